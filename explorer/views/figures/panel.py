"""What every view hands a page: a Panel (figure, title, caption), and the small helpers captions and axes share.

No streamlit. Views of every page build Panels from a trace; pages only lay them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import torch

from mha_core.attention.listing import listing_statement
from mha_core.attention.modules import Trace

from .heatmap_layout import FULL_FIGURE_PX
from .heatmaps import heads_heatmap


@dataclass(frozen=True)
class Panel:
    key: str  # a stable name: the step, or a step and a view of it
    title: str
    caption: str  # markdown: shape and Listing 3.5 line
    figure: go.Figure = field(repr=False)


def shape_text(shape) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


ROWS_AND_COLUMNS = {  # what a matrix's rows and columns are, by the last two axes of its shape
    "T, T)": "rows: queries (the token that reads), columns: keys (the tokens it reads)",
    "T, d_out)": "rows: tokens, columns: features",
    "T, d_in)": "rows: tokens, columns: embedding dims",
    "T, head_dim)": "one matrix per head; rows: tokens, columns: the head's dims",
}


def rows_and_columns(axes: str) -> str:
    """ "rows: …, columns: …" for a shape such as "(b, h, T, T)"; empty when the shape is not a drawn matrix."""
    return next((text for end, text in ROWS_AND_COLUMNS.items() if axes.endswith(end)), "")


def caption(trace: Trace, step: str, axes: str, note: str = "") -> str:
    """`step` · shape (b, h, T, T) = (2, 2, 6, 6): rows: queries …, columns: keys … · Listing 3.5 line 38: `code`."""
    number, code = listing_statement(step)
    shape = shape_text(trace.info[step].shape) if step in trace.info else ""
    reading = rows_and_columns(axes)
    text = (
        f"`{step}` · shape {axes} = {shape}{f' · {reading}' if reading else ''} · Listing 3.5, line {number}: `{code}`"
    )
    return f"{text} · {note}" if note else text


def head_names(h: int) -> list[str]:
    """Subplot and legend names "head 0", "head 1", …, numbered from 0 as in the tensors."""
    return [f"head {k}" for k in range(h)]


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor as a CPU numpy array (float32 for the half-precision dtypes numpy lacks)."""
    tensor = tensor.detach()
    if tensor.dtype in (torch.float16, torch.bfloat16):
        tensor = tensor.float()
    return tensor.cpu().numpy()


def index_labels(n: int) -> list[str]:
    """Axis labels 0 … n − 1 for a dimension that has no tokens (features, head dims)."""
    return [str(k) for k in range(n)]


def token_heads_panel(
    key: str,
    title: str,
    text: str,
    values: np.ndarray,
    labels: list[str],
    *,
    figure_title: str,
    kind: str,
    presenter: bool,
    zmin: float | None = None,
    zmax: float | None = None,
    width_px: int = FULL_FIGURE_PX,
) -> Panel:
    """(h, T, T) values of one sequence, one heatmap per head, tokens on both axes: how every page draws them
    (``width_px``: the column it is drawn in, half of it where two go side by side)."""
    return Panel(
        key,
        title,
        text,
        heads_heatmap(
            values,
            labels,
            labels,
            title=figure_title,
            kind=kind,
            head_names=head_names(values.shape[0]),
            zmin=zmin,
            zmax=zmax,
            presenter=presenter,
            width_px=width_px,
        ),
    )
