"""Which devices and dtypes this machine can run the modules on."""

from __future__ import annotations

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def available_devices() -> list[str]:
    """cpu always; cuda and mps when torch sees them. Devices not present are not listed."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    return devices


def available_dtypes(device: str) -> list[str]:
    """float32 and float64 everywhere; the half-precision dtypes on GPUs, where they are fast.

    mps has no float64, so it is left out there.
    """
    if device == "cpu":
        return ["float32", "float64"]
    if device == "mps":
        return ["float32", "float16", "bfloat16"]
    return ["float32", "float64", "float16", "bfloat16"]


def resolve(device: str, dtype: str) -> tuple[torch.device, torch.dtype]:
    """Turn names into torch objects, raising a ValueError that names what is available."""
    devices = available_devices()
    if device not in devices:
        raise ValueError(f"device {device!r} is not available here; available: {devices}")
    dtypes = available_dtypes(device)
    if dtype not in dtypes:
        raise ValueError(f"dtype {dtype!r} is not offered on {device}; offered: {dtypes}")
    return torch.device(device), DTYPES[dtype]
