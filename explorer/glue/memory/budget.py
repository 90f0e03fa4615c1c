"""What each page's run adds to the server's memory at its peak, in bytes, estimated before anything is allocated.

The one budget: a job may add at most ``admission.JOB_BYTES`` at its peak. Each page's peak is dominated by its
(b, h, T, T) matrices in the run's dtype (float64 is twice float32): scores, masked scores, weights, the dropout
mask and the dropped weights in train mode, each page's extra copies (the separate heads, a temperature sweep, the
.npz file), and the float32 copies its figures are built from. So an estimate is

    need = factor(page, train with dropout?) × b·h·T² × bytes per element + the module's weights + FIXED_BYTES

with the factors measured on a real server at the production settings (``tests/server/test_memory_budget.py``
checks each estimate against the measured peak; bench/memory_report.py prints them side by side). ``fit`` lowers
batch_size, then num_tokens, until a page's estimate fits. No streamlit: settings.reconcile uses it too.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import replace
from pathlib import Path

MB = 2**20
# What stays in memory beside the jobs: a server warmed on every page (a Cost measurement, Real heads' shipped model
# and Attention variants included), and every byte cache full (caches.byte_cached). One job's estimate may be 192 MB;
# estimates are within 25% of the measured peak (tests/server/test_memory_budget.py), so WARM + CACHE + 1.25 × JOB
# = 689 MB stays under 690 (tests/pages/test_budget.py).
SMALLEST_SERVER_BYTES = 690 * MB  # Community Cloud's smallest app
# measured: harness.visits.warm_up, 377–383 MB on eight servers on 2026-12-05 (docs/memory.md, "Load phases back to
# back"); 365 before Real heads and Attention variants were in the warm-up
WARM_BYTES = 385 * MB
CACHE_BYTES = 64 * MB  # the most every byte cache together may hold (caches.TOTAL_BYTES), at 690 MB and above
JOB_BYTES = 192 * MB  # the most one job's estimate may add at its peak, at 690 MB and above (``job_bytes``)
# Below 690 MB the caches and the job shrink with the room above the warm server (``job_bytes``, ``cache_bytes``):
# the caches take CACHE_SHARE of it (64 of 305 MB at 690), at least MIN_CACHE_BYTES; one job the rest, less a quarter.
CACHE_SHARE = 0.21
MIN_CACHE_BYTES = 8 * MB
LIGHT_BYTES = 24 * MB  # a job under this (a class's settings) passes the gate without the queue, at 690 MB
MIN_JOB_BYTES = LIGHT_BYTES  # a smaller job budget runs only light work ("light only")
# Below 690 MB, what the pages running beside the heavy one add (explorer.glue.memory.crowd: two at least, 6 MB each):
# on 690 MB and more the quarter kept for an estimate's error holds it (48 MB); at 450 MB that quarter is 10 MB, and
# six of the heaviest links at once peaked 8 MB over (issue 43).
BESIDE_BYTES = 12 * MB
ESTIMATE_ERROR = 1.25  # how far a measured peak may exceed its estimate
FIXED_BYTES = 12 * MB  # what any run adds besides its matrices: Python objects, small figures, the page's messages
CROSS_TOKENS = 32  # the masks page's longest query and key lengths (mha_core.runs.teaching.MAX_CROSS_TOKENS)
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}

# Peak bytes per (b, h, T, T) cell: a × bytes per element of the run's dtype (its matrices, with train mode's dropout
# mask and dropped weights when dropout is on), + c × 4 bytes (the float32 and float64 copies its figures are built
# from, whatever the run's dtype). (a in eval or without dropout, a in train mode with dropout, c); measured at
# 8 heads × 512 tokens in float32 and float64 on a real server (README, "A class on one small server").
FACTORS: dict[str, tuple[float, float, float]] = {
    "explorer": (5.2, 7.5, 0.3),  # the trace (scores, masked, weights; dropout mask and dropped weights) + figures
    "step": (5.2, 7.5, 0.3),  # the explorer's run, one step's figures
    "follow": (5.5, 7.0, 3.0),  # the explorer's run, every head's row and the head view
    "heads": (7.0, 7.0, 15.0),  # separate heads and the batched trace, compared in float64 by the figures (eval)
    "references": (15.0, 15.0, 5.0),  # the module against torch's two references, in the dtype, float32 and float64
    "knobs": (11.7, 11.7, 7.5),  # temperature: a trace and the entropy sweep over five scales; dropout: a trace
    "masks": (8.0, 8.0, 2.0),  # cross-attention (b, h, tgt, src), explicit and fused, and the mask
    "npz": (9.0, 11.0, 0.0),  # the trace, its arrays as numpy, and the compressed file held while it is served
    "cost": (4.3, 4.3, 0.0),  # the Cost measurement at its longest length; its weights: COST_WEIGHT_COPIES
    # five traces in float32 (MHA, GQA, MQA, MLA, SWA; five matrices each, as the explorer's) and one view's figures;
    # measured at the worst link on a server of its own: +199 MB, 191 estimated (tests/server/test_memory_budget.py)
    "variants": (27.0, 27.0, 1.0),
}
# The Cost measurement's weights, per d_model² element (d_in = d_out = d_model): six copies in the run's dtype (the
# module's four matrices, nn.MultiheadAttention's copy) and nine float32 ones (initialised in float32, then cast).
# Measured: 1024 wide, +84 MB in float64 and +60 MB in float32 at T = 128; the worst link within a quarter (tests/
# test_memory_budget.py: +122 MB measured, 130 estimated in float64 at 256 tokens; +129, 141 in float32 at 512).
COST_WEIGHT_COPIES, COST_WEIGHT_FLOAT32 = 6, 9
PAGE_NAMES = {
    "explorer": "The explorer",
    "step": "Step through",
    "follow": "Follow a token",
    "heads": "Heads and references",
    "references": "Heads and references",
    "knobs": "Knobs that teach",
    "masks": "Masks and cross-attention",
    "npz": "The .npz download",
    "cost": "The Cost measurement",
    "variants": "Attention variants",
}


CGROUP_ROOT = Path("/sys/fs/cgroup")  # where cgroup v2 (unified) or v1 (memory/) is mounted
PROC_CGROUP = Path("/proc/self/cgroup")  # this process's cgroup under each hierarchy
ASCII_DIGITS = re.compile(r"[0-9]{1,20}")  # ``str.isdigit`` takes "²", which int() refuses: a crash at start-up
NO_LIMIT = 2**50  # v1 writes "no limit" as a huge number (9223372036854771712); v2 writes "max"


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip(" \t\n")
    except OSError:
        return None
    return int(text) if ASCII_DIGITS.fullmatch(text) and 0 < int(text) < NO_LIMIT else None


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per hierarchy: ``""`` for v2's unified one, ``"memory"`` for v1's memory one."""
    found = {}
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                found[controller] = parts[2].strip()
    return found


