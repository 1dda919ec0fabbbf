r"""What a run keeps: its :class:`History`, and the checkpoint file that holds
everything.

:func:`save_checkpoint` writes ``checkpoint.pt`` after every epoch, atomically: the file is
serialised in memory, written next to the old one and renamed over it, so a run killed
mid-write, or a write that fails (a full disk, a directory that became unwritable),
leaves the last good checkpoint in place, and the failure is one line that names the
path, the error and the space a checkpoint needs (:class:`CheckpointWriteError`).
:func:`read_checkpoint` is the one validating reader behind :func:`load_checkpoint`,
resuming a run and the cache.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from .._checks import check_int
from .._version import __version__
from .config import TrainConfig, build_model
from .device import resolve_device

__all__ = [
    "CHECKPOINT_NAME",
    "CHECKPOINT_KEYS",
    "History",
    "TrainResult",
    "CheckpointError",
    "CheckpointWriteError",
    "prepare_out_dir",
    "save_checkpoint",
    "read_checkpoint",
    "load_checkpoint",
]

CHECKPOINT_NAME = "checkpoint.pt"


@dataclass
class History:
    """What a training run measured.

    Attributes
    ----------
    epochs : list of dict
        One record per epoch: ``epoch`` (1-based), ``train_loss`` (mean over the epoch's
        tokens), ``valid_loss``, ``seconds`` (wall clock of the training steps),
        ``tokens_per_second`` (target tokens, ``<eos>`` included, per second) and
        ``elapsed`` (cumulative seconds).
    step_losses : list of float
        The loss of every optimiser step.
    device : str
        Where it trained, e.g. ``"cpu"`` or ``"cuda (NVIDIA H200)"``.
    n_parameters : int
        Trainable parameters of the model.
    steps : int
        Optimiser steps taken.
    evals : list of dict
        The learning curve (``TrainConfig.eval_every``): one record per held-out
        scoring, with ``step``, ``examples`` (steps x batch size), ``valid_loss`` and
        ``exact_match`` (greedy decoding's, from one teacher-forced pass:
        :func:`~convs2s_edu.metrics.teacher_forced_scores`).
    shared_clock : bool
        True when (part of) the run trained beside other runs, so that its
        ``seconds`` measured the sharing as much as the model: never a speed.
    provenance : dict
        Where and how it trained (:func:`~convs2s_edu.training.device.provenance`), with
        ``wall_seconds``: the wall clock of the whole run, its held-out scoring
        included.
    """

    epochs: list = field(default_factory=list)
    step_losses: list = field(default_factory=list)
    device: str = ""
    n_parameters: int = 0
    steps: int = 0
    evals: list = field(default_factory=list)
    shared_clock: bool = False
    provenance: dict = field(default_factory=dict)

    def column(self, name: str) -> list:
        """One field of every epoch record, e.g. ``history.column("seconds")``."""
        return [e[name] for e in self.epochs]

    def reached(self, level: float, metric: str = "exact_match") -> dict | None:
        """The first held-out evaluation (of ``evals``) at which ``metric`` was at least
        ``level`` (its ``step``: an upper bound on the steps it took, with the
        resolution ``eval_every``), or ``None`` when none was (the run never reached
        it).

        >>> h = History(evals=[{"step": 50, "exact_match": 0.4},
        ...                    {"step": 100, "exact_match": 0.7}])
        >>> h.reached(0.5)["step"], h.reached(0.9)
        (100, None)
        """
        return next((e for e in self.evals if e[metric] >= level), None)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> History:
        return cls(**d)


@dataclass
class TrainResult:
    """A trained model with its configuration and history."""

    model: nn.Module
    config: TrainConfig
    history: History
    path: Path | None = None


def prepare_out_dir(out_dir) -> Path | None:
    """Create ``out_dir`` (before any training) and return its checkpoint path; a path
    that is a file, or a checkpoint path that is a directory, is a ``ValueError``."""
    if out_dir is None:
        return None
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(
            f"output directory {out_dir} is an existing file, not a directory"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"cannot create output directory {out_dir}: {err.strerror}"
        ) from None
    if not os.access(out_dir, os.W_OK):
        raise ValueError(f"output directory {out_dir} is not writable")
    ckpt_path = out_dir / CHECKPOINT_NAME
    if ckpt_path.exists() and not ckpt_path.is_file():
        raise ValueError(f"{ckpt_path} exists and is not a file")
    return ckpt_path


class CheckpointWriteError(OSError):
    """Writing a checkpoint failed; the last good one is kept (see the module's docstring)."""


def _atomic_write(data, path: Path, kept: str) -> None:
    """Write ``data`` to a temporary file next to ``path``, then rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as err:
        # first, so that the free space below is the real one
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        try:
            free = f"; {shutil.disk_usage(path.parent).free / 1e6:.1f} MB free there"
        except OSError:
            free = ""
        raise CheckpointWriteError(
            f"cannot write the checkpoint {path}: {err.strerror or err} (a checkpoint of "
            f"this run needs {len(data) / 1e6:.1f} MB{free}); {kept}"
        ) from None
    finally:
        # a file system gone read-only: nothing to clean
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def save_checkpoint(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    cfg: TrainConfig,
    history: History,
    generator: torch.Generator,
    epoch: int,
    scheduler=None,
) -> None:
    """Write the checkpoint of ``epoch`` to ``path`` (atomically; see the module's
    notes).

    Raises
    ------
    CheckpointWriteError
        When the file cannot be written; the previous checkpoint is kept.
    """
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    state = {
        "format": 1,
        "version": __version__,
        "epoch": epoch,
        "train_config": cfg.to_dict(),
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "history": history.to_dict(),
        "rng": {
            "torch": torch.get_rng_state(),
            "cuda": cuda,
            "shuffle": generator.get_state(),
        },
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)  # in memory first: the file is written in one piece
    if not path.is_file():
        kept = "no checkpoint was written"
    elif epoch > 1:  # this run wrote epoch - 1 (or resumed from it)
        kept = f"the checkpoint of epoch {epoch - 1} is kept"
    else:  # an older run's file, which this run would have replaced
        kept = "the checkpoint that was there before this run is kept"
    _atomic_write(buffer.getbuffer(), path, kept)


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and what is wrong."""


#: Keys every checkpoint written by :func:`~convs2s_edu.train` holds.
CHECKPOINT_KEYS = (
    "format",
    "epoch",
    "train_config",
    "model",
    "optimizer",
    "history",
    "rng",
)


def read_checkpoint(path) -> dict:
    """Read and validate a checkpoint written by :func:`~convs2s_edu.train`.

    It loads with ``torch.load(weights_only=True)`` (no pickled code runs) and checks,
    in order: the file is a readable checkpoint; it holds every key of
    ``CHECKPOINT_KEYS``; ``train_config`` is a dict of valid :class:`TrainConfig`
    fields; ``history`` is a
    :class:`History` with one record per trained epoch; the weights load into the model the
    config describes (``load_state_dict(strict=True)``: a GRU's weights under a ConvS2S
    config, or the reverse, are refused, in torch's words) and are finite; the optimiser
    and random states are present.

    Parameters
    ----------
    path : str or Path
        A checkpoint file, or a directory holding ``checkpoint.pt``.

    Returns
    -------
    dict
        The checkpoint's content, plus ``"path"`` (the file read), ``"config"`` (the
        :class:`TrainConfig`, with ``device="auto"`` when the device it trained on does not
        exist on this machine) and ``"saved_device"`` (the device it was written with).

    Raises
    ------
    FileNotFoundError
        No file at ``path`` (or no ``checkpoint.pt`` in the directory).
    CheckpointError
        A ``ValueError`` whose one-line message starts with the file's path.
    """
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")

    bad = lambda what: CheckpointError(f"{path}: {what}")

    def checked(what: str, read, *args):
        """``read(*args)``; a ``TypeError`` or ``ValueError`` of it is ``bad(what + message)``."""
        try:
            return read(*args)
        except (TypeError, ValueError) as err:
            raise bad(f"{what}{err}") from None

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated file, not a checkpoint, unsafe pickle ...
        first_line = (str(err).strip().splitlines() or [""])[0]
        raise CheckpointError(
            f"{path} is not a readable convs2s_edu checkpoint ({type(err).__name__}: {first_line})"
        ) from None
    if not isinstance(state, dict):
        raise bad(
            f"not a convs2s_edu checkpoint (holds a {type(state).__name__}, not a dict)"
        )
    missing = [k for k in CHECKPOINT_KEYS if k not in state]
    if missing:
        raise bad(
            f"not a convs2s_edu checkpoint: missing key(s) {', '.join(missing)} "
            f"(a checkpoint holds {', '.join(CHECKPOINT_KEYS)})"
        )
    if state["format"] != 1:
        raise bad(f"checkpoint format {state['format']!r} is not supported (only 1)")

    saved = state["train_config"]
    if not isinstance(saved, dict):
        raise bad(f"train_config must be a dict, got {type(saved).__name__}")
    saved_device = saved.get("device", "auto")
    try:
        resolve_device(saved_device)
        device = saved_device
    except (ValueError, TypeError):  # e.g. trained on a GPU, read on a CPU-only machine
        device = "auto"
    cfg = checked(
        "bad train_config: ", TrainConfig.from_dict, {**saved, "device": device}
    )
    epoch = checked("", check_int, "epoch", state["epoch"])
    history = checked("bad history: ", History.from_dict, state["history"])
    if len(history.epochs) != epoch:
        raise bad(
            f"history holds {len(history.epochs)} epoch record(s) but the checkpoint "
            f"says epoch {epoch}"
        )
    _check_weights(state["model"], cfg, bad)
    if (
        not isinstance(state["optimizer"], dict)
        or "param_groups" not in state["optimizer"]
    ):
        raise bad("optimizer is not an optimiser state dict")
    rng = state["rng"] if isinstance(state["rng"], dict) else {}
    if not all(isinstance(rng.get(k), torch.Tensor) for k in ("torch", "shuffle")):
        raise bad("rng must hold the 'torch' and 'shuffle' generator states")
    return {**state, "path": path, "config": cfg, "saved_device": saved_device}


def _check_weights(weights, cfg: TrainConfig, bad) -> None:
    """Raise ``bad(...)`` unless ``weights`` loads into the model ``cfg`` builds
    (``load_state_dict(strict=True)``, whose error names the missing, unexpected or
    misshapen weights) and every weight is finite."""
    with torch.random.fork_rng(devices=[]):  # building must not move the global RNG
        try:
            build_model(cfg).load_state_dict(weights)
        except (RuntimeError, TypeError, ValueError) as err:
            raise bad(
                f"its weights do not fit the {cfg.model!r} model its train_config describes "
                f"({' '.join(str(err).split())})"
            ) from None
    for name, value in weights.items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            n_bad = int((~torch.isfinite(value)).sum())
            raise bad(
                f"weight {name!r} holds {n_bad} NaN or infinite value(s); "
                "the run diverged or the file is damaged"
            )


def load_checkpoint(path, device: str | None = None) -> TrainResult:
    """Load a checkpoint written by :func:`~convs2s_edu.train` (:func:`read_checkpoint`
    first).

    Parameters
    ----------
    path : str or Path
        A checkpoint file, or a directory holding ``checkpoint.pt``.
    device : str, optional
        Where to put the model. Default: the device it trained on when this
        machine has it, else ``"auto"`` (CUDA when present, else CPU).

    Returns
    -------
    TrainResult
        The model in eval mode.

    Raises
    ------
    FileNotFoundError, CheckpointError
        See :func:`read_checkpoint`.
    """
    state = read_checkpoint(path)
    cfg = state["config"] if device is None else state["config"].replace(device=device)
    model = build_model(cfg)
    model.load_state_dict(state["model"])
    model.to(resolve_device(cfg.device)).eval()
    return TrainResult(model, cfg, History.from_dict(state["history"]), state["path"])
