"""The Real heads page's experiments on a real GPT: scores on the typed text, knocking heads out, text the model
writes, and how layer 1's heads read layer 0's (composition). Cached on settings (model, text, heads, ...), never
on tensors; each run passes the admission gate (knock-outs and writing as heavy work, sized by what they add); the
shared model is only read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import streamlit as st

from explorer.glue.cached import real_models
from explorer.glue.memory import admission, caches
from explorer.glue.state.user_text import quote
from explorer.views import character_view, induction_circuit, real_record
from mha_core.gpt import attribution, composition, generation, model_heads

KNOCKOUT_MODES = ("zero", "mean")
MAX_NEW_TOKENS = 80  # "continue my sentence": tokens written per press
MAX_TOP_K = 256
MAX_TEMPERATURE = 2.0  # the page's temperature input: 0 … 2
MIN_TEMPERATURE = generation.MIN_TEMPERATURE  # above 0 (greedy): less overflows the logits
LIGHT_BYTES = 8 * 2**20  # the shipped model's runs: a few MB of activations
RUN_SLACK_BYTES = 4 * 2**20  # the allocator's rounding and the small tensors of one run
COMPOSITION_MAX_EMB = 256  # (h1, h0, e, e) products: 4 × 4 × 128² floats here; GPT-2's 12 × 12 × 768² would be 340 MB


def _gate(name: str, label: str):
    """GPT-2 through real_models' gate (its bytes); the shipped model's light runs through the same gate."""
    if name == "gpt2":
        return real_models.gate(name)
    return admission.admit(label, need_bytes=LIGHT_BYTES)


def _ids(name: str, text: str) -> list[int]:
    return real_models.token_ids(name, text)[: real_models.page_cap(name)]


def writing_cap(name: str) -> int:
    """Tokens of the sentence the model writes after: all the shipped model reads (a sentence of 120 characters typed
    twice fits; writing draws no grid), the page's cap for GPT-2 (its forward over 1,024 tokens is hundreds of MB)."""
    own = name == "own"
    return real_models.model_and_tokenizer(name)[0].cfg["context_length"] if own else real_models.page_cap(name)


def _prompt_ids(name: str, text: str) -> list[int]:
    """The sentence as the model writes after it (``writing_cap``: more than the page draws)."""
    return real_models.token_ids(name, text)[: writing_cap(name)]


def repeat_rows(name: str, text: str) -> tuple[int, ...]:
    """The sentence's positions whose last few tokens appeared earlier (what induction can predict from)."""
    return model_heads.repeat_rows(_ids(name, text))


def run_bytes(name: str, tokens: int, kept_layers: int) -> int:
    """What one run of the model adds at its peak, from its shape: the logits and their softmax, one layer's attention
    steps alive at once, ``kept_layers`` layers' weights kept (a traced forward), the blocks' activations."""
    config = real_models.model_and_tokenizer(name)[0].cfg
    emb, vocab, heads = config["emb_dim"], config["vocab_size"], config["n_heads"]
    tokens = max(1, min(tokens, config["context_length"]))
    scores = 4 * heads * tokens * tokens  # one (1, h, T, T) float32 tensor
    ours = 2 * 4 * tokens * vocab + (4 + kept_layers) * scores + 4 * 12 * tokens * emb + RUN_SLACK_BYTES
    return max(ours, real_models.gpt2_need()) if name == "gpt2" else ours


def _heavy(name: str, label: str, need_bytes: int):
    """CPU-seconds of work (a forward per written token; a traced and a plain forward per knock-out) wait their turn
    in the one gate like every heavy run, sized by what they add: 30 tabs writing at once had made a bystander's
    default page take 5.6 s instead of 0.1 s, as light work running all at once."""
    return admission.admit(f"{real_models.LABELS[name]} {label}", need_bytes=need_bytes, heavy=True)


@caches.byte_cached(max_bytes=8 * 2**20, max_entries=32, ttl_s=1800, spinner="Knocking the heads out…")
def _knockout(name: str, text: str, heads: tuple[tuple[int, int], ...], mode: str) -> model_heads.KnockoutReading:
    model, tokenizer = real_models.model_and_tokenizer(name)
    return model_heads.knockout_reading(model, tokenizer, _ids(name, text), heads, mode)


