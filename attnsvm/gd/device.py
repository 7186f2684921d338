"""Device selection for training: CUDA when present, else the CPU."""

from __future__ import annotations

import os
import socket

import numpy as np
import torch

from attnsvm.codes import EXIT_DEVICE_UNAVAILABLE
from attnsvm.failures import DeviceUnavailableError

DEVICES = ("auto", "cpu", "cuda")
__all__ = ["DEVICES", "EXIT_DEVICE_UNAVAILABLE", "DeviceUnavailableError", "resolve_device"]


def _no_cuda_reason() -> str:
    if torch.version.cuda is None:
        return f"this torch build ({torch.__version__}) has no CUDA support"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    shown = "unset" if visible is None else repr(visible)
    return f"no CUDA device is visible (CUDA_VISIBLE_DEVICES {shown}; no GPU or no driver)"


def resolve_device(device: str = "auto") -> torch.device:
    """Map ``"auto"`` (CUDA if available, else CPU), ``"cpu"`` or ``"cuda"`` / ``"cuda:N"``.

    Raises ValueError naming the value if it is none of these, and
    :class:`DeviceUnavailableError` (one line: what was asked for, why it is missing, and
    ``device: auto`` as the way to run on the CPU) if CUDA is asked for but not available.
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
            raise DeviceUnavailableError(
                f"device {device!r} requested but CUDA is not available on "
                f"{socket.gethostname()}: {_no_cuda_reason()}; "
                "use device 'auto' to run on the CPU when there is no GPU"
            )
        dev = torch.device(name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceUnavailableError(
                f"device {device!r} requested but only {torch.cuda.device_count()} CUDA "
                f"device(s) are visible on {socket.gethostname()}"
            )
        return dev
    raise ValueError(f"device must be one of {', '.join(DEVICES)} (or cuda:N), got {device!r}")


def describe_device(device: torch.device) -> str:
    """Human-readable device, e.g. ``"cpu"`` or ``"cuda:0 (NVIDIA H100 80GB HBM3)"``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)


def to_device(a: np.ndarray, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Host array ``a`` as a tensor on ``device`` in ``dtype`` (through float64)."""
    return torch.as_tensor(np.asarray(a, dtype=np.float64)).to(device=device, dtype=dtype)
