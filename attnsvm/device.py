"""Device selection for training: CUDA when present, else the CPU."""

from __future__ import annotations

import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str = "auto") -> torch.device:
    """Map ``"auto"`` (CUDA if available, else CPU), ``"cpu"`` or ``"cuda"`` / ``"cuda:N"``.

    Raises ValueError naming the value if it is none of these, or if CUDA is asked for but
    not available.
    """
    if not isinstance(device, str):
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    name = device.strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available")
        dev = torch.device(name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) present"
            )
        return dev
    raise ValueError(f"device must be one of {', '.join(DEVICES)} (or cuda:N), got {device!r}")


def describe_device(device: torch.device) -> str:
    """Human-readable device, e.g. ``"cpu"`` or ``"cuda:0 (NVIDIA H100 80GB HBM3)"``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)
