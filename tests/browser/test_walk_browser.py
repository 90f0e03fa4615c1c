"""The lesson walked by clicks, as a class walks it (issue 42): from the front page through every page link in the
sidebar and the front page's two paths, revisiting pages, with the browser's Back and Forward between, and presenter
mode switched on and off on the way. After every step each sidebar widget shows the URL's value and the page states
the same settings. Then one widget is moved on each page: only that setting changes, in the URL and in the sidebar.

Streamlit gives a widget a new id on every page; the sidebar once kept a key's value from the previous page's widget
and drew the new one at its own default (1 head, 1 token, seed 0), on every other click (docs/decisions.md).
"""

from __future__ import annotations

import time
from dataclasses import asdict

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from explorer.glue.frame.sidebar import PAGES, START_PATHS

from .walk_checks import (
    PATHS,
    SIDEBAR,
    arrive,
    disagreements,
    front_page_link,
    history,
    move,
    sidebar_link,
    sidebar_widgets,
    url_path,
    url_query,
    url_settings,
)

pytestmark = pytest.mark.browser

EXPLORER, STEP, HEADS, MASKS, KNOBS, TRAINED, COST, FOLLOW, REAL, VARIANTS = (script for script, _, _ in PAGES)
FIRST, CLASS = (who for who, _, _ in START_PATHS)  # the front page's two paths: a first visit's and a class's

# (how, page it reaches[, whose path]): "link" is a click in the sidebar, "front" one in the front page's row of a
# path, "back" and "forward" the browser's, "presenter" a click on presenter mode's switch (the page stays).
WALK = [
    ("front", STEP, FIRST),
    ("back", EXPLORER),
    ("front", FOLLOW, FIRST),
    ("link", MASKS),
    ("back", FOLLOW),
    ("forward", MASKS),
    ("link", HEADS),
    ("link", EXPLORER),
    ("front", HEADS, FIRST),
    ("link", EXPLORER),
    ("front", REAL, FIRST),
    ("presenter", REAL),
    ("link", KNOBS),
    ("back", REAL),
    ("presenter", REAL),
    ("link", EXPLORER),
    ("front", STEP, CLASS),
    ("link", EXPLORER),
    ("front", MASKS, CLASS),
    ("link", EXPLORER),
    ("front", KNOBS, CLASS),
    ("link", TRAINED),
    ("link", COST),
    ("link", VARIANTS),
    ("back", COST),
    ("forward", VARIANTS),
    ("link", STEP),
    ("presenter", STEP),
    ("link", FOLLOW),
    ("presenter", FOLLOW),
    ("link", EXPLORER),
    ("front", TRAINED, CLASS),
    ("link", REAL),
]
# (page, widget, key): one widget moved per page, each a setting no other follows (num_tokens goes down, so the
# context stays long enough; the seed by its + button: Trained heads' sidebar has no slider). Real heads has none.
MOVES = [
    (EXPLORER, "batch_size", "ArrowRight"),
    (STEP, "dropout", "ArrowRight"),
    (HEADS, "num_tokens", "ArrowLeft"),
    (MASKS, "batch_size", "ArrowRight"),
    (KNOBS, "num_tokens", "ArrowLeft"),
    (FOLLOW, "dropout", "ArrowRight"),
    (TRAINED, "seed", "plus"),
    (COST, "batch_size", "ArrowLeft"),
    (VARIANTS, "num_tokens", "ArrowRight"),
]


def test_the_walk_covers_every_page_link_and_both_paths():
    """The walk clicks every sidebar link, every link of both front-page paths, and goes back and forward."""
    assert {step[1] for step in WALK if step[0] == "link"} == {script for script, _, _ in PAGES}
    for who, _, scripts in START_PATHS:
        assert {step[1] for step in WALK if step[0] == "front" and step[2] == who} == set(scripts), who
    assert {"back", "forward", "presenter"} <= {step[0] for step in WALK}
    assert {page for page, _, _ in MOVES} == {script for script, _, _ in PAGES} - {REAL}


def ensure_sidebar_open(page) -> None:
    """Presenter mode folds the sidebar away; a visitor opens it with its › button to reach a link or a switch."""
    if page.locator(SIDEBAR).get_attribute("data-collapsed") == "true":
        page.locator("[data-testid='stExpandSidebarButton']").click()
        page.wait_for_function(
            "() => document.querySelector(\"[data-testid='stSidebar']\").getAttribute('data-collapsed') === 'false'"
        )


