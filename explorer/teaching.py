"""What the teaching pages show, composed from the modules' own traces: panels, shapes and sentences. No streamlit.

One ``build_*`` function per page (or page section) runs the mha_core computation once and returns a small frozen
view: figures as ``panels.Panel`` (title, caption with the shape, figure) and the numbers the page prints. The
pages lay the views out; ``teaching_cache`` caches them keyed on settings and page parameters.

Axis letters: b batch, h heads, T tokens, i query position, j key position, d head_dim.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mha_core import heads, masks, teaching
from mha_core.attention import ExplicitAttention
from mha_core.listing import LISTING_LINES, STEP_LINES
from mha_core.reference import ReferenceReport
from mha_core.trace import Trace, trace_forward

from . import figures
from .panels import Panel, caption, shape_text


def _heads(h: int) -> list[str]:
    return [f"head {k}" for k in range(h)]


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach()
    if tensor.dtype in (torch.float16, torch.bfloat16):
        tensor = tensor.float()
    return tensor.cpu().numpy()


# =====================================================================================================================
# Step through: Listing 3.5, one step per screen
# =====================================================================================================================

# The gutter marker of the highlighted listing lines. Shown with language="diff", "+" lines are drawn in colour
# and every other line is muted: a spotlight on the step, readable from the back of a room.
MARK = "+"


def _line_of(fragment: str) -> int:
    return next(n for n, line in enumerate(LISTING_LINES, start=1) if fragment in line)


def statement_lines(first: int) -> list[int]:
    """The 1-based lines of the statement starting at ``first``: it goes on while brackets are open."""
    depth, number, lines = 0, first, []
    while number <= len(LISTING_LINES):
        text = LISTING_LINES[number - 1]
        depth += sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
        lines.append(number)
        if depth <= 0 and not text.rstrip().endswith("\\"):
            break
        number += 1
    return lines


def marked_listing(lines: Sequence[int]) -> str:
    """Listing 3.5 with a "+" gutter on the given lines (plain text for st.code(language="diff"), not HTML)."""
    marked = set(lines)
    return "\n".join(f"{MARK} {text}" if n in marked else f"  {text}" for n, text in enumerate(LISTING_LINES, start=1))


@dataclass(frozen=True)
class Step:
    key: str
    title: str
    listing_steps: tuple[str, ...]  # trace steps whose Listing 3.5 statements are highlighted
    before: tuple[str, str] | None  # (trace step, axes) of the tensor going in
    after: tuple[str, str]  # (trace step, axes) of the tensor coming out
    sentences: tuple[str, ...]
    extra_fragments: tuple[str, ...] = ()  # more listing lines to highlight, found by their text

    @property
    def lines(self) -> tuple[int, ...]:
        starts = [STEP_LINES[name] for name in self.listing_steps] + [_line_of(f) for f in self.extra_fragments]
        return tuple(sorted({n for start in starts for n in statement_lines(start)}))


STEPS: tuple[Step, ...] = (
    Step(
        "x",
        "The input x",
        ("x",),
        None,
        ("x", "(b, T, d_in)"),
        (
            "Each row is one token's embedding: b sequences of T tokens, d_in numbers per token.",
            "Everything that follows is computed from these numbers and the module's parameters: W_query, W_key and "
            "W_value (with biases only when qkv_bias=True), and out_proj's weight and bias.",
        ),
        extra_fragments=("b, num_tokens, d_in = x.shape",),
    ),
    Step(
        "projections",
        "Projections: queries, keys, values",
        ("keys", "queries", "values"),
        ("x", "(b, T, d_in)"),
        ("queries", "(b, T, d_out)"),
        (
            "Three linear layers turn every token into a query (what it looks for), a key (what it offers) and a "
            "value (what it passes on).",
            "Each is one d_in → d_out matrix multiply for all heads at once: the heads sit side by side in the d_out "
            "columns. The three layers are built once, in __init__ (lines 11–13, also lit).",
            "An intuition: a library search. The query is your question, the keys are the labels on the shelves and "
            "the values are what the books say: each score compares the question with a label, and what you take "
            "away is a mix of the books' contents, weighted by how well their labels matched.",
        ),
        extra_fragments=("self.W_query = nn.Linear(", "self.W_key = nn.Linear(", "self.W_value = nn.Linear("),
    ),
    Step(
        "view",
        "view: split d_out into heads",
        ("keys_split", "values_split", "queries_split"),
        ("queries", "(b, T, d_out)"),
        ("queries_split", "(b, T, h, head_dim)"),
        (
            "view(b, T, h, head_dim) cuts each token's d_out numbers into h blocks of head_dim.",
            "No number moves in memory: column c simply belongs to head c // head_dim from now on.",
            "head_dim = d_out // num_heads was set in __init__ (line 10, also lit), after checking that d_out is "
            "divisible by num_heads.",
        ),
        extra_fragments=("self.head_dim = d_out // num_heads",),
    ),
    Step(
        "transpose",
        "transpose(1, 2): heads before tokens",
        ("keys_heads", "queries_heads", "values_heads"),
        ("queries_split", "(b, T, h, head_dim)"),
        ("queries_heads", "(b, h, T, head_dim)"),
        (
            "Why transpose? A matrix multiply works on the last two axes and treats the axes in front as a batch.",
            "With heads in front of tokens, each head's (T, head_dim) matrix becomes one batch entry, so a single "
            "matmul computes every head's scores at once.",
        ),
    ),
    Step(
        "scores",
        "Scores: queries @ keysᵀ",
        ("attn_scores",),
        ("queries_heads", "(b, h, T, head_dim)"),
        ("attn_scores", "(b, h, T, T)"),
        (
            "Each head gets its own T × T matrix: entry (i, j) is the dot product of query i with key j, how well "
            "token j offers what token i looks for.",
            "keys.transpose(2, 3) turns each head's keys into (head_dim, T), so (T, head_dim) @ (head_dim, T) = "
            "(T, T).",
        ),
    ),
    Step(
        "mask",
        "Causal mask: −∞ on future keys",
        ("mask", "masked_scores"),
        ("attn_scores", "(b, h, T, T)"),
        ("masked_scores", "(b, h, T, T)"),
        (
            "Token i must not see the tokens after it: the book's buffer, built in __init__ (lines 16–20, also lit), "
            "is 1 above the diagonal, and masked_fill_ writes −∞ there.",
            "Why a buffer and not a tensor attribute or a parameter? register_buffer makes the mask part of the "
            "module without training it (it is not in parameters(), so no optimizer touches it), moves it with the "
            "weights on .to(device), and saves it in state_dict.",
            "Why −∞ and not 0? The softmax takes exp of every score, and exp(0) = 1: a blocked key with score 0 would "
            "still get weight. exp(−∞) = 0 gives it exactly zero, and each row is normalised over the keys it may see.",
            "The book's first way (section 3.5.1), softmax, then zero the future weights, then divide each row by its "
            "sum, gives the same weights; −∞ before the softmax does it in one step.",
        ),
        extra_fragments=("self.register_buffer(",),
    ),
    Step(
        "softmax",
        "Scale by 1/√head_dim, then softmax",
        ("attn_weights",),
        ("masked_scores", "(b, h, T, T)"),
        ("attn_weights", "(b, h, T, T)"),
        (
            "Why divide by √head_dim? If the head_dim terms of a dot product are independent with unit variance, the "
            "sum's standard deviation is √head_dim; large scores push the softmax towards one-hot, where its gradients "
            "vanish. Dividing keeps the scores' spread near 1 for any head size.",
            "Masking then scaling equals scaling then masking: −∞ / √head_dim is still −∞, and the other scores are "
            "divided either way.",
            "The softmax then turns each row into weights that are at least 0 and sum to 1.",
        ),
    ),
    Step(
        "dropout",
        "Dropout on the weights",
        ("attn_weights_dropped",),
        ("attn_weights", "(b, h, T, T)"),
        ("attn_weights_dropped", "(b, h, T, T)"),
        (
            "In training, dropout zeroes each weight with probability p and multiplies the survivors by 1/(1−p), "
            "so every weight keeps its expected value.",
            "With p = 0, or in eval mode (module.eval()), it does nothing: the weights pass through unchanged.",
            "Train vs eval: module.eval() only turns dropout off here (nn.Dropout is built on line 15, also lit); the "
            "causal mask applies in both modes. torch.no_grad() is separate: it stops recording gradients and "
            "changes no number.",
        ),
        extra_fragments=("self.dropout = nn.Dropout(dropout)",),
    ),
    Step(
        "context",
        "Context: weights @ values",
        ("context_heads",),
        ("attn_weights_dropped", "(b, h, T, T)"),
        ("context_heads", "(b, h, T, head_dim)"),
        (
            "Each token's context vector is the weighted sum of the value vectors of the tokens it attends to, in "
            "every head separately. Without dropout each weight row sums to 1, so it is a weighted average; after "
            "dropout in train mode the rows sum to 1 only on average.",
            "(T, T) @ (T, head_dim) = (T, head_dim) per head.",
        ),
    ),
    Step(
        "transpose_back",
        "transpose(1, 2) back: tokens before heads",
        ("context_transposed",),
        ("context_heads", "(b, h, T, head_dim)"),
        ("context_transposed", "(b, T, h, head_dim)"),
        (
            "The same transpose again moves tokens back in front of heads.",
            "Each token's row now holds its h head outputs one after another, ready to be joined.",
        ),
    ),
    Step(
        "concatenate",
        "contiguous().view: concatenate the heads",
        ("context",),
        ("context_transposed", "(b, T, h, head_dim)"),
        ("context", "(b, T, d_out)"),
        (
            "view(b, T, d_out) joins the h heads side by side: the concatenation of the book's "
            "MultiHeadAttentionWrapper, without a loop over heads.",
            "Why contiguous() before view? The transpose only changed strides, so the numbers are no longer in row "
            "order in memory; view needs them in order and raises an error otherwise. contiguous() makes that copy.",
        ),
    ),
    Step(
        "out_proj",
        "out_proj: mix the heads",
        ("output",),
        ("context", "(b, T, d_out)"),
        ("output", "(b, T, d_out)"),
        (
            "A last linear layer (d_out → d_out) lets every output feature combine all heads' results.",
            "The book notes it is not strictly necessary, but it is standard in LLM architectures. It is built in "
            "__init__ (line 14, also lit) with a bias, unlike W_query, W_key and W_value by default.",
        ),
        extra_fragments=("return context_vec", "self.out_proj = nn.Linear("),
    ),
)
STEP_COUNT = len(STEPS)


@dataclass(frozen=True)
class StepView:
    number: int  # 1-based
    count: int
    title: str
    lines: tuple[int, ...]  # highlighted lines of Listing 3.5, 1-based
    listing: str  # the whole listing with a + gutter on those lines
    code: str  # the highlighted lines alone
    shape_before: str  # "(b, T, d_out) = (2, 6, 2)", or "" for the first step
    shape_after: str
    sentences: tuple[str, ...]
    panels: tuple[Panel, ...]  # the first is the step's main heatmap (all that presenter mode shows)


def shape_line(trace: Trace, step: str, axes: str) -> str:
    return f"{axes} = {shape_text(trace.info[step].shape)}"


def _dims(n: int) -> list[str]:
    return [str(k) for k in range(n)]


def _step_panels(
    step: Step, trace: Trace, labels: list[str], b: int, presenter: bool, dropout_active: bool, train: bool = False
) -> list[Panel]:
    """The step's figures, main one first. Every number comes from the trace."""
    h, T, head_dim = trace.info["queries_heads"].shape[1:]
    d_out = h * head_dim
    where = f"batch element {b}"

    def heads_panel(name: str, axes: str, kind: str, title: str, cols=None, col_title="key", note="", **kw):
        return Panel(
            f"step_{name}",
            title,
            caption(trace, name, axes, note or where),
            figures.heads_heatmap(
                trace.numpy(name)[b],
                labels,
                labels if cols is None else cols,
                title=f"{name} · {where}",
                kind=kind,
                head_names=_heads(h),
                presenter=presenter,
                col_title=col_title,
                **kw,
            ),
        )

    def matrix_panel(name: str, axes: str, title: str, groups: int | None = None, note=""):
        values = trace.numpy(name)[b]
        return Panel(
            f"step_{name}",
            title,
            caption(trace, name, axes, note or where),
            figures.matrix_heatmap(
                values,
                labels,
                _dims(values.shape[-1]),
                title=f"{name} · {where}",
                column_groups=groups,
                presenter=presenter,
            ),
        )

    def reshape_panel(name: str, axes: str, stage: str, values_from: str, title: str):
        return Panel(
            f"step_{name}_{stage}",
            title,
            caption(trace, name, axes, where),
            figures.reshape_figure(
                T,
                h,
                head_dim,
                token_labels=labels,
                stage=stage,
                values=trace.numpy(values_from)[b],
                title=f"{name} {axes}",
                presenter=presenter,
            ),
        )

    key = step.key
    if key == "x":
        x = trace.numpy("x")[b]
        return [
            Panel(
                "step_x",
                "x: one row per token",
                caption(trace, "x", "(b, T, d_in)", where),
                figures.matrix_heatmap(
                    x, labels, _dims(x.shape[-1]), title=f"x · {where}", presenter=presenter, col_title="embedding dim"
                ),
            )
        ]
    if key == "projections":
        qkv = np.stack([trace.numpy(name)[b] for name in ("queries", "keys", "values")])  # (3, T, d_out)
        return [
            Panel(
                "step_qkv",
                "Q, K and V: one row per token, d_out columns",
                caption(trace, "queries", "(b, T, d_out)", f"{where} · keys and values have the same shape"),
                figures.heads_heatmap(
                    qkv,
                    labels,
                    _dims(d_out),
                    title=f"queries, keys, values · {where}",
                    kind="values",
                    head_names=["queries", "keys", "values"],
                    presenter=presenter,
                    row_title="token",
                    col_title="feature",
                ),
            ),
            matrix_panel("queries", "(b, T, d_out)", "queries, columns banded by the head they will go to", h),
        ]
    if key == "view":
        return [
            reshape_panel("queries_split", "(b, T, h, head_dim)", "view", "queries", "After view"),
            reshape_panel("queries", "(b, T, d_out)", "flat", "queries", "Before view"),
        ]
    if key == "transpose":
        return [
            reshape_panel("queries_heads", "(b, h, T, head_dim)", "transpose", "queries", "After transpose"),
            heads_panel(
                "queries_heads",
                "(b, h, T, head_dim)",
                "values",
                "Each head's queries, on its own",
                cols=_dims(head_dim),
                col_title="dim",
            ),
            reshape_panel("queries_split", "(b, T, h, head_dim)", "view", "queries", "Before transpose"),
        ]
    if key == "scores":
        return [heads_panel("attn_scores", "(b, h, T, T)", "scores", "Scores Q Kᵀ, per head")]
    if key == "mask":
        return [
            heads_panel("masked_scores", "(b, h, T, T)", "scores", "Masked scores: −∞ on future keys"),
            Panel(
                "step_mask",
                "The mask as used (True = may attend)",
                caption(
                    trace,
                    "mask",
                    "(T, T)",
                    "the book's buffer sliced to T tokens and inverted: the book's `mask_bool` is True = blocked",
                ),
                figures.heads_heatmap(
                    trace.numpy("mask")[None],
                    labels,
                    labels,
                    title="mask[:T, :T]",
                    kind="mask",
                    head_names=["may attend"],
                    presenter=presenter,
                ),
            ),
        ]
    if key == "softmax":
        return [
            heads_panel(
                "attn_weights",
                "(b, h, T, T)",
                "weights",
                "Attention weights, per head",
                note=f"{where} · each row sums to 1",
            ),
            heads_panel("scaled_scores", "(b, h, T, T)", "scores", "Scaled scores (masked / √head_dim)"),
        ]
    if key == "dropout":
        dropped = trace.numpy("attn_weights_dropped")[b]
        idle = "train mode with p = 0: unchanged" if train else "eval mode: unchanged"
        note = f"{where} · " + ("survivors scaled by 1/(1−p)" if dropout_active else idle)
        result = [
            heads_panel(
                "attn_weights_dropped",
                "(b, h, T, T)",
                "weights",
                "Weights after dropout",
                note=note,
                zmin=0.0,
                zmax=max(1.0, float(np.nanmax(dropped)) if dropped.size else 1.0),
            )
        ]
        if dropout_active:
            keep = trace.numpy("dropout_keep")[b].astype(np.float32)  # (h, T, T)
            keep[:, ~trace.numpy("mask").astype(bool)] = -np.inf  # causally masked: neither kept nor dropped
            result.append(
                Panel(
                    "step_dropout_keep",
                    "Where dropout kept the weight",
                    caption(trace, "dropout_keep", "(b, h, T, T)", f"{where} · 1 = kept, 0 = dropped"),
                    _keep_mask_figure(keep, labels, presenter),
                )
            )
        return result
    if key == "context":
        return [
            heads_panel(
                "context_heads",
                "(b, h, T, head_dim)",
                "values",
                "Context per head",
                cols=_dims(head_dim),
                col_title="dim",
            ),
            heads_panel(
                "values_heads",
                "(b, h, T, head_dim)",
                "values",
                "The values being averaged",
                cols=_dims(head_dim),
                col_title="dim",
            ),
        ]
    if key == "transpose_back":
        return [
            reshape_panel("context_transposed", "(b, T, h, head_dim)", "view", "context", "After the transpose back")
        ]
    if key == "concatenate":
        return [matrix_panel("context", "(b, T, d_out)", "Heads side by side", h)]
    if key == "out_proj":
        return [
            matrix_panel("output", "(b, T, d_out)", "The output"),
            matrix_panel("context", "(b, T, d_out)", "Its input: the concatenated heads", h),
        ]
    raise ValueError(f"unknown step {key!r}")


