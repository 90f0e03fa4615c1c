"""Seeded work on torch's global RNG, one thread at a time.

torch has one global RNG per process, and Streamlit runs every session in a thread of one
process. ``nn.Linear`` initialises from that RNG (no generator can be passed), so two sessions
seeding and building modules at the same moment can swap each other's weights. Every use of the
global RNG in this package goes through ``seeded``: it holds a process-wide lock, seeds, and
restores the caller's RNG state afterwards.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

GLOBAL_RNG_LOCK = threading.RLock()


@contextlib.contextmanager
def seeded(seed: int | None, device: torch.device | str | None = None) -> Iterator[None]:
    """Seed the global RNG for the block (None: leave it as it is), then restore it; one thread at a time."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    cuda = [device.index or 0] if device.type == "cuda" else []
    with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=cuda):
        if seed is not None:
            torch.manual_seed(seed)
        yield
