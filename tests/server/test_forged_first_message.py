"""A new tab's first websocket message, forged, on a real server: the values get the same notices as any other.

The widget guard read each widget's range from what the session had drawn, so a tab's first ``rerun_script``
(no widget drawn yet; element ids are the same in every session) passed anything: Real heads' "tokens to write"
as NaN gave "These settings cannot run: `cannot convert float NaN to integer`", inf "Something went wrong
(OverflowError)", the same for top-k. Here the ids are learned on one server, and a second, fresh server gets the
forged message as the very first message of its life (before any page has run in that process).
"""

from __future__ import annotations

import math

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState

from harness.server import StreamlitServer
from harness.session import Session

QUERY = "model=own"
FORGED = {"w_rh_write": "rh_write=", "w_rh_top_k": "rh_top_k=", "w_rh_temperature": "rh_temperature="}


@pytest.fixture(scope="module")
def widget_ids() -> dict[str, str]:
    with StreamlitServer() as server, Session(server.port, QUERY, timeout=120, page="Real_heads") as tab:
        first = tab.run()
        assert first.ok, first.errors
        return dict(tab.widget_ids)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e300])
def test_a_forged_first_message_on_a_fresh_server_gets_notices_not_errors(widget_ids, value):
    states = [WidgetState(id=widget_ids[key], double_value=value) for key in FORGED]
    states.append(WidgetState(id=widget_ids["w_rh_continue"], trigger_value=True))
    with StreamlitServer() as server, Session(server.port, QUERY, timeout=120, page="Real_heads") as tab:
        result = tab.run(states)  # the first message this server ever gets
        log = server.log_text()
    assert result.status == "FINISHED_SUCCESSFULLY" and not result.errors, result.errors
    warnings = " ".join(result.warnings)
    assert all(words in warnings for words in FORGED.values()), warnings[:1000]
    assert any("The model writes" in text for text in result.texts), "it wrote, with the corrected values"
    assert "Traceback" not in log
