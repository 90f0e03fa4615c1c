"""Tokens per second with and without the KV cache as the context grows, side by side in one run, and its bytes.

At each context length the cache is filled with that many tokens (a private copy of the model), then for each of
``--tokens`` new tokens, in turn: one cached call (the new token only) and one uncached call (the whole sequence so
far, chapter 4's generate_text_simple), each timed alone. Tokens per second = 1 / median seconds per token. The
cache's bytes are measured on its tensors (``variants.cache_bytes``) beside the formula (``kv_memory``).

Models: the shipped GPT (2 layers, 128 wide, context 64) and GPT-2 124M's shape (untrained, seeded). A second table
puts the five attention variants in GPT-2's shape side by side at the longest context.

    python bench/kv_cache.py [--device cpu --contexts 8,16,32,56 --gpt2-contexts 64,128,256,512,1000 --tokens 5
                              --layers 12 --threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mha_core.gpt.model import GPT_CONFIG_124M, GPTModel  # noqa: E402
from mha_core.gpt.training import load_shipped  # noqa: E402
from mha_core.variants.cached_generation import forward_cached, private_copy, reset_kv_cache, with_attention  # noqa: E402
from mha_core.variants.kv_memory import CacheConfig  # noqa: E402
from mha_core.variants.layers import cache_bytes  # noqa: E402
from mha_core.variants.page_runs import VariantSpec, build_variant  # noqa: E402


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(call, device: torch.device) -> float:
    sync(device)
    began = time.perf_counter()
    call()
    sync(device)
    return time.perf_counter() - began


@torch.no_grad()
def side_by_side(model: GPTModel, context: int, tokens: int, device: torch.device, uncached: bool = True):
    """(median s/token cached, median s/token uncached or None, cache bytes after the last token)."""
    generator = torch.Generator().manual_seed(context)
    ids = torch.randint(model.cfg["vocab_size"], (1, context + tokens), generator=generator).to(device)
    private = private_copy(model)
    reset_kv_cache(private)
    forward_cached(private, ids[:, :context])  # the prompt: the cache holds `context` tokens
    model(ids[:, :context])  # a warm-up of the uncached path at this length
    cached, full = [], []
    for k in range(tokens):
        t = context + k
        cached.append(timed(lambda t=t: forward_cached(private, ids[:, t : t + 1]), device))
        if uncached:
            full.append(timed(lambda t=t: model(ids[:, : t + 1]), device))
    return statistics.median(cached), statistics.median(full) if full else None, cache_bytes(private)


def config_of(cfg: dict, kind: str, spec: VariantSpec | None = None) -> CacheConfig:
    """The model's cache as the formula sees it, float32."""
    heads = cfg["n_heads"]
    return CacheConfig(
        name=kind,
        n_layers=cfg["n_layers"],
        n_heads=heads,
        head_dim=cfg["emb_dim"] // heads,
        n_kv_heads=spec.num_kv_groups if spec else heads,
        latent_dim=spec.latent_dim if spec else 1,
        window=spec.window if spec else cfg["context_length"],
        context_length=cfg["context_length"],
        dtype="float32",
    )


def growth_table(models: dict, contexts: list[int], tokens: int, device: torch.device) -> None:
    print("| model | context | tokens/s with cache | tokens/s without | speed-up | cache (measured) | formula |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, model in models.items():
        for context in contexts:
            if context + tokens > model.cfg["context_length"]:
                continue
            with_s, without_s, nbytes = side_by_side(model, context, tokens, device)
            formula = config_of(model.cfg, "MHA").bytes_of("MHA", context + tokens)
            print(
                f"| {name} | {context} | {1 / with_s:.3g} | {1 / without_s:.3g} | {without_s / with_s:.1f}× "
                f"| {nbytes / 1e6:,.2f} MB | {formula / 1e6:,.2f} MB |"
            )


def variants_table(cfg: dict, context: int, tokens: int, device: torch.device) -> None:
    spec = VariantSpec(
        d_in=cfg["emb_dim"],
        d_out=cfg["emb_dim"],
        num_heads=cfg["n_heads"],
        context_length=cfg["context_length"],
        qkv_bias=cfg["qkv_bias"],
        num_kv_groups=cfg["n_heads"] // 4,
        latent_dim=cfg["emb_dim"] // 4,
        window=context // 4,
    )
    print(
        f"\nThe five variants in this shape at context {context} (GQA {spec.num_kv_groups} K/V heads, MLA latent "
        f"{spec.latent_dim}, SWA window {spec.window} on every layer):\n"
    )
    print("| variant | tokens/s with cache | cache (measured) | formula | of MHA's |")
    print("|---|---:|---:|---:|---:|")
    mha_bytes = None
    for kind in ("MHA", "GQA", "MQA", "MLA", "SWA"):
        model = with_attention(cfg, lambda c, kind=kind: build_variant(spec, kind)).to(device)
        with_s, _, nbytes = side_by_side(model, context, tokens, device, uncached=False)
        formula = config_of(cfg, kind, spec).bytes_of(kind, context + tokens)
        mha_bytes = mha_bytes or nbytes
        print(
            f"| {kind} | {1 / with_s:.3g} | {nbytes / 1e6:,.2f} MB | {formula / 1e6:,.2f} MB "
            f"| {nbytes / mha_bytes:.1%} |"
        )
        del model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--contexts", default="8,16,32,56", help="for the shipped GPT (context 64)")
    parser.add_argument("--gpt2-contexts", default="64,128,256,512,1000")
    parser.add_argument("--tokens", type=int, default=5, help="new tokens timed at each context")
    parser.add_argument("--layers", type=int, default=12, help="GPT-2's shape with this many layers")
    parser.add_argument(
        "--variants-context", type=int, default=0, help="the variants table's context (default: the first)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (one is steadiest on a shared CPU)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    shipped, _ = load_shipped()
    torch.manual_seed(123)
    gpt2_cfg = {**GPT_CONFIG_124M, "drop_rate": 0.0, "n_layers": args.layers}
    gpt2 = GPTModel(gpt2_cfg).eval()
    print(
        f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} tokens timed per context="
        f"{args.tokens} (median), float32, batch 1\n"
    )
    growth_table({"shipped GPT": shipped.to(device)}, [int(c) for c in args.contexts.split(",")], args.tokens, device)
    print()
    contexts = [int(c) for c in args.gpt2_contexts.split(",")]
    growth_table({f"GPT-2 124M shape, {args.layers} layers": gpt2.to(device)}, contexts, args.tokens, device)
    variants_table(gpt2_cfg, args.variants_context or contexts[0], args.tokens, device)


if __name__ == "__main__":
    main()
