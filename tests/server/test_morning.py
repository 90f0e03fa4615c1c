"""A class's morning on one used server, in the production environment (no malloc variables), given less than 690 MB
(issue 43): the phases of ``harness.morning`` back to back (heavy links, Real heads tabs that repeat, write and knock
heads out, Attention variants at its largest, the Cost measurement, tabs downloading the trace, idle, the heaviest
links at once). The shorter morning (``harness.morning.SHORT``) fits CI; the whole one is ``bench/class_morning.py``,
its last result in docs/memory.md.

Before the gate followed the budget it reads, ``MHA_SERVER_MB=450`` changed nothing but GPT-2's notice: the same
morning peaked at 603–676 MB and the notices spoke of "the 192 MB one run may use on this shared server".
"""

from __future__ import annotations

import pytest

from explorer.glue.memory import budget
from harness import morning
from harness.server import StreamlitServer
from harness.visits import warm_up

SERVER_MB = 450
GLIBC_MB = 12  # what glibc may keep in partly used pages after a phase, beside the caches (docs/memory.md)


def kept_margin_mb(server_mb: int) -> float:
    """What the server may keep above its warm self after idle: the caches' bytes at this budget, and glibc's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MHA_SERVER_MB", str(server_mb))
        patch.setattr(budget, "_REST", {"bytes": 0})
        return budget.cache_bytes() / budget.MB + GLIBC_MB


def test_a_morning_on_a_450_mb_server_stays_in_450_mb_and_gives_its_memory_back():
    with StreamlitServer(env={"MHA_SERVER_MB": str(SERVER_MB)}) as server:
        warm = warm_up(server)
        phases = morning.run_morning(server, morning.SHORT)
    rows = "; ".join(f"{p.name}: peak {p.peak_mb:.0f}, kept {p.kept_mb:.0f}" for p in phases)
    print(f"MHA_SERVER_MB={SERVER_MB}: warm {warm:.0f} MB; {rows}")
    for phase in phases:
        assert not phase.errors(), (phase.name, phase.errors()[:3])
        assert phase.peak_mb <= SERVER_MB, f"{phase.name}: peak {phase.peak_mb:.0f} MB over {SERVER_MB}"
    idle = next(p for p in phases if p.name == "idle")
    margin = kept_margin_mb(SERVER_MB)
    assert idle.kept_mb <= warm + margin, f"kept {idle.kept_mb:.0f} MB after idle, warm {warm:.0f} + {margin:.0f}"
    notices = [w for p in phases for r in p.results for w in r.warnings if "one run may use" in w]
    assert notices and all(f"this server's {SERVER_MB} MB (MHA_SERVER_MB)" in n for n in notices), notices[:2]
