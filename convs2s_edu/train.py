r"""Training both models on the same data, timed honestly, with checkpoints and a cache.

The seed notebook's experiment (sections 10-11): Adam with learning rate
:math:`10^{-3}`, batches of 128, 30 epochs over 10,000 sorting examples of
length 8-20 drawn from a vocabulary of 50. :class:`TrainConfig` holds those
numbers; :func:`train` runs it for either model; :func:`train_or_load` trains
once and reuses the result from a cache, which is how the gallery pages share
trained models.

What is timed
-------------
An epoch's wall-clock time (:func:`time.perf_counter`) covers the training
steps only: batching, forward, backward and the optimiser. On a GPU the clock
is read after :func:`torch.cuda.synchronize`, otherwise it would stop while
kernels are still queued. The held-out loss is computed after the clock stops.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from . import distributed as _distributed
from ._version import __version__
from .convs2s import ConvS2S, ConvS2SConfig
from .data import PAD, SortingDataset, generate_dataset
from .fast import apply_compile, check_compile_mode, check_precision, make_train_step
from .hybrid import HYBRID_NAMES, HybridConfig, HybridSeq2Seq
from .rnn import RNNSeq2Seq, RNNSeq2SeqConfig

__all__ = [
    "MODEL_NAMES",
    "TrainConfig",
    "History",
    "TrainResult",
    "TrainingDivergedError",
    "resolve_device",
    "make_datasets",
    "build_model",
    "sequence_loss",
    "train",
    "CheckpointError",
    "read_checkpoint",
    "load_checkpoint",
    "cache_dir",
    "cache_key",
    "train_or_load",
]

#: Model names accepted by :class:`TrainConfig` and the command line: the two models, then
#: the hybrids ``"<encoder>+<decoder>"`` (:mod:`convs2s_edu.hybrid`).
MODEL_NAMES = ("convs2s", "gru", *HYBRID_NAMES)

#: Environment variable: directory of the training cache (default ``~/.cache/convs2s_edu``).
CACHE_ENV = "CONVS2S_EDU_CACHE"

CHECKPOINT_NAME = "checkpoint.pt"

#: Upper bounds checked by :class:`TrainConfig` (see its Notes): beyond them a run would
#: exhaust memory or time long before it finished, so they are refused up front.
LIMITS = {
    "vocab_size": 10_000,
    "min_len": 512,
    "max_len": 512,
    "n_train": 1_000_000,
    "n_valid": 1_000_000,
    "n_test": 1_000_000,
    "batch_size": 4096,
    "epochs": 10_000,
    "seed": 2**32 - 1,
}

#: Batch size of the held-out loss (evaluation only: no activations kept for backward).
VALID_BATCH_SIZE = 512


@dataclass
class TrainConfig:
    r"""Everything that determines a training run.

    The data, optimiser and schedule defaults are the seed notebook's; two
    defaults are not: gradient clipping (``clip_norm``) and the paper's
    ConvS2S (``paper_normalisation``).

    Parameters
    ----------
    model : {"convs2s", "gru", "gru+conv", "conv+gru"}
        Which model to train (:data:`MODEL_NAMES`): ConvS2S, the GRU + Bahdanau
        model, or a hybrid ``"<encoder>+<decoder>"`` (:class:`~convs2s_edu.HybridSeq2Seq`).
    vocab_size, min_len, max_len : int
        The sorting task: tokens ``1..vocab_size``, lengths ``min_len..max_len``.
    n_train, n_valid, n_test : int
        Sizes of the training, held-out and test sets. All three depend only on
        ``seed`` and the task, never on the model, so both models see the same data.
    batch_size : int
        Examples per optimiser step (seed: 128).
    lr : float
        Adam's learning rate (seed: 1e-3).
    epochs : int
        Passes over the training set (seed: 30).
    clip_norm : float or None
        Clip the gradient's global norm to this value (not in the seed; a
        standard safeguard for recurrent models, applied to both models alike).
        ``None`` disables clipping.
    paper_normalisation : bool
        The convolutional parts only (the GRU model ignores it): train the paper's
        ConvS2S, with weight normalisation and the paper's initialisation, encoder
        gradient scaling
        and the :math:`m\sqrt{1/m}` context scaling
        (:meth:`ConvS2SConfig.paper <convs2s_edu.ConvS2SConfig.paper>`). ``False``
        trains the seed's simplified ConvS2S (PyTorch's default initialisation,
        none of the three). On by default: the package measures the paper's
        model; ``convs2s-edu compare --seed-convs2s`` measures the seed's.
    seed : int
        Seeds the data, the model's initialisation, dropout and the shuffling.
    device : str
        ``"auto"`` (CUDA when present, else CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    model_options : dict
        Extra fields of :class:`~convs2s_edu.ConvS2SConfig` or
        :class:`~convs2s_edu.RNNSeq2SeqConfig` (e.g. ``{"weight_norm": True}``);
        for a hybrid, a field goes to every part's config that has it.
    compile : bool
        :func:`torch.compile` the encoder and decoder (:mod:`convs2s_edu.fast`); same
        parameters, same checkpoint. Default ``False`` (eager).
    compile_mode : {None, "default", "reduce-overhead", "max-autotune"}
        ``torch.compile``'s mode; ``"reduce-overhead"`` uses CUDA graphs (CUDA only).
    precision : {"fp32", "bf16"}
        ``"bf16"``: mixed precision (autocast) on CUDA or on a CPU with bf16 matrix
        instructions; refused with a ``ValueError`` elsewhere
        (:func:`convs2s_edu.fast.check_precision`).

    Raises
    ------
    ValueError
        For a field of the wrong type or out of range; the message names the
        field, the value and the allowed range.

    Notes
    -----
    Every field is type-checked (``lr=True`` or ``clip_norm="x"`` are refused,
    not coerced) and the integer fields are bounded by ``train.LIMITS``:
    ``vocab_size <= 10,000``; ``min_len, max_len <= 512``; ``n_train``,
    ``n_valid``, ``n_test <= 1,000,000``; ``batch_size <= 4096``;
    ``epochs <= 10,000``; ``0 <= seed < 2^32``. The length bound is a memory
    bound: each attention map holds ``batch_size * max_len^2`` floats per layer
    (128 MiB at 128 x 512^2, several of them kept for the backward pass), and a
    run with ``max_len = 100,000`` would be killed by the operating system
    with no message instead of failing clearly.
    """

    model: str = "convs2s"
    vocab_size: int = 50
    min_len: int = 8
    max_len: int = 20
    n_train: int = 10_000
    n_valid: int = 1_000
    n_test: int = 1_000
    batch_size: int = 128
    lr: float = 1e-3
    epochs: int = 30
    clip_norm: float | None = 1.0
    paper_normalisation: bool = True
    seed: int = 0
    device: str = "auto"
    model_options: dict = field(default_factory=dict)
    compile: bool = False
    compile_mode: str | None = None
    precision: str = "fp32"

    def __post_init__(self):
        if not isinstance(self.model, str) or self.model not in MODEL_NAMES:
            raise ValueError(f"model must be one of {MODEL_NAMES}, got {self.model!r}")
        for name, high in LIMITS.items():
            low = 0 if name == "seed" else 1
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, numbers.Integral)
                or not low <= value <= high
            ):
                raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
            setattr(self, name, int(value))
        if self.min_len > self.max_len:
            raise ValueError(f"min_len must be <= max_len, got {self.min_len} > {self.max_len}")
        if not _positive_real(self.lr):
            raise ValueError(f"lr must be a positive finite number, got {self.lr!r}")
        if self.clip_norm is not None and not _positive_real(self.clip_norm):
            raise ValueError(
                f"clip_norm must be a positive finite number or None, got {self.clip_norm!r}"
            )
        if not isinstance(self.paper_normalisation, bool):
            raise ValueError(
                f"paper_normalisation must be True or False, got {self.paper_normalisation!r}"
            )
        if not isinstance(self.device, str):
            raise ValueError(
                f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {self.device!r}"
            )
        resolve_device(self.device)  # validates the string
        if not isinstance(self.model_options, dict) or not all(
            isinstance(k, str) for k in self.model_options
        ):
            raise ValueError(
                "model_options must be a dict of option names (str) to values, "
                f"got {self.model_options!r}"
            )
        self.model_options = dict(self.model_options)
        from .fast import PRECISIONS, check_compile_mode  # execution paths (issue 10)

        if not isinstance(self.compile, bool):
            raise TypeError(f"compile must be True or False, got {self.compile!r}")
        check_compile_mode(self.compile_mode)
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")

    def replace(self, **changes) -> TrainConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        """The inverse of ``to_dict()``; unknown field names are a ``ValueError``."""
        if not isinstance(d, dict):
            raise ValueError(f"a TrainConfig is read from a dict, got {type(d).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = sorted(str(k) for k in d if k not in names)
        if unknown:
            raise ValueError(
                f"unknown TrainConfig field(s) {', '.join(unknown)}; allowed: {', '.join(names)}"
            )
        return cls(**d)


def _positive_real(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, numbers.Real) and math.isfinite(x) and x > 0


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU. Raises ``ValueError`` for unknown names or
    for CUDA on a machine without it."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}"
        ) from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available on this machine")
    return dev


# --------------------------------------------------------------------------
# Data and models
# --------------------------------------------------------------------------


def make_datasets(cfg: TrainConfig) -> tuple[SortingDataset, SortingDataset, SortingDataset]:
    """The training, held-out and test sets of ``cfg`` (seeds ``seed``, ``seed+1``, ``seed+2``).

    They depend on the task fields and ``seed`` only, so a ConvS2S and a GRU
    run with the same seed train and are scored on identical examples.

    The three sets are pairwise disjoint: a held-out or test example whose
    source also occurs in an earlier set is replaced by a fresh draw (on the
    seed's task, 10,000 sequences of length 8-20 over 50 tokens, a repeat is
    so unlikely that the sets are exactly the three independent draws).
    ``ValueError`` when the task has too few distinct sequences for that.
    """
    seen: set[tuple[int, ...]] = set()

    def make(n, offset):
        examples = generate_dataset(n, cfg.min_len, cfg.max_len, cfg.vocab_size, cfg.seed + offset)
        if offset > 0:  # the training set may repeat itself; the others must not meet it
            examples = [e for e in examples if tuple(e[0]) not in seen]
            refill = 0
            while len(examples) < n:
                refill += 1
                if refill > 100:
                    raise ValueError(
                        f"cannot draw {cfg.n_valid} held-out and {cfg.n_test} test examples "
                        f"disjoint from the training set: lengths {cfg.min_len}..{cfg.max_len} "
                        f"over {cfg.vocab_size} tokens give too few distinct sequences"
                    )
                more = generate_dataset(
                    n, cfg.min_len, cfg.max_len, cfg.vocab_size, [cfg.seed + offset, refill]
                )
                kept = {tuple(x) for x, _ in examples}
                for e in more:
                    if len(examples) < n and tuple(e[0]) not in seen and tuple(e[0]) not in kept:
                        examples.append(e)
                        kept.add(tuple(e[0]))
        seen.update(tuple(x) for x, _ in examples)
        return SortingDataset(examples, cfg.vocab_size)

    return make(cfg.n_train, 0), make(cfg.n_valid, 1), make(cfg.n_test, 2)


def build_model(cfg: TrainConfig) -> nn.Module:
    """A freshly initialised model of ``cfg.model`` for the task of ``cfg``.

    ``paper_normalisation`` starts every convolutional part from
    :meth:`ConvS2SConfig.paper <convs2s_edu.ConvS2SConfig.paper>`; ``model_options`` win over it.
    """
    options = {
        "vocab_size": cfg.vocab_size,
        "max_positions": max(64, cfg.max_len + 1),
        **cfg.model_options,
    }
    try:
        if cfg.model == "convs2s":
            conv = ConvS2SConfig.paper if cfg.paper_normalisation else ConvS2SConfig
            return ConvS2S(conv(**options))
        if cfg.model == "gru":
            return RNNSeq2Seq(RNNSeq2SeqConfig(**options))
        return HybridSeq2Seq(
            HybridConfig.from_options(cfg.model, paper=cfg.paper_normalisation, **options)
        )
    except TypeError as err:  # an unknown option name
        raise ValueError(f"bad model_options for {cfg.model!r}: {err}") from None


def sequence_loss(
    logits: torch.Tensor, tgt_out: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    r"""Token-level cross-entropy, padding excluded.

    .. math::

        \mathcal{L} = -\frac{1}{N}\sum_{b,t:\ y_{bt} \neq \text{PAD}}
                       \log p(y_{bt} \mid y_{b,<t}, x_b)

    ``logits`` ``(B, T, V)``, ``tgt_out`` ``(B, T)``; ``reduction="sum"`` returns the sum.
    """
    return F.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD, reduction=reduction
    )


# --------------------------------------------------------------------------
# History and checkpoints
# --------------------------------------------------------------------------


@dataclass
class History:
    """What a training run measured.

    Attributes
    ----------
    epochs : list of dict
        One record per epoch: ``epoch`` (1-based), ``train_loss`` (mean over the
        epoch's tokens), ``valid_loss``, ``seconds`` (wall clock of the training
        steps), ``tokens_per_second`` (target tokens, ``<eos>`` included, per
        second) and ``elapsed`` (cumulative seconds).
    step_losses : list of float
        The loss of every optimiser step.
    device : str
        Where it trained, e.g. ``"cpu"`` or ``"cuda (NVIDIA H200)"``.
    n_parameters : int
        Trainable parameters of the model.
    """

    epochs: list = field(default_factory=list)
    step_losses: list = field(default_factory=list)
    device: str = ""
    n_parameters: int = 0

    def column(self, name: str) -> list:
        """One field of every epoch record, e.g. ``history.column("seconds")``."""
        return [e[name] for e in self.epochs]

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


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the message names the epoch and step."""


def _device_label(dev: torch.device) -> str:
    if dev.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(dev)})"
    return "cpu"


