"""The page boundary: every page's body runs inside ``run_page``, and shows its figures with ``show_figure``.

Importing this module configures the process once (torch's threads, the allocator) and starts the idle watcher,
before any session computes: every page imports it.
"""

from __future__ import annotations

import html
import linecache
import logging
import traceback
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import streamlit as st
import torch
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from explorer.glue.frame import chart, server_setup
from explorer.glue.memory import admission, budget, crowd, idle
from explorer.glue.state.url import apply_settings
from explorer.glue.state.user_text import quote
from explorer.views import figures

server_setup.configure_process()  # once per process, before any session computes
idle.start_watcher()  # caches cleared after a minute without a visitor


def show_figure(panel, *, bare: bool = False, stage: bool = False, on_click=None) -> None:
    """A panel: its heading, the figure (PNG download named after it), and its caption.

    ``bare``: the figure only (the teaching pages' presenter mode). ``stage``: the figure fills the height left on a
    projector's first screen (presenter mode's main figure; see sidebar.PRESENTER_CSS), whatever its own height.
    ``on_click``: called with a clicked point's integer customdata before the run the click starts (``chart.draw``).
    """
    if not bare:
        st.markdown(f"**{panel.title}**")
    if stage:
        st.html(STAGE_CSS)  # a constant: nothing from the user
        figure = figures.bar_follows_stage(panel.figure)  # its legend under its bar, however the stage sizes it
        staged = figures.stage_cell_text(figure)
        if figure.layout.height:  # ints from the view's plan
            wider = int(figure.layout.width or 0) > figures.FULL_FIGURE_PX  # it outgrew the page to keep its labels
            least = {"height": int(STAGE_SQUEEZE * figure.layout.height), "key": f"stage_{panel.key}"}
            st.html(STAGE_LEAST_CSS.format(**least, width=int(STAGE_SQUEEZE * figure.layout.width) if wider else 0))
        if staged is not None:  # cell values, shown once the stage's drawn cells hold them
            figure = staged[0]
            st.html(STAGE_TEXT_CSS.format(key=f"stage_{panel.key}", width=staged[1], height=staged[2]))
        with st.container(key=f"stage_{panel.key}"):
            described = alternative(panel.figure, panel.title)[0]  # the staged copy draws its text apart
            plot(st, figure, key=f"chart_{panel.key}", height="stretch", label=described, table=False, described=True)
        show_as_table(st, panel.figure, panel.title)  # under the stage: the stage's height is the figure's
    else:
        plot(st, panel.figure, key=f"chart_{panel.key}", label=panel.title, on_click=on_click)
    if not bare:
        st.caption(panel.caption)


# A page with a stage (presenter mode's main figure) gives the figure the screen's width: Streamlit's side padding of
# 5rem (110 px a side at presenter type) shrinks to 1.5rem. At 1280 × 720 the Explorer's two heads were 155 px each.
def show_pair(pair) -> None:
    """Two panels side by side (without | with), titles, figures and captions each in one row, so the figures start
    level whatever their titles' lengths."""
    for row in ("title", "figure", "caption"):
        for column, panel in zip(st.columns(2), pair, strict=True):
            with column:
                if row == "title":
                    st.markdown(f"**{panel.title}**")
                elif row == "figure":
                    show_figure(panel, bare=True)
                else:
                    st.caption(panel.caption)


STAGE_CSS = (
    "<style>.block-container, [data-testid='stMainBlockContainer'] "
    "{ padding-left: 1.5rem !important; padding-right: 1.5rem !important; }</style>"
)


# A stage grows its figure to the screen but squeezes it to no less than STAGE_SQUEEZE of its planned size, where
# every label has room to spare (1.4 lines each); a larger figure scrolls. At 720p, Trained heads' 2 heads × 16 tokens
# (planned 1,466 px tall) were squeezed to 490 px, and the Explorer's 4 × 32 from 1,422 × 5,018 to 787 × 490: labels
# printed over each other.
STAGE_SQUEEZE = 0.75  # the defaults' figures (513 and 624 px planned) still fit a 720p stage's 490 px
STAGE_LEAST_CSS = (
    "<style>.st-key-{key} {{ min-height: {height}px !important; overflow-x: auto; }} "
    ".st-key-{key} [data-testid='stElementContainer'], .st-key-{key} [data-testid='stBidiComponentRegular'] "
    "{{ min-width: {width}px; }}</style>"
)


