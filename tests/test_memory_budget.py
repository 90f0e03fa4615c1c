"""The one budget, measured: a real server at the production settings, every page at its largest link in float64
with train mode and dropout, sequences of visits, four tabs at once, a fair queue with real trainings, and the
browser's clear_cache message. RSS of the server and its children (harness.rss), peaks caught by VmHWM.

Each attack of issue 19 is here: before this budget the worst link peaked at 1,170 MB (Explorer), 1,320 MB (Follow a
token); Heads kept 1,111 MB after 12 seeds; four tabs reached 1,542 MB; a clear_cache message emptied every cache.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import urlencode

import pytest

from explorer.glue import admission, budget
from explorer.glue.settings import parse_query
from harness.rss import RssSampler
from harness.server import StreamlitServer
from harness.session import Session

GOAL_MB = admission.SERVER_GOAL_MB
KEPT_MB = 150  # what a sequence of visits may leave above the warm server
WORST = dict(
    num_heads="16", d_out="1024", num_tokens="1024", input="random", batch_size="1", d_in="1024", dtype="float64"
) | dict(train="true", dropout="0.5")
# page URL name -> the budget's page (the heaviest of what it opens by default)
PAGES = {"": "explorer", "Step_through": "step", "Follow_a_token": "follow", "Heads_and_references": "heads"} | {
    "Knobs_that_teach": "knobs",
    "Masks_and_cross_attention": "masks",
}


@pytest.fixture(scope="module")
def server():
    with StreamlitServer() as running:
        Session(running.port).connect().run().ok  # warm-up: torch, plotly and the explorer imported
        for page in PAGES:  # every page's own imports, at the defaults
            with Session(running.port, page=page) as session:
                session.run()
        time.sleep(1)
        running.warm_mb = running.rss_mb()
        yield running


def visit(server, page: str, query: dict, widgets=()) -> tuple[float, float, object]:
    """(peak MB during the visit, RSS before it, the run) for one tab that opens ``page?query`` and closes."""
    before = server.rss_mb()
    with RssSampler(server.pid) as sampler, Session(server.port, urlencode(query), page=page) as session:
        result = session.run()
        peak = sampler.peak_mb
    return peak, before, result


@pytest.mark.parametrize("page", list(PAGES))
def test_each_page_at_the_worst_link_stays_in_the_goal_and_its_estimate_is_within_a_quarter(server, page):
    peak, before, result = visit(server, page, WORST)
    assert result.ok, result.errors
    assert peak <= GOAL_MB, f"{page or 'explorer'} peaked at {peak:.0f} MB"
    name = PAGES[page]
    fitted = budget.fitted(name, parse_query(WORST)[0])
    estimate = budget.need_bytes(name, fitted) / 2**20
    measured = peak - before
    print(f"{page or 'explorer'}: peak {peak:.0f} MB, +{measured:.0f} MB measured, {estimate:.0f} MB estimated")
    if name != "masks":  # the masks page is small at any setting: its peak is noise around a few MB
        assert 0.75 * measured <= estimate <= 1.25 * measured, (measured, estimate)
    assert any("MB one run may use" in w for w in result.warnings), result.warnings


def test_sequences_of_visits_keep_at_most_150_mb_above_the_warm_server(server):
    sequences = [
        ("Heads_and_references", [WORST | {"seed": str(k)} for k in range(6)]),
        ("Knobs_that_teach", [WORST | {"knob": "dropout", "draw": str(k)} for k in range(4)]),
        ("Follow_a_token", [WORST | {"token": str(k)} for k in range(0, 64, 8)]),
        ("", [WORST | {"seed": str(k)} for k in range(4)]),
    ]
    highest = 0.0
    for page, queries in sequences:
        for query in queries:
            peak, _, result = visit(server, page, query)
            assert result.ok, result.errors
            highest = max(highest, peak)
    time.sleep(2)
    kept = server.rss_mb()
    print(f"warm {server.warm_mb:.0f} MB, highest peak {highest:.0f} MB, kept {kept:.0f} MB")
    assert highest <= GOAL_MB
    assert kept <= server.warm_mb + KEPT_MB


def test_four_tabs_of_the_worst_link_at_once_stay_in_the_goal(server):
    results, start = [None] * 4, threading.Barrier(4)

    def tab(k: int) -> None:
        start.wait(30)
        with Session(server.port, urlencode(WORST | {"seed": str(100 + k)}), page="Follow_a_token") as session:
            results[k] = session.run()

    with RssSampler(server.pid) as sampler:
        threads = [threading.Thread(target=tab, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        peak = sampler.peak_mb
    print(f"four tabs: peak {peak:.0f} MB")
    assert all(r is not None and r.ok for r in results), [r.errors for r in results if r is not None]
    assert peak <= GOAL_MB


def test_a_browser_clear_cache_message_is_refused(server):
    with Session(server.port, urlencode(WORST)) as session:
        session.run()
        session.send_clear_cache()
        time.sleep(1)
    assert "refused a clear_cache message from a browser" in server.log_text()


def test_a_widget_state_of_the_wrong_kind_gets_a_short_notice(server):
    with Session(server.port) as session:
        session.run()
        bad = session.widget("w_seed", string_value="not a number")
        result = session.run([bad])
    assert result.ok, result.errors
    assert any("value of the wrong kind (w_seed)" in w for w in result.warnings), result.warnings
