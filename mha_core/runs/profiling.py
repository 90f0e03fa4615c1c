"""What attention costs as the sequence grows: time and peak memory of four ways to run one module. Torch only.

The four variants share one module's weights and one input (b, T, E), with E = d_in = d_out = h · head_dim:

* ``explicit``: ``MultiHeadAttention.forward`` (Listing 3.5). It materialises four (b, h, T, T) matrices (the book's
  in-place ``masked_fill_`` keeps three):
  scores, masked scores, scaled scores and weights.
* ``traced``: ``trace_forward`` of the same module: the same forward, with every step kept in the trace.
* ``sdpa``: ``reference.sdpa_forward``: the module's projections, attention by ``F.scaled_dot_product_attention``.
* ``torch_mha``: ``nn.MultiheadAttention`` with the weights copied in (``reference.to_torch_mha``), causal mask,
  ``need_weights=False``.

One (b, h, T, T) matrix holds b · h · T² numbers: ``attention_matrix_bytes`` = b · h · T² · bytes per number.

How memory is measured (inputs and weights, which exist before the call, are not counted):

* CUDA: ``torch.cuda.max_memory_allocated()`` during the call, less what was allocated before it. This is every
  byte the caching allocator handed out, kernel workspaces included.
* CPU: torch keeps no allocator statistics on the CPU. ``LiveTensorBytes``, a ``TorchDispatchMode``, sees every
  tensor each torch operation returns, counts its storage's bytes once, and subtracts them when the last tensor
  on that storage is freed; the peak of that count over the call is reported. It sees every tensor an operation
  hands back (also those nn.MultiheadAttention makes in its Python code), but not scratch memory that one fused
  kernel allocates and frees inside itself, such as the key/value blocks of SDPA's flash kernel. That kernel
  never holds a (T, T) matrix, which is why its curve grows like T, not T².

Timings are medians over a few calls after a warm-up. Measurements in one process never overlap (a lock), so
two visitors' measurements neither slow each other down nor add up their peaks.
"""

from __future__ import annotations

import statistics
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from mha_core import devices
from mha_core.attention import masks
from mha_core.attention.modules import Trace, trace_forward
from mha_core.attention.reference import sdpa_forward, to_torch_mha
from mha_core.runs import forward as runs

VARIANTS: dict[str, str] = {
    "explicit": "MultiHeadAttention (Listing 3.5)",
    "traced": "trace_forward (every step kept)",
    "sdpa": "F.scaled_dot_product_attention",
    "torch_mha": "torch.nn.MultiheadAttention",
}
TOKEN_STEPS = (16, 32, 64, 128, 256, 512, 1024)  # num_tokens measured: doubling, so a log-log plot spaces them evenly
ATTENTION_STEPS = ("attn_scores", "masked_scores", "scaled_scores", "attn_weights")  # the (b, h, T, T) steps


def attention_cells(batch: int, heads: int, rows: int, columns: int | None = None) -> int:
    """Numbers in one (b, h, rows, columns) attention matrix (b · h · T² when columns is None): memory grows with it."""
    return batch * heads * rows * (rows if columns is None else columns)


def attention_matrix_bytes(batch: int, heads: int, tokens: int, dtype: torch.dtype | str) -> int:
    """Bytes of one (b, h, T, T) attention matrix: b · h · T² · bytes per number."""
    if isinstance(dtype, str):
        dtype = devices.DTYPES[dtype]
    return attention_cells(batch, heads, tokens) * torch.empty((), dtype=dtype).element_size()


def trace_matrix_bytes(trace: Trace) -> dict[str, int]:
    """Bytes of each (b, h, T, T) step the trace holds, as the tensors report them (numel · element size)."""
    return {
        name: trace.steps[name].numel() * trace.steps[name].element_size()
        for name in ATTENTION_STEPS
        if name in trace.steps
    }