def toggle_presenter(page, script: str) -> list[str]:
    """Click presenter mode's switch: the URL must follow it (on, then off); the page stays."""
    ensure_sidebar_open(page)
    wanted = "false" if url_query(page).get("presenter", ["false"])[-1] == "true" else "true"
    page.locator(f"{SIDEBAR} .st-key-w_presenter label").first.click()
    try:
        page.wait_for_function(
            "(wanted) => (new URLSearchParams(location.search).get('presenter') ?? 'false') === wanted",
            arg=wanted,
            timeout=30_000,
        )
    except PlaywrightTimeout:
        return [f"{PATHS[script] or 'front page'}: presenter mode's switch did not turn it {wanted}"]
    finally:
        arrive(page, PATHS[script])
    return []


def take(page, step: tuple) -> list[str]:
    """Take one step of the walk; the problems seen on pages it passed on the way (Back through a page's entries)."""
    how, script = step[0], step[1]
    if how == "link":
        ensure_sidebar_open(page)
        sidebar_link(page, script)
    elif how == "front":
        front_page_link(page, step[2], script)
    elif how in ("back", "forward"):
        return history(page, how, script)
    else:
        return toggle_presenter(page, script)
    return []


def moved_only(page, script: str, name: str, key: str) -> list[str]:
    """Move one widget: the URL's settings and the sidebar's widgets differ from before in that setting alone."""
    where = f"{PATHS[script] or 'front page'}: {name} moved"
    before_url, before_widgets = asdict(url_settings(page)), sidebar_widgets(page)
    try:
        move(page, name, key)
    except PlaywrightTimeout as error:
        return [f"{where}: the URL did not change: {str(error).splitlines()[0]}"]
    after_url, after_widgets = asdict(url_settings(page)), sidebar_widgets(page)
    problems = disagreements(page, where)
    changed = {field for field in before_url if before_url[field] != after_url[field]}
    if changed != {name}:
        problems.append(f"{where}: the URL's settings that changed: {sorted(changed)}")
    changed = {w for w in before_widgets if w in after_widgets and before_widgets[w] != after_widgets[w]}
    if changed != {name}:
        problems.append(f"{where}: the sidebar widgets that changed: {sorted(changed)}")
    return problems


def walk(page, app_url: str) -> list[str]:
    """Take every step of WALK from the front page: the problems seen (a step that cannot be taken ends the walk)."""
    started = time.monotonic()
    page.goto(app_url)
    arrive(page, "")
    problems = disagreements(page, "front page, opened")
    for number, step in enumerate(WALK, start=1):
        where = f"step {number}: {step[0]} to {PATHS[step[1]] or 'front page'}"
        print(f"{time.monotonic() - started:.1f} s: {where}")  # shown when the test fails
        try:
            problems += take(page, step)
        except (PlaywrightTimeout, AssertionError) as error:  # the walk cannot go on: say where it stopped
            return [*problems, f"{where}: could not be taken: {str(error).splitlines()[0]}"]
        problems += disagreements(page, where)
    return problems


def test_a_class_walks_the_pages_by_clicks_and_the_sidebar_always_shows_the_page_settings(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
    page = context.new_page()
    try:
        problems = walk(page, app_url)
        ensure_sidebar_open(page)
        sidebar_link(page, EXPLORER)
        forget = page.locator(f"{SIDEBAR} .st-key-w_forget_model button")
        if forget.count():  # Real heads put its model's layer in the settings: a slider there moves nothing
            forget.click()
            page.wait_for_function("() => !new URLSearchParams(location.search).get('model')", timeout=30_000)
            arrive(page, "")
            problems += disagreements(page, "front page, seeded random weights again")
        for script, name, key in MOVES:
            if PATHS[script] != url_path(page):
                ensure_sidebar_open(page)
                sidebar_link(page, script)
                problems += disagreements(page, f"{PATHS[script] or 'front page'}, before moving {name}")
            problems += moved_only(page, script, name, key)
    finally:
        context.close()
    assert not problems, "\n".join(problems)
