"""The app's chart element: one figure drawn by plotly.js and updated in place on every rerun.

``st.plotly_chart`` derives its element id from the figure, so each rerun that changes a figure gave the browser a
new element: React unmounted the old chart and plotly drew the new one from nothing (purge, then newPlot). This
element keeps its id (the key) and hands the drawn chart the new figure, which ``Plotly.react`` updates in place.
The figure goes as JSON bytes made once here (st.plotly_chart validated it into a dict, then serialised it).

plotly.js is plotly.js's own cartesian bundle (vendor/: npm's plotly.js-cartesian-dist-min, MIT) at the version the
plotly package ships, else the package's full bundle: the app draws only heatmap, scatter and bar traces, and a
browser evaluates the full 4.8 MB bundle in about 1.4 s on these cores, the 1.5 MB one in about 0.7 s
(docs/benchmarks.md). It is served from the app's static folder (``server.enableStaticServing``):
``serve_plotly_js`` puts a copy there at start-up, so the drawn version always matches the package's figures. Its
name carries its content's hash and its date is long past, so that a returning visitor's browser keeps it: Streamlit
serves that folder with no Cache-Control and answers no revalidation with a 304 (each one downloaded the whole file,
gzipped anew on the server: 1.5 MB and 0.4 s of CPU), and a date is the one thing the app sets, from which browsers
judge a file's freshness (RFC 9111 §4.2.2: a tenth of its age; docs/benchmarks.md, the returning visitor).
"""

from __future__ import annotations

import contextlib
import filecmp
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path

import plotly
import plotly.io
import streamlit as st

log = logging.getLogger("mha_explorer")

CHART_JS = (Path(__file__).with_name("chart.js")).read_text(encoding="utf-8")
APP_STATIC = Path(__file__).resolve().parents[3] / "static"  # served at <base>/app/static/ (config.toml)
PACKAGE_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"  # every trace type: 4.8 MB
CARTESIAN_JS = Path(__file__).with_name("vendor") / "plotly-cartesian.min.js"  # these trace types: 1.5 MB
CARTESIAN_TRACES = frozenset(
    {"bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour", "image", "pie", "scatter"}
    | {"scatterternary", "violin"}
)

SERVED_DATE = 946_684_800  # 2000-01-01: the served copy's modification time (a name never served other bytes)


def bundle_version(path: Path) -> str:
    """The plotly.js version a bundle's banner names ("plotly.js v4.1.1", "plotly.js (cartesian - minified) v4.1.1")."""
    found = re.search(r"plotly\.js[^\n]*? v(\d+\.\d+\.\d+)", path.read_text(encoding="utf-8")[:300])
    if found is None:
        raise RuntimeError(f"{path} names no plotly.js version in its banner")
    return found.group(1)


@functools.cache
def plotly_js_path() -> Path:
    """The bundle the charts load: the cartesian one where it is the plotly.js version the plotly package's figures are
    made for, else the package's own (a newer plotly without a new vendor/ bundle still draws, more slowly)."""
    if bundle_version(CARTESIAN_JS) == bundle_version(PACKAGE_JS):
        return CARTESIAN_JS
    wanted = bundle_version(PACKAGE_JS)
    log.warning("vendor/plotly-cartesian.min.js is not plotly.js %s: serving the full bundle", wanted)
    return PACKAGE_JS


@functools.cache
def plotly_js_name() -> str:
    """The served copy's file name: plotly-<package version>.<its content's hash>.min.js, so that a new plotly.js
    gets a new name and a browser's copy under a name is never stale."""
    digest = hashlib.sha256(plotly_js_path().read_bytes()).hexdigest()[:12]
    return f"plotly-{plotly.__version__}.{digest}.min.js"


def chart_js() -> str:
    """chart.js with the served copy's name where it loads plotly.js."""
    src = 'const PLOTLY_SRC = "app/static/plotly.min.js";'
    if src not in CHART_JS:
        raise RuntimeError(f"chart.js no longer says {src!r}: name the served plotly.js there")
    return CHART_JS.replace(src, f'const PLOTLY_SRC = "app/static/{plotly_js_name()}";')


COMPONENT = "mha_chart"  # its name; other components (the sidebar's history guard) are no charts
_chart = st.components.v2.component(COMPONENT, js=chart_js(), isolate_styles=False)


