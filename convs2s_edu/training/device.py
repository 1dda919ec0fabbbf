"""The one device helper: which device a name means, how to name it, and waiting for it."""

from __future__ import annotations

import torch

__all__ = ["resolve_device", "device_label", "synchronize"]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else the CPU; ``"cpu"``, ``"cuda"``, ``"cuda:N"``.

    Raises
    ------
    ValueError
        For an unknown name, or for CUDA on a machine without it.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):  # not a device name
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available on this machine")
    return dev


def device_label(device: str | torch.device) -> str:
    """``"cpu"``, or ``"cuda (<GPU name>)"``: how a history or a measurement names its device."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type


def synchronize(device: str | torch.device) -> None:
    """Wait for the queued kernels of a CUDA ``device`` (a no-op on the CPU): read a clock
    only after this, or it stops while the GPU is still working."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
