"""The trained spec: one trained layer as a URL-safe string, read back strictly (explorer.glue.state.trained_link)."""

from __future__ import annotations

import re

import pytest
import torch

from explorer.glue.state.trained_link import format_trained_spec, parse_trained_spec
from mha_core.toy.tiny_training import make_config


@pytest.mark.parametrize(
    "config, layer",
    [
        (make_config("previous_token"), 0),
        (make_config("first_token", num_heads=8, steps=10, seed=2**31 - 1), 0),
        (make_config("key_value_lookup", num_heads=4, lr=0.0015), 0),
        (make_config("induction", num_heads=1, lr=0.123456789, seed=7), 1),
    ],
)
def test_trained_spec_round_trips(config, layer):
    spec = format_trained_spec(config, layer)
    assert re.fullmatch(r"[A-Za-z0-9_.:-]+", spec), spec  # nothing a URL needs to escape but cuda:N's colon
    assert parse_trained_spec(spec) == (config, layer)
    assert hash(parse_trained_spec(spec)[0]) == hash(config)  # the same cache key


def test_trained_spec_reads_as_documented():
    spec = format_trained_spec(make_config("previous_token", seed=3), 0)
    assert spec == "previous_token.heads2.layers1.d32.vocab16.len16.steps200.batch64.lr1e-2.seed3.cpu.layer0"


GOOD_SPEC = "previous_token.heads2.layers1.d32.vocab16.len16.steps200.batch64.lr1e-2.seed0.cpu.layer0"


@pytest.mark.parametrize(
    "text, message",
    [
        (GOOD_SPEC.replace("previous_token", "nope"), "unknown task 'nope'"),
        (GOOD_SPEC.replace(".layer0", ""), "11 dot-separated parts, expected 12"),
        (GOOD_SPEC.replace("heads2", "heads999"), "num_heads=999 .* outside 1–16"),
        (GOOD_SPEC.replace("heads2", "heads02"), "expected heads<number> for num_heads"),
        (GOOD_SPEC.replace("heads2", "heads-2"), "expected heads<number> for num_heads"),
        (GOOD_SPEC.replace("heads2", "h2"), "expected heads<number> for num_heads"),
        (GOOD_SPEC.replace("steps200", "steps99999999"), "steps=99999999 .* outside 1–2000"),
        (GOOD_SPEC.replace("layer0", "layer1"), "layer=1 .* outside 0–0"),
        (GOOD_SPEC.replace("lr1e-2", "lr0.01"), "13 dot-separated parts, expected 12"),
        (GOOD_SPEC.replace("lr1e-2", "lr1x-2"), "lr part 'lr1x-2'"),
        (GOOD_SPEC.replace("lr1e-2", "lr10e-3"), "not in canonical form; expected"),
        (GOOD_SPEC.replace("lr1e-2", "lr1e2"), "lr must be a number in \\(0, 1\\)"),
        (GOOD_SPEC.replace("heads2", "heads3"), "d_model=32 must be divisible by num_heads=3"),
        (GOOD_SPEC.replace("cpu", "mps"), "device 'mps' in trained spec is not cpu"),
        (GOOD_SPEC.replace("seed0", "seed2147483648"), "seed=2147483648 .* outside"),
        (GOOD_SPEC + "x" * 200, "at most 200"),
        ("", "1 dot-separated parts"),
        ("<script>." * 11 + "x", "unknown task '<script>'"),
    ],
)
def test_trained_spec_rejects_bad_input_naming_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        parse_trained_spec(text)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA, so a cuda spec is valid here")
def test_trained_spec_rejects_cuda_without_cuda():
    with pytest.raises(ValueError, match="no CUDA device"):
        parse_trained_spec(GOOD_SPEC.replace("cpu", "cuda"))


def test_trained_spec_refuses_to_write_what_it_cannot_read():
    with pytest.raises(ValueError, match="layer must be in"):
        format_trained_spec(make_config("previous_token"), 1)
    with pytest.raises(ValueError, match="steps=5000 is outside 1–2000"):
        format_trained_spec(make_config("previous_token", steps=5000), 0)
    with pytest.raises(ValueError, match="not a string|must be a string"):
        parse_trained_spec(None)
