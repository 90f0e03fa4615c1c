"""What a session must see for its own link: its URL's settings, its attention shape, and mha_core's own numbers.

Every rerun is checked for cross-talk: the URL the server wrote back parses to this session's own settings, the
captions carry this session's attention shape (b, h, T, T), and the numbers of the "Final output" figure (or the
attention weights) equal an independent ``mha_core`` computation (module built from the settings, plain forward).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from urllib.parse import parse_qs

import numpy as np
import torch

from explorer.glue.state import settings as cfg
from explorer.glue.state.settings import Settings
from explorer.views.figures import decode_array
from harness.session import RunResult
from mha_core.runs import forward as runs


def shown_output(figure: dict) -> np.ndarray | None:
    """The exact numbers of a figure's heads stacked (h, i, j): the "Final output" or the attention weights;
    None when they were downsampled to uint8 codes."""
    traces = [t for t in figure["data"] if (t.get("meta") or {}).get("role") == "values"]
    if not traces:
        return None
    traces.sort(key=lambda t: t["meta"].get("head", 0))
    heads = [decode_array(t["z"]) for t in traces]
    if any(z.dtype.kind != "f" for z in heads):
        return None
    return np.stack(heads)


_EXPECTED: dict[tuple[Settings, int], np.ndarray] = {}
_EXPECTED_LOCK = threading.Lock()


def expected_output(settings: Settings, batch_index: int = 0) -> np.ndarray:
    """output[batch_index] (T, d_out) from mha_core alone: the module built from the settings, a plain forward."""
    key = (settings, batch_index)
    with _EXPECTED_LOCK:
        if key not in _EXPECTED:
            module = runs.build_module(settings.module_spec())
            x, _ = runs.build_input(settings.input_spec())
            weight = module.W_query.weight
            with torch.no_grad():
                output = module(x.to(device=weight.device, dtype=weight.dtype))  # (b, T, d_out)
            _EXPECTED[key] = output[batch_index].float().cpu().numpy()[None]  # (1, T, d_out)
        return _EXPECTED[key]


def expected_weights(settings: Settings, batch_index: int = 0) -> np.ndarray:
    """attn_weights[batch_index] (h, T, T) from mha_core's own trace (blocked keys weigh exactly 0)."""
    module = runs.build_module(settings.module_spec())
    x, _ = runs.build_input(settings.input_spec())
    return runs.run_trace(module, x, train=False, seed=settings.seed).numpy("attn_weights")[batch_index]


def settings_from_query(query_string: str) -> Settings:
    params = {k: v for k, v in parse_qs(query_string, keep_blank_values=True).items() if k in cfg.FIELD_NAMES}
    return cfg.parse_query(params)[0]


@dataclass
class Check:
    """One rerun's verdict on cross-talk."""

    url_ok: bool
    shape_ok: bool
    numbers: str  # "equal", "different", "not shown"

    @property
    def cross_talk(self) -> bool:
        return not self.url_ok or not self.shape_ok or self.numbers == "different"


def check_run(result: RunResult, expected: Settings) -> Check:
    url_ok = result.query_string is None or settings_from_query(result.query_string) == expected
    b, h, t = expected.batch_size, expected.num_heads, expected.num_tokens
    shapes = (f"({b}, {h}, {t}, {t})", f"({b}, {h}, {t}, {expected.head_dim})")  # attention or reshapes section
    shape_ok = any(shape in text for text in result.texts for shape in shapes)
    numbers = "not shown"
    for key, expect in (("chart_output", expected_output), ("chart_attn_weights", expected_weights)):
        shown = shown_output(result.charts[key]) if key in result.charts else None
        if shown is not None:
            want = expect(expected)
            same = shown.shape == want.shape and np.allclose(shown, want, rtol=1e-5, atol=1e-6, equal_nan=True)
            numbers = "equal" if same and numbers != "different" else "different"
    return Check(url_ok, shape_ok, numbers)


def session_query(index: int) -> dict[str, str]:
    """Session ``index``'s own link: small, distinct settings, so numbers tell the sessions apart."""
    heads = 1 + index % 4
    head_dim = 2 + index % 3
    return {
        "num_heads": str(heads),
        "d_out": str(heads * head_dim),
        "num_tokens": str(4 + (index * 7) % 29),
        "d_in": str(4 + index % 5),
        "batch_size": str(1 + index % 2),
        "input": "random",
        "seed": str(1000 + index),
        "section": "reshapes" if index % 2 else "attention",  # the page draws and sends only the open section
    }


def big_query() -> dict[str, str]:
    """16 heads × 512 tokens (4 × 16 MiB attention matrices), with a seed nobody else uses: the cache can't answer."""
    return {
        "num_heads": "16",
        "d_out": "256",
        "num_tokens": "512",
        "batch_size": "1",
        "input": "random",
        "d_in": "16",
        "seed": str(random.randrange(10**6, 10**7)),
    }