def knockout(name: str, text: str, heads: tuple[tuple[int, int], ...], mode: str) -> model_heads.KnockoutReading:
    """The sentence read with ``heads`` knocked out (zeroed or mean-ablated), beside the intact model; a reading
    already made waits for nobody."""
    key = (name, text, tuple(sorted(heads)), mode)
    hit, reading = _knockout.peek(*key)
    if hit:
        return reading
    need = run_bytes(name, len(_ids(name, text)), real_models.model_and_tokenizer(name)[0].cfg["n_layers"])
    with _heavy(name, "knocking heads out", need):
        return _knockout(*key)


@dataclass(frozen=True, kw_only=True)
class Writing:
    """What the model writes after the sentence with every head and with the chosen heads knocked out, beside what
    copying the sentence's earlier stretch would write."""

    intact: tuple[tuple[int, ...], tuple[str, ...]]  # ids, labels
    knocked: tuple[tuple[int, ...], tuple[str, ...]] | None  # None when no head is knocked out
    copy: tuple[tuple[int, ...], tuple[str, ...]]  # what copying writes (shorter, or empty, where nothing repeats)
    text: tuple[str, str | None]  # the two continuations decoded


@caches.byte_cached(max_bytes=2**20, max_entries=64, ttl_s=1800, spinner="Writing…")
def _continuation(name: str, text: str, how: tuple, heads: tuple[tuple[int, int], ...], mode: str) -> Writing:
    model, tokenizer = real_models.model_and_tokenizer(name)
    ids, (new_tokens, temperature, top_k, seed) = _prompt_ids(name, text), how
    keywords = {"temperature": temperature, "top_k": top_k or None, "seed": seed}
    runs = [model_heads.continue_text(model, tokenizer, ids, new_tokens, **keywords)]
    if heads:
        runs.append(model_heads.continue_text(model, tokenizer, ids, new_tokens, heads=heads, mode=mode, **keywords))
    copy = tuple(attribution.copy_continuation(ids, new_tokens))
    labelled = [(run, tuple(tokenizer.labels(list(run)))) for run in [*runs, copy]]
    return Writing(
        intact=labelled[0],
        knocked=labelled[1] if heads else None,
        copy=labelled[-1],
        text=(tokenizer.decode(list(runs[0])), tokenizer.decode(list(runs[1])) if heads else None),
    )


def continuation(name: str, text: str, how: tuple[int, float, int, int], heads=(), mode: str = "zero") -> Writing:
    """What the model writes after the sentence, ``how`` = (new tokens, temperature, top-k, seed): greedy at
    temperature 0, else sampled from the ``top_k`` likeliest (0: all) with the seed; with every head, and with
    ``heads`` knocked out (``mode``) when any are chosen. A writing already made waits for nobody."""
    key = (name, text, tuple(how), tuple(sorted(heads)), mode)
    hit, written = _continuation.peek(*key)
    if hit:
        return written
    need = run_bytes(name, len(_prompt_ids(name, text)) + how[0], 0)
    with _heavy(name, f"writing {how[0]} tokens", need):
        return _continuation(*key)


def fit_temperature(temperature: float) -> tuple[float, str | None]:
    """The temperature the model can sample at, and a notice when it had to change: 0 (greedy) or at least
    ``MIN_TEMPERATURE`` (below it the logits overflow); NaN and ±inf give greedy."""
    if temperature == 0.0 or MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE:
        return temperature, None
    if not math.isfinite(temperature) or temperature < 0:
        return 0.0, f"temperature={quote(temperature)} is not a temperature; writing greedily (0)."
    fitted = min(max(temperature, MIN_TEMPERATURE), MAX_TEMPERATURE)
    return fitted, (
        f"temperature={quote(temperature)} is outside 0 (greedy) or {MIN_TEMPERATURE}–{MAX_TEMPERATURE}; "
        f"using {fitted:g}."
    )


def copy_prompt(name: str, text: str) -> str:
    """The sentence cut to its copy's start and first tokens (``attribution.COPY_GIVEN``) when it repeats, else the
    sentence, a space and its first tokens: a copy for the model to finish."""
    ids, tokenizer = _prompt_ids(name, text), real_models.model_and_tokenizer(name)[1]
    start = attribution.copy_start(ids)
    if start is not None:
        return tokenizer.decode(ids[: start + attribution.COPY_GIVEN])
    return f"{text} {tokenizer.decode(ids[: attribution.COPY_GIVEN])}"


CHARACTERS_MAX_BYTES = 64 * 2**20  # the shipped model's reading is a few MB; GPT-2's 144 heads' outputs, 300 MB