# A stage's cell values (figures.stage_cell_text), hidden until the stage is as large as their cells need: the view
# does not know the screen, the stage's size (a CSS container) does. Numbers only, from the figure.
STAGE_TEXT_CSS = (
    "<style>.st-key-{key} {{ container: stage / size; }} .st-key-{key} g.heatmap-label {{ display: none; }} "
    "@container stage (min-width: {width}px) and (min-height: {height}px) "
    "{{ .st-key-{key} g.heatmap-label {{ display: inline; }} }}</style>"
)


def plot(
    container,
    figure,
    *,
    key: str,
    height: int | str = "content",
    label: str = "",
    table: bool = True,
    described: bool = False,
    on_click=None,
) -> None:
    """One figure in ``container`` (st, a column), full width, downloadable as PNG, named for a screen reader by
    ``label`` (else its own title) and the view's description of it (figures.describe), and with a "Show as table"
    of its numbers under it (``table=False`` for an st.empty slot, which holds one element). ``described``: the
    label is the description already.

    Streamlit's template goes under the figure's own settings, so what the figures leave unset (backgrounds, text and
    grid colours) follows the page's light or dark theme; they set their text sizes themselves. Their colour scales
    follow it here: on a dark page a copy gets the dark scales (st.context.theme: the browser's last known theme).
    """
    if height == "content" and on_a_phone():
        figure = figures.one_column(figure)  # heads stacked, each the phone's width: side by side they were 65 px
    name, place, original = label if described else alternative(figure, label)[0], container, figure
    figure = figures.for_theme(figure, dark=st.context.theme.type == "dark")
    # A figure that sets its own width (square cells) is drawn in a box of that width, or of its place's when that is
    # narrower: stretched to the page, its matrix kept to the left and its colour bar went to the far right
    # (out_proj.weight's bar 600 px from its heatmap); drawn at its own width in a narrower place, it broke.
    if figure.layout.width and height == "content":
        container = container.container(width=int(figure.layout.width), key=f"fit_{key}")
    config = figures.png_config_for(figure)
    chart.draw(container, figure, config=config, key=key, height=height, label=name, on_click=on_click)
    if table:
        show_as_table(place, original, label)


def show_as_table(container, figure, title: str = "") -> None:
    """A figure's numbers (figures.as_table) in a folded "Show as table": a plain HTML table with column headers, which
    a screen reader walks cell by cell (st.dataframe draws on a canvas). Not st.table, so that a page's own tables
    stay its only ones. The cells are escaped: token text is the user's."""
    _, table, note = alternative(figure, title)
    if not table:
        return
    with container.expander("Show as table"):
        if note:
            st.caption(note)
        st.html(f'{FIGURE_TABLE_CSS}<div class="mha-figure-table">{table}</div>')


# Each figure object's (description, table HTML, note) by title while the object lives: the views' caches hand the
# same figure objects on every hit, and describing and tabling 16 of them was 0.2 s of a rerun. As chart._JSON_OF.
_ALTERNATIVE_OF: dict[int, dict[str, tuple[str, str, str]]] = {}


def alternative(figure, title: str) -> tuple[str, str, str]:
    """The figure for a screen reader: its description (figures.describe), its numbers as an HTML table, the note
    that says when the table is cut; made once per figure object and title."""
    key = id(figure)
    known = _ALTERNATIVE_OF.get(key)
    if known is None:
        known = _ALTERNATIVE_OF[key] = {}
        weakref.finalize(figure, _ALTERNATIVE_OF.pop, key, None)
    if title not in known:
        frame, note = figures.as_table(figure)
        table = "" if frame.empty else frame.to_html(index=False, escape=True)
        known[title] = (figures.describe(figure, title=title), table, note)
    return known[title]


FIGURE_TABLE_CSS = (
    "<style>.mha-figure-table { overflow-x: auto; } .mha-figure-table table { border-collapse: collapse; "
    "font-size: 0.85rem; } .mha-figure-table th, .mha-figure-table td { padding: 0.15rem 0.5rem; "
    "border: 1px solid rgba(128, 128, 128, 0.4); text-align: right; white-space: nowrap; }</style>"
)


# Columns that a phone stacks (Streamlit does below 640 px) in reverse: the right one, the step's figure, comes first
# (Step through put its 3,000-px listing first). For the container ``key`` around the columns.
RIGHT_FIRST_CSS = (
    "<style>@media (max-width: 640px) {{ .st-key-{key} [data-testid='stHorizontalBlock'] "
    "{{ flex-direction: column-reverse; }} }}</style>"
)


