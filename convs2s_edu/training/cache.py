"""The training cache: train a configuration once, load it afterwards.

The gallery pages share trained models through it, and the lab's experiments
keep their measurements next to the checkpoints it holds.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .._version import __version__
from .checkpoint import (
    CHECKPOINT_NAME,
    CheckpointError,
    TrainResult,
    load_checkpoint,
    read_checkpoint,
)
from .config import TrainConfig
from .device import resolve_device
from .loop import train

__all__ = ["CACHE_ENV", "cache_dir", "cache_key", "run_dir", "train_or_load"]

#: Environment variable: directory of the training cache (default ``~/.cache/convs2s_edu``).
CACHE_ENV = "CONVS2S_EDU_CACHE"


def cache_dir() -> Path:
    """``$CONVS2S_EDU_CACHE``, else ``$XDG_CACHE_HOME/convs2s_edu``, else
    ``~/.cache/convs2s_edu``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "convs2s_edu"


def cache_key(cfg: TrainConfig) -> str:
    """Hash of the config (device resolved to its type) and the package version.

    A new version of the package trains again rather than reuse a cache entry of
    an older one.
    """
    d = cfg.to_dict()
    d["device"] = resolve_device(cfg.device).type  # CPU and GPU timings are kept apart
    if cfg.model == "gru":
        del d["paper_normalisation"]  # a switch of the convolutional parts: the same GRU model
    blob = json.dumps({"config": d, "version": __version__}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_dir(cfg: TrainConfig, directory=None) -> Path:
    """The cache entry of ``cfg``: ``directory / <model>-<cache_key(cfg)>`` (``directory``
    defaults to :func:`cache_dir`)."""
    return Path(directory or cache_dir()) / f"{cfg.model}-{cache_key(cfg)}"


def train_or_load(
    cfg: TrainConfig | None = None, progress: bool | None = None, directory=None
) -> TrainResult:
    """Train once, reuse afterwards.

    The checkpoint lives in :func:`run_dir`. A finished run is loaded; an
    interrupted one is resumed; otherwise training starts.
    """
    cfg = cfg if cfg is not None else TrainConfig()
    where = run_dir(cfg, directory)
    ckpt = where / CHECKPOINT_NAME
    if ckpt.is_file():
        try:
            state = read_checkpoint(ckpt)
        except CheckpointError as err:
            raise CheckpointError(
                f"{err} (a damaged cache entry: delete {where} to train again)"
            ) from None
        if state["epoch"] >= cfg.epochs:
            return load_checkpoint(ckpt, device=cfg.device)
    return train(cfg, out_dir=where, resume=True, progress=progress)
