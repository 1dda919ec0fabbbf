r"""The experiments and their arms, and the budget every run of them trains with.

=====================  ==============================================================
experiment             arms
=====================  ==============================================================
``encoder_decoder``    ``convs2s``, ``gru``, ``gru+conv``, ``conv+gru`` (seed article §1-2)
``positions``          learned positions on both sides, source only, target only, none;
                       the GRU as a reference (paper §5.4)
``attention_layers``   attention in all decoder layers, the first, the last, two mixes
                       (paper §5.5)
``depth_kernel``       layers :math:`L \in \{2, 4, 6\}` × kernel width :math:`k \in \{3, 5\}`
                       (paper §5.6)
``beam``               ConvS2S and the GRU (the ``encoder_decoder`` runs, no extra
                       training) decoded with beam sizes 1-10 (paper §5.3, article §2)
=====================  ==============================================================

The budget (examples, epochs, seeds) is the same for every arm and lives in one
place, :func:`budget`; the full site uses :data:`FULL_BUDGET` and
:data:`FULL_SEEDS`, the quick site (``CONVS2S_EDU_QUICK=1``) :data:`QUICK_BUDGET`
and :data:`QUICK_SEEDS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..._checks import check_int
from ...training.config import TrainConfig
from ..site import is_quick_mode

__all__ = [
    "FULL_BUDGET",
    "FULL_SEEDS",
    "QUICK_BUDGET",
    "QUICK_SEEDS",
    "LONG_LENGTHS",
    "BEAM_EXAMPLES",
    "DECODE_BATCH",
    "Budget",
    "budget",
    "receptive_field",
    "Arm",
    "Experiment",
    "EXPERIMENTS",
    "get_experiment",
]

# --------------------------------------------------------------------------
# Budgets: every choice in one place
# --------------------------------------------------------------------------

#: Seeds per arm in the full build: three, the fewest that give a min-max spread worth
#: reading (issue 9 asks for at least 3). A seed sets the data, the initialisation,
#: dropout and the shuffling (:class:`~convs2s_edu.TrainConfig`).
FULL_SEEDS = 3

#: Training budget of one run in the full build, the same for every arm of every experiment.
#: The main models train 2 × 30 epochs × 10,000 examples (600,000 example-passes); the
#: experiments train 16 distinct arms × 3 seeds = 48 runs of 2,000 examples × 5 epochs
#: (10,000 example-passes each, 480,000 in all). Several arms cost more per example than
#: the main ConvS2S (4 layers, kernel 3) and every run is also decoded (test set, longer
#: lengths, beams), so the experiments' total time comes out at about the main models'
#: (on a busy 2-core machine, one thread: 12 runs of the encoder × decoder experiment took
#: 463 s, ~38 s a run, extrapolated ~35 min for all 48 runs with their decoding, against
#: ~30 min for the two main models at the same per-example speed; the issue allows the
#: experiments to double the site's build time).
#: ``n_valid`` / ``n_test``: 500 held-out and test examples, enough to tell accuracies
#: a few points apart, cheap to decode.
FULL_BUDGET = {"n_train": 2_000, "n_valid": 500, "n_test": 500, "epochs": 5}

#: Seeds per arm in the quick build: one (so every verdict is "not resolved").
QUICK_SEEDS = 1

#: Training budget of one run in the quick build: tiny, so that all 16 arms train in a
#: minute or two on two CPU cores; its numbers say nothing about the full experiment.
QUICK_BUDGET = {"n_train": 500, "n_valid": 100, "n_test": 100, "epochs": 2}

#: The longer test lengths of the ``positions`` experiment (trained on 8-20): they need a
#: position table of at least 41 rows (40 tokens + ``<sos>``); the default has 64.
LONG_LENGTHS = ((21, 30), (31, 40))

#: Beam sizes of the ``beam`` experiment: eight sizes across 1-10 in the full build (the
#: paper's speed table goes up to 5, the issue asks for 1-10; 7 and 9 are left out to save
#: decoding time), four of them in the quick build.
FULL_BEAM_SIZES = (1, 2, 3, 4, 5, 6, 8, 10)
QUICK_BEAM_SIZES = (1, 2, 5, 10)

#: Test examples decoded per beam size (the first ones of the test set): a beam of 10
#: decodes ten hypotheses per source, and beam search over the whole test set for every
#: size took about as long as training the run (measured on a busy 2-core machine).
BEAM_EXAMPLES = 200

#: Sources decoded together when decoding is timed (the test set is decoded in chunks).
DECODE_BATCH = 256


#: The three verdicts of :func:`verdict`.
@dataclass(frozen=True)
class Budget:
    """How much every run of an experiment trains and is tested on.

    Attributes
    ----------
    seeds : int
        Runs per arm, seeds ``0 .. seeds - 1``.
    n_train, n_valid, n_test, epochs : int
        The :class:`~convs2s_edu.TrainConfig` fields every arm shares.
    beam_sizes : tuple of int
        Beam sizes of the ``beam`` experiment.
    quick : bool
        True for the quick build's budget.
    """

    seeds: int
    n_train: int
    n_valid: int
    n_test: int
    epochs: int
    beam_sizes: tuple
    quick: bool = False

    def train_config(self, arm: Arm, seed: int) -> TrainConfig:
        """The :class:`~convs2s_edu.TrainConfig` of ``arm`` with ``seed`` under this budget."""
        return TrainConfig(
            model=arm.model,
            n_train=self.n_train,
            n_valid=self.n_valid,
            n_test=self.n_test,
            epochs=self.epochs,
            seed=seed,
            model_options=dict(arm.options),
        )

    def describe(self) -> str:
        """One line for a page: the budget, and how it compares with the main models'."""
        main = TrainConfig()
        mode = "quick build" if self.quick else "full build"
        return (
            f"{mode}: {self.seeds} seed(s) per arm; every run trains on "
            f"{self.n_train:,} examples × {self.epochs} epochs (the main models: "
            f"{main.n_train:,} × {main.epochs}), held-out loss on {self.n_valid:,} "
            f"examples, scores on {self.n_test:,} test examples (greedy decoding)"
        )


