"""What a KV cache holds, by the formula, for each kind of attention, and named models' configs to put in it.

Per token and layer a cache keeps 2 (K and V) × key/value heads × head_dim numbers, or, with latent attention, one
latent of ``latent_dim`` numbers; a sliding-window layer keeps at most ``window`` tokens. So

    bytes = batch × tokens kept × layers × numbers per token and layer × bytes per number

which is the formula of the book's estimators (ch04/04_gqa, 05_mla, 06_swa memory_estimator*.py), head_dim
included: they round emb_dim / n_heads up, so their printed figures are reproduced with ``book_head_dim``.
``variants.cache_bytes`` measures the same thing on a module's tensors.

Note on the book's estimators: there ``n_kv_groups`` is the number of query heads per key/value head
(n_kv_heads = n_heads // n_kv_groups), whereas its ``GroupedQueryAttention(num_kv_groups=...)`` takes the number of
key/value heads. Here every function takes ``n_kv_heads``, named for what it counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8": 1, "int8": 1}
VARIANTS = ("MHA", "GQA", "MQA", "MLA", "SWA")


def book_head_dim(emb_dim: int, n_heads: int) -> int:
    """emb_dim / n_heads rounded up, as the book's estimators compute it."""
    return math.ceil(emb_dim / n_heads)


def cache_formula(*, batch: int, tokens: int, layers: int, numbers_per_token: int, bytes_per_elem: int) -> int:
    """The one formula every estimator here uses: batch × tokens kept × layers × numbers per token × bytes each."""
    return batch * tokens * layers * numbers_per_token * bytes_per_elem


def kv_bytes(*, batch: int, tokens: int, layers: int, n_kv_heads: int, head_dim: int, bytes_per_elem: int) -> int:
    """Keys and values of ``n_kv_heads`` heads: MHA (n_kv_heads = n_heads), GQA, MQA (n_kv_heads = 1)."""
    numbers = 2 * n_kv_heads * head_dim  # K and V
    return cache_formula(
        batch=batch, tokens=tokens, layers=layers, numbers_per_token=numbers, bytes_per_elem=bytes_per_elem
    )


def latent_bytes(*, batch: int, tokens: int, layers: int, latent_dim: int, bytes_per_elem: int) -> int:
    """One latent per token and layer: multi-head latent attention."""
    return cache_formula(
        batch=batch, tokens=tokens, layers=layers, numbers_per_token=latent_dim, bytes_per_elem=bytes_per_elem
    )


def swa_layer_split(n_layers: int, swa: int, full: int) -> tuple[int, int]:
    """(sliding-window layers, full layers) for a repeating pattern of ``swa`` window layers then ``full`` full ones.

    The last, partial pattern starts with window layers, as the book's ``distribute_layers`` counts them.
    """
    if swa < 0 or full < 0 or swa + full == 0:
        raise ValueError(f"a layer pattern needs swa ≥ 0, full ≥ 0 and swa + full > 0, got {swa}:{full}")
    repeats, left = divmod(n_layers, swa + full)
    return repeats * swa + min(swa, left), repeats * full + max(0, left - swa)


def swa_bytes(
    *,
    batch: int,
    tokens: int,
    n_layers: int,
    n_kv_heads: int,
    head_dim: int,
    bytes_per_elem: int,
    window: int,
    pattern: tuple[int, int] = (1, 0),
) -> int:
    """Sliding-window layers keep min(tokens, window) tokens, full layers all of them (``pattern``: swa:full)."""
    swa_layers, full_layers = swa_layer_split(n_layers, *pattern)
    common = {"batch": batch, "n_kv_heads": n_kv_heads, "head_dim": head_dim, "bytes_per_elem": bytes_per_elem}
    return kv_bytes(tokens=min(tokens, window), layers=swa_layers, **common) + kv_bytes(
        tokens=tokens, layers=full_layers, **common
    )


WHAT_IF_FIELDS = ("n_kv_heads", "latent_dim", "window")  # the knobs a preset may hold only as a what-if


