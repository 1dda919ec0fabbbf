r"""What determines a training run: :class:`TrainConfig`, its data and its model.

The original notebook's experiment (sections 10-11): Adam with learning rate
:math:`10^{-3}`, batches of 128, 30 epochs over 10,000 sorting examples of length 8-20
drawn from a vocabulary of 50. :class:`TrainConfig` holds those numbers;
:func:`make_datasets` draws the run's three data sets, :func:`training_set` the examples
of one epoch and :func:`build_model` builds its freshly initialised model. All depend on
the config alone, so that two runs with the same seed see the same data.

Two recipes
-----------
:data:`RECIPES` names two ways to train the same models (:meth:`TrainConfig.recipe`):
``"original"``, the original notebook's (the defaults), and ``"fast"``, a recipe of the
kind transformer training made standard: a fresh batch of never-seen examples every step,
Adam with :math:`\beta_2 = 0.98`, a linear warm-up over the first 5% of the steps to a
peak learning rate of :math:`3 \cdot 10^{-3}`, then a linear decay to 0, no dropout, 800
steps. What the recipe is worth, in steps and in accuracy, is measured on the site.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import asdict, dataclass, field, fields, replace

from torch import nn

from .._checks import check_int
from ..data import TASKS, SortingDataset, generate_dataset
from ..fast.paths import PRECISIONS, check_compile_mode
from ..registry import MODELS, model_entry
from .device import resolve_device

__all__ = [
    "MODEL_NAMES",
    "LIMITS",
    "BATCHINGS",
    "LR_SCHEDULES",
    "RECIPES",
    "TrainConfig",
    "make_datasets",
    "training_set",
    "build_model",
]

#: The package's own models (:data:`~convs2s_edu.registry.MODELS` holds every registered
#: one, which :class:`TrainConfig`'s ``model`` and the command line accept).
MODEL_NAMES = tuple(MODELS)

#: Upper bounds of :class:`TrainConfig`'s integer fields (the lower: 1, 0 for ``seed``):
#: beyond them a run would exhaust memory or time long before it finished, so they are
#: refused up front. The length bound is a memory bound: each attention map holds
#: ``batch_size * max_len^2`` floats per layer (128 MiB at 128 x 512^2, several of them
#: kept for the backward pass), and a run with ``max_len = 100,000`` would be killed by
#: the operating system with no message instead of failing clearly.
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

#: How the training examples are put into batches: random (the original notebook's), or
#: of equal or neighbouring lengths (:func:`~convs2s_edu.data.length_batches`).
BATCHINGS = ("random", "bucket", "pooled")

#: Learning-rate schedules: ``"constant"`` (the original notebook's) or
#: ``"warmup-linear"`` (a linear warm-up over the first ``warmup`` fraction of the
#: steps, then a linear decay to 0).
LR_SCHEDULES = ("constant", "warmup-linear")

#: The named recipes of :meth:`TrainConfig.recipe`: the fields each sets (see the
#: module's docstring; an "epoch" of ``"fast"`` is 12,800 new examples, 100 steps).
RECIPES = {
    "original": {},
    "fast": {
        "fresh_data": True,
        "n_train": 12_800,
        "epochs": 8,
        "lr": 3e-3,
        "lr_schedule": "warmup-linear",
        "warmup": 0.05,
        "adam_betas": (0.9, 0.98),
        "model_options": {"dropout": 0.0},
    },
}


def _real(x) -> bool:
    """A real number, not a bool (to Python ``True`` is the integer 1)."""
    return not isinstance(x, bool) and isinstance(x, numbers.Real)


def _positive_real(x) -> bool:
    return _real(x) and math.isfinite(x) and x > 0


def _name_in(names: tuple):
    return lambda value: isinstance(value, str) and value in names


def _betas(value) -> bool:
    """Two numbers in ``[0, 1)``, as a pair of any kind (not a string)."""
    if (
        isinstance(value, (str, bytes))
        or not hasattr(value, "__len__")
        or len(value) != 2
    ):
        return False
    return all(_real(b) and 0 <= b < 1 for b in value)


#: The checks of :class:`TrainConfig`'s fields that are not integers (those are bounded
#: by :data:`LIMITS`), in order: the field, what its message says it must be, the test.
_CHECKS = (
    (
        "model",
        lambda: f"one of the registered models {tuple(MODELS)}",
        _name_in(MODELS),
    ),
    ("task", f"one of {TASKS}", _name_in(TASKS)),
    ("fresh_data", "True or False", lambda v: isinstance(v, bool)),
    ("batching", f"one of {BATCHINGS}", _name_in(BATCHINGS)),
    ("lr_schedule", f"one of {LR_SCHEDULES}", _name_in(LR_SCHEDULES)),
    ("warmup", "a fraction in [0, 1)", lambda v: _real(v) and 0 <= v < 1),
    ("adam_betas", "two numbers in [0, 1)", _betas),
    ("lr", "a positive finite number", _positive_real),
    (
        "clip_norm",
        "a positive finite number or None",
        lambda v: v is None or _positive_real(v),
    ),
    ("paper_normalisation", "True or False", lambda v: isinstance(v, bool)),
    ("device", "'auto', 'cpu', 'cuda' or 'cuda:N'", lambda v: isinstance(v, str)),
    (
        "model_options",
        "a dict of option names (str) to values",
        lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v),
    ),
    ("compile", "True or False", lambda v: isinstance(v, bool)),
    ("fast", "True, False or None", lambda v: v is None or isinstance(v, bool)),
    ("precision", f"one of {PRECISIONS}", _name_in(PRECISIONS)),
)


@dataclass
class TrainConfig:
    r"""Everything that determines a training run.

    The data, optimiser and schedule defaults are the original notebook's; two
    defaults are not: gradient clipping (``clip_norm``) and the paper's
    ConvS2S (``paper_normalisation``, see :func:`build_model`).

    Parameters
    ----------
    model : str
        Which model to train, by its name in :data:`~convs2s_edu.registry.MODELS`: the
        package registers ``"convs2s"``, ``"gru"`` (the GRU + Bahdanau model) and the
        hybrids ``"gru+conv"`` and ``"conv+gru"`` (:class:`~convs2s_edu.HybridSeq2Seq`).
    vocab_size, min_len, max_len : int
        The sorting task: tokens ``1..vocab_size``, lengths ``min_len..max_len``.
    task : {"sort", "reverse", "copy"}
        What the target is (:data:`~convs2s_edu.data.TASKS`; seed: sorting).
    n_train, n_valid, n_test : int
        Sizes of the training, held-out and test sets (:func:`make_datasets`); with
        ``fresh_data``, ``n_train`` is the number of new examples per epoch.
    batch_size : int
        Examples per optimiser step (seed: 128).
    lr : float
        Adam's learning rate (seed: 1e-3); the peak of a ``"warmup-linear"`` schedule.
    epochs : int
        Passes over the training set (seed: 30); rounds of new examples with
        ``fresh_data``.
    fresh_data : bool
        ``False`` (seed): the same ``n_train`` examples every epoch. ``True``: new ones
        every epoch, never used before (:func:`training_set`).
    batching : {"random", "bucket", "pooled"}
        How the examples are put into batches (:data:`BATCHINGS`).
    lr_schedule : {"constant", "warmup-linear"}
        :data:`LR_SCHEDULES`; every step's factor is :func:`~convs2s_edu.training.lr_factor`.
    warmup : float
        The warm-up fraction of ``"warmup-linear"``, in ``[0, 1)`` (ignored otherwise).
    adam_betas : tuple of float
        Adam's :math:`(\beta_1, \beta_2)` (seed: PyTorch's ``(0.9, 0.999)``).
    eval_every : int or None
        Every this many optimiser steps (and after the last one), score the held-out
        set's exact match into :attr:`History.evals <convs2s_edu.training.History>`, the
        learning curve. ``None``: only the held-out loss after every epoch.
    fast : bool or None
        ``True``: train through the fast paths of :mod:`convs2s_edu.fast`, the same
        function as the reference model, computed another way (the same values and
        gradients; dropout's masks drawn otherwise, the same in distribution);
        the trained model is returned as the reference. ``False`` trains the model
        files' code as written. With ``compile``, ``fast`` is ``False``: the compiled
        model runs the fast paths that compile
        (:func:`~convs2s_edu.fast.paths.apply_compile`), not the eager ones.
        ``None`` (default): whichever of the two a short timing on this machine found
        faster (:func:`~convs2s_edu.training.calibrate.resolve_path`); :func:`train`
        writes the choice into the config it returns and checkpoints.
    compile, compile_mode, precision
        The execution path of the step (:mod:`convs2s_edu.fast.paths`).

    Raises
    ------
    ValueError
        For a field of the wrong type (``lr=True`` or ``clip_norm="x"`` are refused, not
        coerced; ``TypeError`` for ``compile`` and ``fast``) or out of range
        (:data:`LIMITS`); the message names the field, the value and the allowed range.

    See Also
    --------
    TrainConfig.recipe : the named recipes (:data:`RECIPES`).
    """

    model: str = "convs2s"
    vocab_size: int = 50
    min_len: int = 8
    max_len: int = 20
    task: str = "sort"
    n_train: int = 10_000
    n_valid: int = 1_000
    n_test: int = 1_000
    batch_size: int = 128
    lr: float = 1e-3
    epochs: int = 30
    fresh_data: bool = False
    batching: str = "random"
    lr_schedule: str = "constant"
    warmup: float = 0.05
    adam_betas: tuple = (0.9, 0.999)
    eval_every: int | None = None
    clip_norm: float | None = 1.0
    paper_normalisation: bool = True
    seed: int = 0
    device: str = "auto"
    model_options: dict = field(default_factory=dict)
    fast: bool | None = None
    compile: bool = False
    compile_mode: str | None = None
    precision: str = "fp32"

    def __post_init__(self):
        for name, must_be, ok in _CHECKS:
            value = getattr(self, name)
            if not ok(value):
                error = TypeError if name in ("compile", "fast") else ValueError
                # the registry's now
                must_be = must_be() if callable(must_be) else must_be
                raise error(f"{name} must be {must_be}, got {value!r}")
        for name, high in LIMITS.items():
            low = 0 if name == "seed" else 1
            setattr(self, name, check_int(name, getattr(self, name), low, high))
        if self.eval_every is not None:
            self.eval_every = check_int("eval_every", self.eval_every, 1, 10**9)
        if self.min_len > self.max_len:
            raise ValueError(
                f"min_len must be <= max_len, got {self.min_len} > {self.max_len}"
            )
        if self.compile and self.fast:
            raise ValueError(
                "compile=True needs fast=False: the compiled model runs the fast paths "
                "that compile (apply_compile), not the eager fast paths"
            )
        resolve_device(self.device)  # the name of a device this machine has
        check_compile_mode(self.compile_mode)
        self.adam_betas = (float(self.adam_betas[0]), float(self.adam_betas[1]))
        self.model_options = dict(self.model_options)

    def replace(self, **changes) -> TrainConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    @classmethod
    def recipe(cls, name: str, **changes) -> TrainConfig:
        """The config of a named recipe (:data:`RECIPES`), with ``changes`` on top.

        ``model_options`` of ``changes`` are merged into the recipe's (so
        ``recipe("fast", model_options={"hidden_dim": 64})`` keeps its ``dropout=0``).

        >>> TrainConfig.recipe("fast").total_steps
        800
        """
        if name == "seed":  # its name until 0.4: "seed" now means a random seed only
            warnings.warn(
                'the recipe "seed" is now called "original"', DeprecationWarning, 2
            )
            name = "original"
        if name not in RECIPES:
            raise ValueError(f"unknown recipe {name!r}; allowed: {', '.join(RECIPES)}")
        fields_ = {**RECIPES[name], **changes}
        options = {
            **RECIPES[name].get("model_options", {}),
            **changes.get("model_options", {}),
        }
        if options:
            fields_["model_options"] = options
        return cls(**fields_)

    @property
    def steps_per_epoch(self) -> int:
        r"""Optimiser steps of one epoch in one process: :math:`\lceil n_{train} / B \rceil`."""
        return -(-self.n_train // self.batch_size)

    @property
    def total_steps(self) -> int:
        """Optimiser steps of the whole run in one process (epochs x steps per epoch)."""
        return self.epochs * self.steps_per_epoch

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        """The inverse of ``to_dict()``; unknown field names are a ``ValueError``."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(str(k) for k in d if k not in names)
        if unknown:
            raise ValueError(
                f"unknown TrainConfig field(s) {', '.join(unknown)}; allowed: {', '.join(names)}"
            )
        return cls(**d)


