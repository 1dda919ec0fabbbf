r"""What determines a training run: :class:`TrainConfig`, its data and its model.

The seed notebook's experiment (sections 10-11): Adam with learning rate
:math:`10^{-3}`, batches of 128, 30 epochs over 10,000 sorting examples of
length 8-20 drawn from a vocabulary of 50. :class:`TrainConfig` holds those
numbers; :func:`make_datasets` draws the run's three data sets and
:func:`build_model` builds its freshly initialised model. Both depend on the
config alone, so that two runs with the same seed see the same data.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field, fields, replace

from torch import nn

from .._checks import check_int
from ..convs2s import ConvS2S, ConvS2SConfig
from ..data import SortingDataset, generate_dataset
from ..hybrid import HYBRID_NAMES, HybridConfig, HybridSeq2Seq
from ..rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from .device import resolve_device
from .paths import PRECISIONS, check_compile_mode

__all__ = ["MODEL_NAMES", "LIMITS", "TrainConfig", "make_datasets", "build_model"]

#: Model names accepted by :class:`TrainConfig` and the command line: the two models, then
#: the hybrids ``"<encoder>+<decoder>"`` (:mod:`convs2s_edu.hybrid`).
MODEL_NAMES = ("convs2s", "gru", *HYBRID_NAMES)

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
        :func:`torch.compile` the encoder and decoder (:mod:`convs2s_edu.training.paths`); same
        parameters, same checkpoint. Default ``False`` (eager).
    compile_mode : {None, "default", "reduce-overhead", "max-autotune"}
        ``torch.compile``'s mode; ``"reduce-overhead"`` uses CUDA graphs (CUDA only).
    precision : {"fp32", "bf16"}
        ``"bf16"``: mixed precision (autocast) on CUDA or on a CPU with bf16 matrix
        instructions; refused with a ``ValueError`` elsewhere
        (:func:`convs2s_edu.training.paths.check_precision`).

    Raises
    ------
    ValueError
        For a field of the wrong type or out of range; the message names the
        field, the value and the allowed range.

    Notes
    -----
    Every field is type-checked (``lr=True`` or ``clip_norm="x"`` are refused,
    not coerced) and the integer fields are bounded by :data:`LIMITS`:
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
            setattr(
                self, name, check_int(name, getattr(self, name), 0 if name == "seed" else 1, high)
            )
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
