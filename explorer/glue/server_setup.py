"""Process-wide settings for the app server, made once at start-up, before any session runs.

Two of them, both because a Streamlit server is one process whose sessions are threads sharing one interpreter:

1. torch's thread pools (below).
2. The start-up heap is frozen out of the garbage collector. Streamlit runs a full ``gc.collect()`` after every
   script run (``runner.postScriptGC``); with torch, plotly and Streamlit imported that walks about 220,000
   long-lived objects, 100 ms holding the GIL every session needs. It was 43% of the server's CPU under the class
   load test. ``gc.freeze()`` after the imports moves those objects to a generation the collector never scans, so
   the collection after a rerun only looks at what the rerun made (well under 1 ms). The frozen objects are modules,
   classes and functions that live as long as the process anyway.

A Streamlit server is one Python process whose sessions are threads, on at most 2 CPUs here and on Community Cloud.
torch's thread pools belong to the process, so no session may change them (a session that did would change them
for everyone running at that moment). They are set here, once: one intra-op thread per op, because concurrent
sessions already keep both CPUs busy (torch releases the GIL inside its ops), and OpenMP threads of different
sessions spinning against each other on 2 CPUs cost far more than they win. Measured on this project's 2-core
machine, a traced forward at 8 heads × 512 tokens is no faster on 2 threads (61 vs 68 ms).
"""

from __future__ import annotations

import contextlib
import gc
import threading

import torch

INTRA_OP_THREADS = 1
INTER_OP_THREADS = 1

_done = threading.Lock()
_configured = False


def configure_process() -> None:
    """Set torch's thread pools and freeze the start-up heap; later calls do nothing."""
    global _configured
    with _done:
        if _configured:
            return
        torch.set_num_threads(INTRA_OP_THREADS)
        # Once inter-op work has run in the process (a test run), the pool can no longer change: it stays.
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(INTER_OP_THREADS)
        _import_what_every_page_uses()
        gc.collect()
        gc.freeze()
        _configured = True


def _import_what_every_page_uses() -> None:
    """The long-lived modules every page needs, imported before the freeze so that their objects are frozen too.

    Not pandas: only two pages use it, and it adds 64 MB to the server (measured), which the 690 MB budget needs.
    """
    import plotly.graph_objects  # noqa: F401

    from ..views import attention_explorer, figures  # noqa: F401


configure_torch = configure_process  # the name the tests and benches know