#: The second word of every data stream of a seed (``[seed, role]``): never 0, so that
#: no stream of :func:`make_datasets` or :func:`training_set` is the plain ``seed``'s.
STREAM_ROLES = {"training": 1, "held-out": 2, "test": 3, "epoch": 4}


def _draw(cfg: TrainConfig, n: int, seed, exclude: set, what: str) -> list:
    """``n`` examples of ``cfg``'s task drawn with ``seed``, none of whose sources is in
    ``exclude``: a clashing draw is replaced by one of a fresh draw (seeded with
    ``seed`` and a counter) whose source is new."""
    examples = generate_dataset(
        n, cfg.min_len, cfg.max_len, cfg.vocab_size, seed, cfg.task
    )
    if not exclude:
        return examples
    examples = [e for e in examples if tuple(e[0]) not in exclude]
    # the sources no new example may have
    taken = exclude | {tuple(x) for x, _ in examples}
    refill = 0
    while len(examples) < n:
        refill += 1
        if refill > 100:
            raise ValueError(
                f"cannot draw {n} {what} examples disjoint from the other sets: lengths "
                f"{cfg.min_len}..{cfg.max_len} over {cfg.vocab_size} tokens give too few "
                "distinct sequences"
            )
        seeds = [*seed, refill] if isinstance(seed, list) else [seed, refill]
        for e in generate_dataset(
            n, cfg.min_len, cfg.max_len, cfg.vocab_size, seeds, cfg.task
        ):
            if len(examples) < n and tuple(e[0]) not in taken:
                examples.append(e)
                taken.add(tuple(e[0]))
    return examples