def _tightest(folder: Path, own: str, file: str) -> int | None:
    """The smallest limit from this process's cgroup up to the root (a parent's limit binds its children too)."""
    parts = [p for p in own.strip("/").split("/") if p and p != ".."]
    limits = [_read_limit(folder.joinpath(*parts[:depth], file)) for depth in range(len(parts), -1, -1)]
    found = [limit for limit in limits if limit is not None]
    return min(found) if found else None


def cgroup_limit() -> tuple[int, str] | None:
    """(bytes, which file) of this process's cgroup memory limit, v2 (``memory.max``) or v1
    (``memory.limit_in_bytes``); None where no limit is set or there are no cgroup files."""
    own = _own_cgroups()
    v2 = _tightest(CGROUP_ROOT, own.get("", "/"), "memory.max")
    if v2 is not None:
        return v2, "the container's memory limit (cgroup v2 memory.max)"
    v1 = _tightest(CGROUP_ROOT / "memory", own.get("memory", "/"), "memory.limit_in_bytes")
    if v1 is not None:
        return v1, "the container's memory limit (cgroup v1 memory.limit_in_bytes)"
    return None


def server_memory() -> tuple[int, str]:
    """(bytes this server may use, where that number comes from): ``MHA_SERVER_MB``, else this process's cgroup
    memory limit (v2 or v1), else Community Cloud's smallest app, 690 MB. Read on every call (cheap): a test or a
    deployment may change them."""
    wanted = os.environ.get("MHA_SERVER_MB", "").strip(" \t\n")
    if ASCII_DIGITS.fullmatch(wanted) and 0 < int(wanted) < NO_LIMIT // MB:
        return int(wanted) * MB, "MHA_SERVER_MB"
    limit = cgroup_limit()
    if limit is not None:
        return limit
    return SMALLEST_SERVER_BYTES, "the 690 MB default (no MHA_SERVER_MB and no cgroup memory limit)"


def server_bytes() -> int:
    """The memory this server may use (``server_memory``)."""
    return server_memory()[0]


def server_source() -> str:
    """Where ``server_bytes`` comes from, for a notice."""
    return server_memory()[1]


PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_REST = {"bytes": 0}  # the process's RSS at rest less what its caches held then (``note_rest``), measured


def note_rest(rss: int, cached: int) -> None:
    """What this process holds at rest, measured: its RSS when no page runs (after a trim) less its caches' bytes.
    A used server keeps more than a fresh warm one (glibc's free pages, imports, Streamlit's stores); the gate then
    admits less."""
    _REST["bytes"] = max(0, rss - cached)


def own_rss_bytes() -> int:
    """This process's resident memory, from /proc (0 where there is none: the baseline then stays WARM_BYTES)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return 0


def baseline_bytes() -> int:
    """What the server holds besides caches and jobs: the measured rest, at least a warm server's WARM_BYTES."""
    return max(WARM_BYTES, _REST["bytes"])


def shares(server: int, baseline: int) -> tuple[int, int]:
    """(the caches' bytes, one job's room) of a server of ``server`` bytes whose baseline holds ``baseline``: the
    caches take CACHE_SHARE of the room above the baseline (MIN_CACHE_BYTES to CACHE_BYTES), one job the rest less
    an estimate's error (at most JOB_BYTES; under MIN_JOB_BYTES the server is ``light_only``)."""
    room = server - baseline
    cache = int(min(CACHE_BYTES, max(MIN_CACHE_BYTES, CACHE_SHARE * room)))
    beside = BESIDE_BYTES if server < SMALLEST_SERVER_BYTES else 0  # pages take turns there (crowd), two at once
    return cache, min(JOB_BYTES, max(0, int((room - cache - beside) / ESTIMATE_ERROR)))


def cache_bytes() -> int:
    """What every byte cache together may hold on this server, now."""
    return shares(server_bytes(), baseline_bytes())[0]


def job_room() -> int:
    """What one job's estimate may add on this server, now (may be under MIN_JOB_BYTES: ``light_only``)."""
    return shares(server_bytes(), baseline_bytes())[1]


def job_bytes() -> int:
    """The most one job's estimate may add at its peak: 192 MB at 690 MB and above, less below, at least
    MIN_JOB_BYTES (light work runs on any server). Pages fit their settings to it."""
    return max(MIN_JOB_BYTES, job_room())