@dataclass(frozen=True, kw_only=True)
class CacheConfig:
    """Enough of a model to size its KV cache under each variant; ``own`` is the variant the model itself uses.

    ``cited`` holds the model's own config fields, by their names in its config file (``config_file``), and the
    values the numbers here come from; ``what_if`` names the fields of ``WHAT_IF_FIELDS`` the model does not have
    (a latent for Llama, a window for GPT-2), kept to size the other variants and labelled so on the page.
    """

    name: str
    n_layers: int
    n_heads: int
    head_dim: int
    n_kv_heads: int  # GQA's key/value heads (MHA: n_heads)
    latent_dim: int  # MLA's cached width per token and layer (its shared RoPE key included)
    rope_dim: int = 0  # of latent_dim, the RoPE key every head shares (DeepSeek's qk_rope_head_dim)
    window: int  # SWA's window
    pattern: tuple[int, int] = (1, 0)  # SWA layers : full layers
    context_length: int
    dtype: str = "bfloat16"
    own: str = "MHA"
    source: str = ""  # where the numbers come from, in words
    config_file: str = ""
    cited: tuple[tuple[str, object], ...] = ()
    what_if: tuple[str, ...] = ()

    def kv_heads_of(self, variant: str) -> int:
        """Key/value heads ``variant`` caches per layer (MLA caches a latent instead: 0)."""
        if variant == "SWA":
            return self.n_kv_heads if self.own == "SWA" else self.n_heads  # Gemma's, Mistral's window sit on GQA
        return {"MHA": self.n_heads, "GQA": self.n_kv_heads, "MQA": 1, "MLA": 0}[variant]

    def swa_layers(self) -> tuple[int, int]:
        """(window layers, full layers) under this config's pattern."""
        return swa_layer_split(self.n_layers, *self.pattern)

    def bytes_of(self, variant: str, tokens: int, batch: int = 1) -> int:
        """The cache of ``variant`` at ``tokens`` tokens by the formula, this config's other numbers kept."""
        if variant not in VARIANTS:
            raise ValueError(f"variant {variant!r} is not one of {', '.join(VARIANTS)}")
        common = {"batch": batch, "head_dim": self.head_dim, "bytes_per_elem": DTYPE_BYTES[self.dtype]}
        if variant == "MLA":
            return latent_bytes(
                batch=batch, tokens=tokens, layers=self.n_layers, latent_dim=self.latent_dim,
                bytes_per_elem=DTYPE_BYTES[self.dtype],
            )  # fmt: skip
        if variant == "SWA":
            return swa_bytes(
                tokens=tokens, n_layers=self.n_layers, n_kv_heads=self.kv_heads_of("SWA"), window=self.window,
                pattern=self.pattern, **common,
            )  # fmt: skip
        return kv_bytes(tokens=tokens, layers=self.n_layers, n_kv_heads=self.kv_heads_of(variant), **common)


def _cite(config_file: str, cited: dict, note: str = "") -> dict:
    """A preset's citation: its config file, its fields as named there, and the sentence the page shows."""
    fields = ", ".join(f"{name} {value}" for name, value in cited.items())
    return {"config_file": config_file, "cited": tuple(cited.items()), "source": f"{config_file}: {fields}. {note}"}