def _code(lines: Sequence[int]) -> str:
    """The highlighted lines alone, a "..." line where lines are skipped (an __init__ line, then forward's)."""
    out: list[str] = []
    for previous, number in zip((None, *lines), lines, strict=False):
        if previous is not None and number > previous + 1:
            out.append("        ...")
        out.append(LISTING_LINES[number - 1])
    return textwrap.dedent("\n".join(out))


def line_ranges(lines: Sequence[int]) -> str:
    """ "line 38", "lines 44–45" or "lines 10, 28–31": the highlighted lines, runs joined."""
    runs: list[list[int]] = []
    for number in lines:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)
    return f"line {text}" if len(lines) == 1 else f"lines {text}"


def build_step_view(
    trace: Trace,
    labels: list[str],
    number: int,
    *,
    batch_index: int,
    presenter: bool,
    dropout_active: bool,
    train: bool = False,
) -> StepView:
    """Step ``number`` (1-based) of ``STEPS`` for one traced forward pass."""
    if not 1 <= number <= STEP_COUNT:
        raise ValueError(f"step must be in 1–{STEP_COUNT}, got {number}")
    step = STEPS[number - 1]
    sentences = step.sentences
    if step.key == "dropout":
        if dropout_active:
            sentences = sentences[:1] + ("Train mode is on: look at the zeros and the values above 1.",) + sentences[2:]
        elif train:
            sentences = (
                sentences[:1]
                + ("Train mode is on, but p = 0: nothing is dropped, the weights pass through unchanged.",)
                + sentences[2:]
            )
    head_dim = trace.info["queries_heads"].shape[-1]
    if step.key == "softmax" and head_dim == 1:
        sentences = sentences + (
            "Here head_dim = 1, so √head_dim = 1 and the division changes nothing: try head_dim 16 to see it matter.",
        )
    return StepView(
        number=number,
        count=STEP_COUNT,
        title=step.title,
        lines=step.lines,
        listing=marked_listing(step.lines),
        code=_code(step.lines),
        shape_before=shape_line(trace, *step.before) if step.before else "",
        shape_after=shape_line(trace, *step.after),
        sentences=sentences,
        panels=tuple(_step_panels(step, trace, labels, batch_index, presenter, dropout_active, train)),
    )


