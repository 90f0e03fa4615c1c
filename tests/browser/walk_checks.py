"""What the walk test (test_walk_browser) reads on a page: the sidebar's widgets, the settings in the URL, and the
sentences in which each page states the settings it runs on; and how it moves: a click, Back, Forward, a slider.

A step is over when the URL names the page it should (or the value it should), and the run it started has settled.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from explorer.glue.frame.sidebar import INPUT_LABELS, PAGES, POSITION_LABELS
from explorer.glue.state import settings as cfg
from explorer.glue.state.url import widget_values

from .helpers import assert_no_exception, settle

SIDEBAR = "[data-testid='stSidebar']"
NAV_LINK = f"{SIDEBAR} [data-testid='stPageLink-NavLink']"
# The URL path of each page's script (Streamlit names a page by its file, less the number): "" for the front page.
PATHS = {script: re.sub(r"^pages/\d+_|\.py$", "", script) if script != "app.py" else "" for script, _, _ in PAGES}
LABELS = {script: label for script, label, _ in PAGES}

# Every keyed widget in the sidebar whose key is w_<something>, read as the visitor sees it: a slider's value, a
# number's or a text's box, a toggle's state, a select box's shown option. Buttons (no value) are left out.
SIDEBAR_WIDGETS_JS = """
() => {
  const found = {};
  for (const el of document.querySelectorAll("[data-testid='stSidebar'] [class*='st-key-w_']")) {
    const key = [...el.classList].find((c) => c.startsWith("st-key-w_")).slice("st-key-w_".length);
    const range = el.querySelector("input[type='range']");
    const box = el.querySelector("input[type='checkbox']");
    const text = el.querySelector("input[type='number'], input[type='text'], textarea");
    const select = el.querySelector("[data-baseweb='select']");
    const thumb = el.querySelector("[data-testid='stSliderThumbValue']");
    if (range) found[key] = range.value;
    else if (thumb) found[key] = thumb.innerText.trim();  // a select_slider
    else if (box) found[key] = box.checked;
    else if (select) found[key] = select.innerText.trim();
    else if (text) found[key] = text.value;
  }
  return found;
}
"""
# The widgets of the settings (and of presenter mode and the heads' width): the sidebar also holds a page's own
# widgets (the Explorer's View, Real heads' sentence in presenter mode), which show page parameters instead.
SETTING_WIDGETS = {*cfg.FIELD_NAMES, "head_dim", "heads_fixed", "presenter", "width_fixed"}


def url_query(page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query, keep_blank_values=True)


def url_path(page) -> str:
    return urlsplit(page.url).path.strip("/").split("/")[-1]


def url_settings(page) -> cfg.Settings:
    """The settings the URL states; the app writes every field, so a URL without them is a failure."""
    query = url_query(page)
    missing = [name for name in ("num_heads", "d_out", "num_tokens", "batch_size", "seed") if name not in query]
    assert not missing, f"{page.url}: the URL lacks {missing}"
    settings, _ = cfg.parse_query(cfg.settings_params(query))
    return settings


def shown_value(name: str, value: object) -> object:
    """How the sidebar shows a setting's value (a select box shows a label, a float slider its number)."""
    if name == "input":
        return INPUT_LABELS[value]
    if name == "positions":
        return POSITION_LABELS[value]
    if name == "rope_base":
        return f"{value:,}"
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return float(value)
    return str(value)


def expected_widgets(page) -> dict[str, object]:
    """What every settings widget should show: the URL's settings (and presenter mode's state)."""
    settings = url_settings(page)
    values = {**widget_values(settings), "d_out": settings.d_out, "heads_fixed": settings.num_heads}
    expected = {name: shown_value(name, value) for name, value in values.items()}
    query = url_query(page)
    expected["presenter"] = query.get("presenter", ["false"])[-1] == "true"
    expected["width_fixed"] = query.get("width", ["per_head"])[-1] == "fixed"
    return expected


def sidebar_widgets(page) -> dict[str, object]:
    """The settings widgets the sidebar shows, as the visitor reads them (floats as numbers)."""
    found = page.evaluate(SIDEBAR_WIDGETS_JS)
    shown = {name: value for name, value in found.items() if name in SETTING_WIDGETS}
    return {name: float(value) if name == "dropout" else value for name, value in shown.items()}


