"""Settings that follow a real GPT's layer (``?model=own|gpt2&layer=L&text=...``), as ``_fit_trained`` does for a
trained one: the module's shape is the model's, the input is the sentence through its tokenizer, and every change
is said in a notice. Called from ``settings.reconcile``; the model itself comes from ``real_models`` (loaded once
per process, never here by a link: GPT-2 serves only once it is on this server).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol, TypeVar

from explorer.glue.cached import real_models
from explorer.glue.state.user_text import quote
from mha_core.attention.inputs import BOOK_TEXT


class RealFields(Protocol):
    """What fitting reads of ``settings.Settings`` (a dataclass): named here, since settings imports this module."""

    model: str
    text: str
    layer: int


SettingsT = TypeVar("SettingsT", bound=RealFields)  # settings.Settings, returned with the same type


def fit_real(s: SettingsT, notices: list[str]) -> SettingsT:
    """``s`` on the real model's layer; without the shipped model, seeded random weights with a notice."""
    name = s.model
    if name == "gpt2" and not real_models.gpt2_ready():
        notices.append(f"{real_models.gpt2_absent_reason()} The shipped model serves instead.")
        name = "own"
    facts = real_models.facts(name)
    if facts is None:
        notices.append(f"{real_models.own_absent_reason()} Showing seeded random weights.")
        return replace(s, model="", layer=0)
    s = _fit_text(replace(s, model=name), notices)
    layer = min(max(s.layer, 0), facts.n_layers - 1)
    if layer != s.layer:
        notices.append(
            f"layer={s.layer} does not exist in {facts.label} (layers 0–{facts.n_layers - 1}); using {layer}."
        )
    num_tokens = min(len(real_models.token_ids(name, s.text)), real_models.token_cap(name))
    fixed = dict(
        num_heads=facts.n_heads,
        d_in=facts.emb_dim,
        d_out=facts.emb_dim,
        num_tokens=num_tokens,
        context_length=facts.context_length,
        batch_size=1,
        dropout=0.0,
        train=False,
        qkv_bias=facts.qkv_bias,
        device="cpu",
        dtype="float32",
        input="text",
        trained="",
    )
    changed = [key for key, value in fixed.items() if getattr(s, key) != value and key not in ("input", "trained")]
    if changed == ["num_tokens"]:
        notices.append(f"num_tokens follows what was typed: {num_tokens} tokens (a shorter text gives fewer).")
    elif changed:
        notices.append(f"Showing layer {layer} of {facts.label}: {', '.join(changed)} follow the real model.")
    return replace(s, layer=layer, **fixed)


def _fit_text(s: SettingsT, notices: list[str]) -> SettingsT:
    """The sentence as the model reads it: at least one token, at most ``TOKEN_CAP`` shown (with a notice)."""
    ids = real_models.token_ids(s.model, s.text)
    if not ids:
        notices.append(f"The sentence {quote(s.text)} has no tokens; using the book's sentence.")
        return replace(s, text=BOOK_TEXT)
    cap = real_models.token_cap(s.model)
    if len(ids) > cap:
        notices.append(
            f"The sentence is {len(ids)} tokens long for {real_models.facts(s.model).label}; "
            f"showing the first {cap} ({real_models.CAP_REASON[s.model]})."
        )
    return s
