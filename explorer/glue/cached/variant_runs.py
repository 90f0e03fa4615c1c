"""Streamlit glue for the Attention variants page: its own URL parameters, and its runs and views, cached.

Keys are the settings and small ints and strings, never arrays. Every run builds its own modules (or a private copy
of the shipped GPT), so filling a KV cache changes nothing another session reads. Runs pass the admission gate with
the page's estimate (budget "variants"); the shipped GPT's decoding is light (64 tokens at most, 2 layers).
"""

from __future__ import annotations

import math
from dataclasses import replace

import streamlit as st

from explorer.glue.cached import real_models
from explorer.glue.cached.teaching_runs import seed_int
from explorer.glue.memory import admission, caches
from explorer.glue.memory.caches import MB, byte_cached
from explorer.glue.state import url
from explorer.glue.state.settings import DEFAULTS, Settings
from explorer.views import attention_variants, attention_variants_decoding, attention_variants_trained
from mha_core.gpt.model import count_parameters
from mha_core.runs import forward as runs
from mha_core.variants import page_runs as variant_runs
from mha_core.variants import trained_variants
from mha_core.variants.page_runs import KINDS, VariantSpec

DECODE_TOKENS = 48  # at most this many tokens decoded one at a time (each call is traced, and timed without too)
MAX_NEW_TOKENS = 48
MAX_LATENT = 512
SOURCES = {"gpt": "the shipped GPT", "variant": "the chosen variant on the sidebar's input"}
CONFIG_CHOICES = attention_variants.CONFIG_CHOICES
VARIANT_KINDS = KINDS
PROMPT = "The for statement iterates over"  # the shipped GPT's prompt: text like its training data


# The shape the page opens on: at the book's 2 heads of head_dim 1, GQA is MQA (one K/V head), K and V are one
# column each and the cache's lines lie in pairs. 8 query heads of head_dim 4 in 2 K/V groups tell all five apart.
TEACHING_SHAPE = {"num_heads": 8, "d_out": 32}
TEACHING_CONTEXT = 64  # the cache chart runs to 64 tokens: SWA's line leaves MHA's once its window of 4 is full


def divisors(n: int) -> list[int]:
    return [g for g in range(1, n + 1) if n % g == 0]


