"""A class's whole morning on one server (issue 43), at the production settings (no malloc variables).

One fresh ``streamlit run`` server, warmed on every page (``harness.visits.warm_up``), then the phases of
``harness.morning`` back to back: heavy Explorer and Follow a token links, Real heads ×10 at once (repeat the
sentence, write 80 tokens, 4 heads knocked out), Attention variants at its largest ×20 at once, Cost ×2 at its worst
link, 20 tabs downloading the trace (fetching the file), 120 s idle, the heaviest links at once. Prints each phase's
peak and settled RSS (server and children, MB) and whether it stayed in the budget; exits 1 when it did not.

    python bench/class_morning.py [--server-mb 450] [--short]

``--server-mb`` sets ``MHA_SERVER_MB`` for the server (the budget the gate reads); ``--short`` runs the CI test's
shorter morning (``harness.morning.SHORT``). Last result: docs/memory.md, "A class's morning".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import morning  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402
from harness.visits import warm_up  # noqa: E402

KEPT_MB = 75  # what the morning may keep above the warm server after idle (tests/server/test_morning.py)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-mb", type=int, default=690, help="MHA_SERVER_MB for the server (default 690)")
    parser.add_argument("--short", action="store_true", help="the CI test's shorter morning")
    args = parser.parse_args()
    size = morning.SHORT if args.short else morning.FULL
    with StreamlitServer(env={"MHA_SERVER_MB": str(args.server_mb)}) as server:
        warm = warm_up(server)
        print(f"MHA_SERVER_MB={args.server_mb}: warm {warm:.0f} MB", flush=True)
        done = morning.run_morning(server, size, report=lambda line: print(line, flush=True))
        notices = sorted({w for p in done for r in p.results for w in r.warnings if "MB" in w})
    print("\n| phase | peak | kept | errors |\n|---|---:|---:|---:|")
    print(f"| warm server | {warm:.0f} | {warm:.0f} | |")
    for phase in done:
        print(f"| {phase.name} | {phase.peak_mb:.0f} | {phase.kept_mb:.0f} | {len(phase.errors())} |")
    for line in notices[:6]:
        print("notice:", line)
    idle = next(p for p in done if p.name == "idle")
    over = [p.name for p in done if p.peak_mb > args.server_mb]
    kept = f"kept after idle {idle.kept_mb:.0f} (warm {warm:.0f} + {KEPT_MB})"
    print(f"over {args.server_mb} MB: {over or 'none'}; {kept}")
    return 0 if not over and idle.kept_mb <= warm + KEPT_MB and not any(p.errors() for p in done) else 1


if __name__ == "__main__":
    sys.exit(main())
