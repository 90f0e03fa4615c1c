"""Head bands above a matrix whose columns are the heads' blocks (Q, the concatenated context): one colour a head."""

from __future__ import annotations

from collections.abc import Sequence

from .heatmap_layout import PanelSize, least_stage_cell_px
from .style import escape_label, font_size, head_colors, text_color_on
from .text_width import text_px


def _band_shape(k: int, x0: float, x1: float, band_px: float, color: str) -> dict:
    """Head k's coloured band, ``band_px`` tall, just above the plot over columns x0 … x1."""
    return dict(
        type="rect",
        name=f"head band {k}",
        xref="x",
        yref="y domain",
        x0=x0,
        x1=x1,
        ysizemode="pixel",
        yanchor=1,
        y0=3,
        y1=3 + band_px,
        fillcolor=color,
        line={"width": 1, "color": "white"},
    )


def _band_label(label: str, x: float, band_px: float, color: str, presenter: bool) -> dict:
    """A band's label, centred on it, in the colour that reads on the band."""
    return dict(
        text=label,
        xref="x",
        yref="y domain",
        x=x,
        y=1,
        yanchor="bottom",
        yshift=3 + (band_px - font_size(presenter, 1.2)) / 2,
        showarrow=False,
        font={"size": font_size(presenter, 0.85), "color": text_color_on(color)},
    )


def _head_separator(x: float) -> dict:
    """A dark vertical line between two heads' columns."""
    return dict(
        type="line",
        name="head separator",
        xref="x",
        yref="y domain",
        x0=x,
        x1=x,
        y0=0,
        y1=1,
        line={"width": 2, "color": "#222"},
    )


def band_columns(layout: dict, n_cols: int, groups: int, presenter: bool) -> int:
    """Add a coloured band per head above the matrix's columns to ``layout``; return the pixels it needs."""
    if n_cols % groups:
        raise ValueError(f"{n_cols} columns do not split into {groups} equal head blocks")
    width = n_cols // groups
    band_px = font_size(presenter, 1.6)
    shapes = layout.setdefault("shapes", [])
    for k, color in enumerate(head_colors(groups)):
        x0, x1 = k * width - 0.5, (k + 1) * width - 0.5
        shapes.append(_band_shape(k, x0, x1, band_px, color))
        if k:
            shapes.append(_head_separator(x0))
    return band_px + 6


def band_label_text(name: str, k: int, band_px: float, presenter: bool) -> str | None:
    """Head k's band label: its name ("head k") when that fits the band's width in px, else "hk", else "k", else
    none, so that a label is never cut or run into its neighbour's."""
    font = font_size(presenter, 0.85)
    forms = (escape_label(name), f"h{k}", str(k))
    return next((text for text in forms if text_px(text, font) + 4 <= band_px), None)


def _band_labels(
    figure, n_cols: int, groups: int, names: Sequence[str] | None, presenter: bool, band_px: float
) -> None:
    """Label the bands of ``figure`` (``band_columns``), each chosen for a band ``band_px`` wide as drawn."""
    names = list(names) if names is not None else [f"head {k}" for k in range(groups)]
    if len(names) != groups:
        raise ValueError(f"{len(names)} group names for {groups} column groups")
    width = n_cols // groups
    for k, color in enumerate(head_colors(groups)):
        label = band_label_text(names[k], k, band_px, presenter)
        if label is not None:
            x = k * width - 0.5 + width / 2
            figure.add_annotation(_band_label(label, x, font_size(presenter, 1.6), color, presenter))


def label_bands(figure, size: PanelSize, labels_px: float, bands: tuple, presenter: bool) -> None:
    """The head bands' labels, for the bands as drawn: a stage may draw the cells smaller than planned.
    ``bands``: the matrix's column count, and (head count, head names) or None (no bands)."""
    if bands[1] is None:
        return
    n_cols, (groups, names) = bands
    cell_px = least_stage_cell_px(size, figure, labels_px, presenter)
    _band_labels(figure, n_cols, groups, names, presenter, cell_px * n_cols / groups)
