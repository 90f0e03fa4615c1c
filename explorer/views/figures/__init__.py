"""Pure plotly figure builders: numpy arrays and labels in, ``go.Figure`` out.

No streamlit, and no torch in the builders, so every builder can be tested on small arrays and used from a notebook;
``panel`` (the Panel every view hands a page, with its captions) is the one module here that reads a trace.

Axis letters: h heads, i query position (matrix rows), j key position (matrix columns).

Conventions shared by every builder:

* Matrices read like printed matrices: row 0 at the top, and numeric axes whose ticks carry the token
  text (``tickvals``/``ticktext``). Categorical axes would merge duplicate tokens such as two "the".
* One colour scale per figure, shared by every head, with one colour bar.
* Masked scores (−∞) and NaN are not colours on the scale. They are drawn by overlay traces in fixed
  colours (``MASKED_COLOR``, ``NAN_COLOR``) and named in the legend.
* Heads, tokens and columns are numbered from 0, as in the tensors.
* JSON size sets three regimes, by the number of cells h * i * j. Up to ``HOVER_TOKENS_LIMIT`` (8,192),
  hover gives both tokens and the exact value; the token text costs about 20 bytes a cell, as plotly needs
  it per cell and per head. Up to ``HOVER_EXACT_LIMIT`` (150,000), hover gives positions and the exact
  value (float32, about 5.3 bytes a cell). Beyond it, heatmaps are downsampled for display and sent as
  uint8 codes, so a 16 × 1024 × 1024 figure stays a few hundred KB of JSON.
* ``presenter=True`` makes every font about 1.6× larger, for a projector.
* ``fig.layout.meta["filename"]`` names the PNG that plotly's toolbar downloads: ``png_config_for(fig)`` is the
  plotly config the page's chart element draws with (explorer.glue.frame.boundary.plot).

Every trace a heatmap builder adds carries ``meta={"role": ..., "head": ...}``, with role one of
"values", "masked", "nan" or "legend", so that tests and pages can find traces without relying on order.
"""

from __future__ import annotations

from .describe import as_table, describe
from .diagrams import RESHAPE_STAGES, reshape_figure
from .downsample import weights_top
from .heatmap_layout import FULL_FIGURE_PX, bar_follows_stage, one_column, stage_cell_text
from .heatmaps import heads_heatmap, matrix_heatmap
from .lines import bar_chart, line_chart
from .style import (
    ALLOWED_COLOR,
    BASE_FONT_SIZE,
    DISPLAY_CELL_BUDGET,
    GRID_COLOR,
    HALF_FIGURE_PX,
    HEAD_COLORS,
    HOVER_EXACT_LIMIT,
    HOVER_TOKENS_LIMIT,
    KINDS,
    MASKED_COLOR,
    MAX_PANEL_COLUMNS,
    MAX_TICKS,
    NAN_COLOR,
    NARROW_FIGURE_PX,
    PRESENTER_SCALE,
    cell_font_size,
    decode_array,
    escape_label,
    escape_markdown,
    figure_nbytes,
    finish_figure,
    half_figure_px,
    head_colors,
    legend_px,
    png_config,
    png_config_for,
    to_figure,
)
from .theme import for_theme

__all__ = [
    "cell_font_size",
    "ALLOWED_COLOR",
    "BASE_FONT_SIZE",
    "DISPLAY_CELL_BUDGET",
    "HEAD_COLORS",
    "HOVER_EXACT_LIMIT",
    "HOVER_TOKENS_LIMIT",
    "KINDS",
    "MASKED_COLOR",
    "MAX_PANEL_COLUMNS",
    "MAX_TICKS",
    "FULL_FIGURE_PX",
    "one_column",
    "stage_cell_text",
    "bar_follows_stage",
    "GRID_COLOR",
    "NAN_COLOR",
    "HALF_FIGURE_PX",
    "NARROW_FIGURE_PX",
    "PRESENTER_SCALE",
    "RESHAPE_STAGES",
    "as_table",
    "describe",
    "escape_label",
    "escape_markdown",
    "finish_figure",
    "for_theme",
    "bar_chart",
    "decode_array",
    "figure_nbytes",
    "half_figure_px",
    "head_colors",
    "legend_px",
    "heads_heatmap",
    "line_chart",
    "matrix_heatmap",
    "png_config",
    "png_config_for",
    "reshape_figure",
    "to_figure",
    "weights_top",
]
