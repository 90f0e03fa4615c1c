"""Each page draws only the settings that change what it draws, and shows only their notices; the others stay in
the URL untouched (issue 11, point 3)."""

from __future__ import annotations

import pytest

from explorer.glue.frame import sidebar
from explorer.glue.state.url import notice_fields

from ..apptest_helpers import open_page

WIDGET_KINDS = ("slider", "number_input", "selectbox", "toggle", "text_input", "select_slider")
# The sidebar widget each settings field is drawn with (d_out's comes with num_heads).
FIELD_LABELS = {
    "num_heads": "num_heads",
    "d_in": "d_in",
    "num_tokens": "num_tokens",
    "context_length": "context_length",
    "batch_size": "batch_size",
    "dropout": "dropout",
    "train": "train mode (dropout active)",
    "qkv_bias": "qkv_bias",
    "seed": "seed",
    "input": "input",
    "device": "device",
    "dtype": "dtype",
    "positions": "positions",  # rope_base's slider shows only beside positions=rope (test_position_knob_page.py)
}
PAGE_FIELDS = {
    "app.py": sidebar.KNOB_FIELDS,
    "pages/1_Step_through.py": sidebar.KNOB_FIELDS,
    "pages/2_Heads_and_references.py": sidebar.EVAL_FIELDS,
    "pages/3_Masks_and_cross_attention.py": sidebar.CROSS_FIELDS,
    "pages/4_Knobs_that_teach.py": sidebar.EVAL_FIELDS,
    "pages/5_Trained_heads.py": sidebar.TRAINING_FIELDS,
    "pages/6_Cost.py": sidebar.COST_FIELDS,
    "pages/7_Follow_a_token.py": sidebar.ALL_FIELDS,
    "pages/9_Attention_variants.py": sidebar.VARIANT_FIELDS,
}
# Not the defaults, and consistent, so that nothing is corrected: a page must hand every one back unchanged.
OTHER_SETTINGS = {"num_tokens": "7", "context_length": "9", "d_in": "5", "dropout": "0.2", "input": "random"}


def sidebar_labels(at) -> set[str]:
    return {w.label for kind in WIDGET_KINDS for w in at.sidebar.get(kind)}


@pytest.mark.parametrize("page", list(PAGE_FIELDS))
def test_a_page_draws_its_own_settings_and_keeps_the_others_in_the_url(page):
    at = open_page(page, OTHER_SETTINGS)
    assert not at.exception
    labels = sidebar_labels(at)
    used = set(PAGE_FIELDS[page])
    for field, label in FIELD_LABELS.items():
        assert (label in labels) == (field in used), (page, field)
    for name, value in OTHER_SETTINGS.items():
        assert at.query_params[name] == value, (page, name)  # shown or not, still in the link to share


@pytest.mark.parametrize(
    ("page", "shown"),
    [("pages/1_Step_through.py", True), ("pages/3_Masks_and_cross_attention.py", False), ("pages/6_Cost.py", False)],
)
def test_a_settings_notice_shows_only_where_its_setting_is_used(page, shown):
    at = open_page(page, {"num_tokens": "12", "context_length": "5"})  # context_length below num_tokens
    notices = " ".join(w.value for w in at.warning)
    assert ("context_length=5 is below num_tokens=12" in notices) == shown, notices
    assert at.session_state.settings.context_length == 12  # corrected all the same, for the pages that use it


def test_a_pages_own_notice_always_shows():
    at = open_page("pages/6_Cost.py", {"max_tokens": "100", "num_tokens": "abc"})
    notices = " ".join(w.value for w in at.warning)
    assert "max_tokens=100 is not one of the measured lengths" in notices
    assert "num_tokens" not in notices  # the explorer's setting: not this page's business


def test_notice_fields_reads_the_settings_a_notice_names():
    assert notice_fields("context_length=5 is below num_tokens=12; raised to 12.") == {"context_length", "num_tokens"}
    assert notice_fields("Device `cuda` is not available here; using cpu.") == {"device"}
    assert "input" in notice_fields("The sentence has 3 tokens; showing the first 2.")
