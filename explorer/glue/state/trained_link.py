"""A trained layer as one URL-safe string: "Open in the explorer" links carry it as ``?trained=<spec>``. No streamlit.

Settings ⇄ URL is the glue's business, so the spec lives here, beside ``settings``. It has its own grammar
(``previous_token.heads2.layers1.d32.vocab16.len16.steps200.batch64.lr1e-2.seed0.cpu.layer0``): one spelling per
config, so one cache entry per trained model. Its regular expressions are the strict parser for that one value,
as ``settings.parse_int`` is for a plain number: unlike a URL setting, a bad spec is not clamped part by part,
it is rejected whole (``parse_trained_spec`` raises ValueError naming the part) and the page falls back to
seeded random weights with a notice.
"""

from __future__ import annotations

import numbers
import re
from decimal import Decimal

from mha_core.toy.tasks import TASKS
from mha_core.toy.tiny_training import TrainConfig, make_config

# (spec prefix, TrainConfig field, low, high). The bounds keep a URL from asking for a long run:
# the largest spec trains in about a minute on one CPU core.
SPEC_NUMBERS = (
    ("heads", "num_heads", 1, 16),
    ("layers", "num_layers", 1, 2),
    ("d", "d_model", 1, 128),
    ("vocab", "vocab_size", 2, 256),
    ("len", "seq_len", 2, 64),
    ("steps", "steps", 1, 2000),
    ("batch", "batch_size", 1, 256),
)
SPEC_MAX_SEED = 2**31 - 1
SPEC_MAX_CHARS = 200
_SPEC_INT = r"(0|[1-9][0-9]{0,9})"  # no sign, no leading zeros: one spelling per number
_SPEC_LR = r"lr([1-9][0-9]{0,16})e(0|-?[1-9][0-9]{0,2})"  # digits e exponent: 0.01 is lr1e-2
_SPEC_DEVICE = r"(cpu|cuda|cuda:(?:0|[1-9][0-9]?))"


def _spec_quote(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _format_lr(lr: float) -> str:
    """The shortest decimal that gives lr back, written without a dot: 0.01 -> "1e-2", 0.0015 -> "15e-4"."""
    _, digits, exponent = Decimal(repr(lr)).normalize().as_tuple()
    return f"lr{''.join(map(str, digits))}e{exponent}"


def format_trained_spec(config: TrainConfig, layer: int = 0) -> str:
    """One layer of a trained config as a URL-safe string, e.g.

    ``previous_token.heads2.layers1.d32.vocab16.len16.steps200.batch64.lr1e-2.seed0.cpu.layer0``

    Every field of the config is spelled out, so ``parse_trained_spec`` rebuilds an equal config
    (and so hits the same cache entry). Raises ValueError when the config or layer is outside
    what a spec may carry (``SPEC_NUMBERS``, ``SPEC_MAX_SEED``).
    """
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not 0 <= layer < config.num_layers:
        raise ValueError(f"layer must be in [0, {config.num_layers}), got {layer!r}")
    parts = [config.task]
    for prefix, name, low, high in SPEC_NUMBERS:
        value = getattr(config, name)
        if not low <= value <= high:
            raise ValueError(f"{name}={value} is outside {low}–{high}, which a trained spec can carry")
        parts.append(f"{prefix}{value}")
    if not 0 <= config.seed <= SPEC_MAX_SEED:
        raise ValueError(f"seed={config.seed} is outside 0–{SPEC_MAX_SEED}, which a trained spec can carry")
    if not re.fullmatch(_SPEC_DEVICE, config.device):
        raise ValueError(f"device {config.device!r} cannot be written in a trained spec (cpu, cuda, cuda:N)")
    parts += [_format_lr(config.lr), f"seed{config.seed}", config.device, f"layer{int(layer)}"]
    return ".".join(parts)


def parse_trained_spec(text: str) -> tuple[TrainConfig, int]:
    """(config, layer) from ``format_trained_spec``'s string; strict, since it comes from a URL.

    Raises ValueError naming the first part that is wrong: an unknown task, a missing or
    misspelled field, a number out of bounds, a config ``make_config`` rejects (for example a
    CUDA device on a machine without one), or a layer the model does not have.
    """
    if not isinstance(text, str):
        raise ValueError(f"a trained spec must be a string, got {type(text).__name__}")
    if len(text) > SPEC_MAX_CHARS:
        raise ValueError(f"trained spec is {len(text)} characters long; at most {SPEC_MAX_CHARS}")
    parts = text.split(".")
    expected = ["task", *(prefix for prefix, *_ in SPEC_NUMBERS), "lr", "seed", "device", "layer"]
    if len(parts) != len(expected):
        raise ValueError(
            f"trained spec {_spec_quote(text)} has {len(parts)} dot-separated parts, expected {len(expected)}: "
            + ".".join(expected)
        )
    task, *numbers_, lr_part, seed_part, device, layer_part = parts
    if task not in TASKS:
        raise ValueError(f"unknown task {_spec_quote(task)} in trained spec; choose one of {sorted(TASKS)}")
    values: dict[str, int] = {}
    for part, (prefix, name, low, high) in zip(numbers_, SPEC_NUMBERS, strict=True):
        values[name] = _spec_int(part, prefix, name, low, high)
    match = re.fullmatch(_SPEC_LR, lr_part)
    if match is None:
        raise ValueError(f"lr part {_spec_quote(lr_part)} is not like lr1e-2 (digits, 'e', exponent)")
    lr = float(f"{match[1]}e{match[2]}")
    seed = _spec_int(seed_part, "seed", "seed", 0, SPEC_MAX_SEED)
    if not re.fullmatch(_SPEC_DEVICE, device):
        raise ValueError(f"device {_spec_quote(device)} in trained spec is not cpu, cuda or cuda:N")
    layer = _spec_int(layer_part, "layer", "layer", 0, values["num_layers"] - 1)
    try:
        config = make_config(task, **values, lr=lr, seed=seed, device=device)
    except ValueError as error:
        raise ValueError(f"trained spec: {error}") from None
    canonical = format_trained_spec(config, layer)
    if canonical != text:  # e.g. lr10e-3 for lr1e-2: one config, one spelling, one cache entry
        raise ValueError(f"trained spec {_spec_quote(text)} is not in canonical form; expected {canonical!r}")
    return config, layer


def _spec_int(part: str, prefix: str, name: str, low: int, high: int) -> int:
    """One ``<prefix><number>`` part, or ValueError. Stricter than ``settings.parse_int`` on purpose: no sign, no
    leading zero, no clamping (one spelling per config), and it raises where parse_int corrects with a notice."""
    match = re.fullmatch(re.escape(prefix) + _SPEC_INT, part)
    if match is None:
        raise ValueError(f"expected {prefix}<number> for {name} in trained spec, got {_spec_quote(part)}")
    value = int(match[1])
    if not low <= value <= high:
        raise ValueError(f"{name}={value} in trained spec is outside {low}–{high}")
    return value


def previous_token_spec() -> str:
    """The previous-token task at its defaults (both heads learn to look one token back, about 12 s on one core):
    Step through's one click from the book's flat scores to a head with a visible pattern."""
    return format_trained_spec(make_config("previous_token"), 0)
