"""The machine, read with the standard library only: the CPU's model and flags, the usable cores.

Only :mod:`os` and :mod:`platform` are imported, so that the OpenMP defaults
(:mod:`convs2s_edu._threads`, before torch loads) and the build's timer
(``tools/timed.py``, which loads this file by its path) can use it too.
"""

from __future__ import annotations

import os
import platform

__all__ = ["cpu_model", "cpu_flags", "usable_cores"]


def _cpuinfo_value(keys: tuple[str, ...]) -> str | None:
    """The first value of a line of ``/proc/cpuinfo`` whose key is one of ``keys``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in keys and value.strip():
                    return value
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The CPU's model name: ``/proc/cpuinfo``'s ``model name`` (Linux), else
    ``platform.processor()``, else ``platform.machine()``, else ``"unknown CPU"``."""
    value = _cpuinfo_value(("model name", "Model", "Hardware"))
    if value:
        return " ".join(value.split())
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_flags() -> set[str]:
    """The CPU's feature flags (``/proc/cpuinfo``'s ``flags``; empty where there is none)."""
    return set((_cpuinfo_value(("flags",)) or "").split())


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
