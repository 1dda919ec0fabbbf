"""The configurations the documentation site trains: the seed's, or small ones in quick mode.

The gallery pages call :func:`site_config` for every model they train, so
that ``CONVS2S_EDU_QUICK=1`` shrinks the whole site at once.
"""

from __future__ import annotations

import os

from .train import TrainConfig

__all__ = ["QUICK_ENV", "is_quick_mode", "site_config"]

#: Environment variable: ``1`` makes :func:`site_config` small (quick docs builds).
QUICK_ENV = "CONVS2S_EDU_QUICK"


def is_quick_mode() -> bool:
    """True when ``$CONVS2S_EDU_QUICK`` is ``1`` (or ``true``/``yes``)."""
    return os.environ.get(QUICK_ENV, "").strip().lower() in ("1", "true", "yes")


def site_config(model: str, **changes) -> TrainConfig:
    """The configuration the gallery pages train: the seed's, or a small one in quick mode.

    Quick mode (``CONVS2S_EDU_QUICK=1``) keeps the task and the models and
    shrinks the data to 2,000 training examples and the schedule to 6 epochs,
    so the whole site builds in a few minutes on two CPU cores.
    """
    cfg = TrainConfig(model=model)
    if is_quick_mode():
        cfg = cfg.replace(n_train=2_000, n_valid=300, n_test=300, epochs=6)
    return cfg.replace(**changes)