def serve_plotly_js(static: Path = APP_STATIC) -> Path:
    """Copy the charts' plotly.js (``plotly_js_path``) into the app's static folder, dated ``SERVED_DATE``, unless the
    same file is there."""
    target, source = static / plotly_js_name(), plotly_js_path()
    if not (target.exists() and filecmp.cmp(source, target, shallow=False)):
        static.mkdir(exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.partial")  # one per process: processes may start together
        shutil.copyfile(source, partial)
        os.utime(partial, (SERVED_DATE, SERVED_DATE))
        partial.replace(target)  # atomic: a browser never loads half a file
        log.info("serving plotly.js %s (%s) from %s", bundle_version(source), source.name, target)
    elif target.stat().st_mtime != SERVED_DATE:  # a copy made before the date was set
        os.utime(target, (SERVED_DATE, SERVED_DATE))
    return target


DOCS = APP_STATIC.parent / "docs"


def serve_doc(name: str, static: Path = APP_STATIC) -> Path:
    """Copy docs/<name> into the app's static folder, so a notice can link to it on a server with no repository
    link (GPT-2's notice links the deploy guide); unless the same file is there."""
    target, source = static / name, DOCS / name
    if not (target.exists() and filecmp.cmp(source, target, shallow=False)):
        static.mkdir(exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.partial")
        shutil.copyfile(source, partial)
        partial.replace(target)
    return target


def figure_bytes(figure, config: dict, *, stretch: bool, label: str = "", clickable: bool = False) -> bytes:
    """What the element draws: the figure's JSON (numpy arrays as base64), its plotly config, whether it fills
    its container's height, its name for a screen reader (``label``; else the figure's title), and whether a click
    on a point with an integer ``customdata`` is sent back. The figure's JSON is written once, never parsed back."""
    spec = figure_json(figure)
    label = plain_text(label or figure.layout.title.text or "")
    rest = json.dumps(
        {"config": config, "stretch": stretch, "label": label, "clickable": clickable}, separators=(",", ":")
    )
    return f'{{"figure":{spec},{rest[1:]}'.encode()


def plain_text(title: str) -> str:
    """A title as plain text: plotly's HTML tags (``<b>``, ``<br>``) and markdown's backticks and ``**`` dropped."""
    return " ".join(re.sub(r"`|\*\*", "", re.sub(r"<[^>]*>", " ", title)).split())


# Each figure object's JSON while the object lives (figures from the views' caches are the same objects on every hit,
# shared and never mutated: serialising them was most of a cache hit's time). Keyed by id; a figure's entry goes when
# the figure is freed, before its id can be reused.
_JSON_OF: dict[int, str] = {}


def figure_json(figure) -> str:
    """``plotly.io.to_json`` of ``figure``, made once per figure object."""
    key = id(figure)
    text = _JSON_OF.get(key)
    if text is None:
        text = plotly.io.to_json(figure, validate=False, engine="json")
        _JSON_OF[key] = text
        weakref.finalize(figure, _JSON_OF.pop, key, None)
    return text


ELEMENT = "bidi_component"  # the element's name in a delta and in AppTest's tree


def is_chart(proto) -> bool:
    """Whether a component element's proto is a chart (its registered name ends with ``COMPONENT``)."""
    return proto.component_name.endswith(COMPONENT)


def figure_of(proto) -> dict:
    """The figure a chart element's proto carries: tests, the harness and the benchmarks read charts with it."""
    return json.loads(proto.bytes)["figure"]


def key_of(proto) -> str:
    """The key a chart element was drawn with (the end of its element id)."""
    return proto.id.split("-", 2)[-1]


def draw(
    container,
    figure,
    *,
    config: dict,
    key: str,
    width: int | str = "stretch",
    height="content",
    label: str = "",
    on_click: Callable[[int], None] | None = None,
) -> None:
    """Draw ``figure`` in ``container`` as the element ``key`` (the same key updates the same drawn chart), named
    ``label`` for a screen reader. ``on_click``: called, before the run a click starts, with the integer
    ``customdata`` of the point clicked (a browser can send anything: other values are dropped)."""
    data = figure_bytes(figure, config, stretch=height == "stretch", label=label, clickable=on_click is not None)
    clicks = {"on_clicked_change": lambda: _clicked(key, on_click)} if on_click is not None else {}
    with contextlib.nullcontext() if container is st else container:  # a component draws where `with` points
        _chart(data=data, key=key, width=width, height=height, **clicks)


def _clicked(key: str, on_click: Callable[[int], None]) -> None:
    """The chart's "clicked" trigger, passed on when it is a point's index (an int, not a bool)."""
    value = (st.session_state.get(key) or {}).get("clicked")
    if isinstance(value, int) and not isinstance(value, bool):
        on_click(value)