# =====================================================================================================================
# Heads and references
# =====================================================================================================================

FUSED_NO_WEIGHTS = (
    "F.scaled_dot_product_attention returns no attention weights. Its fused kernels (flash, memory-efficient, "
    "cuDNN) never build the T × T matrix: they stream keys in tiles and keep a running maximum and sum per query "
    "(an online softmax). Its math fallback, which runs where no fused kernel fits (float64 on CUDA, for "
    "example), does build it. This app shows the weights from the explicit path, which computes the same output "
    "step by step; the differences below prove the two agree."
)


@dataclass(frozen=True)
class HeadsView:
    panels: tuple[Panel, ...]  # separate heads, the batched module, their difference
    max_abs_diff: dict[str, float]  # mha_core.heads.separate_heads' own numbers, by step
    weights_diff_per_head: tuple[float, ...]  # max |separate − batched| of each head's weights, this batch element


@dataclass(frozen=True)
class HeadsRun:
    """Every head run on its own and the batched module on the same input: what the heads view draws from."""

    separate: heads.SeparateHeads
    batched: Trace


def run_heads(module, x: torch.Tensor) -> HeadsRun:
    weight = module.W_query.weight
    x = x.to(device=weight.device, dtype=weight.dtype)
    return HeadsRun(heads.separate_heads(module, x), trace_forward(module, x))


