"""Every fact the app's sentences state that code can check, checked: listing lines, memory, masks, presets.

Each test pins one corrected sentence of issue 12, so that the text and the code cannot drift apart again.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from explorer.glue.state.settings import Settings
from explorer.views import (
    attention_explorer,
    cost,
    heads_and_references,
    knobs_that_teach,
    step_through,
    step_through_steps,
)
from mha_core.attention import masks
from mha_core.attention.inputs import book_tokens
from mha_core.attention.listing import (
    INIT_LINES,
    LISTING_3_5,
    LISTING_LINES,
    STEP_LINES,
    init_line,
    joined_statement,
    listing_statement,
    statement_lines,
)
from mha_core.attention.modules import MultiHeadAttention
from mha_core.runs import forward as runs
from mha_core.runs import profiling

from ..teaching_helpers import explorer_run, number, step

CPU = torch.device("cpu")
CITED = re.compile(r"line (\d+): `([^`]+)`")


def every_caption(run: runs.ExplorerRun) -> list[str]:
    shown = [
        p.caption
        for section in ("attention", "reshapes")
        for p in attention_explorer.build_view(
            run, section=section, batch_index=0, enlarge=0, presenter=False
        ).figures()
    ]
    for step_number in range(1, step_through_steps.STEP_COUNT + 1):
        view = step_through.build_step_view(
            run.trace, run.labels, step_number, batch_index=0, presenter=False, dropout_active=False
        )
        shown += [p.caption for p in view.panels]
    return shown


def test_every_caption_cites_the_listing_line_that_holds_its_code():
    cited = [(int(n), code) for c in every_caption(explorer_run()) for n, code in CITED.findall(c)]
    assert len(cited) > 20
    for line_number, code in cited:
        line = LISTING_LINES[line_number - 1].strip()
        assert code.startswith(line) or line.startswith(code), (line_number, code, line)


def test_out_proj_and_the_mask_buffer_are_cited_at_their_constructors():
    captions = every_caption(explorer_run())
    assert init_line("out_proj") == (14, "self.out_proj = nn.Linear(d_out, d_out)")
    assert init_line("mask_buffer")[0] == 18 and "torch.triu" in init_line("mask_buffer")[1]
    assert any("line 14: `self.out_proj = nn.Linear(d_out, d_out)`" in c for c in captions)
    assert any("line 18: `torch.triu(" in c for c in captions)
    assert not any("line 52: `self.out_proj" in c or "line 17: `torch.triu" in c for c in captions)
    assert [INIT_LINES[k] for k in ("head_dim", "W_query", "W_key", "W_value")] == [10, 11, 12, 13]


def test_the_mask_caption_says_the_books_mask_bool_is_true_where_blocked():
    mask_caption = next(c for c in every_caption(explorer_run()) if c.startswith("`mask` · shape (T, T)"))
    assert "mask_bool" in mask_caption and "True = blocked" in mask_caption


# --- memory: the Cost page's sentences against a measurement -------------------------------------------------------


def book_class():
    """The book's Listing 3.5, executed verbatim (it uses the in-place masked_fill_)."""
    namespace = {"nn": nn, "torch": torch}
    exec(LISTING_3_5, namespace)  # noqa: S102 - the project's own constant
    return namespace["MultiHeadAttention"]


def matrices_at_peak(module, t: int, h: int) -> float:
    x = torch.rand(1, t, module.d_out)
    return profiling.peak_bytes(lambda: module(x), CPU) / profiling.attention_matrix_bytes(1, h, t, "float32")


def test_the_book_keeps_about_three_matrices_alive_and_this_module_four():
    t, h = 256, 2
    torch.manual_seed(0)
    book = book_class()(32, 32, t, 0.0, h).eval()
    torch.manual_seed(0)
    ours = MultiHeadAttention(32, 32, t, 0.0, h).eval()
    assert 3 <= matrices_at_peak(book, t, h) < 3.5  # scores (masked in place), scaled scores, weights
    assert 4 <= matrices_at_peak(ours, t, h) < 4.5  # ... and the out-of-place masked scores
    text = cost.formula_markdown(1, h, "float32", [t])
    assert "about three of them" in text and "masked_fill_" in text and "a fourth" in text
    assert "keeps four" not in text


def test_nn_multihead_attentions_memory_grows_four_times_per_doubling():
    peaks = []
    for t in (128, 256, 512):
        torch.manual_seed(0)
        module = MultiHeadAttention(32, 32, t, 0.0, 2).eval()  # b 1, h 2, head_dim 16
        calls = profiling.variant_calls(module, torch.rand(1, t, 32))
        peaks.append(profiling.peak_bytes(calls["torch_mha"], CPU))
    assert 3.5 < peaks[1] / peaks[0] < 4.5 and 3.5 < peaks[2] / peaks[1] < 4.5
    text = cost.memory_method("cpu")
    assert "×4 per doubling" in text and "fast path work on blocks" not in text