def token_counts(max_tokens: int, min_tokens: int = 64) -> list[int]:
    """The doubling sequence lengths from min_tokens up to max_tokens (at least one)."""
    counts = [t for t in TOKEN_STEPS if min_tokens <= t <= max_tokens]
    return counts or [max(1, min(max_tokens, min_tokens))]


class LiveTensorBytes(TorchDispatchMode):
    """Peak bytes of tensor storages created by torch operations while the mode is active (CPU accounting).

    A storage is counted when an operation first returns a tensor on it that did not exist among the operation's
    inputs, and uncounted when the last tensor object seen on it is freed. Views and in-place results of tensors
    made before the mode started (inputs, weights) are not counted.
    """

    def __init__(self):
        super().__init__()
        self._live: dict[int, list[int]] = {}  # storage data_ptr -> [bytes, tensors seen alive on it]
        self.current = 0
        self.peak = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Nothing is compiled inside this mode: without this, torch wraps ``__torch_dispatch__`` in
        ``torch._disable_dynamo``, whose first call imports torch._dynamo and sympy (805 modules, +81 MB kept)."""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {_storage_key(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self._see(tensor, inputs)
        return out

    def _see(self, tensor: torch.Tensor, inputs: set[int]) -> None:
        key = _storage_key(tensor)
        if not key:
            return
        entry = self._live.get(key)
        if entry is None:
            if key in inputs:  # a view or in-place result of a tensor that existed before counting began
                return
            entry = self._live[key] = [tensor.untyped_storage().nbytes(), 0]
            self.current += entry[0]
            self.peak = max(self.peak, self.current)
        entry[1] += 1
        weakref.finalize(tensor, self._release, key)

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self._live[key]


def _storage_key(tensor: torch.Tensor) -> int:
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # tensors without storage (sparse, meta) cost nothing here
        return 0
    return storage.data_ptr() if storage.nbytes() else 0


def peak_bytes(call: Callable[[], object], device: torch.device) -> int:
    """Peak bytes allocated during call() above what was allocated before it (see the module docstring)."""
    with torch.no_grad():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
            result = call()
            torch.cuda.synchronize(device)
            del result
            return torch.cuda.max_memory_allocated(device) - before
        with LiveTensorBytes() as counter:
            result = call()
            del result
        return counter.peak


def median_seconds(call: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median wall time of call() over `repeats` calls, after one warm-up call."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    times = []
    with torch.no_grad():
        call()
        for _ in range(max(1, repeats)):
            sync()
            begin = time.perf_counter()
            call()
            sync()
            times.append(time.perf_counter() - begin)
    return statistics.median(times)


@dataclass(frozen=True, kw_only=True)
class CostSpec:
    """What to measure: the module's shape, where, and how long at most."""

    num_heads: int = 2
    head_dim: int = 16
    batch_size: int = 1
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 123
    max_tokens: int = 512
    min_tokens: int = 64
    repeats: int = 3
    time_budget_s: float = 30.0  # stop before a sequence length that would take longer than what is left

    @property
    def d_model(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def tokens(self) -> list[int]:
        """The sequence lengths this spec measures: the page's formula and the measurement read the same list."""
        return token_counts(self.max_tokens, self.min_tokens)


@dataclass(frozen=True, kw_only=True)
class CostPoint:
    variant: str
    num_tokens: int
    seconds: float  # median of spec.repeats calls
    peak_bytes: int  # see the module docstring for how, per device
    matrix_bytes: int  # one (b, h, T, T) matrix by the formula b · h · T² · bytes


@dataclass(frozen=True, kw_only=True)
class CostReport:
    spec: CostSpec
    points: list[CostPoint]
    skipped: list[int] = field(default_factory=list)  # sequence lengths left out to stay within the time budget
    trace_bytes: dict[str, int] = field(default_factory=dict)  # the traced (b, h, T, T) steps at the longest T
    seconds: float = 0.0

    def tokens(self) -> list[int]:
        return sorted({p.num_tokens for p in self.points})

    def series(self, what: str) -> dict[str, list[float]]:
        """variant -> values over tokens(); what is "seconds" or "peak_bytes"."""
        found: dict[str, list[float]] = {}
        for variant in VARIANTS:
            points = sorted((p for p in self.points if p.variant == variant), key=lambda p: p.num_tokens)
            if points:
                found[variant] = [float(getattr(p, what)) for p in points]
        return found


_MEASURING = threading.Lock()  # one measurement at a time in this process


def variant_calls(module, x: torch.Tensor) -> dict[str, Callable[[], object]]:
    """The four forwards as zero-argument calls on x (b, T, E), keyed as VARIANTS."""
    torch_mha = to_torch_mha(module)
    blocked = masks.to_blocked(masks.causal(x.shape[1], device=x.device))  # (T, T), True = blocked, torch's way
    return {
        "explicit": lambda: module(x),
        "traced": lambda: trace_forward(module, x),
        "sdpa": lambda: sdpa_forward(module, x),
        "torch_mha": lambda: torch_mha(x, x, x, attn_mask=blocked, need_weights=False)[0],
    }


def _measured_module(spec: CostSpec, context_length: int):
    """The one module every variant runs: E = d_in = d_out = h · head_dim, seeded, on the spec's device and dtype."""
    module_spec = runs.ModuleSpec(
        d_in=spec.d_model,
        d_out=spec.d_model,
        context_length=context_length,
        num_heads=spec.num_heads,
        seed=spec.seed,
        device=spec.device,
        dtype=spec.dtype,
    )
    return runs.build_module(module_spec)


def measure(
    spec: CostSpec,
    variants: Sequence[str] = tuple(VARIANTS),
    progress: Callable[[float, str], None] | None = None,
    wait_s: float = 120.0,
) -> CostReport:
    """Time and peak memory of each variant at each sequence length in token_counts(spec.max_tokens).

    Lengths run from short to long. Before each one, its time is predicted from the last (×4: T² work); lengths
    that would overrun ``spec.time_budget_s`` are skipped and listed. Raises TimeoutError when another
    measurement holds the lock for longer than ``wait_s``.
    """
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    tokens = spec.tokens
    device, dtype = devices.resolve(spec.device, spec.dtype)
    if not _MEASURING.acquire(timeout=wait_s):
        raise TimeoutError("another measurement is running; try again in a minute")
    try:
        begin = time.perf_counter()
        module = _measured_module(spec, context_length=tokens[-1])
        generator = torch.Generator().manual_seed(spec.seed)
        points: list[CostPoint] = []
        skipped: list[int] = []
        trace_bytes: dict[str, int] = {}
        last_seconds = 0.0
        for index, num_tokens in enumerate(tokens):
            elapsed = time.perf_counter() - begin
            if index and elapsed + 4 * last_seconds > spec.time_budget_s:
                skipped = tokens[index:]
                break
            started = time.perf_counter()
            x = torch.rand(spec.batch_size, num_tokens, spec.d_model, generator=generator)  # (b, T, E)
            x = x.to(device=device, dtype=dtype)
            calls = variant_calls(module, x)
            formula = attention_matrix_bytes(spec.batch_size, spec.num_heads, num_tokens, dtype)
            for k, variant in enumerate(variants):
                if progress is not None:
                    done = (index + k / len(variants)) / len(tokens)
                    progress(done, f"{VARIANTS[variant]} at {num_tokens} tokens")
                seconds = median_seconds(calls[variant], device, spec.repeats)
                peak = peak_bytes(calls[variant], device)
                points.append(
                    CostPoint(
                        variant=variant, num_tokens=num_tokens, seconds=seconds, peak_bytes=peak, matrix_bytes=formula
                    )
                )
            with torch.no_grad():
                trace_bytes = trace_matrix_bytes(trace_forward(module, x))
            del calls, x
            last_seconds = time.perf_counter() - started
        if progress is not None:
            progress(1.0, "done")
        return CostReport(
            spec=spec, points=points, skipped=skipped, trace_bytes=trace_bytes, seconds=time.perf_counter() - begin
        )
    finally:
        _MEASURING.release()