def light_bytes() -> int:
    """Jobs under this pass the gate without the queue: LIGHT_BYTES, or a quarter of one job's budget on a smaller
    server (so that light jobs at once stay within one heavy job's room)."""
    return min(LIGHT_BYTES, job_bytes() // 4)


def light_only() -> bool:
    """The server's memory leaves no room for more than light work: heavy links are fitted to MIN_JOB_BYTES and the
    pages that need more say so."""
    return job_room() < MIN_JOB_BYTES


def smallest_server_bytes(job: int = MIN_JOB_BYTES) -> int:
    """The smallest server (in MB steps) whose warm baseline leaves ``job`` to one job: MIN_JOB_BYTES runs every page
    (its heavy links fitted small); JOB_BYTES runs every link as at 690 MB."""
    server = WARM_BYTES
    while shares(server, WARM_BYTES)[1] < job:
        server += MB
    return server


def budget_words() -> str:
    """The server's memory and where it was read, for a notice: "this server's 450 MB (MHA_SERVER_MB)"."""
    server, source = server_memory()
    return f"this server's {server / MB:,.0f} MB ({source})"


def light_only_notice() -> str:
    """What a page that needs more than light work says on a light-only server: the budget, where it was read, and
    what runs."""
    return (
        f"Light pages only: {budget_words()} leaves about {job_room() / MB:.0f} MB for one run once the server's own "
        f"{baseline_bytes() / MB:.0f} MB and its caches are counted, under the {MIN_JOB_BYTES / MB:.0f} MB this page's "
        f"larger settings need. Its runs are fitted to {MIN_JOB_BYTES / MB:.0f} MB; a server of "
        f"{smallest_server_bytes() / MB:.0f} MB or more runs every page."
    )


def resident_room() -> int:
    """What a model that stays loaded may hold: the server, less its baseline, full caches and one heavy job."""
    cache, job = shares(server_bytes(), baseline_bytes())
    return server_bytes() - baseline_bytes() - cache - max(MIN_JOB_BYTES, job)


def itemsize(dtype: str) -> int:
    return ITEMSIZE.get(dtype, 4)


def matrix_bytes(batch_size: int, num_heads: int, rows: int, columns: int, dtype: str) -> int:
    """Bytes of one (b, h, rows, columns) matrix in ``dtype``."""
    return batch_size * num_heads * rows * columns * itemsize(dtype)


def module_bytes(settings) -> int:
    """Listing 3.5's weights and its causal mask buffer (context_length², one byte per element, or the dtype's)."""
    weights = 3 * settings.d_in * settings.d_out + settings.d_out * settings.d_out + 4 * settings.d_out
    return weights * itemsize(settings.dtype) + settings.context_length**2 * 4


def dropping(page: str, settings) -> bool:
    """Train mode with dropout: two more matrices (the mask and the dropped weights). Heads compares in eval mode."""
    return settings.train and settings.dropout > 0 and page not in ("heads", "references")


def cell_bytes(page: str, settings) -> float:
    """Peak bytes per (b, h, T, T) cell for ``page`` at these settings."""
    eval_factor, train_factor, figures = FACTORS[page]
    return (train_factor if dropping(page, settings) else eval_factor) * itemsize(settings.dtype) + figures * 4


def need_bytes(page: str, settings, rows: int | None = None, columns: int | None = None) -> int:
    """What ``page`` adds at its peak for these settings (rows × columns: the masks page's tgt_len × src_len)."""
    longest = CROSS_TOKENS if page == "masks" else settings.num_tokens  # the masks page has its own lengths
    rows = longest if rows is None else rows
    columns = longest if columns is None else columns
    cells = settings.batch_size * settings.num_heads * rows * columns
    return int(cell_bytes(page, settings) * cells) + module_bytes(settings) + FIXED_BYTES


def fits(page: str, settings, budget: int | None = None) -> bool:
    return need_bytes(page, settings) <= (job_bytes() if budget is None else budget)


ALSO = {"heads": "references"}  # a page whose other part runs more: fitted to both


def fitted(page: str, settings, budget: int | None = None):
    """The nearest settings whose estimate fits ``budget`` (``job_bytes()``): batch_size down first, then num_tokens.
    No notice."""
    budget = job_bytes() if budget is None else budget
    if page in ALSO:
        settings = fitted(ALSO[page], settings, budget)
    if fits(page, settings, budget):
        return settings
    cells = max(1.0, (budget - module_bytes(settings) - FIXED_BYTES) / cell_bytes(page, settings))
    per_sequence = settings.num_heads * settings.num_tokens**2
    batch = max(1, min(settings.batch_size, int(cells // per_sequence)))
    tokens = settings.num_tokens
    if batch * per_sequence > cells:
        tokens = max(1, min(tokens, math.isqrt(int(cells // (settings.num_heads * batch)))))
    s = replace(settings, batch_size=batch, num_tokens=tokens)
    while tokens > 1 and not fits(page, s, budget):  # the module's own bytes shrink too: settle exactly
        tokens -= 1
        s = replace(s, num_tokens=tokens)
    return s


def fit_notice(page: str, wanted, got) -> str:
    """One line: what the budget changed and why, in MB."""
    need = need_bytes(page, wanted) / MB
    return (
        f"{PAGE_NAMES[page]} would need about {need:,.0f} MB for batch_size={wanted.batch_size} × "
        f"{wanted.num_heads} heads × {wanted.num_tokens}² tokens in {wanted.dtype}"
        f"{' with dropout in train mode' if dropping(page, wanted) else ''}, over the "
        f"{job_bytes() / MB:.0f} MB one run may use within {budget_words()}; using batch_size={got.batch_size} "
        f"and num_tokens={got.num_tokens}."
    )


def cost_bytes(batch_size: int, num_heads: int, head_dim: int, num_tokens: int, dtype: str) -> int:
    """The Cost measurement's peak at its longest length: its (b, h, T, T) matrices and its weights."""
    cells = batch_size * num_heads * num_tokens**2
    d_model = num_heads * head_dim
    weights = (COST_WEIGHT_COPIES * itemsize(dtype) + COST_WEIGHT_FLOAT32 * 4) * d_model**2
    return int(FACTORS["cost"][0] * itemsize(dtype) * cells) + weights + FIXED_BYTES


def cost_need_bytes(spec) -> int:
    """``cost_bytes`` of a profiling.CostSpec."""
    return cost_bytes(spec.batch_size, spec.num_heads, spec.head_dim, spec.max_tokens, spec.dtype)


def cost_max_tokens(settings, wanted: int, steps) -> int:
    """The longest measured length ≤ wanted (of ``steps``) whose Cost estimate fits the budget."""
    s = settings
    room = job_bytes()
    fitting = [
        t for t in steps if t <= wanted and cost_bytes(s.batch_size, s.num_heads, s.head_dim, t, s.dtype) <= room
    ]
    return fitting[-1] if fitting else min(steps)
