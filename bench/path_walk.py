"""The path a setting walks on each page: how many of the project's modules ("rooms") one run enters, and how
often a lower layer calls back up into a higher one (mha_core < explorer/views < explorer/glue < pages).

Measured with a trace, not read from the source: each page runs once under Streamlit's AppTest at its defaults
(no widget touched, no button pressed), in a process of its own so every cache is cold and the page really computes,
and ``sys.setprofile``/``threading.setprofile`` record every call into a project function in the order it happens.
Every project module is imported before the trace starts, so module bodies (imports) are not counted; the page's own
script is. For each call the caller is the nearest project frame below it on the stack (Streamlit's cache wrappers
in between are skipped).

* rooms: the distinct project modules entered during the run, the page included. This is an upper bound on the walk
  of a settings value: it counts everything the run touches (the sidebar, the URL, the boundary, every figure
  builder), not only the modules the value itself passes through.
* doors: distinct (caller module → callee module) pairs, caller ≠ callee.
* climbs: distinct doors that go up a layer (a callee in a higher layer than its caller: a callback, or a lower
  layer importing a higher one's function), with the number of calls that took them.

    python bench/path_walk.py [--pages app.py pages/1_Step_through.py ...] [--rooms] [--settings]

``--settings`` measures the walk of the settings value itself instead (issue 23: at most 8 rooms, at most 1 climb
back up), by following objects, not by reading the source. Every ``Settings`` instance is marked, and so is whatever
a project function returns when one of its arguments is marked (the run request, the module, the trace, the view,
its figure dicts; containers, dataclasses and named tuples are marked three levels down, so the panels inside a view
are too). A call into a project function whose arguments include a marked object, or which returns one, enters the
callee's module. Calls with no marked argument (the page's own widgets, the navigation, the boundary) are not part
of the walk, and ints and strings read off the settings are not followed (they have no identity to follow).

* rooms: the modules so entered, in order of first entry, the page included, minus those every page shares
  (``SHARED``: the way from the URL and widgets to a Settings object, the byte budget, the page boundary that lays a
  figure out), which are listed apart. The headline count takes the ``figures/`` package as one room: it is the
  views' drawing library (the Panel a view hands its page, and the plotly builders split by kind, one module a
  kind), and a reader follows a setting into it once, not into each of its modules; the count by module follows.
* climbs: a marked value handed as an argument to a function in a higher layer than its caller's.

The walk is fixed by the page's defaults (no widget touched): a path a default run never takes is not seen.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import pkgutil
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"mha_core": 0, "explorer.views": 1, "explorer.glue": 2, "page": 3}  # low → high
MISSING = object()
# The modules every page shares (URL and widgets → Settings, the byte budget, the page boundary that lays out a
# figure): listed apart from the settings walk (see the docstring).
SHARED = {
    *(f"explorer.glue.frame.{m}" for m in ("server_setup", "boundary", "sidebar")),
    *(f"explorer.glue.state.{m}" for m in ("url", "settings")),
    "explorer.glue.memory.budget",
    *(f"mha_core.{m}" for m in ("attention.inputs", "devices", "runs.profiling")),
}
FIGURES = "explorer.views.figures"  # one package of figure builders, split by kind
PRIMITIVES = (int, float, complex, str, bytes, bool, type(None))
MAX_ROOMS, MAX_CLIMBS = 8, 1  # issue 23


def room_of_file(filename: str) -> str | None:
    """The project module a code object belongs to ("mha_core.runs.forward", "pages/1_Step_through.py"); None
    outside."""
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    parts = relative.parts
    if relative.suffix != ".py" or not parts:
        return None
    if parts[0] == "pages" or relative == Path("app.py"):
        return str(relative)
    if parts[0] in ("mha_core", "explorer"):
        dotted = relative.with_suffix("").parts
        return ".".join(dotted[:-1] if dotted[-1] == "__init__" else dotted)
    return None


def layer_of(room: str) -> int:
    if room.endswith(".py"):
        return LAYERS["page"]
    return next((rank for prefix, rank in LAYERS.items() if room.startswith(prefix)), LAYERS["explorer.glue"])


def import_everything() -> None:
    """Import every project module first, so the trace sees the run's calls and no module body."""
    sys.path.insert(0, str(ROOT))
    for package in ("mha_core", "explorer"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            importlib.import_module(info.name)


def room_finder():
    """room(code): the project module a code object belongs to, cached per file."""
    rooms: dict[str, str | None] = {}

    def room(code) -> str | None:
        found = rooms.get(code.co_filename, MISSING)
        if found is MISSING:
            found = rooms[code.co_filename] = room_of_file(code.co_filename)
        return found

    return room


def make_tracer(calls: list[tuple[str | None, str]]):
    """A profile function appending (caller room, callee room) for every call into a project function."""
    room = room_finder()

    def tracer(frame, event, _arg):
        if event != "call":
            return
        callee = room(frame.f_code)
        if callee is None:
            return
        caller = frame.f_back
        while caller is not None and room(caller.f_code) is None:
            caller = caller.f_back
        calls.append((room(caller.f_code) if caller is not None else None, callee))

    return tracer


class Marks:
    """The objects derived from a Settings: kept alive here, so that an id is never reused by another object."""

    def __init__(self, settings_class: type):
        self.settings_class = settings_class
        self.kept: dict[int, object] = {}

    def add(self, value, depth: int = 0) -> None:
        if isinstance(value, (*PRIMITIVES, type)) or id(value) in self.kept or depth > 3:
            return
        self.kept[id(value)] = value
        if isinstance(value, (tuple, list, set, frozenset)):
            inner = list(value)[:64]
        elif isinstance(value, dict):
            inner = list(value.values())[:64]
        elif dataclasses.is_dataclass(value):
            inner = [getattr(value, f.name, None) for f in dataclasses.fields(value)]
        else:
            inner = []
        for item in inner:
            self.add(item, depth + 1)

    def marked(self, value) -> bool:
        if isinstance(value, self.settings_class):
            self.add(value)
            return True
        return id(value) in self.kept


def make_settings_tracer(calls: list[tuple[str | None, str, str]], marks: Marks):
    """A profile function appending (caller room, callee room, "arg" or "return") for every project call that takes
    a marked object or returns one; what a call that took one returns is marked in turn."""
    room = room_finder()
    took: set[int] = set()  # frames whose call took a marked argument

    def caller_room(frame) -> str | None:
        caller = frame.f_back
        while caller is not None and room(caller.f_code) is None:
            caller = caller.f_back
        return room(caller.f_code) if caller is not None else None

    def tracer(frame, event, arg):
        if event not in ("call", "return"):
            return
        callee = room(frame.f_code)
        if callee is None:
            return
        if event == "call":
            values = list(frame.f_locals.values())
            values += [v for value in values if isinstance(value, (tuple, dict)) for v in _items(value)]
            if any(marks.marked(value) for value in values):
                took.add(id(frame))
                calls.append((caller_room(frame), callee, "arg"))
        elif id(frame) in took:
            took.discard(id(frame))
            marks.add(arg)
        elif marks.marked(arg):
            calls.append((caller_room(frame), callee, "return"))

    return tracer


def _items(value) -> list:
    return list(value.values() if isinstance(value, dict) else value)[:64]


def walk_page(page: str, timeout: float, follow_settings: bool = False) -> dict:
    """Run one page once under AppTest with the tracer on, in this process; the walk as a plain dict."""
    import torch
    from streamlit.testing.v1 import AppTest

    torch.set_num_threads(1)
    import_everything()
    if follow_settings:
        from explorer.glue.state.settings import Settings

        marked_calls: list[tuple[str | None, str, str]] = []
        tracer = make_settings_tracer(marked_calls, Marks(Settings))
    else:
        calls: list[tuple[str | None, str]] = []
        tracer = make_tracer(calls)
    at = AppTest.from_file(str(ROOT / page), default_timeout=timeout)
    threading.setprofile(tracer)
    sys.setprofile(tracer)
    try:
        at.run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    failed = [str(e.value) for e in at.exception]
    if follow_settings:
        return summarise_settings(page, marked_calls, failed)
    return summarise(page, calls, failed=failed)


def summarise_settings(page: str, calls: list[tuple[str | None, str, str]], failed: list[str]) -> dict:
    """The settings walk: rooms outside SHARED in order of first entry, and the climbs (see the docstring)."""
    entered = list(dict.fromkeys([page, *(callee for _, callee, _ in calls)]))
    climbs = Counter(
        f"{a} → {b}" for a, b, how in calls if how == "arg" and a is not None and layer_of(b) > layer_of(a)
    )
    return {
        "page": page,
        "rooms": [r for r in entered if r not in SHARED],
        "shared": [r for r in entered if r in SHARED],
        "doors": len({(a, b) for a, b, _ in calls if a is not None and a != b}),
        "climbs": dict(climbs),
        "calls": len(calls),
        "exceptions": failed,
    }


def summarise(page: str, calls: list[tuple[str | None, str]], failed: list[str]) -> dict:
    rooms = list(dict.fromkeys(callee for _, callee in calls))  # in order of first entry
    doors = Counter((a, b) for a, b in calls if a is not None and a != b)
    climbs = {f"{a} → {b}": n for (a, b), n in doors.items() if layer_of(b) > layer_of(a)}
    return {
        "page": page,
        "rooms": rooms,
        "doors": len(doors),
        "climbs": climbs,
        "calls": len(calls),
        "exceptions": failed,
    }


def walk_in_child(page: str, timeout: float, follow_settings: bool = False) -> dict:
    """One fresh process per page: cold caches, and one page's imports never hide another's."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", page, "--timeout", str(timeout), *(["--settings"] * follow_settings)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{page}: the walk failed\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def packed_rooms(walk: dict) -> int:
    """The headline count: the page's rooms with the figures/ package as one (see the docstring)."""
    return len({FIGURES if room.startswith(FIGURES + ".") else room for room in walk["rooms"]})


def markdown(walks: list[dict], show_rooms: bool) -> str:
    lines = [
        "| page | rooms (figures/ as one) | modules | mha_core / views / glue / page | doors | climbs (calls) |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for walk in walks:
        packed = packed_rooms(walk)
        counts = Counter(layer_of(room) for room in walk["rooms"])
        split = " / ".join(str(counts.get(rank, 0)) for rank in sorted(LAYERS.values()))
        climbs = f"{len(walk['climbs'])}: " + (
            "; ".join(f"{e} ({n})" for e, n in sorted(walk["climbs"].items())) or "none"
        )
        lines.append(f"| {walk['page']} | {packed} | {len(walk['rooms'])} | {split} | {walk['doors']} | {climbs} |")
    if show_rooms:
        for walk in walks:
            shared = f" (shared: {', '.join(walk['shared'])})" if "shared" in walk else ""
            lines.append(f"\n{walk['page']}: " + " → ".join(walk["rooms"]) + shared)
    failed = [f"{w['page']}: {e}" for w in walks for e in w["exceptions"]]
    return "\n".join(lines + [f"\nexception on {f}" for f in failed])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", nargs="*", help="pages relative to the root (default: app.py and pages/*.py)")
    parser.add_argument("--rooms", action="store_true", help="also list each page's rooms in order of first entry")
    parser.add_argument("--settings", action="store_true", help="follow the settings value only (see the docstring)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(walk_page(args.child, args.timeout, args.settings)))
        return 0
    pages = args.pages or ["app.py", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob("*.py"))]
    walks = []
    for page in pages:
        walks.append(walk_in_child(page, args.timeout, args.settings))
        print(f"{page}: {packed_rooms(walks[-1])} rooms, figures/ as one", file=sys.stderr, flush=True)
    print(markdown(walks, args.rooms))
    if args.settings:
        over = [w["page"] for w in walks if packed_rooms(w) > MAX_ROOMS or len(w["climbs"]) > MAX_CLIMBS]
        print(f"\nover {MAX_ROOMS} rooms or {MAX_CLIMBS} climb: {', '.join(over) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