def characters_fit(name: str) -> bool:
    """Character by character keeps every head's output at every position (L, h, T, E): a small model's size."""
    return real_models.facts(name) is not None and character_bytes(name) <= CHARACTERS_MAX_BYTES


def character_bytes(name: str) -> int:
    """What reading the text position by position holds at most: every head's output and weights, the logits."""
    f = real_models.facts(name)
    tokens = real_models.page_cap(name)
    heads = f.n_layers * f.n_heads
    floats = (
        heads * tokens * (f.emb_dim + tokens) + (2 * f.n_layers + 4) * tokens * f.emb_dim + 3 * tokens * f.vocab_size
    )
    return 4 * floats * 2  # float32, and as much again for the transient copies (numpy, the traces)


@caches.byte_cached(max_bytes=24 * 2**20, max_entries=16, spinner="Reading the sentence character by character…")
def _characters(name: str, text: str, heads: tuple[tuple[int, int], ...], mode: str, own: bool):
    model, tokenizer = real_models.model_and_tokenizer(name)
    return model_heads.read_characters(model, tokenizer, _ids(name, text), heads=heads, mode=mode, own=own)


def characters(name: str, text: str, heads=(), mode: str = "zero", own: bool = False) -> model_heads.CharacterReading:
    """The sentence (at least two tokens) read position by position with ``heads`` knocked out: given the true text,
    or (``own``) writing on its own after the copy's first tokens; cached on those settings."""
    with admission.admit("reading character by character", need_bytes=max(LIGHT_BYTES, character_bytes(name))):
        return _characters(name, text, tuple(sorted(heads)), mode, own)


@caches.byte_cached(max_bytes=8 * 2**20, max_entries=64)
def position_view(name: str, text: str, heads, mode: str, own: bool, pos: int, layer: int, presenter: bool):
    """One position's panels (``character_view.position_view``), drawn once per settings and shared."""
    reading = characters(name, text, heads, mode, own)
    return character_view.position_view(reading, pos, layer, own=own, presenter=presenter)


def composition_fits(name: str) -> bool:
    facts = real_models.facts(name)
    return facts is not None and facts.n_layers >= 2 and facts.emb_dim <= COMPOSITION_MAX_EMB


@st.cache_resource(max_entries=2, show_spinner="Measuring how the layers compose…")
def _circuit_view(name: str, presenter: bool):
    model, _ = real_models.model_and_tokenizer(name)
    probe = real_models.head_probe_in_gate(name)
    comp = composition.composition(model)
    scores = {kind: value.numpy().copy() for kind, value in comp.scores.items()}  # (h1, h0) each
    return induction_circuit.composition_view(scores, comp.random, probe.strongest, presenter=presenter)


def circuit_view(name: str, presenter: bool):
    """Q-, K- and V-composition of layer 1's heads with layer 0's, as a view (the shipped model only: GPT-2's
    products would not fit this server's memory)."""
    with _gate(name, "measuring composition"):
        return _circuit_view(name, presenter)


COPYING_MAX_VOCAB = 512  # a V × V matrix: 256² bytes' logits here; GPT-2's 50,257² would be 10 GB


def copying_fits(name: str) -> bool:
    facts = real_models.facts(name)
    return facts is not None and facts.vocab_size <= COPYING_MAX_VOCAB


@st.cache_resource(max_entries=8, ttl=1800, show_spinner="Reading the head's OV circuit in token space…")
def _copying_view(name: str, layer: int, head: int, presenter: bool):
    model, tokenizer = real_models.model_and_tokenizer(name)
    matrix = composition.ov_token_circuit(model, layer, head).numpy()  # (V, V)
    labels = tokenizer.labels(list(range(matrix.shape[0])))
    scores = composition.copying_scores(model).numpy()  # (L, h)
    return induction_circuit.copying_view(matrix, labels, scores, layer=layer, head=head, presenter=presenter)


def copying_view(name: str, layer: int, head: int, presenter: bool):
    """A head's OV circuit in token space and every head's copying score (models with a small vocabulary only)."""
    with _gate(name, "reading OV circuits"):
        return _copying_view(name, layer, head, presenter)


@st.cache_resource(max_entries=2, show_spinner=False)
def phase_change(presenter: bool):
    """(panels, sentence): the shipped model's training curve and checkpoints from its record, drawn once."""
    return real_record.phase_change(real_models.shipped_record(), presenter=presenter)
