"""Specs are built with keywords: a positional construction fails, and Settings hands its fields on by name."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from pathlib import Path

import pytest

from explorer.glue.state.settings import Settings
from mha_core.runs.forward import InputSpec, ModuleSpec
from mha_core.runs.profiling import CostSpec
from mha_core.runs.teaching import MaskParams
from mha_core.toy.tiny_training import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


def core_dataclasses() -> list[type]:
    found = []
    for path in sorted((ROOT / "mha_core").rglob("*.py")):
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        found += [
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__
        ]
    return found


def test_the_scan_finds_the_specs():
    """The oracle: the list below is not empty, and holds the specs the issue names."""
    assert {ModuleSpec, InputSpec, CostSpec, TrainConfig, MaskParams} <= set(core_dataclasses())


@pytest.mark.parametrize("cls", [*core_dataclasses(), Settings], ids=lambda cls: cls.__name__)
def test_every_field_is_keyword_only(cls):
    positional = [f.name for f in dataclasses.fields(cls) if not f.kw_only]
    assert positional == [], f"{cls.__name__} takes {positional} by position"


@pytest.mark.parametrize(
    "build",
    [
        lambda: ModuleSpec(3, 2, 6, 0.0, 2, False, 123, "cpu", "float32"),  # the nine arguments of old
        lambda: InputSpec("random", 5, 7, 3, 9),
        lambda: CostSpec(2, 16),
        lambda: TrainConfig("previous_token", 2, 1, 32, 16, 16, 200, 64, 1e-2, 0, "cpu"),
        lambda: MaskParams("causal"),
        lambda: Settings(2, 3, 2),
    ],
    ids=["ModuleSpec", "InputSpec", "CostSpec", "TrainConfig", "MaskParams", "Settings"],
)
def test_a_positional_construction_fails(build):
    with pytest.raises(TypeError, match="positional argument"):
        build()


def test_settings_hand_every_spec_field_on_by_name():
    settings = Settings(
        num_heads=4, d_in=5, d_out=12, num_tokens=9, context_length=11, batch_size=3, dropout=0.25, qkv_bias=True,
        seed=77, input="random", text="a b c", device="cpu", dtype="float64",
    )  # fmt: skip
    module_spec, input_spec = settings.module_spec(), settings.input_spec()
    for field in dataclasses.fields(ModuleSpec):
        assert getattr(module_spec, field.name) == getattr(settings, field.name), field.name
    assert input_spec.kind == "random"  # the one field named differently: Settings.input
    for field in dataclasses.fields(InputSpec):
        if field.name != "kind":
            assert getattr(input_spec, field.name) == getattr(settings, field.name), field.name