def _atomic_save(obj: Any, path: Path) -> None:
    """Write to a temporary file in the same directory, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _save_checkpoint(
    path: Path,
    model,
    optimizer,
    cfg: TrainConfig,
    history: History,
    generator: torch.Generator,
    epoch: int,
) -> None:
    state = {
        "format": 1,
        "version": __version__,
        "epoch": epoch,
        "train_config": cfg.to_dict(),
        "model_config": model.cfg.to_dict(),
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict(),
        "history": history.to_dict(),
        "rng": {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "shuffle": generator.get_state(),
        },
    }
    _atomic_save(state, path)


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and what is wrong."""


#: Keys every checkpoint written by :func:`train` holds.
CHECKPOINT_KEYS = ("format", "epoch", "train_config", "model", "optimizer", "history", "rng")


def _checkpoint_file(path) -> Path:
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return path


def read_checkpoint(path) -> dict:
    """Read and validate a checkpoint written by :func:`train`.

    The one reader behind :func:`load_checkpoint`, ``train(resume=True)`` and
    the cache of :func:`train_or_load`. It loads with
    ``torch.load(weights_only=True)`` (no pickled code runs) and checks, in
    order: the file is a readable checkpoint; it holds every key of
    ``CHECKPOINT_KEYS``; ``train_config`` is a dict of valid
    :class:`TrainConfig` fields; ``history`` is a :class:`History` with one
    record per trained epoch; the weights are a state dict of finite tensors
    that fits the model the config describes (a GRU's weights under a
    ConvS2S config, or the reverse, are refused); the optimiser and random
    states are present.

    Parameters
    ----------
    path : str or Path
        A checkpoint file, or a directory holding ``checkpoint.pt``.

    Returns
    -------
    dict
        The checkpoint's content, plus ``"path"`` (the file read) and
        ``"config"`` (the :class:`TrainConfig`, with ``device="auto"`` when the
        device it trained on does not exist on this machine) and
        ``"saved_device"`` (the device string it was written with).

    Raises
    ------
    FileNotFoundError
        No file at ``path`` (or no ``checkpoint.pt`` in the directory).
    CheckpointError
        A ``ValueError`` whose one-line message starts with the file's path.
    """
    path = _checkpoint_file(path)

    def bad(what: str):
        return CheckpointError(f"{path}: {what}")

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated file, not a checkpoint, unsafe pickle ...
        first_line = (str(err).strip().splitlines() or [""])[0]
        raise CheckpointError(
            f"{path} is not a readable convs2s_edu checkpoint ({type(err).__name__}: {first_line})"
        ) from None
    if not isinstance(state, dict):
        raise bad(f"not a convs2s_edu checkpoint (holds a {type(state).__name__}, not a dict)")
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
    try:
        cfg = TrainConfig.from_dict({**saved, "device": device})
    except (ValueError, TypeError) as err:
        raise bad(f"bad train_config: {err}") from None

    epoch = state["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise bad(f"epoch must be an integer >= 1, got {epoch!r}")
    try:
        history = History.from_dict(state["history"])
    except (TypeError, ValueError) as err:
        raise bad(f"bad history: {err}") from None
    if len(history.epochs) != epoch:
        raise bad(
            f"history holds {len(history.epochs)} epoch record(s) but the checkpoint "
            f"says epoch {epoch}"
        )
    _check_weights(state["model"], cfg, bad)
    if not isinstance(state["optimizer"], dict) or "param_groups" not in state["optimizer"]:
        raise bad("optimizer is not an optimiser state dict")
    rng = state["rng"]
    if not (
        isinstance(rng, dict)
        and isinstance(rng.get("torch"), torch.Tensor)
        and isinstance(rng.get("shuffle"), torch.Tensor)
    ):
        raise bad("rng must hold the 'torch' and 'shuffle' generator states")
    return {**state, "path": path, "config": cfg, "saved_device": saved_device}


def _check_weights(weights, cfg: TrainConfig, bad) -> None:
    """Raise ``bad(...)`` unless ``weights`` is a finite state dict of the model ``cfg`` builds."""
    if not isinstance(weights, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in weights.items()
    ):
        raise bad("model must be a state dict (parameter name -> tensor)")
    for name, value in weights.items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            n_bad = int((~torch.isfinite(value)).sum())
            raise bad(
                f"weight {name!r} holds {n_bad} NaN or infinite value(s); "
                "the run diverged or the file is damaged"
            )

    def mismatch(model_cfg: TrainConfig) -> str:
        with torch.random.fork_rng(devices=[]):  # building must not move the global RNG
            try:
                expected = build_model(model_cfg).state_dict()
            except ValueError as err:
                return str(err)
        if expected.keys() != weights.keys():
            missing = sorted(expected.keys() - weights.keys())
            extra = sorted(weights.keys() - expected.keys())
            return (
                f"missing {len(missing)} weight(s) (e.g. {missing[:2]}), "
                f"{len(extra)} unexpected (e.g. {extra[:2]})"
            )
        for k, v in expected.items():
            if v.shape != weights[k].shape:
                return (
                    f"weight {k!r} has shape {tuple(weights[k].shape)}, expected {tuple(v.shape)}"
                )
        return ""

    why = mismatch(cfg.replace(device="cpu"))
    if why:

        def top_level(names):  # e.g. {"encoder", "decoder"} for ConvS2S
            return {k.split(".")[0] for k in names}

        def kind_fits(m):  # same top-level modules as a default-sized model of kind m
            with torch.random.fork_rng(devices=[]):
                other = build_model(cfg.replace(model=m, model_options={}, device="cpu"))
            return top_level(other.state_dict()) == top_level(weights)

        others = [m for m in MODEL_NAMES if m != cfg.model and kind_fits(m)]
        looks = f"; they are the weights of a {others[0]!r} model" if others else ""
        raise bad(
            f"its weights do not fit the {cfg.model!r} model its train_config "
            f"describes ({why}){looks}"
        )


def load_checkpoint(path, device: str | None = None) -> TrainResult:
    """Load a checkpoint written by :func:`train` (``torch.load(weights_only=True)``: no
    pickled code).

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
        See :func:`read_checkpoint`, which validates the file first.
    """
    state = read_checkpoint(path)
    cfg = state["config"] if device is None else state["config"].replace(device=device)
    model = build_model(cfg)
    model.load_state_dict(state["model"])
    model.to(resolve_device(cfg.device)).eval()
    return TrainResult(model, cfg, History.from_dict(state["history"]), state["path"])


# --------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------


def _progress_stream():
    """Where progress goes: stderr, or the build's log when sphinx-gallery captured stderr.

    sphinx-gallery puts a page's stderr into the page and logs it only with ``-v``: the
    build's log is where a reader waits for progress.
    """
    stream = sys.stderr
    if type(stream).__module__.startswith("sphinx_gallery") and sys.__stderr__:
        stream = sys.__stderr__
    return stream


class _Progress:
    """Training progress on stderr: a tqdm bar on a terminal, else one line per epoch.

    ``enabled=False`` shows nothing; ``None`` or ``True`` show the bar when stderr
    is a terminal and, when it is not (docs builds, CI logs, notebooks), one line
    per epoch (model, epoch, loss, seconds), so that a long run shows it is alive.
    """

    def __init__(self, total: int, desc: str, last_epoch: int, enabled: bool | None):
        self.desc, self.last_epoch, self.bar = desc, last_epoch, None
        self.stream = _progress_stream()
        self.lines = enabled is not False and not self.stream.isatty()
        if enabled is not False and not self.lines:
            from tqdm import tqdm  # tqdm.std: no notebook widgets (and no ipywidgets warning)

            self.bar = tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True)

    def step(self, epoch: int, loss: torch.Tensor) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(epoch=epoch, loss=f"{float(loss.detach()):.3f}")

    def epoch(self, epoch: int, loss: float, seconds: float, tokens_per_second: float) -> None:
        if self.bar is not None:
            self.bar.set_postfix(
                epoch=epoch, loss=f"{loss:.3f}", tok_s=f"{tokens_per_second:,.0f}"
            )
        elif self.lines:
            print(
                f"{self.desc}: epoch {epoch}/{self.last_epoch}, train loss {loss:.4f}, "
                f"{seconds:.1f} s ({tokens_per_second:,.0f} tokens/s)",
                file=self.stream,
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@torch.no_grad()
def _mean_loss(model, loader, device) -> float:
    was_training = model.training
    model.eval()
    total, n = 0.0, 0
    for batch in loader:
        batch = batch.to(device)
        total += float(sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out, "sum"))
        n += batch.n_target_tokens
    model.train(was_training)
    return total / n


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _prepare_out_dir(out_dir) -> Path | None:
    """Create ``out_dir`` (before any training) and return its checkpoint path; a path that is
    a file, or a checkpoint path that is a directory, is a ``ValueError``."""
    if out_dir is None:
        return None
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"output directory {out_dir} is an existing file, not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot create output directory {out_dir}: {err.strerror}") from None
    if not os.access(out_dir, os.W_OK):
        raise ValueError(f"output directory {out_dir} is not writable")
    ckpt_path = out_dir / CHECKPOINT_NAME
    if ckpt_path.exists() and not ckpt_path.is_file():
        raise ValueError(f"{ckpt_path} exists and is not a file")
    return ckpt_path


