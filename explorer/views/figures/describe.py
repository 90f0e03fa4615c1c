"""A figure in words and as a table, for a screen reader (WCAG 2.1 AA, 1.1.1: a chart is an image to one).

``describe`` says what a figure shows, its shape, its range and where its largest values are; ``as_table`` gives its
numbers. Both read the figure's own arrays (what is drawn), so they hold for every builder here: heatmaps by their
"values" traces (``meta.role``), line and bar charts by their named traces. Pure: no streamlit.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from .style import MARKUP

MOST_TABLE_CELLS = 1_000  # a "Show as table" of a larger figure shows its first rows (and says so)
MOST_TABLE_COLUMNS = 32


def plain(text: object) -> str:
    """Plotly's pseudo-HTML as plain words: ``<b>``, ``<br>`` dropped, and a token escaped for plotly ("&lt;") read
    back as typed (a table escapes it once more, a screen reader reads it as is)."""
    return " ".join(html.unescape(MARKUP.sub(" ", str(text or ""))).split())


def number(value: float) -> str:
    return f"{value:.3g}"


def _values_traces(figure) -> list:
    return [
        t
        for t in figure.data
        if t.type == "heatmap" and (t.meta or {}).get("role", "values") == "values" and np.ndim(t.z) == 2
    ]


def _cells(figure, trace) -> tuple[np.ndarray, bool]:
    """A heatmap trace's values (rows, columns) and whether they are block averages (uint8 codes decoded)."""
    z = np.asarray(trace.z)
    if z.dtype != np.uint8:
        return z.astype(np.float64), False
    ticks = _scale_ticks(figure)  # uint8 codes: the colour bar's ticks map codes to values, linearly
    if len(ticks) < 2:
        return z.astype(np.float64), True
    (c0, v0), (c1, v1) = ticks[0], ticks[-1]
    return v0 + (z.astype(np.float64) - c0) * (v1 - v0) / (c1 - c0), True


def _scale_ticks(figure) -> list[tuple[float, float]]:
    """The colour bar's (position, value) ticks whose text is a number ("≥ 2" read as 2)."""
    bar = figure.layout.coloraxis.colorbar
    found = []
    for at, text in zip(bar.tickvals or (), bar.ticktext or (), strict=False):
        try:
            found.append((float(at), float(plain(text).lstrip("≥≤ ").replace("−", "-"))))
        except ValueError:
            continue
    return found


def _categories(figure) -> list[str]:
    """A two-colour scale's names ("blocked", "may attend"), low first; empty for a scale of numbers."""
    bar = figure.layout.coloraxis.colorbar
    texts = [plain(t) for t in bar.ticktext or ()]
    return texts if len(texts) == 2 and not _scale_ticks(figure) else []


def _axis(figure, trace, letter: str):
    name = getattr(trace, f"{letter}axis") or letter  # "x", "x2", …
    return figure.layout[f"{letter}axis{name[1:]}"]


def tick_labels(figure, trace, letter: str, n: int) -> list[str]:
    """Each row's (y) or column's (x) label: the axis's tick text where it names every position, else the index."""
    axis = _axis(figure, trace, letter)
    named = dict(zip(axis.tickvals or (), axis.ticktext or (), strict=False))
    return [plain(named[k]) if k in named else str(k) for k in range(n)]


def _axis_title(figure, trace, letter: str, fallback: str) -> str:
    return plain(_axis(figure, trace, letter).title.text) or fallback


