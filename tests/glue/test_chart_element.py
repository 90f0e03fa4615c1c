"""A chart keeps its element id through a new figure, and the new figure travels in its data: the browser's element
(explorer/glue/frame/chart.js) is handed the new bytes and updates the drawn chart in place with Plotly.react.
st.plotly_chart hashed the figure into the id, so every changed figure was a new element: React unmounted the old
chart and plotly.js drew the new one from nothing (issue 20). tests/browser/test_explorer_browser.py checks in a
browser that the new figure is drawn.
"""

import pytest
from streamlit.testing.v1 import AppTest

from explorer.glue.frame.chart import ELEMENT, figure_of, key_of


def _one_chart() -> None:
    """One heatmap of n × n cells through the app's own boundary.plot, n from the session state."""
    import plotly.graph_objects as go
    import streamlit as st

    from explorer.glue.frame import boundary

    n = st.session_state.get("n", 3)
    boundary.plot(st, go.Figure(go.Heatmap(z=[[row * n + col for col in range(n)] for row in range(n)])), key="chart_x")


def _chart(at: AppTest) -> tuple[str, dict]:
    (chart,) = at.get(ELEMENT)
    return chart.proto.id, figure_of(chart.proto)


def test_a_keyed_chart_keeps_its_id_through_a_new_figure_and_carries_the_figure():
    at = AppTest.from_function(_one_chart, default_timeout=60)
    at.run()
    assert not at.exception
    first_id, first_figure = _chart(at)
    assert key_of(at.get(ELEMENT)[0].proto) == "chart_x"
    assert first_figure["data"][0]["z"] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]

    at.session_state["n"] = 4
    at.run()
    new_id, new_figure = _chart(at)
    assert new_id == first_id, "a new element for a new figure: the browser would remount the chart"
    assert len(new_figure["data"][0]["z"]) == 4 and new_figure != first_figure


def test_the_manifest_scan_memo_finds_what_a_fresh_scan_finds_and_the_chart_still_draws():
    """tests/conftest.py scans for component manifests once per process (speed_up_apptest): the app's chart is
    declared in code, so AppTests after the first still draw it, and the memo holds what a fresh scan finds."""
    from streamlit.components.v2 import manifest_scanner

    scan = manifest_scanner.scan_component_manifests
    for n in (2, 3):
        at = AppTest.from_function(_one_chart, default_timeout=60)
        at.session_state["n"] = n
        at.run()
        assert not at.exception
        assert len(_chart(at)[1]["data"][0]["z"]) == n
    assert scan.cache_info().misses == 1 and scan.cache_info().hits >= 1
    fresh = scan.__wrapped__()
    assert sorted((m.name, str(root)) for m, root in scan()) == sorted((m.name, str(root)) for m, root in fresh)


def test_plotly_js_is_copied_into_the_static_folder_once_and_replaced_when_it_differs(tmp_path):
    from explorer.glue.frame.chart import SERVED_DATE, plotly_js_name, plotly_js_path, serve_plotly_js

    PLOTLY_JS = plotly_js_path()

    served = serve_plotly_js(tmp_path / "static")
    assert served.read_bytes() == PLOTLY_JS.read_bytes() and served.stat().st_mtime == SERVED_DATE
    first = served.stat().st_ctime_ns
    assert serve_plotly_js(tmp_path / "static") == served and served.stat().st_ctime_ns == first  # left alone
    served.write_text("stale")
    serve_plotly_js(tmp_path / "static")
    assert served.read_bytes() == PLOTLY_JS.read_bytes() and served.stat().st_mtime == SERVED_DATE
    assert [p.name for p in (tmp_path / "static").iterdir()] == [plotly_js_name()]  # no partial copy left


def test_the_deploy_guide_gpt2s_notice_links_is_served_beside_plotly_js(tmp_path):
    """GPT-2's notice links app/static/deploy.md (real_models.DEPLOY_DOC): the server copies docs/deploy.md there."""
    from explorer.glue.cached import real_models
    from explorer.glue.frame import chart

    served = chart.serve_doc("deploy.md", tmp_path / "static")
    assert f"app/static/{served.name}" == real_models.DEPLOY_DOC
    assert served.read_bytes() == (chart.DOCS / "deploy.md").read_bytes()
    assert "### The server's memory" in served.read_text(encoding="utf-8")  # the section the notice names
    served.write_text("stale")
    chart.serve_doc("deploy.md", tmp_path / "static")
    assert served.read_bytes() == (chart.DOCS / "deploy.md").read_bytes()
    assert [p.name for p in (tmp_path / "static").iterdir()] == ["deploy.md"]  # no partial copy left


def test_the_served_plotly_js_is_named_by_its_version_and_content_and_the_chart_loads_that_name():
    """A browser keeps the file for long (its date is old): a new plotly.js must come under a new name."""
    import hashlib

    import plotly

    from explorer.glue.frame import chart

    name = chart.plotly_js_name()
    digest = hashlib.sha256(chart.plotly_js_path().read_bytes()).hexdigest()[:12]
    assert name == f"plotly-{plotly.__version__}.{digest}.min.js"
    assert f'const PLOTLY_SRC = "app/static/{name}";' in chart.chart_js()
    assert 'plotly.min.js"' not in chart.chart_js()