def train(
    cfg: TrainConfig | None = None,
    out_dir=None,
    resume: bool = False,
    progress: bool | None = None,
    stop_after: int | None = None,
) -> TrainResult:
    """Train ``cfg.model`` on the sorting task.

    Parameters
    ----------
    cfg : TrainConfig, optional
        The seed's configuration when omitted.
    out_dir : str or Path, optional
        Where to write ``checkpoint.pt`` after every epoch (atomically). Without
        it nothing is written.
    resume : bool
        Continue from ``out_dir/checkpoint.pt`` if it exists. On the CPU the
        result is bit-for-bit the one of an uninterrupted run.
    progress : bool, optional
        Show a progress bar; by default only when stderr is a terminal.
    stop_after : int, optional
        Stop after this epoch (as if interrupted), checkpoint included.

    Returns
    -------
    TrainResult
        The model (in eval mode), the config and the :class:`History`.

    Raises
    ------
    TrainingDivergedError
        When a loss is NaN or infinite; the last good checkpoint is kept.

    Notes
    -----
    Started by ``torchrun`` (or with its environment variables set), every process
    trains one share of each batch with DistributedDataParallel
    (:mod:`convs2s_edu.distributed`): ``cfg.batch_size`` is then the global batch;
    only rank 0 writes the checkpoint and the progress output.
    """
    cfg = cfg if cfg is not None else TrainConfig()
    ddp = _distributed.setup(cfg.device)  # None unless started by torchrun (issue 10)
    try:
        return _train(cfg, out_dir, resume, progress, stop_after, ddp)
    finally:
        if ddp is not None:
            ddp.close()


