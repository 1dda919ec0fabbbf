"""OpenMP settings that survive a busy machine, applied before PyTorch is imported.

PyTorch's CPU kernels run on OpenMP threads. By default (GNU OpenMP's
``OMP_WAIT_POLICY`` unset) a thread that finishes its share of a parallel
region *spins*, burning its core while it waits for the next region. On an idle
machine that saves a few microseconds per operation; on a machine where another
busy process shares the cores, the spinning threads fight it for the CPU and the
small operations of these models run many times slower. ``OMP_WAIT_POLICY=PASSIVE``
makes waiting threads sleep, and ``OMP_NUM_THREADS`` = the usable cores - 1 leaves
one core to whatever else runs: with every core in use, one competing process
delays one thread's share of each operation, and the whole operation with it.

OpenMP reads these variables once, when torch loads it. Every entry point (the
``convs2s-edu`` script, ``python -m convs2s_edu``, a notebook's ``import convs2s_edu``,
the docs build) imports ``convs2s_edu/__init__.py`` first and torch right after, so that
file calls :func:`apply_defaults` at its very top: no later place runs early enough. It
fills in only what the user has not set, and nothing once torch is loaded: users of the
Python API who import torch first should set ``OMP_WAIT_POLICY=PASSIVE`` (and
``OMP_NUM_THREADS``) themselves (see the README).

This module imports only :mod:`os`, :mod:`sys` and :mod:`convs2s_edu._machine`, so that
importing it cannot load torch.
"""

from __future__ import annotations

import os
import sys

from ._machine import usable_cores

__all__ = ["THREAD_DEFAULTS", "apply_defaults"]


def _default_threads() -> str:
    """One core fewer than this process may use (at least one), as a string."""
    return str(max(1, usable_cores() - 1))


#: Environment variables set (unless already set) before torch is loaded: waiting
#: threads sleep, and one core is left to the rest of the machine
#: (``tools/thread_options.py``).
THREAD_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": _default_threads()}


def apply_defaults(environ=None) -> dict:
    """Set :data:`THREAD_DEFAULTS` in ``environ`` (default :data:`os.environ`) where
    unset.

    Returns
    -------
    dict
        The variables this call set (empty when the user had set them all, or
        when torch is already imported and setting them would change nothing).
    """
    environ = os.environ if environ is None else environ
    if environ is os.environ and "torch" in sys.modules:
        return {}  # too late: the OpenMP runtime has read its environment already
    done = {key: value for key, value in THREAD_DEFAULTS.items() if key not in environ}
    environ.update(done)
    return done