def disagreements(page, where: str) -> list[str]:
    """Each sidebar widget whose value is not the URL's, and each of the page's sentences that state other settings."""
    expected, shown = expected_widgets(page), sidebar_widgets(page)
    problems = [
        f"{where}: sidebar {name} shows {value!r}, the URL says {expected.get(name)!r}"
        for name, value in sorted(shown.items())
        if name not in expected or value != expected[name]
    ]
    if expected["presenter"]:
        return problems  # presenter mode leaves out the prose that states the settings
    text = page.locator("[data-testid='stMain']").inner_text()
    for sentence in page_sentences(url_path(page), url_settings(page)):
        if sentence not in text:
            problems.append(f"{where}: the page does not say {sentence!r}")
    return problems


def page_sentences(path: str, s: cfg.Settings) -> list[str]:
    """What each page says about the settings it ran on (its captions and headings), from the URL's settings."""
    heads = f"{s.num_heads} heads × head_dim {s.head_dim} = d_out {s.d_out}"
    shape = f"{heads}, {s.num_tokens} tokens, batch {s.batch_size}"
    weights = f"= ({s.batch_size}, {s.num_heads}, {s.num_tokens}, {s.num_tokens})"  # attn_weights' (b, h, T, T)
    return {
        "": [shape],
        "Step_through": [shape],
        "Heads_and_references": [weights],
        "Masks_and_cross_attention": [f"hidden_dim={s.d_out}, n_heads={s.num_heads})", f"batch {s.batch_size}."],
        "Knobs_that_teach": [weights],
        "Follow_a_token": [weights, f"{s.num_heads} heads"],
        "Trained_heads": [f"on {s.device} with seed {s.seed} from the sidebar"],
        "Cost": [f"d_in = d_out = {s.num_heads} × {s.head_dim} = {s.d_out}, batch {s.batch_size}, on {s.device}"],
        "Real_heads": [],  # its own model and sentence: the sidebar holds presenter mode only
        "Attention_variants": [f"Q has {s.num_heads} heads", f"all {s.num_tokens} tokens (batch {s.batch_size}"],
    }[path]


def arrive(page, path: str, timeout: float = 180_000) -> None:
    """Until the URL names the page ``path`` and its run has settled with no error on it."""
    page.wait_for_function(
        "(path) => location.pathname.replace(/\\/+$/, '').split('/').pop() === path"
        " || (path === '' && /\\/$/.test(location.pathname))",
        arg=path,
        timeout=timeout,
    )
    settle(page, timeout)
    assert_no_exception(page)


def sidebar_link(page, script: str) -> None:
    page.locator(NAV_LINK).filter(has_text=re.compile(rf"{re.escape(LABELS[script])}$")).first.click()
    arrive(page, PATHS[script])


def front_page_link(page, who: str, script: str) -> None:
    """A link in the front page's "Where to start" row of ``who`` (both rows link Step through)."""
    row = page.locator("[data-testid='stMain'] [data-testid='stHorizontalBlock']").filter(has_text=f"{who}:")
    row.locator("[data-testid='stPageLink-NavLink']").filter(has_text=LABELS[script]).first.click()
    arrive(page, PATHS[script])


def history(page, direction: str, script: str) -> list[str]:
    """The browser's Back or Forward, pressed once: it must show the page ``script``. A page link pushes the page's
    path, and the page's first run writes its settings into the query; Streamlit pushed that as an entry of its own,
    so the first Back from a page opened by a click showed the same page again (history_guard.js)."""
    page.go_back() if direction == "back" else page.go_forward()
    settle(page)  # the entry may hold the URL shown now: the page is run again all the same
    assert_no_exception(page)
    if url_path(page) != PATHS[script]:
        where = PATHS[script] or "front page"
        return [f"one {direction} showed {url_path(page) or 'front page'}, not {where}"]
    arrive(page, PATHS[script])
    return []


def move(page, name: str, key: str) -> str:
    """Move the sidebar widget ``w_<name>`` one step (a slider by the keyboard, a number by its + button), and wait
    until the URL holds the value the widget then shows; that value is returned."""
    before = url_query(page)[name][-1]
    widget = page.locator(f"{SIDEBAR} .st-key-w_{name}")
    if key == "plus":
        widget.locator("[data-testid='stNumberInputStepUp']").click()
    else:
        widget.locator("input[type='range']").first.focus()
        page.keyboard.press(key)
    page.wait_for_function(
        "([name, before]) => { const now = new URLSearchParams(location.search).get(name);"
        " return now !== null && now !== before; }",
        arg=[name, before],
        timeout=30_000,
    )
    settle(page)
    assert_no_exception(page)
    return url_query(page)[name][-1]