def budget(
    quick: bool | None = None, seeds: int | None = None, epochs: int | None = None
) -> Budget:
    """The experiments' budget: the full build's, or the quick build's.

    Parameters
    ----------
    quick : bool, optional
        Default: :func:`~convs2s_edu.lab.site.is_quick_mode` (``CONVS2S_EDU_QUICK=1``).
    seeds, epochs : int, optional
        Override the number of seeds per arm or of epochs per run (``>= 1``).

    Returns
    -------
    Budget
    """
    quick = is_quick_mode() if quick is None else bool(quick)
    sizes = dict(QUICK_BUDGET if quick else FULL_BUDGET)
    if epochs is not None:
        sizes["epochs"] = check_int("epochs", epochs)
    n_seeds = QUICK_SEEDS if quick else FULL_SEEDS
    if seeds is not None:
        n_seeds = check_int("seeds", seeds)
    return Budget(
        seeds=n_seeds,
        beam_sizes=QUICK_BEAM_SIZES if quick else FULL_BEAM_SIZES,
        quick=quick,
        **sizes,
    )


# --------------------------------------------------------------------------
# Experiments and their arms
# --------------------------------------------------------------------------


def receptive_field(n_layers: int, kernel_size: int) -> int:
    r"""Input positions one output of ``n_layers`` stacked convolutions of width ``k`` sees.

    .. math:: r = 1 + L\,(k - 1)

    Each layer widens the window by :math:`k - 1` (Gehring et al., 2017, §3.2:
    "a stack of 6 blocks with k = 5 results in an input field of 25 elements").
    """
    n_layers = check_int("n_layers", n_layers)
    kernel_size = check_int("kernel_size", kernel_size)
    # r = 1 + L (k - 1)
    return 1 + n_layers * (kernel_size - 1)