def on_a_phone() -> bool:
    """The visitor's browser says it is a phone ("Mobi" in its User-Agent, as MDN advises): the server never learns
    the screen's width, so a narrow desktop window keeps the figures as they are."""
    try:
        agent = st.context.headers.get("User-Agent", "")
    except (AttributeError, RuntimeError):  # no session (a bare script)
        return False
    return "Mobi" in (agent or "")


def show_table(
    data, *, presenter: bool, key: str, formats: dict[str, str] | None = None, hide_index=True, width="stretch"
) -> None:
    """A small table: st.dataframe, or in presenter mode an HTML table (st.table) that the presenter CSS enlarges.

    st.dataframe draws its cells on a canvas at the theme's size, which no CSS can grow. ``formats``: printf formats
    by column name (the dataframe's NumberColumn formats; in presenter mode the cells are formatted as text). A table
    of more than CANVAS_MOST_COLUMNS columns is HTML in normal mode too: its headers wrap, so every column shows (on
    a canvas at 1280 × 800 the Cost table hid its columns after "traced (ms)", the held-out table position 15).
    """
    formats = formats or {}
    if not presenter and _columns(data) <= CANVAS_MOST_COLUMNS:
        config = {name: st.column_config.NumberColumn(format=fmt) for name, fmt in formats.items()}
        st.dataframe(data, hide_index=hide_index, width=width, key=key, column_config=config)
        return
    st.table(formatted_cells(data, formats), hide_index=hide_index)


CANVAS_MOST_COLUMNS = 8  # a canvas table of more columns scrolls some out of view at 1280 × 800


def _columns(data) -> int:
    """How many columns a table shows: a DataFrame's, a dict's keys, or the first row dict's (plus a shown index)."""
    if isinstance(data, dict):
        return len(data)
    if isinstance(data, list):
        return len(data[0]) if data else 0
    return len(data.columns)


def formatted_cells(data, formats: dict[str, str]):
    """``data`` (a DataFrame, a dict of columns or a list of row dicts) with its numbers as text: each named column in
    its printf format, other floats to 4 significant digits (an HTML table prints every digit it is given)."""

    def cell(column, value):
        if column in formats and isinstance(value, int | float) and not isinstance(value, bool):
            return formats[column] % value
        return f"{value:.4g}" if isinstance(value, float) else value

    if isinstance(data, dict):
        return {column: [cell(column, v) for v in values] for column, values in data.items()}
    if isinstance(data, list):
        return [{column: cell(column, v) for column, v in row.items()} for row in data]
    return data.apply(lambda series: series.map(lambda v: cell(series.name, v)))  # a DataFrame, same index


log = logging.getLogger("mha_explorer")


def printed(text: str, *, wrap: bool = False) -> None:
    """A tensor as torch prints it, in st.code's box. st.code loads Streamlit's syntax highlighter, every Prism
    language (0.4–0.8 s of a new visitor's main thread before the first chart could draw, issue 20), for text that
    has no syntax to highlight. ``wrap``: long lines wrap (a narrow column) instead of scrolling sideways."""
    theme = "dark" if st.context.theme.type == "dark" else "light"  # the browser's, as for the figures (plot)
    background = st.get_option(f"theme.{theme}.codeBackgroundColor") or PRINTED_FALLBACK
    box = "mha-printed mha-wrap" if wrap else "mha-printed"
    style = PRINTED_CSS.replace("BACKGROUND", background)
    st.html(f'{style}<pre class="{box}"><code>{html.escape(text)}</code></pre>')


PRINTED_FALLBACK = "rgba(128, 128, 128, 0.15)"  # a config without code colours: a grey that shows on light and dark
# st.code's box, read off Streamlit 1.67's code block at 16 and 22 px type; the text's colour is the page's.
PRINTED_CSS = (
    "<style>.mha-printed { margin: 0; padding: 1rem 0 1rem 1rem; border-radius: 0.35rem; background: BACKGROUND; "
    "overflow-x: auto; } .mha-printed code { display: block; padding: 0 1rem 0 0; margin: 0; background: none; "
    "color: inherit; font-family: 'Source Code Pro', monospace; font-size: 0.875rem; line-height: 1.6; "
    "white-space: pre; border: 0; border-radius: 0; } .mha-printed.mha-wrap { padding: 1rem; } "
    ".mha-printed.mha-wrap code { padding: 0; white-space: pre-wrap; }</style>"
)


