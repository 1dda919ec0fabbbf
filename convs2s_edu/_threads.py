"""OpenMP settings that survive a busy machine, applied before PyTorch is imported.

PyTorch's CPU kernels run on OpenMP threads. By default (GNU OpenMP's
``OMP_WAIT_POLICY`` unset) a thread that finishes its share of a parallel
region *spins*, burning its core while it waits for the next region. On an idle
machine that saves a few microseconds per operation; on a machine where another
busy process shares the cores, the spinning threads fight it for the CPU and the
small operations of these models run 10-50 times slower, by different amounts
for the two models. ``OMP_WAIT_POLICY=PASSIVE`` makes waiting threads sleep,
and ``OMP_NUM_THREADS`` = the usable cores - 1 leaves one core to whatever
else runs: with every core in use, one competing process delays one thread's
share of each operation, and the whole operation with it.

OpenMP reads the variable once, when the runtime is loaded, i.e. at
``import torch``. :func:`apply_defaults` is therefore called at the very top of
``convs2s_edu/__init__.py``, before anything imports torch; it only fills in
variables the user has not set (:meth:`dict.setdefault`) and has no effect when
torch was imported before ``convs2s_edu``. Users of the Python API who import
torch first should set ``OMP_WAIT_POLICY=PASSIVE`` (and ``OMP_NUM_THREADS``)
in the environment themselves (see the README).

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


#: Environment variables set (unless already set) before torch is loaded: waiting threads
#: sleep, and one core is left to the rest of the machine (measured on 2 cores,
#: ``tools/thread_options.py``: one thread was as fast as two sleeping ones for ConvS2S,
#: faster for the GRU, and unaffected by a competing busy process).
THREAD_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": _default_threads()}


def apply_defaults(environ=None) -> dict:
    """Set :data:`THREAD_DEFAULTS` in ``environ`` (default :data:`os.environ`) where unset.

    Returns
    -------
    dict
        The variables this call set (empty when the user had set them all, or
        when torch is already imported and setting them would change nothing).
    """
    environ = os.environ if environ is None else environ
    if environ is os.environ and "torch" in sys.modules:
        return {}  # too late: the OpenMP runtime has read its environment already
    done = {}
    for key, value in THREAD_DEFAULTS.items():
        if key not in environ:
            environ[key] = value
            done[key] = value
    return done
