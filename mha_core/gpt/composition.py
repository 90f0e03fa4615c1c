"""How a 2-layer GPT's heads work together (Elhage et al. 2021): composition scores between layers, and each head's
OV circuit in token space with its copying score.

Conventions (named on the page): each head's W_QK and W_OV come from ``circuits`` (row vectors, ``x W_QK xᵀ`` and
``x W_OVᵀ``), with the LayerNorm that feeds the attention folded in by its scale γ only (its centring, division by
the spread and shift left out, as a linear circuit must). A layer-0 head writes ``y = x W_OV⁽⁰⁾ᵀ``; a layer-1 head
reads it through its query (Q-composition, ``W_OV⁽⁰⁾ᵀ W_QK``), its key (K-composition, ``W_QK W_OV⁽⁰⁾``) or its
value (V-composition, ``W_OV⁽¹⁾ W_OV⁽⁰⁾``). Each score is ‖product‖_F / (‖W_a‖_F ‖W_b‖_F): 0 when the layer-1 head
reads nothing the layer-0 head writes, and compared with the same score for random matrices of the same shapes.

The OV circuit in token space is ``W_E W_OVᵀ W_U``ᵀ's transpose as rows: row s is what attending to token s adds
to each output token's logit (the direct path: the embedding, this head, the unembedding, final LayerNorm's γ
folded in). A head that copies raises the logit of the token it attends to: its matrix has mostly positive
eigenvalues, and the copying score Σλ / Σ|λ| is near 1.

Axis letters: h heads, e emb_dim, d head_dim, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mha_core.attention.circuits import circuits
from mha_core.gpt.model import GPTModel

KINDS = ("Q", "K", "V")
RANDOM_SAMPLES = 16  # random pairs averaged for the baseline
RANDOM_SEED = 0


def _folded(model: GPTModel, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, e, e) W_QK and (h, e, e) W_OV of every head of ``layer``, norm1's γ folded into what the head reads."""
    block = model.trf_blocks[layer]
    c = circuits(model.attention_module(layer))
    gamma = block.norm1.scale.detach().float()  # (e,)
    w_qk = gamma[None, :, None] * c.w_qk.float() * gamma[None, None, :]  # diag(γ) W_QK diag(γ): (h, e, e)
    w_ov = c.w_ov.float() * gamma[None, None, :]  # W_OV diag(γ): (h, e, e)
    return w_qk, w_ov


def composition_score(product: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """‖product‖_F / (‖a‖_F ‖b‖_F), over the last two axes."""
    norm = torch.linalg.matrix_norm
    return norm(product) / (norm(a) * norm(b))


def _products(w_qk1: torch.Tensor, w_ov1: torch.Tensor, w_ov0: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each kind's (h1, h0) scores for layer-1 forms (h1, e, e) reading layer-0 outputs (h0, e, e)."""
    q = torch.einsum("zba,hbc->hzac", w_ov0, w_qk1)  # W_OV⁽⁰⁾ᵀ W_QK: (h1, h0, e, e)
    k = torch.einsum("hab,zbc->hzac", w_qk1, w_ov0)  # W_QK W_OV⁽⁰⁾
    v = torch.einsum("hab,zbc->hzac", w_ov1, w_ov0)  # W_OV⁽¹⁾ W_OV⁽⁰⁾
    return {
        "Q": composition_score(q, w_qk1[:, None], w_ov0[None]),
        "K": composition_score(k, w_qk1[:, None], w_ov0[None]),
        "V": composition_score(v, w_ov1[:, None], w_ov0[None]),
    }


@dataclass(frozen=True, kw_only=True)
class Composition:
    """Q-, K- and V-composition of every layer-``reader`` head with every layer-``writer`` head, and the baselines."""

    writer: int
    reader: int
    scores: dict[str, torch.Tensor]  # kind -> (h_reader, h_writer)
    random: dict[str, float]  # kind -> the mean score of random matrices of the same shapes


@torch.no_grad()
def composition(model: GPTModel, writer: int = 0, reader: int = 1) -> Composition:
    """Composition scores of layer ``reader``'s heads reading layer ``writer``'s outputs (writer < reader)."""
    layers = model.cfg["n_layers"]
    if not 0 <= writer < reader < layers:
        raise ValueError(f"need 0 <= writer < reader < {layers} layers, got writer {writer}, reader {reader}")
    _, w_ov0 = _folded(model, writer)
    w_qk1, w_ov1 = _folded(model, reader)
    scores = _products(w_qk1, w_ov1, w_ov0)
    return Composition(writer=writer, reader=reader, scores=scores, random=random_baseline(model))


def random_baseline(model: GPTModel) -> dict[str, float]:
    """Each kind's mean score for random Gaussian heads of this model's shapes (W_QK = W_Qᵀ W_K, W_OV = W_O W_V, each
    factor e × d): what 'no composition' looks like at this size, since two rank-d forms in e dimensions overlap
    somewhat by chance."""
    e = model.cfg["emb_dim"]
    d = e // model.cfg["n_heads"]
    gen = torch.Generator().manual_seed(RANDOM_SEED)

    def form() -> torch.Tensor:  # (S, e, e) of rank d
        left = torch.randn(RANDOM_SAMPLES, e, d, generator=gen)
        right = torch.randn(RANDOM_SAMPLES, d, e, generator=gen)
        return left @ right

    w_qk1, w_ov1, w_ov0 = form(), form(), form()
    q = w_ov0.transpose(1, 2) @ w_qk1  # (S, e, e)
    k = w_qk1 @ w_ov0
    v = w_ov1 @ w_ov0
    return {
        "Q": float(composition_score(q, w_qk1, w_ov0).mean()),
        "K": float(composition_score(k, w_qk1, w_ov0).mean()),
        "V": float(composition_score(v, w_ov1, w_ov0).mean()),
    }


@torch.no_grad()
def ov_token_circuit(model: GPTModel, layer: int, head: int) -> torch.Tensor:
    """(V, V): row s, column t is what attending to token s adds to token t's logit through this head alone
    (W_E diag(γ₁) W_OVᵀ diag(γ_f) W_Uᵀ, position embeddings and biases left out)."""
    _, w_ov = _folded(model, layer)
    if not 0 <= head < w_ov.shape[0]:
        raise ValueError(f"head {head} does not exist: layer {layer} has heads 0..{w_ov.shape[0] - 1}")
    embed = model.tok_emb.weight.detach().float()  # (V, e)
    unembed = model.out_head.weight.detach().float() * model.final_norm.scale.detach().float()  # (V, e)·γ_f
    return embed @ w_ov[head].T @ unembed.T  # (V, e) @ (e, e) @ (e, V) = (V, V)


def copying_score(matrix: torch.Tensor) -> float:
    """Σλ / Σ|λ| over the eigenvalues of a square matrix: 1 when all are positive (the head copies), −1 when all
    are negative (it suppresses what it reads). Eigenvalues of a real matrix come in conjugate pairs, so Σλ is
    real."""
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"need a square matrix, got shape {tuple(matrix.shape)}")
    eig = torch.linalg.eigvals(matrix.double())  # (V,) complex
    return float(eig.sum().real / eig.abs().sum())


@torch.no_grad()
def copying_scores(model: GPTModel) -> torch.Tensor:
    """(L, h) every head's copying score."""
    layers, heads = model.cfg["n_layers"], model.cfg["n_heads"]
    return torch.tensor(
        [[copying_score(ov_token_circuit(model, layer, head)) for head in range(heads)] for layer in range(layers)]
    )
