"""Process-wide settings for the app server, made once at start-up, before any session runs.

A Streamlit server is one Python process whose sessions are threads, on at most 2 CPUs here and on Community Cloud.
torch's thread pools belong to the process, so no session may change them (a session that did would change them
for everyone running at that moment). They are set here, once: one intra-op thread per op, because concurrent
sessions already keep both CPUs busy (torch releases the GIL inside its ops), and OpenMP threads of different
sessions spinning against each other on 2 CPUs cost far more than they win. Measured on this project's 2-core
machine, a traced forward at 8 heads × 512 tokens is no faster on 2 threads (61 vs 68 ms).
"""

from __future__ import annotations

import contextlib
import threading

import torch

INTRA_OP_THREADS = 1
INTER_OP_THREADS = 1

_done = threading.Lock()
_configured = False


def configure_torch() -> None:
    """Set torch's thread pools for the server; later calls do nothing."""
    global _configured
    with _done:
        if _configured:
            return
        torch.set_num_threads(INTRA_OP_THREADS)
        # Once inter-op work has run in the process (a test run), the pool can no longer change: it stays.
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(INTER_OP_THREADS)
        _configured = True
