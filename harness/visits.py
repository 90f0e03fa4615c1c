"""One tab's visit of one page, measured: the server's peak RSS during it and its RSS before (harness.rss)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlencode

from harness.rss import RssSampler
from harness.session import RunResult, Session

# Every page's URL name ("" is the explorer, app.py) and the explorer.glue.memory.budget page it runs by default.
PAGES = {
    "": "explorer",
    "Step_through": "step",
    "Follow_a_token": "follow",
    "Heads_and_references": "heads",
    "Knobs_that_teach": "knobs",
    "Masks_and_cross_attention": "masks",
}
LARGEST = dict(num_heads="16", d_out="1024", num_tokens="1024", input="random", batch_size="1", d_in="64")
WORST = LARGEST | dict(d_in="1024", dtype="float64", train="true", dropout="0.5")


@dataclass
class Visit:
    page: str
    before_mb: float
    peak_mb: float
    kept_mb: float  # RSS a moment after the tab closed
    result: RunResult

    @property
    def added_mb(self) -> float:
        return self.peak_mb - self.before_mb


def warm_up(server) -> float:
    """Open every page once at its defaults (their imports stay; Real heads loads the shipped model, which stays) and
    measure once on Cost (its first results add 66 MB that stay, at any size: measured with 64 tokens and with 1024);
    the server's RSS after."""
    for page in ["", *PAGES, "Trained_heads", "Cost", "Real_heads", "Attention_variants"]:
        with Session(server.port, page=page) as session:
            session.run()
            if page == "Cost":
                session.run([session.widget("cost_measure", trigger_value=True)])
    time.sleep(1)
    return server.rss_mb()


def visit(server, page: str, query: dict, settle_s: float = 1.0, press: str | None = None) -> Visit:
    """One tab opens ``page?query``, runs it once (then presses the button keyed ``press``, if any) and closes."""
    before = server.rss_mb()
    with RssSampler(server.pid) as sampler:
        with Session(server.port, urlencode(query), page=page) as session:
            result = session.run()
            if press is not None and result.ok:
                result = session.run([session.widget(press, trigger_value=True)])
        time.sleep(settle_s)
        peak = sampler.peak_mb
    return Visit(page, before, peak, server.rss_mb(), result)