def teaching_groups(heads: int) -> int:
    """The default num_kv_groups: a divisor of ``heads`` strictly between MQA's 1 and MHA's ``heads`` where there is
    one, the nearest to √heads (8 heads: 2 groups of 4), so that GQA differs from both."""
    middle = [g for g in divisors(heads) if 1 < g < heads] or [max(1, heads // 2)]
    return min(middle, key=lambda g: (abs(g - math.sqrt(heads)), g))


def teaching_latent(settings: Settings) -> int:
    """The default MLA latent width: 3 × head_dim numbers per token, a cache size no other variant has (theirs are
    2 × K/V heads × head_dim), so its line on the chart is its own."""
    return min(max(1, 3 * settings.head_dim), MAX_LATENT)


def open_on_teaching_shape() -> None:
    """The first time a session opens this page on the book's shape, the page takes TEACHING_SHAPE (and a context of
    TEACHING_CONTEXT where the context is the book's), like the sidebar would: the sidebar and the URL show it. A
    fresh link that names num_heads, d_out or context_length keeps what it names."""
    state = st.session_state
    if state.get("var_opened"):
        return
    named = set() if "settings" in state else set(st.query_params)  # a fresh link's own choices
    settings = url.current_settings()
    state.var_opened = True
    book_shape = (settings.num_heads, settings.d_out) == (DEFAULTS.num_heads, DEFAULTS.d_out)
    if not book_shape or named & {"num_heads", "d_out"} or settings.model or settings.trained:
        return
    changes = dict(TEACHING_SHAPE)
    if "context_length" not in named and settings.context_length == DEFAULTS.context_length:
        changes["context_length"] = max(TEACHING_CONTEXT, settings.num_tokens)
    earlier = list(state.get("notices", []))  # the link's own notices stay
    url.apply_settings(replace(settings, **changes))
    state.notices = earlier + [m for m in state.notices if m not in earlier]


def page_params(settings: Settings) -> tuple[int, int, int]:
    """(num_kv_groups, latent_dim, window) from the widgets' state, seeded from ``?kv_groups=``, ``?latent=`` and
    ``?window=`` once, kept in range: num_kv_groups snaps to the nearest divisor of num_heads, with a notice."""
    heads = settings.num_heads
    groups = seed_int("var_kv_groups", "kv_groups", teaching_groups(heads), 1, heads)
    if heads % groups:
        nearest = min(divisors(heads), key=lambda g: (abs(g - groups), g))
        url.notice(f"kv_groups={groups} does not divide num_heads={heads}; using {nearest}.")
        st.session_state.var_kv_groups = groups = nearest
    latent = seed_int("var_latent", "latent", teaching_latent(settings), 1, MAX_LATENT)
    window = seed_int("var_window", "window", max(1, min(4, settings.num_tokens)), 1, settings.context_length)
    return groups, latent, window


def variant_spec(settings: Settings, groups: int, latent: int, window: int) -> VariantSpec:
    return VariantSpec(
        d_in=settings.d_in,
        d_out=settings.d_out,
        num_heads=settings.num_heads,
        context_length=settings.context_length,
        qkv_bias=settings.qkv_bias,
        seed=settings.seed,
        num_kv_groups=groups,
        latent_dim=latent,
        window=window,
    )


@byte_cached(max_bytes=24 * MB, max_entries=8, ttl_s=900)
def _variants_run(settings: Settings, groups: int, latent: int, window: int) -> variant_runs.VariantsRun:
    x, labels = runs.build_input(settings.input_spec())
    return variant_runs.run_variants(variant_spec(settings, groups, latent, window), x.float().cpu(), labels)


@caches.gated("variants")
@byte_cached(max_bytes=24 * MB, max_entries=32, ttl_s=1800, spinner="Running the five variants…")
def heads_view(settings: Settings, groups: int, latent: int, window: int, kind: str, batch_index: int, presenter: bool):
    """(panels, table, what to look at) of one variant's heads, from the run of all five (cached apart, for the other
    sections)."""
    run = _variants_run(settings, groups, latent, window)
    panels = attention_variants.heads_panels(run, kind, batch_index, presenter)
    return panels, attention_variants.variants_table(run), attention_variants.heads_look(run, kind)


@caches.gated("variants")
@byte_cached(max_bytes=8 * MB, max_entries=32, ttl_s=1800, spinner="Running the five variants…")
def bytes_view(settings: Settings, groups: int, latent: int, window: int, choice: str, presenter: bool):
    """(panel, table, text) of the KV cache's bytes for the chosen config."""
    run = _variants_run(settings, groups, latent, window)
    return (
        attention_variants.bytes_figure(choice, run, presenter),
        attention_variants.bytes_table(choice, run),
        attention_variants.preset_text(choice, run)
        + "\n\n"
        + attention_variants.bytes_look(attention_variants.config_for(choice, run)),
    )


@byte_cached(max_bytes=16 * MB, max_entries=8, ttl_s=900)
def _module_decoding(settings: Settings, groups: int, latent: int, window: int, kind: str):
    x, labels = runs.build_input(settings.input_spec())
    x, labels = x[:, :DECODE_TOKENS].float().cpu(), list(labels)[:DECODE_TOKENS]
    spec = variant_spec(settings, groups, latent, window)
    module = variant_runs.build_variant(spec, kind)  # private to this run
    return variant_runs.run_decoding(module, x, labels, 1, f"{kind} on the sidebar's input")


@byte_cached(max_bytes=16 * MB, max_entries=8, ttl_s=900)
def _gpt_decoding(new_tokens: int, layer: int):
    model, tokenizer = real_models.own_model()  # shared: run_gpt_decoding fills a private copy
    room = model.cfg["context_length"] - len(tokenizer.encode(PROMPT))
    return variant_runs.run_gpt_decoding(
        model,
        tokenizer.encode(PROMPT),
        min(new_tokens, room),
        layer,
        lambda ids: [tokenizer.decode([i]) for i in ids],
    )


@caches.gated("variants")
@byte_cached(max_bytes=16 * MB, max_entries=32, ttl_s=1800, spinner="Decoding one token at a time…")
def decoding_view(
    settings: Settings,
    groups: int,
    latent: int,
    window: int,
    source: str,
    kind: str,
    new_tokens: int,
    step: int,
    presenter: bool,
):
    if source == "gpt":
        run = _gpt_decoding(new_tokens, 0)
    else:
        run = _module_decoding(settings, groups, latent, window, kind)
    return attention_variants_decoding.build_decoding_view(run, step, presenter)


def gpt_absent_reason() -> str:
    return real_models.own_absent_reason()


# --- 4. the shipped GPT converted, no retraining -------------------------------------------------------------------

CONVERSION_SLACK_BYTES = 4 * MB  # the allocator's rounding and the probe's small tensors


def conversion_bytes(cfg: dict, parameters: int) -> int:
    """What scoring one conversion adds at its peak, from the model's shape: its float32 copy, a chunk of 16 held-out
    windows' logits (three copies: logits, log-softmax, the loss's gradient-free temporaries) and their attention
    scores, weights and trace steps (four (16, h, T, T) tensors)."""
    tokens, chunk = cfg["context_length"], 16
    logits = 4 * chunk * tokens * cfg["vocab_size"]
    scores = 4 * chunk * cfg["n_heads"] * tokens * tokens
    return 4 * parameters + 3 * logits + 4 * scores + CONVERSION_SLACK_BYTES


@byte_cached(max_bytes=MB, max_entries=2, ttl_s=3600)
def _trained_heldout(context_length: int) -> trained_variants.Heldout:
    _, tokenizer = real_models.own_model()
    return trained_variants.heldout(tokenizer, context_length)


@byte_cached(max_bytes=MB, max_entries=16, ttl_s=3600)
def _conversion_score(conversion: trained_variants.Conversion) -> trained_variants.VariantScore:
    model, tokenizer = real_models.own_model()  # shared: score converts a private copy
    return trained_variants.score(model, tokenizer, conversion, _trained_heldout(model.cfg["context_length"]))


def trained_scores() -> trained_variants.TrainedVariants:
    """Every conversion of the shipped GPT scored, each cached on its conversion (a frozen dataclass of ints and a
    kind); the missing ones computed together as one heavy job at the gate (CPU-seconds: a held-out pass and the
    English probe per conversion)."""
    model, tokenizer = real_models.own_model()
    chosen = trained_variants.conversions(model.cfg)
    missing = [c for c in chosen if not _conversion_score.peek(c)[0]]
    if missing:
        need = conversion_bytes(model.cfg, count_parameters(model))
        with admission.admit(f"converting the shipped GPT to {len(missing)} variants", need_bytes=need, heavy=True):
            for conversion in missing:
                _conversion_score(conversion)
    held = _trained_heldout(model.cfg["context_length"])
    return trained_variants.assemble(model, tokenizer, tuple(_conversion_score(c) for c in chosen), held)


@byte_cached(max_bytes=4 * MB, max_entries=4, ttl_s=3600, spinner="Converting the shipped GPT and scoring it…")
def trained_view(presenter: bool):
    """(panel, table, what to look at) of the shipped GPT's conversions, drawn once per presentation."""
    result = trained_scores()
    return (
        attention_variants_trained.quality_figure(result, presenter),
        attention_variants_trained.trained_table(result),
        attention_variants_trained.trained_look(result),
    )