def build_heads_view(run: HeadsRun, labels: list[str], *, batch_index: int, presenter: bool) -> HeadsView:
    """Section 3.6.2: every head on its own (the wrapper's way) beside the batched module, and the difference."""
    separate, batched = run.separate, run.batched
    b = batch_index
    alone = _numpy(separate.weights[b])  # (h, T, T)
    together = _numpy(batched.steps["attn_weights"][b])
    diff = alone.astype(np.float64) - together.astype(np.float64)
    h = alone.shape[0]
    where = f"batch element {b}"
    shape = f"(b, h, T, T) = {shape_text(separate.weights.shape)}"
    diff_max = float(np.abs(diff).max()) if diff.size else 0.0
    zmax = max(diff_max, np.finfo(np.float32).eps)  # a symmetric scale that shows an all-zero difference as white
    panels = (
        Panel(
            "heads_separate",
            "Each head on its own (MultiHeadAttentionWrapper)",
            f"`separate_heads(...).weights` · shape {shape} · {where} · each head's own slice of W_query, W_key, "
            "W_value and its own softmax",
            figures.heads_heatmap(
                alone,
                labels,
                labels,
                title=f"separate heads · {where}",
                kind="weights",
                head_names=_heads(h),
                presenter=presenter,
            ),
        ),
        Panel(
            "heads_batched",
            "The same heads from the batched module (Listing 3.5)",
            caption(batched, "attn_weights", "(b, h, T, T)", where),
            figures.heads_heatmap(
                together,
                labels,
                labels,
                title=f"batched module · {where}",
                kind="weights",
                head_names=_heads(h),
                presenter=presenter,
            ),
        ),
        Panel(
            "heads_difference",
            "Difference: separate − batched",
            f"shape {shape} · {where} · max |difference| = {diff_max:.3g}",
            figures.heads_heatmap(
                np.nan_to_num(diff, nan=0.0),
                labels,
                labels,
                title=f"separate − batched · {where}",
                kind="values",
                head_names=_heads(h),
                zmin=-zmax,
                zmax=zmax,
                presenter=presenter,
            ),
        ),
    )
    per_head = tuple(float(np.abs(diff[k]).max()) if diff[k].size else 0.0 for k in range(h))
    return HeadsView(panels, dict(separate.max_abs_diff), per_head)


