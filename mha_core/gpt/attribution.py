"""Direct logit attribution: how much each head, each MLP, the embeddings and the biases raised one token's logit.

The residual stream at the last layer is a sum of parts: the token and position embeddings, every head's output
(its slice of the context times its columns of ``out_proj``), each ``out_proj`` bias and each MLP's output. The
final LayerNorm is linear in that sum once its scale, the standard deviation of the whole stream at the position, is
frozen (as TransformerLens does): each part is centred, divided by that scale, times the LayerNorm's ``scale``, and
read by the unembedding's row for the token. The parts plus the LayerNorm's ``shift`` read by the same row give the
logit itself, within rounding: what a head "did" for a guess is a number that adds up.

Heads may be knocked out (``knockout``): a silenced head's part is then zero, or its mean over the text's positions.

Axis letters: L layers, h heads, T tokens, E emb_dim, V vocabulary, n parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mha_core.attention.modules import trace_forward
from mha_core.gpt import knockout
from mha_core.gpt.model import GPTModel, in_compute_dtype


@dataclass(frozen=True, kw_only=True)
class Parts:
    """The residual stream at the final LayerNorm, split into what wrote it."""

    heads: torch.Tensor  # (L, h, T, E) each head's output through its columns of out_proj
    other: dict[str, torch.Tensor]  # name -> (T, E): "embeddings", "L0 attention bias", "L0 MLP", ...
    logits: torch.Tensor  # (T, V) the model's logits (heads knocked out, if any)
    frozen_scale: torch.Tensor  # (T,) sqrt(var + eps) of the final stream: the final LayerNorm's divisor
    weights: torch.Tensor  # (L, h, T, T) every layer's attention weights, queries on rows


@torch.no_grad()
def residual_parts(model: GPTModel, ids: list[int], heads=(), mode: str = "zero") -> Parts:
    """Run ``ids`` (one sequence) and keep every part of the residual stream; ``heads`` silenced as in knockout."""
    batch = torch.tensor([list(ids)], dtype=torch.int64)  # (1, T)
    model.check_ids(batch)
    chosen = knockout.check_heads(model, heads)
    x = model.embed(batch)  # (1, T, E)
    other, per_head, weights = {"embeddings": x[0]}, [], []
    for layer, block in enumerate(model.blocks()):
        att = block.att
        trace = trace_forward(att, block.norm1(x))
        weights.append(trace.steps["attn_weights"][0])  # (h, T, T)
        context = trace.steps["context"]  # (1, T, h·d) heads concatenated
        context = knockout.silence(context, [h for (lay, h) in chosen if lay == layer], att.num_heads, mode)
        t, d = context.shape[1], att.head_dim
        split = context[0].reshape(t, att.num_heads, d)  # (T, h·d) -> (T, h, d)
        w_o = att.out_proj.weight.reshape(att.d_out, att.num_heads, d)  # (E, h·d) -> (E, h, d)
        per_head.append(torch.einsum("thd,ehd->hte", split, w_o))  # (h, T, E)
        bias = att.out_proj.bias if att.out_proj.bias is not None else torch.zeros(att.d_out)
        other[f"L{layer} attention bias"] = bias.expand(t, -1)  # (T, E)
        x = x + att.out_proj(context)  # (1, T, E)
        mlp = block.ff(block.norm2(x))  # (1, T, E)
        other[f"L{layer} MLP"] = mlp[0]
        x = x + mlp
        del block, trace
    final = in_compute_dtype(model.final_norm)
    scale = torch.sqrt(x[0].var(dim=-1, unbiased=False) + final.eps)  # (T,)
    return Parts(
        heads=torch.stack(per_head),
        other=other,
        logits=model.head(x)[0],
        frozen_scale=scale,
        weights=torch.stack(weights),
    )


@dataclass(frozen=True, kw_only=True)
class Attribution:
    """Each part's contribution to the logit of ``targets[t]`` at every position t."""

    heads: torch.Tensor  # (L, h, T) each head's direct logit attribution
    other: dict[str, torch.Tensor]  # name -> (T,): embeddings, biases, MLPs, and "final LayerNorm shift"
    logit: torch.Tensor  # (T,) the model's logit of the target at each position

    def total(self) -> torch.Tensor:
        """(T,) every part added up: the logit, within rounding."""
        return self.heads.sum(dim=(0, 1)) + sum(self.other.values())


@torch.no_grad()
def direct_logit_attribution(model: GPTModel, parts: Parts, targets: list[int]) -> Attribution:
    """Each part of ``parts`` read as a contribution to ``targets[t]``'s logit at position t (one target each)."""
    num_tokens = parts.logits.shape[0]
    if len(targets) != num_tokens:
        raise ValueError(f"need one target per position: {num_tokens} positions, {len(targets)} targets")
    final = in_compute_dtype(model.final_norm)
    rows = model.out_head.weight[torch.tensor(list(targets), dtype=torch.int64)].float()  # (T, E)
    reader = final.scale.float() * rows / parts.frozen_scale[:, None]  # (T, E): LayerNorm scale, frozen divisor, W_U

    def through(part: torch.Tensor) -> torch.Tensor:  # (..., T, E) -> (..., T): centred, then read
        centred = part - part.mean(dim=-1, keepdim=True)
        return (centred * reader).sum(dim=-1)

    other = {name: through(part) for name, part in parts.other.items()}
    other["final LayerNorm shift"] = (final.shift.float() * rows).sum(dim=-1)  # (T,)
    index = torch.arange(num_tokens)
    return Attribution(
        heads=through(parts.heads),
        other=other,
        logit=parts.logits[index, torch.tensor(list(targets), dtype=torch.int64)],
    )


COPY_GIVEN = 10  # "writing on its own": the second copy's first tokens given, as the project's writing probe does


def copy_start(ids, width: int = COPY_GIVEN) -> int | None:
    """The first position where ``width`` tokens start that occurred earlier (a sentence typed again), or None."""
    seen = set()
    for i in range(len(ids) - width + 1):
        stretch = tuple(ids[i : i + width])
        if stretch in seen:
            return i
        seen.add(stretch)
    return None


def prompt_length(ids) -> int:
    """Tokens given before the model writes on its own: up to the second copy's first COPY_GIVEN tokens when the text
    repeats a stretch, else the first half; at least 1 and at most T - 1."""
    start = copy_start(ids)
    given = start + COPY_GIVEN if start is not None else len(ids) // 2
    return max(1, min(given, len(ids) - 1))


def copy_continuation(ids, count: int, longest: int = 64) -> list[int]:
    """The ``count`` tokens that copying would write after ``ids``: each the token after the longest earlier match of
    the text's end (the latest of equals, up to ``longest`` tokens), the text growing as it copies; shorter when
    nothing earlier matches."""
    seq, written = list(ids), []
    for _ in range(count):
        ends = [j for j in range(len(seq) - 1) if seq[j] == seq[-1]]  # earlier ends matching one token
        for back in range(1, longest):
            longer = [j for j in ends if j - back >= 0 and seq[j - back] == seq[-1 - back]]
            if not longer:
                break
            ends = longer
        if not ends:
            break
        written.append(seq[ends[-1] + 1])
        seq.append(written[-1])
    return written
