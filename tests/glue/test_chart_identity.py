"""A chart's element id follows its figure, and must: Streamlit 1.67's PlotlyChart reads the figure only when it
mounts (``useState`` from the spec, or from the figure it stored under the element's id), so a chart whose id stayed
the same through a new figure would keep drawing the old one. Tried for issue 20 (an id from the key alone, to get
Plotly.react instead of a remount); every chart went stale (decisions.md, issue 20). This test fails if a patch or a
Streamlit upgrade makes the id ignore the figure: then check in a browser that the new figure is drawn
(tests/browser/test_explorer_browser.py) before keeping it.
"""

from streamlit.testing.v1 import AppTest


def _one_chart() -> None:
    """One heatmap of n × n cells through the app's own boundary.plot, n from the session state."""
    import plotly.graph_objects as go
    import streamlit as st

    from explorer.glue import boundary

    n = st.session_state.get("n", 3)
    boundary.plot(st, go.Figure(go.Heatmap(z=[[row * n + col for col in range(n)] for row in range(n)])), key="chart_x")


def _chart_id(at: AppTest) -> tuple[str, str]:
    (chart,) = at.get("plotly_chart")
    return chart.proto.id, chart.proto.spec


def test_a_keyed_charts_id_changes_with_its_figure_and_only_with_it():
    at = AppTest.from_function(_one_chart, default_timeout=60)
    at.run()
    assert not at.exception
    first_id, first_spec = _chart_id(at)
    assert first_id.endswith("chart_x")  # the key is part of the id

    at.run()  # the same figure: the same id, the chart is left as it is
    assert _chart_id(at) == (first_id, first_spec)

    at.session_state["n"] = 4
    at.run()
    new_id, new_spec = _chart_id(at)
    assert new_spec != first_spec
    assert new_id != first_id, "a new figure under the old id: the browser would keep drawing the old figure"
