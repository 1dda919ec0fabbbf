"""The one device helper: which device a name means, how to name it, where a run
trained, waiting for it, and the machine's folder for trained runs (:func:`cache_dir`)."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path

import numpy as np
import torch

from .._machine import cpu_flags, cpu_model

__all__ = [
    "resolve_device",
    "device_label",
    "provenance",
    "synchronize",
    "CACHE_ENV",
    "cache_dir",
    "MACHINE_KEYS",
]

#: Environment variable: directory of the training cache (default
#: ``~/.cache/convs2s_edu``).
CACHE_ENV = "CONVS2S_EDU_CACHE"

#: The CPU flags a record names beside the model: the vector and matrix units whose
#: kernels PyTorch picks at run time (so two CPUs of one model name may still differ).
_NAMED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else the CPU; ``"cpu"``, ``"cuda"``,
    ``"cuda:N"``.

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
        raise ValueError(
            f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}"
        )
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device {device!r} asked for, but CUDA is not available on this machine"
        )
    return dev


def device_label(device: str | torch.device) -> str:
    """``"cpu"``, or ``"cuda (<GPU name>)"``: how a history or a measurement names its device."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type


#: The :func:`provenance` keys that make two runs' arithmetic the same, path apart: the
#: device, the CPU and the kernels PyTorch picked on it, the threads and torch's
#: version.
MACHINE_KEYS = ("device", "cpu", "cpu_kernels", "threads", "torch")


def provenance(device: str | torch.device, path: str) -> dict:
    """Where and how a run trains, for its history and the experiment record: the
    device, the CPU's model, its vector units (the flags of ``_NAMED_FLAGS`` it has, and
    the kernels PyTorch chose), PyTorch's threads, the execution ``path``, the torch,
    Python and numpy versions, the host and process (a cluster may mix machines) and the
    date (UTC)."""
    return {
        "device": device_label(device),
        "cpu": cpu_model(),
        "cpu_flags": [f for f in _NAMED_FLAGS if f in cpu_flags()],
        "cpu_kernels": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "path": path,
        # a str: torch.load(weights_only=True) reads it
        "torch": str(torch.__version__),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "worker": f"{platform.node()}:{os.getpid()}",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
    }


def synchronize(device: str | torch.device) -> None:
    """Wait for the queued kernels of a CUDA ``device`` (a no-op on the CPU): read a
    clock only after this, or it stops while the GPU is still working."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cache_dir() -> Path:
    """The folder of the training cache (:mod:`convs2s_edu.training.cache`) and of the
    machine's choices of path (:mod:`convs2s_edu.training.calibrate`):
    ``$CONVS2S_EDU_CACHE``, else ``$XDG_CACHE_HOME/convs2s_edu``, else
    ``~/.cache/convs2s_edu``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "convs2s_edu"
