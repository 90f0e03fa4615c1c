"""Old code against new, side by side: the slider move and first paint of two checkouts, paired by seed.

This machine's speed wanders by a third within an hour, so two benchmark runs an hour apart cannot tell a 0.05 s
change from the weather. Here two Streamlit servers run at once, one per checkout (``git worktree add`` gives the
old one), and new visitors alternate between them (old first, then new first), each pair with a seed of its own (a
cache miss on both). Each visit is ``bench/browser_timing.py``'s: first paint, and ``ArrowRight`` on num_tokens to
the page's last change. The paired gain is old − new for each pair; its median says whether the change is real.

    git worktree add /tmp/old HEAD~1
``--returning``: returning visitors (browser_timing's), each profile having opened the same page once before.

    python bench/browser_ab.py /tmp/old . [--case 0|1] [--pairs 8] [--returning]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_timing import CASES, visit  # noqa: E402

from harness import chromium  # noqa: E402
from harness.server import StreamlitServer  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path, help="the old checkout's root")
    parser.add_argument("new", type=Path, help="the new checkout's root")
    parser.add_argument("--case", choices=[str(i) for i in range(len(CASES))], default="0")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--returning", action="store_true", help="returning visitors: each profile saw the page before")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    name, query = list(CASES.items())[int(args.case)]
    logs = Path(__file__).resolve().parents[1] / "artifacts"
    logs.mkdir(exist_ok=True)
    with (
        sync_playwright() as playwright,
        StreamlitServer(root=args.old.resolve(), log_path=logs / "ab-old.log") as old,
        StreamlitServer(root=args.new.resolve(), log_path=logs / "ab-new.log") as new,
    ):
        browser = chromium.launch(playwright)
        servers = {"old": old, "new": new}
        for server in servers.values():
            visit(browser, server.url, {"seed": "1"})  # each server's first visitor: imports, first compilations
        found: dict[str, dict[str, list[float]]] = {side: {"move": [], "paint": []} for side in servers}
        kind = "returning" if args.returning else "new"
        print(f"{name}: {args.pairs} pairs of {kind} visitors, old {args.old} against new {args.new}")
        for pair in range(args.pairs):
            order = ("old", "new") if pair % 2 == 0 else ("new", "old")
            for side in order:
                run = visit(browser, servers[side].url, {**query, "seed": str(9000 + pair)}, returning=args.returning)
                found[side]["move"].append(run["move"])
                found[side]["paint"].append(run["paint"])
            print(
                f"  pair {pair}: paint old {found['old']['paint'][-1]:.2f} s, new {found['new']['paint'][-1]:.2f} s; "
                f"move old {found['old']['move'][-1]:.2f} s, new {found['new']['move'][-1]:.2f} s"
            )
        browser.close()
    for what in ("move", "paint"):
        gains = [o - n for o, n in zip(found["old"][what], found["new"][what], strict=True)]
        print(
            f"{what}: median old {statistics.median(found['old'][what]):.2f} s, new "
            f"{statistics.median(found['new'][what]):.2f} s; paired gain (old − new) median "
            f"{statistics.median(gains):+.3f} s, mean {statistics.mean(gains):+.3f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
