"""What the Cost page shows, composed from one ``mha_core.runs.profiling.CostReport``: figures, a table, the formula.

No streamlit here: the page lays these out. Memory is shown in MiB (2**20 bytes), time in milliseconds.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from mha_core.runs import profiling

from . import figures

MIB = 2**20
FORMULA_SERIES = "b·h·T²·bytes (one matrix)"
SHORT_NAMES = {"explicit": "Listing 3.5", "traced": "traced", "sdpa": "SDPA", "torch_mha": "nn.MultiheadAttention"}
DEFAULT_MAX_TOKENS = 512


def formula_markdown(batch_size: int, num_heads: int, dtype: str, tokens: list[int]) -> str:
    """The attention matrices' memory by formula, with the numbers for these settings at the longest length."""
    longest = tokens[-1]
    per_number = profiling.attention_matrix_bytes(1, 1, 1, dtype)
    one = profiling.attention_matrix_bytes(batch_size, num_heads, longest, dtype)
    return (
        f"One attention matrix holds **b · h · T² · bytes** = {batch_size} · {num_heads} · {longest}² · "
        f"{per_number} = **{one / MIB:,.2f} MiB** at T = {longest} ({dtype}). The book's Listing 3.5 keeps about "
        "three of them alive at once (scores, which `masked_fill_` overwrites in place, the scaled scores and the "
        f"weights): about {3 * one / MIB:,.1f} MiB. This project's module uses the out-of-place `masked_fill`, so "
        f"its masked scores are a fourth: about {4 * one / MIB:,.1f} MiB. "
        "Doubling T multiplies it by four: a slope of 2 on the log-log plot."
    )


def _positive(values: list[float]) -> list[float | None]:
    """Zeros and non-finite values become gaps: a log axis has no place for them."""
    return [v if v is not None and math.isfinite(v) and v > 0 else None for v in values]


def time_figure(report: profiling.CostReport, presenter: bool = False) -> go.Figure:
    seconds = report.series("seconds")
    series = {SHORT_NAMES[v]: _positive([s * 1e3 for s in values]) for v, values in seconds.items()}
    spec = report.spec
    return figures.line_chart(
        report.tokens(),
        series,
        log_x=True,
        log_y=True,
        presenter=presenter,
        title=f"Forward time against sequence length · b={spec.batch_size}, h={spec.num_heads}, "
        f"head_dim={spec.head_dim} · {spec.device} {spec.dtype}",
        x_title="num_tokens T",
        y_title="milliseconds (median)",
    )


def memory_figure(report: profiling.CostReport, presenter: bool = False) -> go.Figure:
    tokens = report.tokens()
    peaks = report.series("peak_bytes")
    series = {SHORT_NAMES[v]: _positive([b / MIB for b in values]) for v, values in peaks.items()}
    spec = report.spec
    series[FORMULA_SERIES] = [
        profiling.attention_matrix_bytes(spec.batch_size, spec.num_heads, t, spec.dtype) / MIB for t in tokens
    ]
    return figures.line_chart(
        tokens,
        series,
        log_x=True,
        log_y=True,
        presenter=presenter,
        title=f"Peak memory against sequence length · b={spec.batch_size}, h={spec.num_heads} · {spec.device}",
        x_title="num_tokens T",
        y_title="MiB at peak",
    )


def table_rows(report: profiling.CostReport) -> list[dict[str, object]]:
    """One row per sequence length: the formula beside each variant's measured peak (MiB) and time (ms)."""
    rows = []
    for t in report.tokens():
        points = {p.variant: p for p in report.points if p.num_tokens == t}
        any_point = next(iter(points.values()))
        row: dict[str, object] = {"T": t, "b·h·T²·bytes (MiB)": any_point.matrix_bytes / MIB}
        for variant, point in points.items():
            row[f"{variant} peak (MiB)"] = point.peak_bytes / MIB
        for variant, point in points.items():
            row[f"{variant} (ms)"] = point.seconds * 1e3
        rows.append(row)
    return rows


def trace_rows(report: profiling.CostReport) -> list[dict[str, object]]:
    """The traced (b, h, T, T) steps at the longest length: bytes the tensors report beside the formula."""
    if not report.trace_bytes:
        return []
    spec, longest = report.spec, report.tokens()[-1]
    formula = profiling.attention_matrix_bytes(spec.batch_size, spec.num_heads, longest, spec.dtype)
    return [
        {
            "step": name,
            "shape": f"({spec.batch_size}, {spec.num_heads}, {longest}, {longest})",
            "tensor bytes": measured,
            "b·h·T²·bytes": formula,
            "equal": measured == formula,
        }
        for name, measured in report.trace_bytes.items()
    ]


def memory_method(device: str) -> str:
    if device == "cuda":
        return (
            "Memory: `torch.cuda.max_memory_allocated()` during the call, less what was allocated before it "
            "(every byte the allocator handed out, kernel workspaces included)."
        )
    return (
        "Memory on the CPU: torch keeps no allocator statistics there, so every tensor that a torch operation "
        "returns is counted (its storage's bytes, once) until it is freed, and the peak is shown. Scratch "
        "memory that one fused kernel allocates and frees inside itself is not seen: SDPA's flash kernel works on "
        "blocks and never holds a (T, T) matrix, so its curve grows like T. nn.MultiheadAttention's grows ×4 per "
        "doubling of T like the explicit paths, but b·h times smaller: it never builds the (b, h, T, T) matrix, "
        "only one float (T, T) mask made from its boolean attn_mask (at b = 4, h = 8, T = 256 its peak is under a "
        "tenth of one attention matrix, against more than four for Listing 3.5; its fast path also needs an even "
        "num_heads). Inputs and weights are not counted."
    )


def work_markdown(batch_size: int, num_heads: int, head_dim: int, tokens: list[int]) -> str:
    """Memory and work told apart: a fused kernel saves the T² memory, not the T² multiply-adds."""
    longest = tokens[-1]
    work = 2 * batch_size * num_heads * longest**2 * head_dim
    return (
        "**Memory and work are two things.** A fused kernel (SDPA's flash kernel) never holds the (T, T) matrix, so "
        "its memory grows like T; it still computes every score and every weighted value: **2 · b · h · T² · "
        f"head_dim** multiply-adds (Q Kᵀ, then weights @ V) = 2 · {batch_size} · {num_heads} · {longest}² · "
        f"{head_dim} = {work:,} at T = {longest}, ×4 per doubling of T. Flash attention saves the memory, not the "
        "work: it is not sub-quadratic, and its time still grows like T² once T is long."
    )
