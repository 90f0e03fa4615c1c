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

    python bench/path_walk.py [--pages app.py pages/1_Step_through.py ...] [--rooms]

Issue 23's goal is at most 8 rooms and 1 climb per page; this script only measures.
"""

from __future__ import annotations

import argparse
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


def room_of_file(filename: str) -> str | None:
    """The project module a code object belongs to ("mha_core.runs", "pages/1_Step_through.py"); None outside."""
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


def make_tracer(calls: list[tuple[str | None, str]]):
    """A profile function appending (caller room, callee room) for every call into a project function."""
    rooms: dict[str, str | None] = {}

    def room(code) -> str | None:
        found = rooms.get(code.co_filename, MISSING)
        if found is MISSING:
            found = rooms[code.co_filename] = room_of_file(code.co_filename)
        return found

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


def walk_page(page: str, timeout: float) -> dict:
    """Run one page once under AppTest with the tracer on, in this process; the walk as a plain dict."""
    import torch
    from streamlit.testing.v1 import AppTest

    torch.set_num_threads(1)
    import_everything()
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
    return summarise(page, calls, failed=[str(e.value) for e in at.exception])


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


def walk_in_child(page: str, timeout: float) -> dict:
    """One fresh process per page: cold caches, and one page's imports never hide another's."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", page, "--timeout", str(timeout)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{page}: the walk failed\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def markdown(walks: list[dict], show_rooms: bool) -> str:
    lines = [
        "| page | rooms | mha_core / views / glue / page | doors | climbs (calls) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for walk in walks:
        counts = Counter(layer_of(room) for room in walk["rooms"])
        split = " / ".join(str(counts.get(rank, 0)) for rank in sorted(LAYERS.values()))
        climbs = f"{len(walk['climbs'])}: " + (
            "; ".join(f"{e} ({n})" for e, n in sorted(walk["climbs"].items())) or "none"
        )
        lines.append(f"| {walk['page']} | {len(walk['rooms'])} | {split} | {walk['doors']} | {climbs} |")
    if show_rooms:
        for walk in walks:
            lines.append(f"\n{walk['page']}: " + " → ".join(walk["rooms"]))
    failed = [f"{w['page']}: {e}" for w in walks for e in w["exceptions"]]
    return "\n".join(lines + [f"\nexception on {f}" for f in failed])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", nargs="*", help="pages relative to the root (default: app.py and pages/*.py)")
    parser.add_argument("--rooms", action="store_true", help="also list each page's rooms in order of first entry")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(walk_page(args.child, args.timeout)))
        return 0
    pages = args.pages or ["app.py", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob("*.py"))]
    walks = []
    for page in pages:
        walks.append(walk_in_child(page, args.timeout))
        print(f"{page}: {len(walks[-1]['rooms'])} rooms", file=sys.stderr, flush=True)
    print(markdown(walks, args.rooms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
