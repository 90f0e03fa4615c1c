"""Masks and cross-attention: one mask in both conventions, the weights it gives and the fully masked rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mha_core.attention import masks
from mha_core.attention.modules import Trace
from mha_core.runs import teaching
from mha_core.runs.teaching import MaskParams

from . import figures
from .figures.panel import Panel, head_names, index_labels, shape_text, to_numpy

# =====================================================================================================================
# Masks and cross-attention
# =====================================================================================================================

TORCH_VERSION = torch.__version__
MASK_TEXT_MAX_KEYS = 12  # print the mask as torch prints it up to this many keys


@dataclass(frozen=True)
class MasksView:
    query_labels: list[str]
    key_labels: list[str]
    mask: np.ndarray | None  # (b, i, j) bool, True = may attend
    ours_text: str  # the chosen batch element's mask as torch prints it ("" when too wide)
    blocked_text: str  # the same mask in nn.MultiheadAttention's convention
    panels: tuple[Panel, ...]  # mask, weights (explicit), output of the chosen implementation
    fully_masked: tuple[tuple[int, tuple[int, ...]], ...]  # (batch element, query rows with every key masked)
    context_zero_on_masked_rows: bool
    handwritten_nan_rows: int  # (batch, head, query) rows scored −∞ throughout, which a plain softmax turns into NaN
    max_diff_explicit_fused: float
    implementation: str


def _mask_text(mask: torch.Tensor) -> str:
    """The mask as torch prints it, when narrow enough to read."""
    return str(mask) if mask.shape[-1] <= MASK_TEXT_MAX_KEYS else ""


READING = "rows: queries i (the token that reads), columns: keys j (the tokens it reads)"
DEFAULT_MASK = "padding"  # cross-attention's own mask: causal has no meaning for queries from another sequence


def never_attended(tgt_len: int, src_len: int) -> list[int]:
    """Keys that the top-left causal mask (query i sees keys j ≤ i) hides from every one of tgt_len queries."""
    return list(range(tgt_len, src_len))


def mask_note(kind: str, tgt_len: int, src_len: int) -> str:
    """Which alignment the drawn mask has, and which mask each use of cross-attention needs."""
    uses = (
        "Encoder–decoder attention (queries from one sequence, keys from another) uses a padding mask only; "
        "KV-cache decoding, where the queries are the last tgt_len of the src_len positions, needs a causal mask "
        "aligned bottom-right (key j visible to query i when j ≤ i + src_len − tgt_len)."
    )
    if kind != "causal":
        return uses
    hidden = never_attended(tgt_len, src_len)
    unseen = (
        f": with {tgt_len} queries and {src_len} keys, " + ", ".join(f"k{j}" for j in hidden) + " are never attended"
        if hidden
        else ""
    )
    return (
        f"This causal mask is aligned top-left (query i may see key j when j ≤ i, counting both from 0){unseen}. "
        "Causal order has no meaning for queries from another sequence. " + uses
    )


def fully_masked_text(view: MasksView, qkv_bias: bool) -> str:
    """What a fully masked row gives, and why its output is out_project's bias, or zero with no bias at all."""
    zero = "are exactly 0" if view.context_zero_on_masked_rows else "are NOT 0"
    bias = (
        " (zero here: on this page the sidebar's qkv_bias sets continuiti's single `bias` flag, which removes "
        "`out_project`'s bias too; in the book's module qkv_bias never touches out_proj)"
        if not qkv_bias
        else ""
    )
    return (
        f"These queries may attend to nothing. Here their weights and their context vectors {zero}, as "
        f"F.scaled_dot_product_attention gives in this torch ({TORCH_VERSION}; some older versions gave NaN), so "
        f"their output is just `out_project`'s bias{bias}. A hand-written softmax would divide 0 by 0 instead: on "
        f"these very scores it gives NaN in {view.handwritten_nan_rows} (batch, head, query) rows."
    )


def _mask_panel(mask: torch.Tensor, query_labels: list[str], key_labels: list[str], b: int, presenter: bool) -> Panel:
    """Batch element ``b``'s (i, j) mask, True = may attend: one mask for every head."""
    where = f"batch element {b}"
    return Panel(
        "mask",
        "The mask (True = may attend)",
        f"`attn_mask` · shape (b, i, j) = {shape_text(mask.shape)} · {READING} · {where} · "
        "the same mask for every head",
        figures.heads_heatmap(
            mask[b].cpu().numpy()[None],
            query_labels,
            key_labels,
            title=f"mask · {where}",
            kind="mask",
            head_names=["may attend"],
            presenter=presenter,
        ),
    )


def _weights_panel(
    weights: np.ndarray, query_labels: list[str], key_labels: list[str], b: int, presenter: bool
) -> Panel:
    """The explicit path's (b, h, i, j) weights at batch element ``b``, one heatmap per head."""
    where = f"batch element {b}"
    return Panel(
        "weights",
        "Attention weights (explicit path): zero exactly where the mask blocks",
        f"`attn_weights` · shape (b, h, i, j) = {shape_text(weights.shape)} · {READING} · {where}",
        figures.heads_heatmap(
            weights[b],
            query_labels,
            key_labels,
            title=f"attn_weights · {where}",
            kind="weights",
            head_names=head_names(weights.shape[1]),
            presenter=presenter,
        ),
    )


