"""What GPT-2 (124M) costs in memory: loading it our way (bfloat16, tensor by tensor) against a naive float32 load,
and running it (forward over 64 and 1024 tokens, every layer's attention weights at 64 tokens).

GPT-2 cannot be downloaded here, so a random float32 model.safetensors with exactly GPT-2's key names and shapes
(the attn.bias buffers included, 548 MB) is written to /tmp once, with a GPT-2-sized random BPE tokenizer.
Every scenario runs in a child process of its own, one thread: peak RSS is the kernel's high-water mark (reset
after loading for the running scenarios), kept RSS what remains after a collection and malloc_trim.

    python bench/gpt2_memory.py [--dir /tmp/mha-gpt2-bench]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MB = 2**20
SCENARIOS = {
    "import torch": ("none", None),
    "load: naive (load_file + float32 model)": ("naive", None),
    "load: ours (bfloat16, tensor by tensor)": ("ours", None),
    "naive + forward 64 tokens": ("naive", "forward64"),
    "ours + forward 64 tokens": ("ours", "forward64"),
    "naive + forward 1024 tokens": ("naive", "forward1024"),
    "ours + forward 1024 tokens": ("ours", "forward1024"),
    "naive + attention_weights 12 layers × 64": ("naive", "attention64"),
    "ours + attention_weights 12 layers × 64": ("ours", "attention64"),
}


def write_fake_gpt2(folder: Path) -> None:
    """GPT-2's key names and shapes, random float32 values (std 0.02, LayerNorm scales near 1); a tiny tokenizer."""
    import torch
    from safetensors.torch import save_file

    from mha_core.gpt.model import GPT2_CONFIG
    from mha_core.gpt.pretrained import expected_shapes

    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "model.safetensors").is_file():
        generator = torch.Generator().manual_seed(0)
        state = {}
        for name, shape in expected_shapes(GPT2_CONFIG).items():
            base = 1.0 if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")) else 0.0
            state[name] = base + 0.02 * torch.randn(shape, generator=generator)
        for layer in range(GPT2_CONFIG["n_layers"]):  # GPT-2's own file carries its causal-mask buffers
            state[f"h.{layer}.attn.bias"] = torch.tril(torch.ones(1024, 1024)).view(1, 1, 1024, 1024)
        save_file(state, str(folder / "model.safetensors"))
    if not (folder / "tokenizer.json").is_file():
        gpt2_sized_tokenizer().save(str(folder / "tokenizer.json"))


def gpt2_sized_tokenizer():
    """A byte-level BPE as big as GPT-2's (50257 tokens, 50000 random merges): its memory, not its splits."""
    import random

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {char: i for i, char in enumerate(alphabet)}
    tokens, merges, rng = list(alphabet), [], random.Random(0)
    while len(vocab) < 50256:
        left, right = rng.choice(tokens), rng.choice(alphabet)
        if left + right not in vocab and len(left + right) <= 12:
            vocab[left + right] = len(vocab)
            tokens.append(left + right)
            merges.append((left, right))
    vocab["<|endoftext|>"] = 50256
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def kept_mb() -> float:
    import psutil

    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return psutil.Process().memory_info().rss / MB


def peak_mb() -> float:
    from harness.rss import hwm_mb

    return hwm_mb(os.getpid())


def load(kind: str, folder: Path):
    """The model, loaded one way or the other (None for 'none')."""
    import torch

    from mha_core.gpt.download import load_gpt2
    from mha_core.gpt.model import GPT2_CONFIG
    from mha_core.gpt.pretrained import load_hf_gpt2

    if kind == "ours":
        return load_gpt2(folder)[0]
    if kind == "naive":
        from safetensors.torch import load_file

        state = load_file(str(folder / "model.safetensors"))  # the whole float32 file in memory
        model = load_hf_gpt2(state, GPT2_CONFIG, dtype=torch.float32)
        del state
        return model
    return None


def run(job: str, model) -> None:
    import torch

    ids = torch.randint(0, 50257, (1, 1024 if job == "forward1024" else 64), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        if job.startswith("forward"):
            logits = model(ids)  # (1, T, V)
            assert logits.shape == (1, ids.shape[1], 50257)
        else:
            weights = model.attention_weights(ids)  # (12, 1, 12, T, T)
            assert weights.shape == (12, 1, 12, 64, 64)


def child(name: str, folder: Path) -> dict:
    """Runs in the child: import, load, (reset the high-water mark,) run; the numbers as a dict."""
    import torch

    torch.set_num_threads(1)
    import mha_core.gpt.model  # noqa: F401 (the app has it imported already)
    from harness.rss import reset_hwm

    kind, job = SCENARIOS[name]
    numbers = {"torch_mb": kept_mb()}
    model = load(kind, folder)
    numbers.update(load_peak_mb=peak_mb(), loaded_mb=kept_mb())
    if job is not None:
        numbers["hwm_reset"] = reset_hwm(os.getpid())
        run(job, model)
        numbers.update(run_peak_mb=peak_mb(), after_run_mb=kept_mb())
    return numbers


def table(results: dict[str, dict]) -> str:
    from mha_core.gpt.download import gpt2_bytes

    torch_mb = results["import torch"]["loaded_mb"]
    lines = [
        f"torch (+ mha_core.gpt.model) alone: {torch_mb:.0f} MB kept, "
        f"{results['import torch']['load_peak_mb']:.0f} peak",
        "",
        "| scenario | peak RSS MB | kept RSS MB | peak above torch | kept above torch | estimate MB (gpt2_bytes) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, numbers in results.items():
        kind, job = SCENARIOS[name]
        peak = numbers.get("run_peak_mb", numbers["load_peak_mb"])
        kept = numbers.get("after_run_mb", numbers["loaded_mb"])
        estimate = "" if kind != "ours" else f"{_estimate(gpt2_bytes, job) / MB:.0f}"
        above = f"{peak - torch_mb:+.0f} | {kept - torch_mb:+.0f}"
        lines.append(f"| {name} | {peak:.0f} | {kept:.0f} | {above} | {estimate} |")
    lines.append("")
    for job in (None, "forward64", "forward1024", "attention64"):
        naive = _peak(results, "naive", job) - torch_mb
        ours = _peak(results, "ours", job) - torch_mb
        lines.append(f"peak above torch, naive/ours, {job or 'load'}: {naive:.0f}/{ours:.0f} MB = {naive / ours:.2f}×")
    return "\n".join(lines)


def _peak(results: dict, kind: str, job: str | None) -> float:
    name = next(n for n, (k, j) in SCENARIOS.items() if k == kind and j == job)
    return results[name].get("run_peak_mb", results[name]["load_peak_mb"])


def _estimate(gpt2_bytes, job: str | None) -> int:
    """Peak above torch as the estimate has it: kept, plus the loading or running extra."""
    if job is None:
        numbers = gpt2_bytes(64)
        return numbers.kept + numbers.loading
    numbers = gpt2_bytes(1024 if job == "forward1024" else 64)
    return numbers.kept + (numbers.attention_weights if job.startswith("attention") else numbers.forward)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/mha-gpt2-bench"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--table-only", action="store_true", help="the table again from the last run's results.json")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.dir)))
        return
    saved = args.dir / "results.json"
    if args.table_only:
        print(table(json.loads(saved.read_text())))
        return
    write_fake_gpt2(args.dir)
    results = {}
    for name in SCENARIOS:
        done = subprocess.run(
            [sys.executable, __file__, "--dir", str(args.dir), "--child", name],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(name, results[name], flush=True)
    saved.write_text(json.dumps(results))
    print()
    print(table(results))


if __name__ == "__main__":
    main()