def make_datasets(
    cfg: TrainConfig,
) -> tuple[SortingDataset, SortingDataset, SortingDataset]:
    """The training, held-out and test sets of ``cfg``, drawn from the independent
    streams
    :class:`numpy.random.SeedSequence` gives ``[seed, role]`` with the roles of
    :data:`STREAM_ROLES` (no two seeds or roles share a stream, as ``seed``, ``seed + 1``
    would). A role is never 0: numpy pads a seed with zeros, so ``[seed, 0]`` would be
    the stream of the plain ``seed``, which any ``generate_dataset(..., seed=seed)``
    elsewhere draws from.

    They depend on the task fields and ``seed`` only, so a ConvS2S and a GRU
    run with the same seed train and are scored on identical examples.

    The three sets are pairwise disjoint: a held-out or test example whose source also
    occurs in an earlier set is replaced by a fresh draw (on the original notebook's
    task, 10,000 sequences of length 8-20 over 50 tokens, a repeat is so unlikely that
    the sets are exactly the three independent draws). ``ValueError`` when the task has
    too few distinct sequences for that.

    With ``fresh_data`` the held-out and test sets are drawn first (the same streams),
    and the training set is the first epoch's (:func:`training_set`: every epoch avoids
    their sources).
    """
    roles = STREAM_ROLES
    draws = [
        ("held-out", cfg.n_valid, [cfg.seed, roles["held-out"]]),
        ("test", cfg.n_test, [cfg.seed, roles["test"]]),
    ]
    if not cfg.fresh_data:
        draws.insert(0, ("training", cfg.n_train, [cfg.seed, roles["training"]]))
    seen: set[tuple[int, ...]] = set()  # the sources of the sets drawn so far
    sets = []
    for what, n, seed in draws:
        examples = _draw(cfg, n, seed, seen, what)
        seen.update(tuple(x) for x, _ in examples)
        sets.append(SortingDataset(examples, cfg.vocab_size, cfg.task))
    if cfg.fresh_data:
        sets.insert(0, training_set(cfg, 1, sets))
    return tuple(sets)