def _output_panel(
    run: teaching.CrossRun, query_labels: list[str], b: int, implementation: str, presenter: bool
) -> Panel:
    """The chosen implementation's (i, E) output at batch element ``b``."""
    batch, _, tgt, _ = run.trace.steps["attn_weights"].shape  # (b, h, i, j)
    output = to_numpy(run.trace.output if implementation == "explicit" else run.output_fused)[b]  # (i, E)
    return Panel(
        "output",
        f"Output ({implementation} implementation)",
        f"`output` · shape (b, i, E) = {shape_text((batch, tgt, output.shape[-1]))} · batch element {b}",
        figures.matrix_heatmap(
            output,
            query_labels,
            index_labels(output.shape[-1]),
            title=f"output ({implementation})",
            presenter=presenter,
            row_title="query",
            width_px=figures.half_figure_px(presenter),  # the page's left half
        ),
    )


def _fully_masked(trace: Trace, mask: torch.Tensor) -> tuple[list[tuple[int, tuple[int, ...]]], bool, int]:
    """(batch element, query rows with every key masked) for each element that has some; whether the context is
    zero on all those rows; how many (b, h, i) rows of scaled scores are −∞ throughout."""
    fully_masked: list[tuple[int, tuple[int, ...]]] = []
    context_zero = True
    empty = masks.fully_masked_rows(mask).cpu()  # (b, i)
    context = trace.steps["context_heads"].cpu()  # (b, h, i, d)
    for n in range(empty.shape[0]):
        rows = tuple(int(i) for i in torch.nonzero(empty[n]).flatten())
        if rows:
            fully_masked.append((n, rows))
            context_zero &= bool((context[n][:, list(rows)] == 0).all())
    nan_rows = int(torch.isneginf(trace.steps["scaled_scores"]).all(-1).sum())  # exp(−∞)/Σexp(−∞) = 0/0 there
    return fully_masked, context_zero, nan_rows


def build_masks_view(
    run: teaching.CrossRun,
    mask: torch.Tensor | None,
    query_labels: list[str],
    key_labels: list[str],
    *,
    batch_index: int,
    implementation: str,
    presenter: bool,
) -> MasksView:
    """The chosen batch element's mask in both conventions, the weights it gives and the fully masked rows."""
    trace, b = run.trace, batch_index
    weights = trace.numpy("attn_weights")  # (b, h, i, j)
    panels = [] if mask is None else [_mask_panel(mask, query_labels, key_labels, b, presenter)]
    panels.append(_weights_panel(weights, query_labels, key_labels, b, presenter))
    panels.append(_output_panel(run, query_labels, b, implementation, presenter))
    fully_masked, context_zero, nan_rows = [], True, 0
    ours_text = blocked_text = ""
    if mask is not None:
        fully_masked, context_zero, nan_rows = _fully_masked(trace, mask)
        ours = mask[b].cpu()
        ours_text, blocked_text = _mask_text(ours), _mask_text(masks.to_blocked(ours))
    return MasksView(
        query_labels,
        key_labels,
        None if mask is None else mask.cpu().numpy(),
        ours_text,
        blocked_text,
        tuple(panels),
        tuple(fully_masked),
        context_zero,
        nan_rows,
        run.max_diff_explicit_fused,
        implementation,
    )


# --- the URL's mask rows (m0, m1, …): one integer per query, bit j set where key j may be attended ------------------


def mask_to_bits(mask: torch.Tensor) -> list[int]:
    """(i, j) bool -> one integer per row, bit j set when key j may be attended."""
    return [sum(1 << j for j, allowed in enumerate(row) if allowed) for row in mask.tolist()]


def mask_from_bits(bits: Sequence[int], num_keys: int) -> torch.Tensor:
    """The inverse of ``mask_to_bits``: (len(bits), num_keys) bool; bits beyond num_keys are ignored."""
    flags = [[bool(row >> j & 1) for j in range(num_keys)] for row in bits]
    return torch.tensor(flags, dtype=torch.bool).reshape(len(bits), num_keys)  # (i, j), also when there are no rows


def causal_rows(tgt_len: int, src_len: int) -> list[int]:
    """The causal mask as one integer per query row, bit j set where key j may be attended (the URL's m0, m1, …)."""
    return mask_to_bits(masks.causal(tgt_len, src_len))


def rows_to_table(rows: list[int], query_names: list[str], key_names: list[str]):
    """The editor's table: one row per query, one tick column per key, True where it may attend."""
    import pandas as pd  # only this page's editor needs it: not imported at start-up (64 MB)

    ticks = mask_from_bits(rows, len(key_names)).numpy()  # (len(rows), len(key_names)) bool
    return pd.DataFrame(ticks, index=query_names, columns=key_names)


def table_to_rows(table: np.ndarray) -> list[int]:
    """The editor's (tgt_len, src_len) ticks back to one integer per row."""
    return mask_to_bits(torch.tensor(np.asarray(table, dtype=bool)))


def custom_params(rows: Sequence[int], num_keys: int) -> MaskParams:
    """The custom mask of the URL's bit rows, as the core's one flag per key."""
    return MaskParams(kind="custom", custom=tuple(map(tuple, mask_from_bits(rows, num_keys).tolist())))


def random_params(keep_percent: int, seed: int) -> MaskParams:
    """The random mask of the page's percent slider (?keep=, 0–100), as the core's fraction."""
    return MaskParams(kind="random", keep_fraction=keep_percent / 100, seed=seed)
