"""The documentation site's plumbing: its configurations (quick mode) and the numbers it records.

The gallery pages call :func:`site_config` for every model they train, so
that ``CONVS2S_EDU_QUICK=1`` shrinks the whole site at once; a page that
measures a number the landing page states hands it to :func:`record`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..training.config import TrainConfig

__all__ = ["QUICK_ENV", "SITE_DATA_ENV", "is_quick_mode", "site_config", "record"]

#: Environment variable: ``1`` makes :func:`site_config` small (quick docs builds).
QUICK_ENV = "CONVS2S_EDU_QUICK"

#: Environment variable: the folder where :func:`record` writes (set by ``docs/conf.py``).
SITE_DATA_ENV = "CONVS2S_EDU_SITE_DATA"


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


def record(name: str, numbers: dict) -> Path | None:
    """Write ``numbers`` as ``<name>.json`` for the site's build (``docs/_ext`` makes the
    landing page's tables from them); nothing outside a docs build (no ``$CONVS2S_EDU_SITE_DATA``).

    Returns the file written, or ``None``.
    """
    folder = os.environ.get(SITE_DATA_ENV)
    if not folder:
        return None
    path = Path(folder) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(numbers, indent=2), encoding="utf-8")
    return path
