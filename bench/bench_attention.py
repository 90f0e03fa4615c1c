"""Forward-pass cost of each way to run the module, as ratios to a minimal SDPA implementation.

The book's bonus setup: batch 8, 1024 tokens, d_in = d_out = 768, 12 heads. Every variant is measured in the same
run by the Cost page's own loop (``mha_core.runs.profiling.median_seconds``: one warm-up call, then the median of
``--rounds`` calls, synchronised on CUDA); the table reports each median as a ratio to the minimal
F.scaled_dot_product_attention.

    python bench/bench_attention.py [--batch 8 --tokens 1024 --dim 768 --heads 12 --rounds 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mha_core.attention.modules import MultiHeadAttention, trace_forward  # noqa: E402
from mha_core.attention.reference import sdpa_forward, to_torch_mha  # noqa: E402
from mha_core.runs.profiling import median_seconds  # noqa: E402


def variants(module: MultiHeadAttention, x: torch.Tensor) -> dict:
    torch_mha = to_torch_mha(module)
    causal_blocked = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).triu(1)
    return {
        "minimal SDPA (baseline)": lambda: sdpa_forward(module, x),
        "MultiHeadAttention (Listing 3.5)": lambda: module(x),
        "trace_forward (every step kept)": lambda: trace_forward(module, x).output,
        "torch.nn.MultiheadAttention": lambda: torch_mha(x, x, x, attn_mask=causal_blocked, need_weights=False)[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    device = torch.device(args.device)
    torch.manual_seed(123)
    module = MultiHeadAttention(args.dim, args.dim, args.tokens, 0.0, args.heads).to(device).eval()
    x = torch.rand(args.batch, args.tokens, args.dim, device=device)
    seconds = {name: median_seconds(call, device, args.rounds) for name, call in variants(module, x).items()}
    baseline = seconds["minimal SDPA (baseline)"]
    print(
        f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} "
        f"batch={args.batch} tokens={args.tokens} d={args.dim} heads={args.heads} rounds={args.rounds}"
    )
    print("| variant | median ms | ratio to minimal SDPA |")
    print("|---|---:|---:|")
    for name, median in seconds.items():
        print(f"| {name} | {median * 1e3:.1f} | {median / baseline:.2f}× |")


if __name__ == "__main__":
    main()