REFERENCE_ROWS: tuple[tuple[str, str], ...] = (
    ("output_vs_torch_mha", "output: ours vs nn.MultiheadAttention"),
    ("weights_vs_torch_mha", "weights: ours vs nn.MultiheadAttention (per head)"),
    ("output_vs_sdpa", "output: ours vs F.scaled_dot_product_attention"),
    ("output_vs_float64", "output error: ours vs float64 baseline"),
    ("torch_mha_output_vs_float64", "output error: nn.MultiheadAttention vs float64 baseline"),
    ("sdpa_output_vs_float64", "output error: SDPA vs float64 baseline"),
    ("weights_vs_float64", "weights error: ours vs float64 baseline"),
    ("torch_mha_weights_vs_float64", "weights error: nn.MultiheadAttention vs float64 baseline"),
)


def reference_table(reports: dict[str, ReferenceReport]) -> dict[str, list]:
    """Columns for a table: "comparison", then one column of max |differences| per dtype."""
    table: dict[str, list] = {"comparison": [label for _, label in REFERENCE_ROWS]}
    for dtype, report in reports.items():
        table[dtype] = [float(getattr(report, field)) for field, _ in REFERENCE_ROWS]
    return table


def float_tolerance(dtype: str) -> float:
    """Our float error may be at most twice torch's own, plus this floor (a few units of rounding)."""
    return 8 * torch.finfo(getattr(torch, dtype)).eps


def agreement_tolerance(dtype: str) -> float:
    """Two implementations of the same attention agree when their outputs differ by at most this."""
    return max(1e-5, 16 * torch.finfo(getattr(torch, dtype)).eps)


def within_torch_error(report: ReferenceReport) -> bool:
    """flash-attention's rule: our error against float64 is at most about twice torch's own error."""
    floor = float_tolerance(report.dtype)
    torch_output = max(report.torch_mha_output_vs_float64, report.sdpa_output_vs_float64)
    return (
        report.output_vs_float64 <= 2 * torch_output + floor
        and report.weights_vs_float64 <= 2 * report.torch_mha_weights_vs_float64 + floor
    )


# =====================================================================================================================
# Masks and cross-attention
# =====================================================================================================================

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
    handwritten_nan_rows: int  # (batch, head, query) rows a plain softmax turns into NaN
    max_diff_explicit_fused: float
    implementation: str