def _train(cfg, out_dir, resume, progress, stop_after, ddp) -> TrainResult:
    dev = resolve_device(cfg.device) if ddp is None else ddp.device
    check_precision(cfg.precision, dev)
    check_compile_mode(cfg.compile_mode, dev)
    main = ddp is None or ddp.is_main  # only rank 0 writes files and progress
    if not main:
        progress = False
    ckpt_path = _prepare_out_dir(out_dir)

    train_ds, valid_ds, _ = make_datasets(cfg)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg).to(dev)
    if cfg.compile:
        apply_compile(model, cfg.compile_mode)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    shuffle = torch.Generator().manual_seed(cfg.seed)
    if ddp is None:
        loader = DataLoader(
            train_ds,
            batch_size=cfg.batch_size,
            shuffle=True,
            collate_fn=train_ds.collate,
            generator=shuffle,
        )
        train_step = make_train_step(model, optimizer, cfg.clip_norm, cfg.precision)
    else:
        torch.manual_seed(cfg.seed + ddp.rank)  # dropout: other masks on every rank
        loader, sampler = ddp.loader(train_ds, cfg.batch_size, cfg.seed)
        train_step = ddp.make_train_step(ddp.wrap(model), optimizer, cfg.clip_norm, cfg.precision)
    valid_loader = DataLoader(valid_ds, batch_size=VALID_BATCH_SIZE, collate_fn=valid_ds.collate)
    history = History(
        device=_device_label(dev),
        n_parameters=sum(p.numel() for p in model.parameters() if p.requires_grad),
    )
    start_epoch = 0

    if resume and ckpt_path is not None and ckpt_path.is_file():
        state = read_checkpoint(ckpt_path)
        saved = state["config"].replace(device=cfg.device, epochs=cfg.epochs)
        if saved != cfg:
            changed = [
                f"{f.name} ({getattr(saved, f.name)!r} -> {getattr(cfg, f.name)!r})"
                for f in fields(cfg)
                if getattr(saved, f.name) != getattr(cfg, f.name)
            ]
            raise ValueError(
                f"cannot resume: {ckpt_path} was written with a different config: "
                f"{', '.join(changed)}"
            )
        if state["epoch"] > cfg.epochs:
            raise ValueError(
                f"cannot resume: {ckpt_path} holds {state['epoch']} epochs, more than "
                f"the {cfg.epochs} asked for"
            )
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        history = History.from_dict(state["history"])
        torch.set_rng_state(state["rng"]["torch"])
        if dev.type == "cuda" and state["rng"]["cuda"]:
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        shuffle.set_state(state["rng"]["shuffle"])
        start_epoch = state["epoch"]
        if ddp is not None and ddp.rank > 0:  # the checkpoint holds rank 0's generator
            torch.manual_seed(cfg.seed + ddp.rank + 7919 * start_epoch)

    last = cfg.epochs if stop_after is None else min(cfg.epochs, stop_after)
    bar = _Progress((last - start_epoch) * len(loader), f"{cfg.model}", last, progress)
    try:
        for epoch in range(start_epoch + 1, last + 1):
            model.train()
            if ddp is not None:
                sampler.set_epoch(epoch)  # a new permutation every epoch, the same on every rank
            step_losses, n_tokens = [], 0
            _sync(dev)
            t0 = time.perf_counter()
            for batch in loader:
                n_tokens += batch.n_target_tokens  # on the CPU: no device sync in the loop
                batch = batch.to(dev)
                loss = train_step(batch)  # forward, backward, clipping, Adam (fast.py)
                step_losses.append(loss)
                bar.step(epoch, loss)
            _sync(dev)
            seconds = time.perf_counter() - t0

            losses = torch.stack(step_losses).float()
            if ddp is not None:  # every rank: the global losses, so all agree on stopping
                losses = ddp.all_sum(losses)
                n_tokens = int(ddp.all_sum(torch.tensor([n_tokens], device=dev)))
            losses = losses.cpu()  # one transfer per epoch
            bad = (~torch.isfinite(losses)).nonzero()
            if len(bad):
                step = int(bad[0]) + 1
                kept = (
                    f"; the last good checkpoint (epoch {epoch - 1}) is kept in {ckpt_path}"
                    if ckpt_path is not None and epoch > 1
                    else ""
                )
                raise TrainingDivergedError(
                    f"{cfg.model}: non-finite loss ({float(losses[step - 1])}) at epoch {epoch}, "
                    f"step {step} of {len(losses)}{kept}. Try a smaller lr (now {cfg.lr}) "
                    f"or gradient clipping (clip_norm={cfg.clip_norm})."
                )
            history.step_losses.extend(losses.tolist())
            elapsed = (history.epochs[-1]["elapsed"] if history.epochs else 0.0) + seconds
            history.epochs.append(
                {
                    "epoch": epoch,
                    "train_loss": float(losses.mean()),
                    "valid_loss": _mean_loss(model, valid_loader, dev),
                    "seconds": seconds,
                    "tokens_per_second": n_tokens / seconds,
                    "elapsed": elapsed,
                }
            )
            bar.epoch(epoch, history.epochs[-1]["train_loss"], seconds, n_tokens / seconds)
            if ckpt_path is not None and main:
                _save_checkpoint(ckpt_path, model, optimizer, cfg, history, shuffle, epoch)
    finally:
        bar.close()
    model.eval()
    return TrainResult(model, cfg, history, ckpt_path)