def training_set(cfg: TrainConfig, epoch: int, held_out=None) -> SortingDataset:
    """The training examples of ``epoch`` (1-based).

    Without ``fresh_data``: the one training set of :func:`make_datasets`, every
    epoch. With it: ``n_train`` examples drawn with the seed ``[seed, 4, epoch]``
    (:data:`STREAM_ROLES`: a stream apart from the held-out and test streams), none of
    whose sources is a held-out or test source.

    Parameters
    ----------
    cfg : TrainConfig
    epoch : int
        ``>= 1``.
    held_out : tuple of SortingDataset, optional
        The held-out and test sets, when the caller has them already.
    """
    if not cfg.fresh_data:
        return make_datasets(cfg)[0]
    if held_out is None:
        held_out = make_datasets(cfg.replace(n_train=1))[1:]
    exclude = {tuple(x) for ds in held_out for x, _ in ds.examples}
    examples = _draw(
        cfg, cfg.n_train, [cfg.seed, STREAM_ROLES["epoch"], epoch], exclude, "training"
    )
    return SortingDataset(examples, cfg.vocab_size, cfg.task)


def build_model(cfg: TrainConfig) -> nn.Module:
    """A freshly initialised model of ``cfg.model`` for the task of ``cfg``: its
    registry entry's builder (:mod:`convs2s_edu.registry`) with the task's vocabulary,
    position table and ``cfg.model_options``.

    ``paper_normalisation`` starts every convolutional part from
    :meth:`ConvS2SConfig.paper <convs2s_edu.ConvS2SConfig.paper>`; ``model_options`` win over it.
    """
    options = {
        "vocab_size": cfg.vocab_size,
        "max_positions": max(64, cfg.max_len + 1),
        **cfg.model_options,
    }
    try:
        return model_entry(cfg.model).build(cfg.paper_normalisation, **options)
    except TypeError as err:  # an unknown option name
        raise ValueError(f"bad model_options for {cfg.model!r}: {err}") from None


def __getattr__(name: str):
    """``IGNORED_FIELDS``, deprecated: each registry entry's ``ignores`` now."""
    if name == "IGNORED_FIELDS":
        warnings.warn(
            "IGNORED_FIELDS is deprecated and will be removed in the next release: use "
            "convs2s_edu.registry.model_entry(name).ignores",
            DeprecationWarning,
            stacklevel=2,
        )
        return {n: e.ignores for n, e in MODELS.items() if e.ignores}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