@dataclass(frozen=True)
class Arm:
    """One arm of an experiment: a model and its ``model_options``.

    Attributes
    ----------
    name : str
        Short name (command line, tables).
    label : str
        Longer label for figures.
    model : str
        :data:`~convs2s_edu.MODEL_NAMES` entry.
    options : dict
        ``TrainConfig.model_options`` of the arm.
    columns : dict
        Constant columns of the arm's row (e.g. its receptive field).
    """

    name: str
    label: str
    model: str = "convs2s"
    options: dict = field(default_factory=dict)
    columns: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Experiment:
    """A named list of arms and what is measured on every run.

    Attributes
    ----------
    name : str
    title : str
    question : str
    arms : tuple of Arm
    measures : tuple of str
        Measurements beyond the base ones (exact match, token accuracy, held-out loss,
        seconds per epoch): ``"greedy_time"``, ``"long"``, ``"beam"``.
    """

    name: str
    title: str
    question: str
    arms: tuple
    measures: tuple = ()

    @property
    def arm_names(self) -> tuple:
        return tuple(a.name for a in self.arms)

    def select(self, names: Sequence[str] | None = None) -> tuple:
        """The arms called ``names`` (all by default); unknown names raise ``ValueError``."""
        if names is None:
            return self.arms
        if isinstance(names, str):
            names = [names]
        unknown = [n for n in names if n not in self.arm_names]
        if unknown or not names:
            raise ValueError(
                f"unknown arm(s) {unknown} of experiment {self.name!r}; "
                f"allowed: {', '.join(self.arm_names)}"
            )
        return tuple(a for a in self.arms if a.name in names)


def _depth_arm(n_layers: int, k: int) -> Arm:
    options = (
        {}
        if (n_layers, k) == (4, 3)
        else {"n_encoder_layers": n_layers, "n_decoder_layers": n_layers, "kernel_size": k}
    )
    return Arm(
        f"L{n_layers}-k{k}",
        f"L={n_layers}, k={k}",
        "convs2s",
        options,
        {"layers": n_layers, "kernel_size": k, "receptive_field": receptive_field(n_layers, k)},
    )


#: Every experiment, by name. Arms that are the same run (e.g. the default ConvS2S) share
#: one cache entry: it trains once for all experiments.
EXPERIMENTS = {
    "encoder_decoder": Experiment(
        "encoder_decoder",
        "Encoder × decoder",
        "Does a GRU encoder with a convolutional decoder sort better than the other three "
        "combinations, as the seed article expects for targets that re-order the source?",
        (
            Arm("convs2s", "conv enc + conv dec (ConvS2S)", "convs2s"),
            Arm("gru", "GRU enc + GRU dec", "gru"),
            Arm("gru+conv", "GRU enc + conv dec", "gru+conv"),
            Arm("conv+gru", "conv enc + GRU dec", "conv+gru"),
        ),
        ("greedy_time",),
    ),
    "positions": Experiment(
        "positions",
        "Position embeddings",
        "What do ConvS2S's learned position embeddings buy on the trained lengths, and what "
        "do they cost on longer sequences than any seen in training?",
        (
            Arm("both", "positions: source + target", "convs2s"),
            Arm("source", "positions: source only", "convs2s", {"target_positions": False}),
            Arm("target", "positions: target only", "convs2s", {"source_positions": False}),
            Arm(
                "none",
                "no positions",
                "convs2s",
                {"source_positions": False, "target_positions": False},
            ),
            Arm("gru", "GRU (reference)", "gru"),
        ),
        ("long",),
    ),
    "attention_layers": Experiment(
        "attention_layers",
        "Attention in which decoder layers",
        "Does ConvS2S need an attention in every decoder layer, or is one enough?",
        (
            Arm("all", "attention in layers 1-4", "convs2s"),
            Arm("first", "layer 1 only", "convs2s", {"attention_layers": [1]}),
            Arm("last", "layer 4 only", "convs2s", {"attention_layers": [4]}),
            Arm("first+last", "layers 1 and 4", "convs2s", {"attention_layers": [1, 4]}),
            Arm("lower", "layers 1 and 2", "convs2s", {"attention_layers": [1, 2]}),
        ),
        (),
    ),
    "depth_kernel": Experiment(
        "depth_kernel",
        "Depth and kernel width",
        "How many layers of which kernel width does the task need, and does the receptive "
        "field 1 + L(k-1) have to cover the sequence?",
        tuple(_depth_arm(n, k) for n in (2, 4, 6) for k in (3, 5)),
        (),
    ),
    "beam": Experiment(
        "beam",
        "Beam width",
        "Does a wider beam find better outputs, and what does it cost in decoding time?",
        (Arm("convs2s", "ConvS2S", "convs2s"), Arm("gru", "GRU + attention", "gru")),
        ("beam",),
    ),
}


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``; an unknown name raises ``ValueError`` listing them."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; allowed: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]
