"""Heads at a fixed width (?width=fixed): d_out stays, num_heads splits it, the parameter count does not move."""

from __future__ import annotations

import pytest

from explorer.glue.state.settings import Settings, head_choices, parameter_count
from mha_core.runs import forward as runs

from ..apptest_helpers import run_page, texts

APP = "app.py"


@pytest.mark.parametrize(
    "settings",
    [Settings(), Settings(num_heads=4, d_out=8, qkv_bias=True), Settings(num_heads=12, d_in=768, d_out=768)],
)
def test_parameter_count_is_the_modules(settings):
    module = runs.build_module(settings.module_spec())
    assert parameter_count(settings) == sum(p.numel() for p in module.parameters())


def test_parameter_count_does_not_depend_on_num_heads_at_a_fixed_width():
    counts = {parameter_count(Settings(num_heads=h, d_in=768, d_out=768)) for h in head_choices(768)}
    assert counts == {2_360_064}  # the book's GPT-2-sized module, for every split of 768
    assert 12 in head_choices(768) and 768 // 12 == 64
    assert head_choices(8) == [1, 2, 4, 8]


def test_fixed_width_keeps_d_out_and_splits_it():
    at = run_page(APP, width="fixed", d_out="8", num_heads="2")
    assert not at.exception
    assert at.session_state._width == "fixed"
    heads = at.sidebar.select_slider(key="w_heads_fixed")
    assert list(heads.options) == ["1", "2", "4", "8"]
    heads.set_value(4).run()
    settings = at.session_state.settings
    assert (settings.d_out, settings.num_heads, settings.head_dim) == (8, 4, 2)
    assert at.query_params["width"] in ("fixed", ["fixed"])
    assert "parameters for every num_heads" in "\n".join(c.value for c in at.sidebar.caption)


def test_a_bad_width_gets_a_notice_and_the_default():
    at = run_page(APP, width="<b>wide</b>")
    assert not at.exception and at.session_state._width == "per_head"
    assert "width=" in texts(at)


def test_head_dim_1_is_flagged_with_one_click_to_wider_heads():
    at = run_page(APP)
    assert "head_dim = 1" in "\n".join(c.value for c in at.sidebar.caption)
    at.sidebar.button(key="w_wider_heads").click().run()
    settings = at.session_state.settings
    assert (settings.num_heads, settings.head_dim, settings.d_out) == (4, 16, 64)
    assert not at.exception