def _mask_text(mask: torch.Tensor) -> str:
    """The mask as torch prints it, when narrow enough to read."""
    return str(mask) if mask.shape[-1] <= MASK_TEXT_MAX_KEYS else ""


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
    batch, h, tgt, src = weights.shape
    where = f"batch element {b}"
    panels = []
    if mask is not None:
        panels.append(
            Panel(
                "mask",
                "The mask (True = may attend)",
                f"`attn_mask` · shape (b, i, j) = {shape_text(mask.shape)} · {where} · the same mask for every head",
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
        )
    panels.append(
        Panel(
            "weights",
            "Attention weights (explicit path): zero exactly where the mask blocks",
            f"`attn_weights` · shape (b, h, i, j) = {shape_text(weights.shape)} · {where}",
            figures.heads_heatmap(
                weights[b],
                query_labels,
                key_labels,
                title=f"attn_weights · {where}",
                kind="weights",
                head_names=_heads(h),
                presenter=presenter,
            ),
        )
    )
    output = _numpy(trace.output if implementation == "explicit" else run.output_fused)[b]  # (i, E)
    panels.append(
        Panel(
            "output",
            f"Output ({implementation} implementation)",
            f"`output` · shape (b, i, E) = {shape_text((batch, tgt, output.shape[-1]))} · {where}",
            figures.matrix_heatmap(
                output,
                query_labels,
                _dims(output.shape[-1]),
                title=f"output ({implementation})",
                presenter=presenter,
                row_title="query",
            ),
        )
    )
    fully_masked: list[tuple[int, tuple[int, ...]]] = []
    context_zero = True
    nan_rows = 0
    if mask is not None:
        empty = masks.fully_masked_rows(mask).cpu()  # (b, i)
        context = trace.steps["context_heads"].cpu()  # (b, h, i, d)
        for n in range(batch):
            rows = tuple(int(i) for i in torch.nonzero(empty[n]).flatten())
            if rows:
                fully_masked.append((n, rows))
                context_zero &= bool((context[n][:, list(rows)] == 0).all())
        nan_rows = int(torch.isnan(teaching.handwritten_softmax(trace.steps["scaled_scores"])).all(-1).sum())
        ours = mask[b].cpu()
        ours_text, blocked_text = _mask_text(ours), _mask_text(masks.to_blocked(ours))
    else:
        ours_text = blocked_text = ""
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


# =====================================================================================================================
# Knobs that teach
# =====================================================================================================================

SCALE_MULTIPLIERS = ("0.01", "0.1", "0.25", "0.5", "1", "2", "4", "8", "16", "32", "64", "128")


@dataclass(frozen=True)
class TemperatureView:
    multiplier: float
    scale: float  # multiplier / √head_dim
    mean_entropy: float  # nats, over batch, heads and rows
    max_mean_entropy: float  # the mean entropy of uniform attention over the allowed keys
    sweep: tuple[float, ...]  # mean entropy at each of SCALE_MULTIPLIERS
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class TemperatureRun:
    """A forward pass at one softmax scale, its row entropies and the sweep over every scale."""

    multiplier: float
    scale: float
    trace: Trace
    entropy: torch.Tensor  # (b, h, T)
    most: torch.Tensor  # (b, h, T): the entropy of uniform attention over the allowed keys
    uniform_mean: float
    sweep: tuple[float, ...]  # mean entropy at each of SCALE_MULTIPLIERS


def run_temperature(module, x: torch.Tensor, multiplier: float) -> TemperatureRun:
    scale = multiplier / math.sqrt(module.head_dim)
    weight = module.W_query.weight
    x = x.to(device=weight.device, dtype=weight.dtype)
    trace = trace_forward(module, x, attention=ExplicitAttention(scale=scale))
    weights = trace.steps["attn_weights"]
    allowed = torch.broadcast_to(trace.steps["mask"], weights.shape)
    most = teaching.uniform_entropy(allowed)  # (b, h, T)
    sweep = teaching.entropy_sweep(module, x, [float(m) for m in SCALE_MULTIPLIERS])
    return TemperatureRun(
        multiplier, scale, trace, teaching.row_entropy(weights), most, most.mean().item(), tuple(sweep)
    )


def build_temperature_view(run: TemperatureRun, labels: list[str], *, presenter: bool) -> TemperatureView:
    """The weights at softmax scale multiplier/√head_dim, the entropy of each row and its sweep over scales."""
    multiplier, scale, trace, entropy, most, sweep = (
        run.multiplier,
        run.scale,
        run.trace,
        run.entropy,
        run.most,
        list(run.sweep),
    )
    weights = trace.steps["attn_weights"]
    h = weights.shape[1]
    sweep_values = [float(m) for m in SCALE_MULTIPLIERS]
    positions = list(range(weights.shape[2]))
    series = {"uniform": _numpy(most[0, 0]).tolist()}  # first, so that the heads are drawn over it
    series |= {f"head {k}": _numpy(entropy[0, k]).tolist() for k in range(h)}
    panels = (
        Panel(
            "temperature_weights",
            f"Attention weights at scale {scale:.3g} (× {multiplier:g} of 1/√head_dim)",
            caption(trace, "attn_weights", "(b, h, T, T)", "batch element 0"),
            figures.heads_heatmap(
                _numpy(weights[0]),
                labels,
                labels,
                title=f"attn_weights at scale {scale:.3g}",
                kind="weights",
                head_names=_heads(h),
                presenter=presenter,
            ),
        ),
        Panel(
            "temperature_entropy",
            "Entropy of each query's weight row",
            f"`row_entropy(attn_weights)` · shape (b, h, T) = {shape_text(entropy.shape)} · batch element 0 · "
            "0 = one-hot, log(number of visible keys) = uniform",
            figures.line_chart(
                positions,
                series,
                title="row entropy",
                x_title="query position",
                y_title="entropy (nats)",
                presenter=presenter,
            ),
        ),
        Panel(
            "temperature_sweep",
            "Mean row entropy as the scale grows",
            "each point is one traced forward pass with ExplicitAttention(scale = multiplier / √head_dim) · "
            "the flat line is uniform attention",
            figures.line_chart(
                sweep_values,
                {"mean": sweep, "uniform": [run.uniform_mean] * len(sweep_values)},
                title="mean entropy vs scale",
                x_title="scale × √head_dim",
                y_title="entropy (nats)",
                log_x=True,
                presenter=presenter,
            ),
        ),
    )
    return TemperatureView(multiplier, scale, teaching.mean_entropy(weights), most.mean().item(), tuple(sweep), panels)


@dataclass(frozen=True)
class DropoutView:
    p: float
    scale: float
    kept_fraction: float
    max_rescale_error: float
    row_sum_range: tuple[float, float]
    panels: tuple[Panel, ...]  # weights after dropout first


@dataclass(frozen=True)
class DropoutRun:
    """A train-mode forward pass and what dropout did to its weights."""

    p: float
    trace: Trace
    report: teaching.DropoutReport


def run_dropout(module, x: torch.Tensor, p: float, seed: int) -> DropoutRun:
    """A train-mode trace on a private copy (runs.run_trace): the shared module is never put in train mode."""
    from mha_core.runs import run_trace

    trace = run_trace(module, x, train=True, seed=seed)
    return DropoutRun(p, trace, teaching.dropout_report(trace, p))


def build_dropout_view(run: DropoutRun, labels: list[str], *, presenter: bool) -> DropoutView:
    p, trace, report = run.p, run.trace, run.report
    before = trace.numpy("attn_weights")[0]
    after = trace.numpy("attn_weights_dropped")[0]
    keep = _numpy(report.keep[0]).astype(np.float32)
    keep[~_numpy(report.allowed[0])] = -np.inf  # causally masked: neither kept nor dropped
    h = before.shape[0]
    where = "batch element 0"
    sums = _numpy(report.row_sums[0])  # (h, T)
    panels = (
        Panel(
            "dropout_after",
            f"After dropout: survivors × 1/(1−p) = × {report.scale:.3g}",
            caption(trace, "attn_weights_dropped", "(b, h, T, T)", where),
            figures.heads_heatmap(
                after,
                labels,
                labels,
                title=f"attn_weights after dropout (p = {p:g})",
                kind="weights",
                head_names=_heads(h),
                zmin=0.0,
                zmax=max(1.0, float(after.max()) if after.size else 1.0),
                presenter=presenter,
            ),
        ),
        Panel(
            "dropout_keep",
            "The dropout mask: 1 = kept, 0 = dropped (grey: causally masked)",
            caption(trace, "dropout_keep", "(b, h, T, T)", where),
            _keep_mask_figure(keep, labels, presenter),
        ),
        Panel(
            "dropout_before",
            "Before dropout",
            caption(trace, "attn_weights", "(b, h, T, T)", where),
            figures.heads_heatmap(
                before,
                labels,
                labels,
                title="attn_weights before dropout",
                kind="weights",
                head_names=_heads(h),
                presenter=presenter,
            ),
        ),
        Panel(
            "dropout_row_sums",
            "Row sums after dropout: 1 on average, not row by row",
            f"sum over keys of attn_weights_dropped · shape (b, h, T) = {shape_text(report.row_sums.shape)} · {where}",
            figures.line_chart(
                list(range(sums.shape[1])),
                {f"head {k}": sums[k].tolist() for k in range(h)} | {"before": [1.0] * sums.shape[1]},
                title="row sums",
                x_title="query position",
                y_title="sum of weights",
                presenter=presenter,
            ),
        ),
    )
    lo, hi = (float(sums.min()), float(sums.max())) if sums.size else (0.0, 0.0)
    return DropoutView(p, report.scale, report.kept_fraction, report.max_rescale_error, (lo, hi), panels)


def _keep_mask_figure(keep: np.ndarray, labels: list[str], presenter: bool):
    """(h, T, T) keep mask: 1 kept, 0 dropped, −∞ causally masked, drawn as "causally masked" (not "−∞")."""
    fig = figures.heads_heatmap(
        keep,
        labels,
        labels,
        title="dropout keep mask",
        kind="weights",
        head_names=_heads(keep.shape[0]),
        presenter=presenter,
    )
    for trace in fig.data:
        role = (trace.meta or {}).get("role")
        if role == "masked":
            trace.update(text=None, texttemplate=None, hovertemplate="causally masked<extra></extra>")
        elif role == "legend":
            trace.update(name="causally masked")
    fig.update_layout(coloraxis_colorbar_title_text="kept")
    return fig


PRESET_TEXT = {
    "none": "The module's own seeded random weights, for comparison.",
    "identity": "W_query = W_key = I: each score is the raw dot product of two slices of input embeddings (head k "
    "uses input features k·head_dim onwards). A dot product grows with the vectors' lengths as well as "
    "with their alignment, so a long key can outscore a similar one: on the book's six tokens, head 1 "
    'attends most to "journey" from "starts", "with", "one" and "step".',
    "self": "One-hot position inputs; W_query = c·I: every query matches its own key.",
    "previous": "One-hot position inputs; W_query shifts e_t to e_(t−1): every query matches the previous token's "
    "key (token 0 has only itself).",
    "first": "One-hot position inputs; W_query sends every e_t to e_0: every query matches the first token's key.",
}


@dataclass(frozen=True)
class PresetView:
    preset: str
    description: str
    num_tokens: int
    hits: float | None  # fraction of rows whose heaviest key is the pattern's target (positional presets)
    panels: tuple[Panel, ...]  # the weights first


@dataclass(frozen=True)
class PresetRun:
    """A module with hand-made weights (a copy or a new module, never the shared one) and its forward pass."""

    preset: str
    made: torch.nn.Module
    trace: Trace
    labels: list[str]
    hits: float | None  # fraction of rows whose heaviest key is the pattern's target (positional presets)


def run_preset(module, x: torch.Tensor, labels: list[str], preset: str, *, num_heads: int) -> PresetRun:
    hits = None
    if preset in teaching.POSITION_PATTERNS:
        num_tokens = min(x.shape[1], teaching.MAX_PRESET_TOKENS)
        weight = module.W_query.weight
        made = teaching.positional_module(
            preset, num_tokens, num_heads, device=weight.device.type, dtype=str(weight.dtype).removeprefix("torch.")
        )
        x_made = teaching.position_inputs(num_tokens, 1).to(device=weight.device, dtype=weight.dtype)
        labels = [f"pos {t}" for t in range(num_tokens)]
    elif preset == "identity":
        made = teaching.with_identity_qk(module)
        x_made = x[:1].to(device=module.W_query.weight.device, dtype=module.W_query.weight.dtype)
    elif preset == "none":
        made = module
        x_made = x[:1].to(device=module.W_query.weight.device, dtype=module.W_query.weight.dtype)
    else:
        raise ValueError(f"preset must be one of {teaching.PRESETS}, got {preset!r}")
    trace = trace_forward(made, x_made)
    if preset in teaching.POSITION_PATTERNS:
        weights = trace.steps["attn_weights"]
        hits = teaching.top_key_hits(weights, teaching.pattern_targets(preset, weights.shape[-1]))
    return PresetRun(preset, made, trace, list(labels), hits)


def build_preset_view(run: PresetRun, *, presenter: bool) -> PresetView:
    """The heatmaps the hand-made weights give."""
    preset, made, trace, labels, hits = run.preset, run.made, run.trace, run.labels, run.hits
    weights = trace.steps["attn_weights"]
    h = weights.shape[1]
    d_in, d_out = made.d_in, made.d_out
    wq = _numpy(made.W_query.weight).T  # (d_in, d_out): x @ Wᵀ
    wk = _numpy(made.W_key.weight).T
    input_labels = labels if preset in teaching.POSITION_PATTERNS else _dims(d_in)
    panels = (
        Panel(
            "preset_weights",
            "Attention weights with these weights",
            caption(trace, "attn_weights", "(b, h, T, T)", "one sequence"),
            figures.heads_heatmap(
                _numpy(weights[0]),
                labels,
                labels,
                title=f"attn_weights · preset {preset}",
                kind="weights",
                head_names=_heads(h),
                presenter=presenter,
            ),
        ),
        Panel(
            "preset_scores",
            "Scores Q Kᵀ",
            caption(trace, "attn_scores", "(b, h, T, T)", "one sequence"),
            figures.heads_heatmap(
                _numpy(trace.steps["attn_scores"][0]),
                labels,
                labels,
                title=f"attn_scores · preset {preset}",
                kind="scores",
                head_names=_heads(h),
                presenter=presenter,
            ),
        ),
        Panel(
            "preset_w_query",
            "W_queryᵀ (queries = x @ W_queryᵀ)",
            f"`W_query.weight.T` · shape (d_in, d_out) = ({d_in}, {d_out}) · columns banded by head",
            figures.matrix_heatmap(
                wq,
                input_labels,
                _dims(d_out),
                title="W_query.weight.T",
                column_groups=h,
                presenter=presenter,
                row_title="input",
                col_title="query feature",
            ),
        ),
        Panel(
            "preset_w_key",
            "W_keyᵀ (keys = x @ W_keyᵀ)",
            f"`W_key.weight.T` · shape (d_in, d_out) = ({d_in}, {d_out}) · columns banded by head",
            figures.matrix_heatmap(
                wk,
                input_labels,
                _dims(d_out),
                title="W_key.weight.T",
                column_groups=h,
                presenter=presenter,
                row_title="input",
                col_title="key feature",
            ),
        ),
    )
    return PresetView(preset, PRESET_TEXT[preset], weights.shape[-1], hits, panels)