# --------------------------------------------------------------------------
# The cache
# --------------------------------------------------------------------------


def cache_dir() -> Path:
    """``$CONVS2S_EDU_CACHE``, else ``$XDG_CACHE_HOME/convs2s_edu``, else
    ``~/.cache/convs2s_edu``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "convs2s_edu"


def cache_key(cfg: TrainConfig) -> str:
    """Hash of the config (device resolved to its type) and the package version."""
    d = cfg.to_dict()
    d["device"] = resolve_device(cfg.device).type  # CPU and GPU timings are kept apart
    for name, default in (("compile", False), ("compile_mode", None), ("precision", "fp32")):
        if d[name] == default:  # execution paths at today's default: the key of before
            del d[name]
    if cfg.model == "gru":
        del d["paper_normalisation"]  # a switch of the convolutional parts: the same GRU model
    blob = json.dumps({"config": d, "version": __version__}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def train_or_load(
    cfg: TrainConfig | None = None, progress: bool | None = None, directory=None
) -> TrainResult:
    """Train once, reuse afterwards.

    The checkpoint lives in ``directory / <model>-<cache_key(cfg)>``
    (``directory`` defaults to :func:`cache_dir`). A finished run is loaded;
    an interrupted one is resumed; otherwise training starts.
    """
    cfg = cfg if cfg is not None else TrainConfig()
    run_dir = Path(directory or cache_dir()) / f"{cfg.model}-{cache_key(cfg)}"
    ckpt = run_dir / CHECKPOINT_NAME
    if ckpt.is_file():
        try:
            state = read_checkpoint(ckpt)
        except CheckpointError as err:
            raise CheckpointError(
                f"{err} (a damaged cache entry: delete {run_dir} to train again)"
            ) from None
        if state["epoch"] >= cfg.epochs:
            return load_checkpoint(ckpt, device=cfg.device)
    return train(cfg, out_dir=run_dir, resume=True, progress=progress)
