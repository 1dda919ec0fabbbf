"""The training cache: train a configuration once, load it afterwards.

The gallery pages share trained models through it, and the lab's experiments keep their
measurements next to the checkpoints it holds.

Several processes may want the same entry at once (the scheduler's workers, two builds,
a notebook beside a build): :func:`train_or_load` holds an exclusive lock on the entry
(:func:`entry_lock`: ``filelock.FileLock`` on a ``.lock`` file inside it, ``flock`` on
Unix, ``msvcrt`` on Windows) while it decides and trains, so the first process trains
and the others wait, then load what it wrote. The operating system releases the lock of
a process that dies; the next one resumes from the last checkpoint.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..registry import model_entry
from .checkpoint import (
    CHECKPOINT_NAME,
    CheckpointError,
    TrainResult,
    load_checkpoint,
    read_checkpoint,
)
from .config import TrainConfig
from .device import cache_dir, resolve_device
from .fingerprint import TRAINING_FILES, fingerprint
from .loop import train

__all__ = [
    "cache_key",
    "run_dir",
    "entry_lock",
    "is_cached",
    "train_or_load",
]


def cache_key(cfg: TrainConfig) -> str:
    """Hash of the config (device resolved to its type) and of the code that trains it
    (:func:`~convs2s_edu.training.fingerprint.fingerprint` of ``TRAINING_FILES``: a
    change to a model, the data or the training trains again; a docstring, a comment or
    the lab's plumbing does not). The fields the model ignores (its registry entry's
    ``ignores``) are left out. ``fast=None`` stays ``None``: the entry is the run of
    "the path this machine chose"
    (:func:`~convs2s_edu.training.calibrate.resolve_path`), which its checkpoint's
    config names, so that a process with other threads, whose choice may differ, still
    finds it."""
    d = cfg.to_dict()
    d["device"] = resolve_device(cfg.device).type  # CPU and GPU timings are kept apart
    for name in model_entry(cfg.model).ignores:
        del d[name]
    blob = json.dumps(
        {"config": d, "code": fingerprint(TRAINING_FILES)}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_dir(cfg: TrainConfig, directory=None) -> Path:
    """The cache entry of ``cfg``: ``directory / <model>-<cache_key(cfg)>``
    (``directory`` defaults to :func:`~convs2s_edu.training.cache_dir`)."""
    return Path(directory or cache_dir()) / f"{cfg.model}-{cache_key(cfg)}"


def entry_lock(where: Path):
    """An exclusive lock on the cache entry ``where`` (created if missing), held while a
    ``with`` block runs (see the module's docstring)."""
    # imported here: `import convs2s_edu` imports this module, and the GPU image lacks
    # filelock
    from filelock import FileLock

    Path(where).mkdir(parents=True, exist_ok=True)
    return FileLock(Path(where) / ".lock")  # blocks until the holder is done (or dies)


def is_cached(cfg: TrainConfig, directory=None) -> bool:
    """True when the cache holds the finished run of ``cfg`` (nothing is trained)."""
    where = run_dir(cfg, directory)
    if not (where / CHECKPOINT_NAME).is_file():
        return False
    try:
        return read_checkpoint(where)["epoch"] >= cfg.epochs
    except CheckpointError as err:
        raise CheckpointError(
            f"{err} (a damaged cache entry: delete {where} to train again)"
        ) from None


def train_or_load(
    cfg: TrainConfig | None = None,
    progress: bool | None = None,
    directory=None,
    shared_clock: bool = False,
) -> TrainResult:
    """Train once, reuse afterwards.

    The checkpoint lives in :func:`run_dir`: a finished run is loaded, an interrupted
    one resumed, otherwise training starts, the entry locked meanwhile
    (:func:`entry_lock`). ``shared_clock`` goes to :func:`~convs2s_edu.train` (a run
    trained beside others).
    """
    cfg = cfg if cfg is not None else TrainConfig()
    where = run_dir(cfg, directory)
    with entry_lock(where):
        if is_cached(cfg, directory):
            return load_checkpoint(where, device=cfg.device)
        return train(
            cfg,
            out_dir=where,
            resume=True,
            progress=progress,
            shared_clock=shared_clock,
        )