def test_sdpas_math_fallback_builds_the_matrix_and_its_flash_kernel_does_not():
    q = torch.rand(1, 2, 256, 16, dtype=torch.float64)
    one = profiling.attention_matrix_bytes(1, 2, 256, "float64")

    def peak(backend) -> int:
        with sdpa_kernel(backend):
            return profiling.peak_bytes(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True), CPU)

    assert peak(SDPBackend.MATH) >= one
    assert peak(SDPBackend.FLASH_ATTENTION) < one / 4
    assert (
        "math fallback" in heads_and_references.FUSED_NO_WEIGHTS
        and "does build it" in heads_and_references.FUSED_NO_WEIGHTS
    )


# --- masks, softmax, presets -------------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [1, 2, 3, 5])
def test_the_sliding_window_is_distance_below_window(window):
    i = torch.arange(6)[:, None]
    j = torch.arange(7)[None, :]
    both = masks.sliding_window(6, 7, window, causal_only=False)
    assert torch.equal(both, (i - j).abs() < window)
    assert torch.equal(masks.sliding_window(6, 7, window), ((i - j).abs() < window) & (j <= i))


def test_minus_infinity_equals_the_books_zero_then_renormalise_and_scaling_commutes_with_masking():
    run = explorer_run(Settings(d_out=8))
    scores, allowed = run.trace.steps["attn_scores"], run.trace.steps["mask"]  # (b, h, T, T), (T, T)
    scale = run.trace.steps["queries_heads"].shape[-1] ** 0.5
    plain = torch.softmax(scores / scale, dim=-1)
    zeroed = plain.masked_fill(~allowed, 0.0)
    renormalised = zeroed / zeroed.sum(-1, keepdim=True)  # section 3.5.1
    torch.testing.assert_close(renormalised, run.trace.steps["attn_weights"], rtol=1e-6, atol=1e-7)
    mask_then_scale = scores.masked_fill(~allowed, -torch.inf) / scale
    scale_then_mask = (scores / scale).masked_fill(~allowed, -torch.inf)
    assert torch.equal(mask_then_scale, scale_then_mask)
    assert torch.exp(torch.tensor(0.0)) == 1 and torch.exp(torch.tensor(-torch.inf)) == 0
    sentences = " ".join(s for key in ("mask", "softmax") for s in step(key).sentences)
    assert "exp(0) = 1" in sentences and "3.5.1" in sentences and "Masking then scaling equals" in sentences


def test_the_identity_preset_prefers_journey_a_long_key_not_a_similar_one():
    x, words = book_tokens()
    module = runs.build_module(Settings().module_spec())
    run = runs.run_preset(module, x[None], list(words), "identity", num_heads=2)
    weights = run.trace.steps["attn_weights"][0, 1]  # head 1, (T, T)
    heaviest = [words[int(k)] for k in weights.argmax(-1)]
    assert heaviest[2:] == ["journey"] * 4  # from "starts", "with", "one", "step"
    assert "look like them" not in knobs_that_teach.PRESET_TEXT["identity"]
    assert (
        "journey" in knobs_that_teach.PRESET_TEXT["identity"] and "lengths" in knobs_that_teach.PRESET_TEXT["identity"]
    )


def test_step_sentences_state_the_std_rule_the_head_dim_1_case_and_train_mode_with_p_0():
    run = explorer_run()  # head_dim 1
    softmax = step_through.build_step_view(
        run.trace, run.labels, number("softmax"), batch_index=0, presenter=False, dropout_active=False
    )
    text = " ".join(softmax.sentences)
    assert "standard deviation is √head_dim" in text and "head_dim = 1" in text and "changes nothing" in text
    wide = explorer_run(Settings(d_out=8))
    wide_text = " ".join(
        step_through.build_step_view(
            wide.trace, wide.labels, number("softmax"), batch_index=0, presenter=False, dropout_active=False
        ).sentences
    )
    assert "changes nothing" not in wide_text
    dropout = step_through.build_step_view(
        run.trace, run.labels, number("dropout"), batch_index=0, presenter=False, dropout_active=False, train=True
    )
    assert "p = 0" in " ".join(dropout.sentences)
    assert any("train mode with p = 0" in p.caption for p in dropout.panels)
    first = step("x").sentences[-1]
    assert "four weight matrices" not in first and "bias" in first
    context = " ".join(step("context").sentences)
    assert "weighted sum" in context and "Without dropout" in context


