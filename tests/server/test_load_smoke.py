"""The load test, small: five sessions at once for about 20 seconds, each from its own URL, moving widgets.

bench/load_test.py starts the app on 127.0.0.1, drives the sessions over Streamlit's own websocket protocol,
checks every run, and stops the server. Here: no errors, and no session ever saw another's settings or numbers.
Timings are printed, never asserted.
"""

from __future__ import annotations

from bench.load_test import markdown_report, run_load


def test_five_sessions_at_once_see_only_their_own_settings_and_numbers():
    report = run_load(
        sessions=5,
        seconds=20,
        settle_seconds=5,
        max_reruns=10,
        think=(0.5, 1.5),
        disconnect_check=False,
        progress=lambda text: None,
    )
    print(markdown_report(report))
    assert report.errors == []
    assert report.cross_talk == 0, [d for log in report.logs for d in log.cross_talk][:3]
    assert all(log.first is not None for log in report.logs), "every session loaded its page"
    assert report.runs > report.sessions, "the sessions moved widgets, not only loaded"
    assert report.numbers_verified == report.runs, "every run's output was checked against mha_core"
