"""Record every intermediate of one forward pass, from the module's own code path.

``trace_forward(module, *inputs, **kwargs)`` calls ``module(*inputs, recorder=r, **kwargs)``.
The module hands each intermediate to the recorder as it computes it, so the trace is not
a re-implementation: ``trace.output`` is bitwise ``module(*inputs)`` (in eval mode).
The trace is returned, never stored on the module, so a module can be shared by sessions.
"""

from __future__ import annotations

import linecache
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import torch


@dataclass(frozen=True, kw_only=True)
class StepInfo:
    """What a step holds and where it was computed."""

    description: str
    source: str  # the line of the module's source that produced the tensor
    filename: str
    lineno: int
    shape: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class Trace:
    output: torch.Tensor
    steps: Mapping[str, torch.Tensor]  # step name -> tensor, in data-flow order
    info: Mapping[str, StepInfo]

    def numpy(self, name: str) -> np.ndarray:
        """A step as a CPU numpy array (float32 for half-precision dtypes numpy lacks)."""
        tensor = self.steps[name].detach()
        if tensor.dtype in (torch.bfloat16, torch.float16):
            tensor = tensor.float()
        return tensor.cpu().numpy()

    def to_npz_dict(self) -> dict[str, np.ndarray]:
        """Every step under its own name, ready for ``np.savez``."""
        return {name: self.numpy(name) for name in self.steps}


class _Recorder:
    def __init__(self):
        self.steps: dict[str, torch.Tensor] = {}
        self.info: dict[str, StepInfo] = {}

    def __call__(self, name: str, tensor: torch.Tensor, description: str) -> torch.Tensor:
        frame = sys._getframe(1)  # the line that computed `tensor` and passed it here
        source = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        self.steps[name] = tensor.detach()
        self.info[name] = StepInfo(
            description=description,
            source=source,
            filename=frame.f_code.co_filename,
            lineno=frame.f_lineno,
            shape=tuple(tensor.shape),
        )
        return tensor


def trace_forward(module: torch.nn.Module, *inputs, **kwargs) -> Trace:
    """Run ``module`` once and return its output with every intermediate, by name."""
    recorder = _Recorder()
    with torch.no_grad():
        output = module(*inputs, recorder=recorder, **kwargs)
    return Trace(output=output, steps=MappingProxyType(recorder.steps), info=MappingProxyType(recorder.info))