def _control_flow_classes() -> tuple[type[BaseException], ...]:
    """Streamlit's own control flow, by class: st.stop raises StopException; st.rerun and st.switch_page raise
    RerunException. Both derive from ScriptControlException (a BaseException): they must pass through."""
    return (ScriptControlException,)


def _is_streamlit_control_flow(error: BaseException) -> bool:
    return isinstance(error, _control_flow_classes())


def run_page(main: Callable[[], None], light: bool = False) -> None:
    """Run a page's body; turn any exception into a short message that says what to change, and log it.

    Everything but Streamlit's control flow is caught, Streamlit's own API errors included (a widget given
    an impossible range). Out-of-memory gets its own advice; a session that ended mid-run stops quietly.
    The user's settings stay in session state and the URL. A page that needs more than light work (``light``
    False) says so first on a server whose memory leaves room for light work only (``budget.light_only``).
    """
    try:
        with crowd.CROWD.turn(admission.session_ended()):  # below 690 MB, pages take turns (explorer.glue.memory.crowd)
            _run_page(main, light)
    except admission.SessionEndedError as error:
        log.info("a page waiting for its turn stopped: %s", error)


def _run_page(main: Callable[[], None], light: bool) -> None:
    """``run_page``'s body, once it is this page's turn."""
    admission.page_started()
    try:
        if not light and budget.light_only():
            st.warning(budget.light_only_notice(), icon=":material/memory:")
        main()
    except BaseException as error:  # noqa: BLE001 - this is the page boundary
        if _is_streamlit_control_flow(error) or not isinstance(error, Exception):
            raise  # st.stop / st.rerun / st.switch_page, KeyboardInterrupt, SystemExit
        if isinstance(error, admission.SessionEndedError):
            log.info("stopped work for a session that ended: %s", error)
            return
        if isinstance(error, admission.OverBudgetError):  # a refusal, not a failure: the budget and its source
            log.info("refused: %s", error)
            st.warning(f"Not run: {error}. Smaller settings run; your settings are kept.", icon=":material/memory:")
            return
        log.error("page failed: %s", "".join(traceback.format_exception(error)))
        if isinstance(error, admission.ServerBusyError):
            st.warning(f"{error} Try again in a minute; your settings are kept.", icon=":material/hourglass:")
        elif isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower():
            st.error(
                "The device ran out of memory for these settings. Lower num_tokens, num_heads or batch_size, "
                "or choose the cpu device."
            )
            _offer_smaller_settings()
        elif isinstance(error, ValueError) and in_our_words(error):
            st.error(f"These settings cannot run: {settings_quote(error)}. Change the setting it names.")
        else:
            st.error(
                f"Something went wrong ({type(error).__name__}). Try smaller settings or reload the page; "
                "the error was logged."
            )
    finally:
        if admission.ran_heavy():  # the figures a heavy run sent are garbage now: their memory goes back too
            admission.release_memory()
        admission.page_finished()  # the last page running trims the heap (what light pages freed goes back too)


def _offer_smaller_settings() -> None:
    """One click to the nearest smaller setting: half the tokens, or the CPU when on a GPU."""
    settings = st.session_state.get("settings")
    if settings is None:
        return
    if settings.device != "cpu":
        smaller = replace(settings, device="cpu", dtype="float32")
        label = "Run on the cpu instead"
    elif settings.num_tokens > 1:
        smaller = replace(settings, num_tokens=max(1, settings.num_tokens // 2))
        label = f"Try num_tokens = {smaller.num_tokens}"
    else:
        return
    st.button(label, key="oom_smaller", on_click=apply_settings, args=(smaller,))


PROJECT_ROOT = Path(__file__).resolve().parents[3]


def in_our_words(error: BaseException) -> bool:
    """True when a ``raise`` in this project's code raised ``error``, so its message is the app's own words (naming
    the setting). A ValueError that Python or a library raised (``int("²")``: "invalid literal for int() with base
    10") is Python's words: the page says something went wrong instead, and the log keeps the text."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    path = Path(tb.tb_frame.f_code.co_filename).resolve()
    if PROJECT_ROOT not in path.parents or "site-packages" in path.parts:
        return False
    return linecache.getline(str(path), tb.tb_lineno).lstrip().startswith("raise")


def settings_quote(error: BaseException) -> str:
    return quote(error, limit=300)