def _finite_extreme(values: np.ndarray, largest: bool) -> tuple[int, int] | None:
    finite = np.isfinite(values)
    if not finite.any():
        return None
    filled = np.where(finite, values, -np.inf if largest else np.inf)
    flat = int(np.argmax(filled) if largest else np.argmin(filled))
    return int(flat // values.shape[1]), int(flat % values.shape[1])


def _heatmap_words(figure, traces) -> str:
    """Heatmaps: how many panels of what shape, the range, where the largest value is, and masked cells."""
    first = traces[0]
    rows, columns = np.asarray(first.z).shape
    y_name = _axis_title(figure, first, "y", "row")
    x_name = _axis_title(figure, first, "x", "column")
    names = ", ".join(plain(t.name) for t in traces)
    panels = f": {len(traces)} panels ({names}), each of" if len(traces) > 1 else " of"
    words = [f"Heatmap{panels} {rows} rows ({y_name}) by {columns} columns ({x_name})."]
    names = _categories(figure)
    if names:
        high = sum(int((_cells(figure, t)[0] >= 0.5).sum()) for t in traces)
        total = rows * columns * len(traces)
        return " ".join([*words, f'{total - high} cells are "{names[0]}", {high} are "{names[1]}".'])
    best, lowest, masked, blocks = None, None, 0, False
    for trace in traces:
        values, shrunk = _cells(figure, trace)
        blocks |= shrunk
        masked += int(np.isneginf(values).sum() + np.isnan(values).sum())
        top, bottom = _finite_extreme(values, True), _finite_extreme(values, False)
        if top is not None and (best is None or values[top] > best[0]):
            best = (float(values[top]), trace, top)
        if bottom is not None and (lowest is None or values[bottom] < lowest):
            lowest = float(values[bottom])
    if best is None:
        return " ".join([*words, "No finite values."])
    value, trace, (i, j) = best
    where = f"row {tick_labels(figure, trace, 'y', rows)[i]}, column {tick_labels(figure, trace, 'x', columns)[j]}"
    if blocks:
        where = f"drawn block {i} down, {j} across"
    words.append(f"Values from {number(lowest)} to {number(value)}; the largest is at {where}")
    words[-1] += f" of {plain(trace.name)}." if len(traces) > 1 else "."
    if masked:
        words.append(f"{masked} cells are masked or not a number, drawn apart from the colour scale and named.")
    if blocks:
        words.append("Too large to draw cell by cell: each drawn cell stands for a block of values.")
    return " ".join(words)


def _series_words(figure, traces) -> str:
    """Line, scatter and bar charts: the series, their lengths, and where each series is largest."""
    kind = "Bar chart" if all(t.type == "bar" for t in traces) else "Line chart"
    x_name = plain(figure.layout.xaxis.title.text) or "x"
    y_name = plain(figure.layout.yaxis.title.text) or "value"
    words = [f"{kind} of {y_name} against {x_name}: {len(traces)} series."]
    for trace in traces[:8]:
        ys = np.asarray(trace.y if trace.y is not None else (), dtype=np.float64)
        xs = _x_labels(figure, trace, len(ys))
        finite = np.isfinite(ys)
        if not finite.any():
            continue
        k = int(np.argmax(np.where(finite, ys, -np.inf)))
        name = plain(trace.name) or "values"
        words.append(
            f"{name}: {len(ys)} points from {number(np.nanmin(ys[finite]))} to {number(ys[k])}, "
            f"largest at {x_name} {xs[k]}."
        )
    return " ".join(words)


def _x_labels(figure, trace, n: int) -> list[str]:
    """Each point's x as the reader sees it: the axis's tick text where it names the position (bar charts)."""
    xs = list(trace.x) if trace.x is not None else list(range(n))
    named = dict(zip(figure.layout.xaxis.tickvals or (), figure.layout.xaxis.ticktext or (), strict=False))
    return [plain(named.get(x, x)) for x in xs]


def _series_traces(figure) -> list:
    return [
        t
        for t in figure.data
        if t.type in ("scatter", "bar")
        and t.y is not None
        and (t.meta or {}).get("role") != "legend"
        and any(v is not None for v in t.y)
    ]


def describe(figure, title: str = "") -> str:
    """The figure in a few sentences: its title (``title``, else its own), what it draws and its shape, its range,
    and where it is largest."""
    title = plain(title or figure.layout.title.text).rstrip(".")
    heat, series = _values_traces(figure), _series_traces(figure)
    meta = figure.layout.meta if isinstance(figure.layout.meta, dict) else {}
    if meta.get("description"):  # a figure whose view describes it (the head view's lines)
        body = str(meta["description"])
    elif heat:
        body = _heatmap_words(figure, heat)
    elif series:
        body = _series_words(figure, series)
    else:
        body = "A diagram; its caption says what it shows."
    return f"{title}. {body}" if title else body


def as_table(figure) -> tuple[pd.DataFrame, str]:
    """The figure's numbers as a table, and a note when it is cut to MOST_TABLE_CELLS cells (empty otherwise).

    Heatmaps: one row per panel and row label, one column per column label. Series: one row per x, a column per
    series.
    """
    heat = _values_traces(figure)
    if heat:
        return _heatmap_table(figure, heat)
    meta = figure.layout.meta if isinstance(figure.layout.meta, dict) else {}
    if meta.get("description"):  # lines between tokens, not series: the view's words say it all
        return pd.DataFrame(), ""
    series = _series_traces(figure)
    if not series:
        return pd.DataFrame(), ""
    columns = {}
    for trace in series:
        xs = _x_labels(figure, trace, len(trace.y))
        ys = [f"{y:.4g}" for y in np.asarray(trace.y, dtype=np.float64)]
        columns[plain(trace.name) or "value"] = pd.Series(ys, index=_unique(xs))
    table = pd.DataFrame(columns)
    table.index.name = plain(figure.layout.xaxis.title.text) or "x"
    return table.reset_index(), ""


def _heatmap_table(figure, traces) -> tuple[pd.DataFrame, str]:
    """One row per panel and matrix row (its label first), one column per matrix column; the first panel's axis
    labels name them (every panel shares its tokens). Built from plain rows: pandas' inserts took 45 ms a figure."""
    rows, columns = np.asarray(traces[0].z).shape
    keep_columns = min(columns, MOST_TABLE_COLUMNS)
    keep_rows = max(1, min(rows, MOST_TABLE_CELLS // (keep_columns * len(traces))))
    y_labels = tick_labels(figure, traces[0], "y", rows)[:keep_rows]
    panels = len(traces) > 1
    body = []
    for trace in traces:
        texts = _cell_texts(figure, trace, keep_rows, keep_columns).tolist()
        name = [plain(trace.name)] if panels else []
        body += [[*name, label, *cells] for label, cells in zip(y_labels, texts, strict=True)]
    head = ["panel"] if panels else []
    head += [
        _axis_title(figure, traces[0], "y", "row"),
        *_unique(tick_labels(figure, traces[0], "x", columns)[:keep_columns]),
    ]
    cut = keep_rows < rows or keep_columns < columns
    note = f"The first {keep_rows} of {rows} rows and {keep_columns} of {columns} columns." if cut else ""
    return pd.DataFrame(body, columns=head, dtype=object), note


def _cell_texts(figure, trace, rows: int, columns: int) -> np.ndarray:
    """A heatmap trace's cells as text: 4 significant digits, "masked (−∞)" where its masked overlay covers a cell
    (the values trace leaves a gap there), "NaN" for a gap that is not masked."""
    values = _cells(figure, trace)[0][:rows, :columns]  # the first rows and columns only: formatting is slow
    head = (trace.meta or {}).get("head")
    masked = np.zeros(values.shape, dtype=bool)
    for overlay in figure.data:
        meta = overlay.meta or {}
        if overlay.type == "heatmap" and meta.get("role") == "masked" and meta.get("head") == head:
            masked |= np.nan_to_num(np.asarray(overlay.z, dtype=np.float64)[:rows, :columns]) > 0
    texts = np.array([f"{v:.4g}" for v in values.ravel()], dtype=object).reshape(values.shape)
    texts[np.isnan(values)] = "NaN"
    texts[np.isneginf(values) | masked] = "masked (−∞)"
    return texts


def _unique(labels: list[str]) -> list[str]:
    """Column names a table can hold: a repeated token ("the", "the") gets its position added."""
    seen: dict[str, int] = {}
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
    return [f"{label} ({k})" if seen[label] > 1 else label for k, label in enumerate(labels)]