# Named models, from their published configs (the page cites each; docs/attention_variants.md lists the fields).
# Latent and window are the model's own where it uses them, else what-ifs: a latent of 4 × head_dim (DeepSeek's
# 512 = 4 × 128) and a 1024-token window (256 for GPT-2, whose whole context is 1024).
PRESETS: dict[str, CacheConfig] = {
    "GPT-2 124M": CacheConfig(
        name="GPT-2 124M", n_layers=12, n_heads=12, head_dim=64, n_kv_heads=4, latent_dim=256, window=256,
        context_length=1024, dtype="float32", own="MHA", what_if=WHAT_IF_FIELDS,
        **_cite(
            "openai-community/gpt2 config.json", {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_ctx": 1024},
            "The book's GPT_CONFIG_124M, float32. MHA: head_dim = n_embd / n_head = 64.",
        ),
    ),
    "Llama 2 7B": CacheConfig(
        name="Llama 2 7B", n_layers=32, n_heads=32, head_dim=128, n_kv_heads=8, latent_dim=512, window=1024,
        context_length=4096, dtype="float16", own="MHA", what_if=WHAT_IF_FIELDS,
        **_cite(
            "meta-llama/Llama-2-7b-hf config.json",
            {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_size": 4096,
             "max_position_embeddings": 4096, "torch_dtype": "float16"},
            "MHA: head_dim = 4096 / 32 = 128, so 2 × 32 × 32 × 128 × 2 bytes = 512 KiB per token.",
        ),
    ),
    "Llama 3 8B": CacheConfig(
        name="Llama 3 8B", n_layers=32, n_heads=32, head_dim=128, n_kv_heads=8, latent_dim=512, window=1024,
        context_length=8192, own="GQA", what_if=("latent_dim", "window"),
        **_cite(
            "meta-llama/Meta-Llama-3-8B config.json",
            {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
             "max_position_embeddings": 8192, "torch_dtype": "bfloat16"},
            "GQA: head_dim = 4096 / 32 = 128.",
        ),
    ),
    "Mistral 7B v0.1": CacheConfig(
        name="Mistral 7B v0.1", n_layers=32, n_heads=32, head_dim=128, n_kv_heads=8, latent_dim=512, window=4096,
        context_length=32768, own="SWA", what_if=("latent_dim",),
        **_cite(
            "mistralai/Mistral-7B-v0.1 config.json",
            {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
             "sliding_window": 4096, "max_position_embeddings": 32768, "torch_dtype": "bfloat16"},
            "GQA with a 4,096-token window on every layer: its SWA line keeps the 8 K/V heads.",
        ),
    ),
    "Qwen3 0.6B": CacheConfig(
        name="Qwen3 0.6B", n_layers=28, n_heads=16, head_dim=128, n_kv_heads=8, latent_dim=512, window=1024,
        context_length=40960, own="GQA", what_if=("latent_dim", "window"),
        **_cite(
            "Qwen/Qwen3-0.6B config.json",
            {"num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
             "max_position_embeddings": 40960, "torch_dtype": "bfloat16"},
            "GQA; the book's ch05/11_qwen3 builds it.",
        ),
    ),
    "DeepSeek-V2": CacheConfig(
        name="DeepSeek-V2", n_layers=60, n_heads=128, head_dim=128, n_kv_heads=8, latent_dim=576, rope_dim=64,
        window=1024, context_length=163840, own="MLA", what_if=("n_kv_heads", "window"),
        **_cite(
            "deepseek-ai/DeepSeek-V2 config.json",
            {"num_hidden_layers": 60, "num_attention_heads": 128, "num_key_value_heads": 128, "kv_lora_rank": 512,
             "qk_rope_head_dim": 64, "v_head_dim": 128, "max_position_embeddings": 163840, "torch_dtype": "bfloat16"},
            "MLA: kv_lora_rank + qk_rope_head_dim = 576 cached per token and layer. Its MHA line takes head_dim "
            "128 for keys and values (its keys are 192 wide).",
        ),
    ),
    "DeepSeek V3 (MLA)": CacheConfig(
        name="DeepSeek V3 (MLA)", n_layers=61, n_heads=128, head_dim=128, n_kv_heads=8, latent_dim=576, rope_dim=64,
        window=1024, context_length=163840, own="MLA", what_if=("n_kv_heads", "window"),
        **_cite(
            "deepseek-ai/DeepSeek-V3 config.json",
            {"num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "kv_lora_rank": 512,
             "qk_rope_head_dim": 64, "v_head_dim": 128, "max_position_embeddings": 163840, "torch_dtype": "bfloat16"},
            "MLA: kv_lora_rank + qk_rope_head_dim = 576 cached per token and layer. Its MHA line takes head_dim "
            "128 for keys and values (its keys are 192 wide).",
        ),
    ),
    "Gemma 3 27B (window)": CacheConfig(
        name="Gemma 3 27B (window)", n_layers=62, n_heads=32, head_dim=128, n_kv_heads=16, latent_dim=512,
        window=1024, pattern=(5, 1), context_length=131072, own="SWA", what_if=("latent_dim",),
        **_cite(
            "google/gemma-3-27b-pt config.json with transformers' Gemma3TextConfig defaults",
            {"num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
             "sliding_window": 1024, "sliding_window_pattern": 6, "max_position_embeddings": 131072,
             "torch_dtype": "bfloat16"},
            "The file's text_config holds the layers, heads, head_dim and sliding_window, its top level torch_dtype; "
            "sliding_window_pattern and max_position_embeddings are not in the file: they are Gemma3TextConfig's "
            "defaults (transformers configuration_gemma3.py), which loading the file fills in. "
            "GQA with a 1,024-token window on 5 of every 6 layers: its SWA line keeps the 16 K/V heads, and its "
            "full layers keep every token.",
        ),
    ),
}  # fmt: skip


def context_lengths(longest: int, shortest: int = 1) -> list[int]:
    """Powers of two from ``shortest`` up to ``longest``, ``longest`` itself last: the x of a log plot."""
    lengths, n = [], max(1, shortest)
    while n < longest:
        lengths.append(n)
        n *= 2
    return [*lengths, longest]
