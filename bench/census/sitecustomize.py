"""A memory census inside a running server, for bench/idle_census.py: what holds RSS once a class has left.

Python imports ``sitecustomize`` at start-up from the path, so a server started with this folder on PYTHONPATH and
``MHA_CENSUS_REQUEST`` set (a file name) runs one daemon thread that waits for that file. The file holds where to
write the census, optionally followed by ``+collect`` (a full collection and ``malloc_trim`` first). The app never
imports this; only that server has it. The census (JSON): RSS by kind of mapping, glibc's heap (``mallinfo2``: in
use, free, arenas from ``malloc_info``), Python's allocated blocks, gc-tracked objects by type, live torch tensors,
Streamlit's sessions (connected, stored).
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REQUEST = os.environ.get("MHA_CENSUS_REQUEST")
FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")


class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS]


def rss_by_mapping() -> dict[str, float]:
    """RSS (MB) of anonymous memory, the brk heap, shared libraries and other files, from /proc/self/smaps."""
    totals: collections.Counter = collections.Counter()
    kind = "anon"
    for line in Path("/proc/self/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and not parts[0].endswith(":"):
            name = parts[5] if len(parts) > 5 else ""
            kind = name if name.startswith("[") else "anon" if not name else "so" if ".so" in name else "file"
        elif parts and parts[0] == "Rss:":
            totals[kind] += int(parts[1])
    return {key: round(kb / 1024, 1) for key, kb in totals.most_common()}


def glibc_heap(libc) -> dict[str, float]:
    info = libc.mallinfo2()
    with tempfile.NamedTemporaryFile("w+", suffix=".xml") as xml:
        handle = libc.fopen(xml.name.encode(), b"w")
        libc.malloc_info(0, handle)
        libc.fclose(handle)
        arenas = Path(xml.name).read_text().count("<heap nr=")
    return {"in_use_mb": round(info.uordblks / 2**20, 1), "free_mb": round(info.fordblks / 2**20, 1), "arenas": arenas}


def sessions() -> dict[str, int]:
    from streamlit import runtime

    if not runtime.exists():
        return {}
    manager = runtime.get_instance()._session_mgr
    stored = getattr(getattr(getattr(manager, "_session_storage", None), "_cache", None), "_data", {})
    return {"connected": manager.num_active_sessions(), "stored_incl_expired": len(stored)}


def census(collect: bool) -> dict:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    if collect:
        gc.collect()
        libc.malloc_trim(0)
    objects = gc.get_objects()
    by_type = collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in objects)
    import torch

    tensors = [o for o in objects if isinstance(o, torch.Tensor)]
    result = {
        "rss_mb_by_mapping": rss_by_mapping(),
        "glibc": glibc_heap(libc),
        "python_blocks": sys.getallocatedblocks(),
        "gc_objects": len(objects),
        "top_types": dict(by_type.most_common(12)),
        "torch_tensors": len(tensors),
        "torch_tensor_mb": round(sum(t.element_size() * t.nelement() for t in tensors) / 2**20, 1),
        "sessions": sessions(),
    }
    del objects, tensors
    return result


def _watch(request: Path) -> None:
    while True:
        time.sleep(0.5)
        if not request.exists():
            continue
        target = request.read_text().strip()
        request.unlink()
        collect = target.endswith("+collect")
        target = target.removesuffix("+collect")
        try:
            Path(target).write_text(json.dumps(census(collect)))
        except Exception as exc:  # noqa: BLE001 - the caller waits for an answer, an error is one
            Path(target).write_text(json.dumps({"error": repr(exc)}))


if REQUEST and "app.py" in sys.argv:
    threading.Thread(target=_watch, args=(Path(REQUEST),), name="mha-census", daemon=True).start()
