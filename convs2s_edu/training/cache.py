"""The training cache: train a configuration once, load it afterwards.

The gallery pages share trained models through it, and the lab's experiments
keep their measurements next to the checkpoints it holds.

Several processes may want the same entry at once (the scheduler's workers,
two builds, a notebook beside a build): :func:`train_or_load` holds an
exclusive lock on the entry (:func:`entry_lock`, ``fcntl.flock`` on a ``.lock``
file inside it) while it decides and trains, so the first process trains and
the others wait, then load what it wrote. The operating system releases the
lock of a process that dies; the next one resumes from the last checkpoint.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

try:  # POSIX; elsewhere the cache is not safe for concurrent processes
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

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

__all__ = [
    "CACHE_ENV",
    "cache_dir",
    "cache_key",
    "run_dir",
    "entry_lock",
    "is_cached",
    "train_or_load",
]

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


@contextlib.contextmanager
def entry_lock(where: Path):
    """Hold an exclusive lock on the cache entry ``where`` (created if missing) while the
    ``with`` block runs; other processes asking for it wait. A no-op where ``fcntl`` is
    missing."""
    where = Path(where)
    where.mkdir(parents=True, exist_ok=True)
    with open(where / ".lock", "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)  # blocks until the holder is done (or dies)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _finished(ckpt: Path, cfg: TrainConfig, where: Path) -> bool:
    if not ckpt.is_file():
        return False
    try:
        state = read_checkpoint(ckpt)
    except CheckpointError as err:
        raise CheckpointError(
            f"{err} (a damaged cache entry: delete {where} to train again)"
        ) from None
    return state["epoch"] >= cfg.epochs


def is_cached(cfg: TrainConfig, directory=None) -> bool:
    """True when the cache holds the finished run of ``cfg`` (nothing is trained)."""
    where = run_dir(cfg, directory)
    return _finished(where / CHECKPOINT_NAME, cfg, where)


def train_or_load(
    cfg: TrainConfig | None = None,
    progress: bool | None = None,
    directory=None,
    shared_clock: bool = False,
) -> TrainResult:
    """Train once, reuse afterwards.

    The checkpoint lives in :func:`run_dir`. A finished run is loaded; an
    interrupted one is resumed; otherwise training starts. The entry is locked
    meanwhile (:func:`entry_lock`): a second process asking for the same run
    waits for the first and loads its checkpoint. ``shared_clock`` goes to
    :func:`~convs2s_edu.train` (a run trained beside others).
    """
    cfg = cfg if cfg is not None else TrainConfig()
    where = run_dir(cfg, directory)
    ckpt = where / CHECKPOINT_NAME
    with entry_lock(where):
        if _finished(ckpt, cfg, where):
            return load_checkpoint(ckpt, device=cfg.device)
        return train(cfg, out_dir=where, resume=True, progress=progress, shared_clock=shared_clock)