def captions_everywhere() -> list[str]:
    """every_caption, plus Step through's dropout step in train mode, the Knobs views and the Heads view."""
    settings = Settings(dropout=0.5, train=True)
    train_run = explorer_run(settings)
    trace, labels = train_run.trace, train_run.labels
    shown = every_caption(explorer_run()) + [
        p.caption
        for p in step_through.build_step_view(
            trace, labels, number("dropout"), batch_index=1, presenter=False, dropout_active=True, train=True
        ).panels
    ]
    module = runs.build_module(settings.module_spec())
    x, _ = runs.build_input(settings.input_spec())
    views = [
        knobs_that_teach.build_temperature_view(runs.run_temperature(module, x, 2.0), labels, presenter=False),
        knobs_that_teach.build_dropout_view(runs.run_dropout(module, x, 0.5, 7), labels, presenter=False),
        knobs_that_teach.build_preset_view(
            runs.run_preset(module, x, labels, "identity", num_heads=2), presenter=False
        ),
        heads_and_references.build_heads_view(runs.run_heads(module, x), labels, batch_index=0, presenter=False),
    ]
    return shown + [p.caption for view in views for p in view.panels]


def test_captions_quote_the_whole_statement_never_cut_at_an_open_bracket():
    captions = captions_everywhere()
    cited = [(int(n), code) for c in captions for n, code in CITED.findall(c)]
    assert len(cited) > 30
    for line, code in cited:
        assert not code.endswith(("(", "[", "{", ",", "\\")), (line, code)
        assert all(code.count(o) == code.count(c) for o, c in ("()", "[]", "{}")), (line, code)
        assert code == joined_statement(line), (line, code)
    softmax = (
        f"line {STEP_LINES['attn_weights']}: `attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)`"
    )
    view = f"line {STEP_LINES['queries_split']}: `queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)`"
    assert any(softmax in c for c in captions) and any(view in c for c in captions)
    assert not any("`torch.softmax(`" in c or "torch.softmax(`" in c for c in captions)


def test_a_steps_statement_is_its_listing_lines_joined():
    for step_name, line in STEP_LINES.items():
        first, code = listing_statement(step_name)
        lines = statement_lines(first)
        assert first <= line <= lines[-1], step_name  # the statement holds the step's own line
        book = "".join(LISTING_LINES[n - 1].strip().removesuffix("\\") for n in lines)
        assert "".join(code.split()) == "".join(book.split()), step_name
        assert "\n" not in code and "  " not in code, step_name
    assert listing_statement("scaled_scores") == listing_statement("attn_weights")  # its second line: one statement


# --- Step through: the __init__ lines, the buffer, train vs eval ---------------------------------------------------


def test_steps_light_the_init_lines_where_they_are_used_and_say_so_correctly():
    lit = {s.key: set(s.lines) for s in step_through_steps.STEPS}
    assert {INIT_LINES[k] for k in ("W_query", "W_key", "W_value")} <= lit["projections"]
    assert INIT_LINES["head_dim"] in lit["view"]
    assert {INIT_LINES["register_buffer"], INIT_LINES["mask_buffer"]} <= lit["mask"]
    assert INIT_LINES["out_proj"] in lit["out_proj"] and INIT_LINES["dropout"] in lit["dropout"]
    for s in step_through_steps.STEPS:  # every "(line(s) …, also lit)" names lines that are lit
        for cited in re.findall(r"\(lines? ([0-9–, ]+), also lit\)", " ".join(s.sentences)):
            for part in cited.split(", "):
                low, _, high = part.partition("–")
                assert set(range(int(low), int(high or low) + 1)) <= lit[s.key], (s.key, cited)
    assert (
        step_through_steps.line_ranges([14, 52, 53]) == "lines 14, 52–53"
        and step_through_steps.line_ranges([38]) == "line 38"
    )


def test_the_mask_is_a_buffer_not_trained_moved_by_to_and_saved():
    module = MultiHeadAttention(3, 2, 6, 0.0, 2)
    assert "mask" not in dict(module.named_parameters()) and "mask" in module.state_dict()
    assert module.to(torch.float64).mask.dtype == torch.float64  # .to() moves buffers with the weights
    text = " ".join(step("mask").sentences)
    assert "not in parameters()" in text and ".to(device)" in text and "state_dict" in text


def test_eval_only_turns_dropout_off_the_mask_applies_in_both_and_no_grad_changes_no_number():
    torch.manual_seed(0)
    module = MultiHeadAttention(4, 4, 6, 0.5, 2)
    x = torch.rand(1, 6, 4)
    future = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    for train in (True, False):
        trace = runs.run_trace(module, x, train=train, seed=1)
        assert (trace.steps["attn_weights_dropped"][..., future] == 0).all()
    module.eval()
    with torch.no_grad():
        quiet = module(x)
    assert torch.equal(quiet, module(x).detach())
    assert "causal mask applies in both" in " ".join(step("dropout").sentences)