def test_the_charts_load_the_cartesian_bundle_of_the_package_plotly_js_version_else_the_full_one(monkeypatch):
    """The vendored cartesian bundle is what the charts load while it is the plotly.js version the plotly package
    ships (a newer plotly with an older vendor/ bundle gets the package's own, which draws every trace type)."""
    from explorer.glue.frame import chart

    assert chart.bundle_version(chart.CARTESIAN_JS) == chart.bundle_version(chart.PACKAGE_JS)
    assert chart.plotly_js_path() == chart.CARTESIAN_JS
    assert chart.CARTESIAN_JS.stat().st_size < chart.PACKAGE_JS.stat().st_size / 3
    monkeypatch.setattr(chart, "bundle_version", lambda path: "9.9.9" if path == chart.PACKAGE_JS else "4.1.1")
    chart.plotly_js_path.cache_clear()
    try:
        assert chart.plotly_js_path() == chart.PACKAGE_JS
    finally:
        monkeypatch.undo()
        chart.plotly_js_path.cache_clear()
    assert chart.plotly_js_path() == chart.CARTESIAN_JS


def test_a_bundle_without_a_version_banner_is_refused(tmp_path):
    from explorer.glue.frame import chart

    unnamed = tmp_path / "plotly.min.js"
    unnamed.write_text("var Plotly = {};")
    with pytest.raises(RuntimeError, match="names no plotly.js version"):
        chart.bundle_version(unnamed)


def test_each_process_writes_its_own_partial_copy(tmp_path, monkeypatch):
    """Processes starting together in one folder (deploy/local_cluster.py) must not write one partial file."""
    import os
    import shutil
    from pathlib import Path

    from explorer.glue.frame import chart

    written = []
    copy = shutil.copyfile
    monkeypatch.setattr(chart.shutil, "copyfile", lambda src, dst: written.append(Path(dst).name) or copy(src, dst))
    chart.serve_plotly_js(tmp_path / "static")
    assert written == [chart.plotly_js_name().replace(".js", f".{os.getpid()}.partial")]


def test_a_figures_json_is_made_once_per_figure_object_and_forgotten_with_it(monkeypatch):
    import gc
    import json

    import plotly.graph_objects as go
    import plotly.io

    from explorer.glue.frame import chart

    made = []
    real = plotly.io.to_json
    monkeypatch.setattr(plotly.io, "to_json", lambda figure, **kw: made.append(1) or real(figure, **kw))
    figure = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]]))
    first = chart.figure_bytes(figure, {}, stretch=False)
    assert chart.figure_bytes(figure, {"displaylogo": False}, stretch=True) != first  # the config is not cached
    assert len(made) == 1 and id(figure) in chart._JSON_OF
    other = go.Figure(go.Heatmap(z=[[1, 2], [3, 5]]))  # another object: its own JSON
    assert json.loads(chart.figure_bytes(other, {}, stretch=False))["figure"]["data"][0]["z"] == [[1, 2], [3, 5]]
    key = id(figure)
    del figure
    gc.collect()
    assert key not in chart._JSON_OF


def test_a_chart_is_named_for_a_screen_reader_by_its_panel_title_or_else_its_own_title():
    import json

    import plotly.graph_objects as go

    from explorer.glue.frame import chart

    titled = go.Figure(go.Heatmap(z=[[1]]), layout={"title": {"text": "<b>attn_weights</b><br>head 0"}})
    assert json.loads(chart.figure_bytes(titled, {}, stretch=False))["label"] == "attn_weights head 0"
    named = chart.figure_bytes(titled, {}, stretch=False, label="**Raw scores** `Q Kᵀ`, per head")
    assert json.loads(named)["label"] == "Raw scores Q Kᵀ, per head"
    assert json.loads(chart.figure_bytes(go.Figure(), {}, stretch=False))["label"] == ""


@pytest.mark.parametrize("sent", [7, 0, True, False, 2.5, "7", None, [7], {"x": 7}])
def test_a_click_passes_on_only_a_points_index(monkeypatch, sent):
    """A browser can send any value as the chart's "clicked" trigger: only an int (not a bool) reaches the page."""
    from explorer.glue.frame import chart

    monkeypatch.setattr(chart.st, "session_state", {"chart_text": {"clicked": sent}})
    got = []
    chart._clicked("chart_text", got.append)
    assert got == ([sent] if type(sent) is int else [])


@pytest.mark.parametrize("token, moved", [(0, True), (33, True), (34, False), (-1, False), (10**12, False)])
def test_a_clicked_token_is_read_from_only_when_it_is_a_position(monkeypatch, token, moved):
    from explorer.glue.frame import writing_sections

    state = type("State", (dict,), {"__setattr__": dict.__setitem__})(w_rh_pos=20)
    monkeypatch.setattr(writing_sections.st, "session_state", state)
    writing_sections._read_from(token, last=33)
    assert state["w_rh_pos"] == (token if moved else 20)
