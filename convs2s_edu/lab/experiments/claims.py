r"""The claims of the paper and of Shi's article, and how the experiments check them.

Every :class:`Claim` says what its source claims, with the source's own numbers
(``Claim.reported``, context only), which kind of claim it is, the arms and the
metric that test it and the smallest difference that would matter
(``Claim.min_effect``, stated here before any run, with its reason in
``Claim.why``). :func:`check_claims` turns the experiments' runs into one row per
claim; every judged pair of arms gets its verdict from
:mod:`~convs2s_edu.lab.experiments.inference` (paired seeds, the minimum effect,
one family for the whole page).

Kinds of claim
--------------
*final quality*
    Scored on every seed's test set (2,000 sources in the full build) at the end of the
    budget the row names
    (:attr:`Budget.label <convs2s_edu.lab.experiments.Budget.label>`): a small-scale
    check of the source's statement, not the statement itself. The paper's claims (which
    it states in perplexity) by the test loss, the article's and the beam's by the
    sequence errors, both as ratios, which survive a loss or an error count that can
    fall to 0.
*learning speed*
    Training steps to 90% held-out exact match. A run that never got there counts at the
    budget, a lower bound: a verdict stands only where the bounds count against it
    (*supported* needs every claimed run, *contradicted* every other run to reach the
    level), else *not resolved*. The same claim in seconds (steps times the median
    seconds per step of interleaved windows timed alone,
    :func:`~convs2s_edu.lab.experiments.timings.step_seconds`) is the steps times one
    constant per arm: no new evidence, so its rows are shown as derived from the row in
    steps, outside the family (:data:`~convs2s_edu.lab.experiments.DERIVED`).
*generation speed*
    Sentences decoded per second on the same test sources, in batches of equal length,
    interleaved (:func:`~convs2s_edu.lab.experiments.timings.generation_speed`): this
    implementation on this machine, not the paper's GPUs against GNMT. Shown with its
    interval, apart from the verdicts and out of the family
    (:data:`~convs2s_edu.lab.experiments.NOT_JUDGED`).

Differences
-----------
Per seed, oriented so that a positive :math:`d` is what the claim says, every
final-quality difference is a log ratio: for the test loss
:math:`d = \ln(L_{other} / L_{claimed})`; for the sequence errors
:math:`d = \ln\big((e_{other} + \tfrac12) / (e_{claimed} + \tfrac12)\big)` (half an
error added to each count, so that no errors still gives a ratio), with the beam's
errors counted among the beam examples,
:math:`(1 - \text{exact match}) \times n_{beam}`. Steps, seconds and speeds are log
ratios too. Every difference is shown as its ratio (e.g. "loss ratio 1.62 (90%: 1.31 to
2.00)"). A minimum effect is one ratio per kind of measure (``LOSS_RATIO``,
``ERROR_RATIO``, ``TEN_PERCENT``), the smallest difference a user would act on here; the
source's effects stay in ``Claim.reported``.

Claims against several arms
---------------------------
A claim that one arm is better than every other is judged pair by pair, every pair in
the family: it is *supported* when every pair is supported, *contradicted* when any pair
is contradicted, *no practical difference* when any pair shows no practical difference
(and none is contradicted), else *not resolved*; the row names the pair that decided it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .inference import (
    VERDICTS,
    min_detectable_effect,
    paired_test,
    seeds_for_power,
    verdicts,
)
from .record import experiment_result, load_record
from .registry import BEAM_EXAMPLES
from .timings import generation_speed, step_seconds

__all__ = [
    "KINDS",
    "NOT_JUDGED",
    "DERIVED",
    "Claim",
    "CLAIMS",
    "claim_values",
    "check_claims",
    "plan_seeds",
    "CheckedClaims",
    "checked_claims",
]

#: The kinds of claim (see the module's notes).
KINDS = ("final quality", "learning speed", "generation speed")
#: The verdict of a generation-speed row: measured with its interval, never judged.
NOT_JUDGED = "measured here, not judged"
#: The verdict of a learning-speed row in seconds: the row in steps times a timing
#: constant per arm, shown, never judged (its reason names the row in steps).
DERIVED = "derived, not judged"

#: 10% (steps, seconds and speeds compared as log ratios)
TEN_PERCENT = math.log(1.1)
#: A loss ratio of 1.25 (test losses compared as log ratios)
LOSS_RATIO = math.log(1.25)
#: An error ratio of 1.25 (sequence errors compared as log ratios)
ERROR_RATIO = math.log(1.25)
#: The largest effect, as a ratio, that the "detectable" column prints as a number.
DETECTABLE_CAP = 100.0

#: Metrics where lower is better.
LOWER_IS_BETTER = ("test_loss", "sequence_errors", "steps_to_0.9", "seconds_to_0.9")
#: Metrics compared as log ratios (claimed over other when higher is better).
LOG_METRICS = (*LOWER_IS_BETTER, "sentences_per_second")
#: Learning-speed metrics: a run that never reached the level counts at the budget.
CENSORED = ("steps_to_0.9", "seconds_to_0.9")

_SER, _LOSS, _SPEED = "sequence_errors", "test_loss", "sentences_per_second"
_NO_NUMBERS = "the source gives no number: the smallest difference a user would act on"
_LOSS_WHY = (
    "a loss ratio of 1.25: a quarter more test loss is the smallest difference a user "
    "would act on here; the paper's gaps are perplexities of translation, whose loss no "
    "model takes under the language's entropy, and mean nothing where the loss can fall "
    "to 0 (they stay under 'reported')"
)
_ERRORS_WHY = (
    "an error ratio of 1.25: a quarter more wrong sequences is the smallest difference a "
    "user would act on here"
)
_STEPS_WHY = "10% fewer steps: the smallest saving of training a user would act on"
_DERIVED_WHY = "not judged: the steps' row times a timing constant"
_MACHINE_WHY = "not judged: this implementation on this machine"

#: Per measure behind a metric (:func:`_base`): the kind of claim it judges, the
#: minimum effect and why (stated here, before any run), and what a difference is
#: called when shown as its ratio.
_MEASURES = {
    _LOSS: ("final quality", LOSS_RATIO, _LOSS_WHY, "loss ratio"),
    _SER: ("final quality", ERROR_RATIO, _ERRORS_WHY, "error ratio"),
    "steps_to_0.9": ("learning speed", TEN_PERCENT, _STEPS_WHY, "steps ratio"),
    "seconds_to_0.9": ("learning speed", TEN_PERCENT, _DERIVED_WHY, "time ratio"),
    _SPEED: ("generation speed", TEN_PERCENT, _MACHINE_WHY, "speed ratio"),
}
_RATIOS = {base: measure[3] for base, measure in _MEASURES.items()}


@dataclass(frozen=True)
class Claim:
    """One claim and how it is checked.

    Attributes
    ----------
    key : str
        A short name.
    text : str
        The claim: a quotation (in quotation marks) or, for the paper, a paraphrase.
    source : str
        Where it is made.
    reported : str
        What the source reports for it (its numbers), or that it gives none: context,
        never the minimum effect.
    experiment : str
        The experiment whose runs test it.
    claimed : tuple of (str, str)
        ``(arm, metric)`` the claim says is better.
    others : tuple of (str, str)
        What it must be better than (every one of them, each a pair of the family).
    kind : str, optional
        One of :data:`KINDS`; by default the kind of the claimed metric's measure.
    min_effect : float, optional
        The smallest difference that would matter, in the units of the differences (a
        log ratio, see the module's notes), stated before any run; by default the
        claimed metric's (a loss or error ratio of 1.25, 10% for steps, seconds and
        speeds).
    expects : str
        ``"better"`` (the claim is a difference) or ``"equivalent"`` (it says the two
        arms do about as well: *no practical difference* agrees with it, and so does
        *supported*, the claimed arm doing better still; one other arm only).
    note : str
        What a reader should know when reading the row (e.g. why the task matters).
    hardware : str
        For learning-speed claims in seconds, the thread count (e.g. ``"1 thread"``).
    why : str, optional
        Why the minimum effect is what it is (by default the reason of the measure's,
        or, for a minimum effect given here, that the source gives no number).
    short : str
        The claim in a few words, for the page's summary table
        (``ClaimsTable(rows, compact=True)``).
    reported_short : str
        What the source reports, in a few words, for the same table.
    """

    key: str
    text: str
    source: str
    reported: str
    experiment: str
    claimed: tuple
    others: tuple
    kind: str | None = None
    min_effect: float | None = None
    expects: str = "better"
    note: str = ""
    hardware: str = ""
    why: str | None = None
    short: str = ""
    reported_short: str = ""

    def __post_init__(self):
        # what is not given comes from the claimed metric's measure (_MEASURES)
        metric = self.claimed[1]
        kind, min_effect, why, _ = _MEASURES.get(_base(metric), (None, None, "", ""))
        if metric.startswith(_SER + "_beam"):
            why += f" (among the {BEAM_EXAMPLES:,} beam examples)"
        if self.min_effect is not None:  # a minimum effect of its own: its own reason
            min_effect, why = self.min_effect, self.why or _NO_NUMBERS
        object.__setattr__(self, "kind", self.kind or kind)
        object.__setattr__(self, "min_effect", min_effect)
        object.__setattr__(self, "why", self.why or why)
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.min_effect is None:
            raise ValueError(f"min_effect is needed: {metric!r} has no default one")
        if self.expects not in ("better", "equivalent"):
            raise ValueError(
                f"expects must be 'better' or 'equivalent', got {self.expects!r}"
            )
        if self.expects == "equivalent" and len(self.others) != 1:
            raise ValueError(
                f"an equivalence claim names one other arm, got {self.others}"
            )

    @property
    def arms(self) -> tuple:
        """The claimed arm, then every other arm, in the order of the claim."""
        return (self.claimed[0], *(other[0] for other in self.others))


def _base(metric: str) -> str:
    """The measure behind a metric's name: ``sequence_errors`` for the beam's errors
    too, without the ``@beam`` of a speed."""
    base = metric.split("@")[0]
    return _SER if base.startswith(_SER) else base


_TABLE3 = (
    "Table 3 (WMT'14 En-Fr, 6,003 sentences, batches of equal length): GNMT (8-layer LSTM) "
    "3,028 s on a K80 GPU and 1,322 s on 88 CPU cores; ConvS2S 142-327 s on GPUs and "
    "142 s on 48 CPU cores greedily, 256-587 s with a beam of 5"
)


def _generation(key: str, beam: int, other: str, against: str, short: str) -> Claim:
    """A row of Table 3's claim: ConvS2S against ``other``, decoding with a beam of ``beam``."""
    how = "greedy decoding" if beam == 1 else f"beam of {beam}"
    metric = f"sentences_per_second@beam{beam}"
    # Table 3's CPU rows: GNMT on 88 cores, ConvS2S on 48
    convs2s_seconds = "142 s" if beam == 1 else "482 s"
    return Claim(
        key,
        f"ConvS2S generates faster than a recurrent model ({how}, against {against})",
        "paper, §5.3 Generation Speed, Table 3",
        _TABLE3,
        "generation",
        ("convs2s", metric),
        ((other, metric),),
        short=f"ConvS2S generates faster ({short})",
        reported_short=f"{convs2s_seconds} against GNMT's 1,322 s (CPUs)",
    )


#: The claims checked on the site, in the order of the table.
CLAIMS = (
    Claim(
        "rnn-cnn-best",
        '"an RNN (encoder) - CNN (decoder) architecture can be expected to achieve better '
        'performance" (than every other encoder-decoder pair, sorting)',
        "Shi's article, §1 Encoder-decoder Architecture",
        "no numbers (an expectation)",
        "encoder_decoder",
        ("gru+conv", _SER),
        (("convs2s", _SER), ("gru", _SER), ("conv+gru", _SER)),
        short="GRU encoder + conv decoder beats every other pair",
        reported_short="none (an expectation)",
    ),
    Claim(
        "cnn-decoder-gru-encoder",
        '"A CNN-decoder has an advantage over an RNN-decoder in handling such target '
        'language texts" (GRU encoder, sorting)',
        "Shi's article, §2 Selections Based on Data Characteristics",
        "no numbers",
        "encoder_decoder",
        ("gru+conv", _SER),
        (("gru", _SER),),
        short="A conv decoder beats a GRU decoder (GRU encoder)",
        reported_short="none",
    ),
    Claim(
        "cnn-decoder-conv-encoder",
        '"A CNN-decoder has an advantage over an RNN-decoder in handling such target '
        'language texts" (convolutional encoder, sorting)',
        "Shi's article, §2 Selections Based on Data Characteristics",
        "no numbers",
        "encoder_decoder",
        ("convs2s", _SER),
        (("conv+gru", _SER),),
        short="A conv decoder beats a GRU decoder (conv encoder)",
        reported_short="none",
    ),
    Claim(
        "learns-in-fewer-steps",
        "ConvS2S learns the task in fewer training steps than the recurrent model "
        "(steps of 128 examples to 90% held-out exact match, sorting)",
        "original notebook; paper, abstract and §1",
        "no steps-to-quality comparison with an RNN",
        "encoder_decoder",
        ("convs2s", "steps_to_0.9"),
        (("gru", "steps_to_0.9"),),
        note="the same budget of steps for both arms; seconds are the steps times a step's cost",
        short="ConvS2S learns in fewer steps than the GRU",
        reported_short="none",
    ),
    Claim(
        "learns-faster-1",
        "ConvS2S learns the task in less training time than the recurrent model "
        "(seconds to 90% held-out exact match, sorting, one thread)",
        'original notebook ("the central claim of the paper"); paper, abstract and §1',
        'the paper: translation quality "at an order of magnitude faster speed, both on '
        'GPU and CPU" (generation; no training-time comparison with an RNN)',
        "encoder_decoder",
        ("convs2s", "seconds_to_0.9"),
        (("gru", "seconds_to_0.9"),),
        hardware="1 thread",
        short="ConvS2S learns in less time (one thread)",
        reported_short="none for training",
    ),
    Claim(
        "learns-faster-all",
        "ConvS2S learns the task in less training time than the recurrent model "
        "(seconds to 90% held-out exact match, sorting, every core)",
        "original notebook; paper, abstract and §1",
        "as above",
        "encoder_decoder",
        ("convs2s", "seconds_to_0.9"),
        (("gru", "seconds_to_0.9"),),
        hardware="all",
        short="ConvS2S learns in less time (every core)",
        reported_short="none for training",
    ),
    Claim(
        "positions-help-reverse",
        "Position embeddings help (paraphrased; source and target positions against "
        "none, on reversing, where the source order determines the target)",
        "paper, §5.4 Position Embeddings, Table 4",
        "validation perplexity 6.64 with both, 6.68 without either (BLEU 21.7 / 21.2)",
        "positions",
        ("reverse/both", _LOSS),
        (("reverse/none", _LOSS),),
        short="Position embeddings help (reversing)",
        reported_short="perplexity 6.64 against 6.68",
    ),
    Claim(
        "source-positions-matter-more",
        "Removing the source positions costs more than removing the target positions "
        "(paraphrased; reversing)",
        "paper, §5.4 Position Embeddings, Table 4",
        "perplexity 6.69 without source positions, 6.63 without target positions",
        "positions",
        ("reverse/source", _LOSS),
        (("reverse/target", _LOSS),),
        note="the arm 'reverse/source' keeps the source positions (removes the target's)",
        short="Source positions matter more than target ones",
        reported_short="perplexity 6.69 against 6.63",
    ),
    Claim(
        "positions-help-sort",
        "Position embeddings help (paraphrased; on sorting, where the source order "
        "carries no information about the target)",
        "paper, §5.4 Position Embeddings, Table 4 (transplanted to sorting)",
        "perplexity 6.64 with both, 6.68 without either, on translation",
        "positions",
        ("sort/both", _LOSS),
        (("sort/none", _LOSS),),
        note="a transplanted claim: in sorting the positions may be useless or harmful",
        short="Position embeddings help (sorting)",
        reported_short="perplexity 6.64 against 6.68 (translation)",
    ),
    Claim(
        "attention-every-layer",
        "Attention in every decoder layer gives a better model than attention in one "
        "layer (paraphrased; against the first only and the last only)",
        "paper, §5.5 Multi-step Attention, Table 5",
        "perplexity 6.65 with attention in all five layers, 7.15 in the first only, 7.66 "
        "in the last only",
        "attention_layers",
        ("all", _LOSS),
        (("first", _LOSS), ("last", _LOSS)),
        short="Attention in every decoder layer beats one layer",
        reported_short="perplexity 6.65 against 7.15 and 7.66",
    ),
    Claim(
        "deeper-encoder",
        "A deeper encoder helps (paraphrased; 4 encoder layers against 2, the decoder fixed at 4)",
        "paper, §5.6 Kernel Size and Depth, Figure 2 and Table 7",
        "encoder of 5 / 9 / 13 layers (k = 3, decoder fixed): 20.61 / 21.17 / 21.63 BLEU; "
        "depth helps the encoder up to about 9 layers",
        "depth",
        ("enc4-dec4", _LOSS),
        (("enc2-dec4", _LOSS),),
        short="A deeper encoder helps (4 layers against 2)",
        reported_short="BLEU 20.61 / 21.17 / 21.63 at 5 / 9 / 13 layers",
    ),
    Claim(
        "encoder-depth-over-decoder",
        '"Deeper architectures are particularly beneficial for the encoder but less so for '
        'the decoder" (4 + 4 layers made shallower in the encoder, 2 + 4, against in the '
        "decoder, 4 + 2: the shallow decoder has the lower loss)",
        "paper, §5.6 Kernel Size and Depth, Figure 2 and Tables 7-8",
        "BLEU with the encoder at 5 / 9 / 13 layers (k = 3, decoder fixed): 20.61 / 21.17 / "
        "21.63; with the decoder at 3 / 5 / 7 layers (k = 3, encoder fixed): 21.10 / 21.71 / "
        '21.62; "Decoder setups with two layers already perform well"',
        "depth",
        ("enc4-dec2", _LOSS),
        (("enc2-dec4", _LOSS),),
        note="the contrast of the two depth effects per seed: [ln L(2 + 4) - ln L(4 + 4)] - "
        "[ln L(4 + 2) - ln L(4 + 4)] = ln L(2 + 4) - ln L(4 + 2), the shared arm cancels",
        short="Depth helps the encoder more than the decoder",
        reported_short="BLEU 20.61 to 21.63 (encoder), 21.10 to 21.62 (decoder)",
    ),
    *(
        _generation(f"generates-faster-{key}", beam, other, against, short)
        for key, beam, other, against, short in (
            ("gru", 1, "gru", "the 1-layer GRU of the site", "greedy, the site's GRU"),
            (
                "matched",
                1,
                "gru-matched",
                "a GRU of ConvS2S's parameter count",
                "greedy, a GRU as large",
            ),
            (
                "beam",
                5,
                "gru-matched",
                "a GRU of ConvS2S's parameter count",
                "beam 5, a GRU as large",
            ),
        )
    ),
    Claim(
        "beam-convs2s",
        'beam search "selects the translation that is most likely to be correct" '
        "(ConvS2S, beam 5 against greedy)",
        "Shi's article, §2 Selections Based on Data Characteristics",
        "no numbers; the paper: beam 5 34.10 BLEU against 33.45 greedy (Table 3)",
        "beam",
        ("convs2s", "sequence_errors_beam5"),
        (("convs2s", "sequence_errors_beam1"),),
        short="A beam of 5 beats greedy decoding (ConvS2S)",
        reported_short="BLEU 34.10 against 33.45 (the paper)",
    ),
    Claim(
        "beam-gru",
        'beam search "selects the translation that is most likely to be correct" '
        "(GRU, beam 5 against greedy)",
        "Shi's article, §2 Selections Based on Data Characteristics",
        "no numbers",
        "beam",
        ("gru", "sequence_errors_beam5"),
        (("gru", "sequence_errors_beam1"),),
        short="A beam of 5 beats greedy decoding (GRU)",
        reported_short="none",
    ),
)


def _per_step(result, timings: Mapping, arm: str, hardware: str) -> tuple[str, float]:
    """The seconds per training step of ``arm``'s model that a learning-speed claim at
    ``hardware`` uses, and where they were timed: the thread count (or device)
    ``hardware``, or the last one timed (every core) for ``"all"``."""
    model = result.experiment.select([arm])[0].model
    per_step = timings["steps"]["seconds_per_step"][model]
    where = hardware if hardware != "all" else list(per_step)[-1]
    return where, per_step[where]


def _why_not_tested(claim: Claim, result, timings: Mapping) -> str:
    """Why this build cannot judge ``claim`` ("" when it can): an arm it did not train,
    a timing it lacks, or seconds per step too unsteady to trust: the timing windows at
    that thread count varied too much, or the machine was busy
    (:func:`~convs2s_edu.lab.timing.speed_verdict`), and steps times an unsteady median
    would turn a judgement of the models into one of the machine."""
    if missing := [a for a in claim.arms if a in result.left_out]:
        return (
            f"{', '.join(missing)} not in these runs of the experiment: "
            f"`convs2s-edu experiment {claim.experiment}` trains every arm"
        )
    needs = {"seconds_to_0.9": "steps"}.get(claim.claimed[1])
    needs = "generation" if claim.kind == "generation speed" else needs
    if needs and needs not in timings:
        return f"no {needs} timing"
    for arm in claim.arms if needs == "steps" else ():
        where, _ = _per_step(result, timings, arm, claim.hardware)
        if not timings["steps"]["reliable"].get(where, False):
            return (
                f"timing unsteady: the seconds per training step at {where} were not "
                f"reliable on this machine (the interleaved windows varied more than allowed, "
                f"or the machine was busy; the speed pages show them); the row in steps "
                f"judges steps to 90% without them"
            )
    return ""


def claim_values(
    claim_arm: tuple, result, timings: Mapping | None = None, hardware: str = ""
) -> tuple[list[float], list[bool]]:
    """Per seed, the value of ``(arm, metric)`` in ``result`` (an ExperimentResult), and
    whether each is a real measurement (``False``: a run that never reached the level,
    counted as the whole budget).

    ``sequence_errors_beam{k}`` is the count of wrong sequences among the beam's
    examples,
    :math:`(1 - \\text{exact match}) \\times n_{beam}`, from ``exact_match_beam{k}``.
    """
    arm, metric = claim_arm
    row = result.row(arm)
    if metric in CENSORED:
        steps = row["steps_to_0.9_values"]
        reached = [math.isfinite(s) for s in steps]
        values = [s if ok else row["steps"] for s, ok in zip(steps, reached)]
        if metric == "seconds_to_0.9":
            seconds = _per_step(result, timings, arm, hardware)[1]
            values = [v * seconds for v in values]
        return values, reached
    if metric.startswith("sentences_per_second@"):
        values = list(timings["generation"][metric.split("@")[1]][arm])
    elif metric.startswith(_SER + "_beam"):
        exact = row[f"exact_match_beam{metric[len(_SER + '_beam') :]}_values"]
        n_beam = result.budget.beam_examples
        values = [float(round((1.0 - em) * n_beam)) for em in exact]
    else:
        values = list(row[f"{metric}_values"])
    return values, [math.isfinite(v) for v in values]


def _shown(result, claim_arm: tuple, values: list) -> str:
    """``arm mean`` for a row's "measured", with the exact match beside the test loss
    and the sequence errors."""
    arm, metric = claim_arm
    mean = float(np.mean(values))
    if metric.startswith(_SER + "_beam"):
        k = metric[len(_SER + "_beam") :]
        exact = result.row(arm)[f"exact_match_beam{k}"]
        n_beam = result.budget.beam_examples
        return f"{arm} beam {k} {mean:,.1f} errors of {n_beam:,} ({exact:.1%} exact)"
    shown = f"{arm} {_fmt(metric, mean)}"
    if metric == _SER:  # errors among the test sources
        shown += f" of {result.budget.n_test:,}"
    if metric in (_SER, _LOSS):
        shown += f" ({result.row(arm)['exact_match']:.1%} exact)"
    return shown


def _difference(claimed: list, other: list, metric: str) -> list[float]:
    """The per-seed differences, oriented so that a positive one is what the claim says:
    log ratios for :data:`LOG_METRICS` (the other's over the claimed's when lower is
    better), half an error added to each count of errors; plain differences otherwise."""
    a, b = np.asarray(claimed, float), np.asarray(other, float)
    base = _base(metric)
    if base == _SER:  # half an error added to each count
        a, b = a + 0.5, b + 0.5
    if base in LOG_METRICS:
        if (a <= 0).any() or (b <= 0).any():
            raise ValueError(f"a ratio of {metric} needs values > 0, got {a} and {b}")
        a, b = np.log(a), np.log(b)
    return (b - a if base in LOWER_IS_BETTER else a - b).tolist()


def _resolution(claim: Claim, budget, errors: float) -> float:
    """The smallest step of the claim's per-seed differences (:func:`paired_test`'s
    ``resolution``): one test example for exact match, one error at the claimed arm's
    mean count ``errors`` for an error ratio, one evaluation interval (as a log ratio at
    the end of the budget) for steps or seconds to a level, none for continuous
    measures."""
    base = _base(claim.claimed[1])
    if base.startswith("exact_match"):
        return 1.0 / (budget.beam_examples if "beam" in base else budget.n_test)
    if base == _SER:
        return math.log((errors + 1.5) / (errors + 0.5))
    if base in CENSORED:
        return math.log1p(budget.eval_every / budget.steps)
    return 0.0


def _fmt(metric: str, value: float) -> str:
    base = _base(metric)
    if base.startswith(("exact_match", "token_accuracy")):
        return f"{value:.1%}"
    if base == _LOSS:
        return f"{value:.4f} nats/token"
    if base == _SER:
        return f"{value:,.1f} errors"
    if base in CENSORED:
        return f"{value:,.0f} {'steps' if base.startswith('steps') else 's'}"
    return f"{value:,.0f} sentences/s"


def _number(metric: str, d: float) -> str:
    """A difference as a number: the ratio of a log ratio, else points."""
    if _base(metric) in _RATIOS:
        return f"{math.exp(min(d, 700.0)):,.2f}"
    return f"{100 * d:+.1f}"


def _fmt_diff(metric: str, d: float) -> str:
    """A difference with its name: ``loss ratio 1.62``, ``+15.0 points``."""
    name = _RATIOS.get(_base(metric))
    return f"{name} {_number(metric, d)}" if name else f"{_number(metric, d)} points"


def _detectable(test, metric: str, n_pairs: int, largest: float) -> str:
    """The smallest true effect the rule supports four times in five for this pair, with
    its seeds, on a page of ``n_pairs`` judged pairs (:func:`min_detectable_effect`, at
    the family's first threshold), in the claim's units; above :data:`DETECTABLE_CAP`
    (or 100 points) not as a number, and said to be beyond any effect seen here when it
    exceeds ``largest``, the largest mean difference of the page's judged pairs."""
    if test.sd == 0.0:
        return "cannot be computed: the seeds gave the same difference, and nothing weighs it"
    k = test.sd * min_detectable_effect(
        test.n, n_pairs, min_effect_in_sd=test.min_effect / test.sd
    )
    beyond = ", beyond any effect seen here" if k > largest else ""
    if _base(metric) in _RATIOS and k > math.log(DETECTABLE_CAP):
        return f"{_RATIOS[_base(metric)]} over {DETECTABLE_CAP:,.0f}{beyond}"
    if _base(metric) not in _RATIOS and k > 1.0:
        return f"over 100 points{beyond}"
    return _fmt_diff(metric, k)


def _each_pair(pairs: list, key: str) -> str:
    """The pairs' ``key`` joined, each named by its other arm when there are several."""
    many = len(pairs) > 1
    return "; ".join(
        (f"against {p['against']}: " if many else "") + p[key] for p in pairs
    )


def _derived_reason(
    claim: Claim, claims: Sequence[Claim], result, timings: Mapping
) -> str:
    """Where a row in seconds comes from: the row in steps of the same arms (numbered as
    in ``claims``) times each arm's seconds per step."""
    source = "the steps to 90%"
    for i, c in enumerate(claims, 1):
        if c.arms == claim.arms and c.claimed[1] == "steps_to_0.9":
            source = f"claim {i} ({c.key})"
            break
    costs = []
    for arm in claim.arms:
        where, seconds = _per_step(result, timings, arm, claim.hardware)
        costs.append(f"{arm} {seconds:.3g} s at {where}")
    return (
        f"derived from {source}: each seed's steps times the seconds per step timed alone "
        f"({', '.join(costs)}); one constant per arm adds no evidence on the models"
    )


def _measure(
    claim: Claim, results: Mapping, timings: Mapping, claims: Sequence[Claim]
) -> dict:
    """A row before the verdicts: what was measured, every pair's paired test (the
    claimed arm against each other arm)."""
    if claim.experiment not in results:
        raise ValueError(
            f"no result of experiment {claim.experiment!r} for the claim "
            f"{claim.key!r}; have {sorted(results)}"
        )
    res = results[claim.experiment]
    row = {
        "claim": claim,
        "n_seeds": res.budget.seeds,
        "budget": res.budget.label,
        "judged": False,
        "pairs": [],
        "decided_by": "",
        "detectable": "",
    }
    metric = claim.claimed[1]
    derived = metric == "seconds_to_0.9"
    row["reason"] = _why_not_tested(claim, res, timings)
    if row["reason"]:  # unsteady seconds per step: derived, but not shown in seconds
        unsteady = row["reason"].startswith("timing unsteady")
        row["verdict"] = (
            DERIVED if unsteady and derived else "not tested at this budget"
        )
        return row
    claimed_values, claimed_real = claim_values(
        claim.claimed, res, timings, claim.hardware
    )
    step = _resolution(claim, res.budget, float(np.mean(claimed_values)))
    claimed_seeds = res.row(claim.claimed[0])["seeds"]
    for other in claim.others:
        b_all, b_all_real = claim_values(other, res, timings, claim.hardware)
        # paired on the seeds both arms have
        b_seeds = res.row(other[0])["seeds"]
        both = sorted(set(claimed_seeds) & set(b_seeds))
        a = [claimed_seeds.index(seed) for seed in both]
        b = [b_seeds.index(seed) for seed in both]
        a_values, a_real = [claimed_values[i] for i in a], [claimed_real[i] for i in a]
        b_values, b_real = [b_all[i] for i in b], [b_all_real[i] for i in b]
        d = _difference(a_values, b_values, metric)  # oriented per seed
        test = paired_test(d, [0.0] * len(d), claim.min_effect, step)
        lo, hi = (_number(metric, x) for x in test.interval(0.90))
        against, its_metric = other
        if against == claim.claimed[0]:  # the claimed arm on another metric
            against = f"{against} ({its_metric.replace('_', ' ')})"
        row["pairs"].append(
            {
                "against": against,
                "test": test,
                "difference": f"{_fmt_diff(metric, test.mean)} (90%: {lo} to {hi})",
                "shown": _shown(res, other, b_values),
                "censored": [
                    a_real.count(False),
                    b_real.count(False),
                ],  # claimed, other
                "verdict": None,
                "reason": "",
                "detectable": "",
            }
        )
    pairs = row["pairs"]
    row.update(
        test=pairs[0]["test"],
        n_seeds=min(p["test"].n for p in pairs),
        measured=f"{_shown(res, claim.claimed, claimed_values)} vs "
        + ", ".join(p["shown"] for p in pairs),
        difference=_each_pair(pairs, "difference"),
        min_effect=_fmt_diff(metric, claim.min_effect),
        censored=[
            max(p["censored"][0] for p in pairs),
            sum(p["censored"][1] for p in pairs),
        ],
    )
    if censored := sum(row["censored"]):  # either side: counted at the budget
        row["measured"] += (
            f" ({censored} run(s) never reached 90%: counted at the budget)"
        )
    if claim.kind == "generation speed":  # this implementation, apart from the verdicts
        machine = timings["generation"].get("machine", "this machine")
        row.update(verdict=NOT_JUDGED, reason=f"this implementation on {machine}")
    elif derived:  # the steps times a constant per arm
        row.update(verdict=DERIVED, reason=_derived_reason(claim, claims, res, timings))
    else:
        row.update(judged=True, verdict=None)
    return row


def _censor(pair: dict, verdict: str) -> None:
    """A pair's verdict, unless it rests on runs that never reached the level: a
    censored value is a lower bound and may only work against the verdict, so
    *supported* needs the claimed arm's runs uncensored, *contradicted* the other's, *no
    practical difference* both."""
    n = 0
    if verdict in VERDICTS[:2]:
        n = pair["censored"][VERDICTS.index(verdict)]
    elif verdict == VERDICTS[2]:
        n = sum(pair["censored"])
    pair["verdict"] = VERDICTS[3] if n else verdict
    if n:
        pair["reason"] = (
            f"read as {verdict}, but {n} run(s) it counts in its favour never reached 90%: "
            f"their values are lower bounds of unknown size"
        )


def _decide(row: dict) -> None:
    """A row's verdict from its pairs' (see the module's notes), and the pair that
    decided it: the closest call when every pair is supported, else the pair of the
    verdict."""
    pairs = row["pairs"]
    said = [p["verdict"] for p in pairs]
    supported, contradicted, same, unresolved = VERDICTS
    if all(v == supported for v in said):
        verdict, pair = supported, max(pairs, key=lambda p: p["test"].p_directional)
    elif contradicted in said:
        cands = [p for p in pairs if p["verdict"] == contradicted]
        verdict, pair = contradicted, min(cands, key=lambda p: p["test"].mean)
    elif same in said:
        cands = [p for p in pairs if p["verdict"] == same]
        verdict, pair = same, min(cands, key=lambda p: p["test"].p_equivalent)
    else:
        cands = [p for p in pairs if p["verdict"] != supported]
        verdict, pair = unresolved, max(cands, key=lambda p: p["test"].p_directional)
    row.update(verdict=verdict, test=pair["test"], decided_by=pair["against"])
    reasons = [pair["reason"]] if pair["reason"] else []
    if len(pairs) > 1:
        each = "; ".join(f"against {p['against']}: {p['verdict']}" for p in pairs)
        reasons.insert(0, f"{each}; decided by the pair against {pair['against']}")
    row["reason"] = "; ".join(reasons)


def _agrees(row: dict) -> str:
    """Whether the verdict agrees with the claim as its source states it."""
    v, claim = row["verdict"], row["claim"]
    if v not in VERDICTS[:3]:  # a measurement without a verdict says nothing of it
        return "undecided"
    if claim.expects == "better":
        return "yes" if v == VERDICTS[0] else "no"
    return "yes" if v in (VERDICTS[0], VERDICTS[2]) else "no"  # "about as well"


def plan_seeds(pilot: Mapping, power: float = 0.8, design: float = 2.0) -> list[dict]:
    """The seeds each judged pair of claims needs, from a pilot's spread.

    Two requirements, each at ``power`` and at the family's first threshold (the
    number of judged pairs of the page), from the standard deviation of the pair's
    per-seed differences in the pilot
    (:func:`~convs2s_edu.lab.experiments.seeds_for_power`): that the rule supports a
    true effect of ``design`` minimum effects (*supported* asks the mean to reach the
    minimum effect, so a design effect of twice it), and that it reads two equal arms
    (a true difference of 0) as *no practical difference*. A pair needs the larger.
    The pilot's spread is an estimate from its few seeds: the plan is as good as that
    estimate, and the claims page says so.

    Parameters
    ----------
    pilot : mapping of str to ExperimentResult
        The pilot's experiments (``Record.result`` of the pilot record), every one the
        judged claims use.
    power, design : float
        The probability to reach, and the true effect in minimum effects.

    Returns
    -------
    list of dict
        Per judged pair: ``claim`` (its key), ``experiment``, ``arms`` (the claimed arm
        and the other), ``sd_in_delta`` (the pilot's standard deviation in minimum
        effects), ``supported`` and ``equal`` (the seeds each requirement needs) and
        ``seeds`` (the larger).

    Raises
    ------
    ValueError
        A pair whose pilot differences do not vary: no spread to plan from.
    """
    # without timings, the rows in seconds and of generation speed are not judged
    rows = [r for r in check_claims(pilot, {}, CLAIMS) if r["judged"]]
    n_pairs = sum(len(r["pairs"]) for r in rows)
    plan = []
    for r in rows:
        claim = r["claim"]
        for (other, _), pair in zip(claim.others, r["pairs"]):
            spread = pair["test"].sd / claim.min_effect
            if not spread > 0:
                raise ValueError(
                    f"{claim.key} against {other}: the pilot's differences do not vary"
                )
            needs = {  # design effect: supported; 0: no practical difference
                key: seeds_for_power(spread, n_pairs, power, effect)
                for key, effect in (("supported", design), ("equal", 0.0))
            }
            plan.append(
                {
                    "claim": claim.key,
                    "experiment": claim.experiment,
                    "arms": (claim.claimed[0], other),
                    "sd_in_delta": spread,
                    **needs,
                    "seeds": max(needs.values()),
                }
            )
    return plan


def check_claims(
    results: Mapping,
    timings: Mapping | None = None,
    claims: Sequence[Claim] = CLAIMS,
    plan: Sequence[dict] = (),
) -> list[dict]:
    """One row per claim, filled in from the experiments' runs and the timings.

    Every pair of arms of every judged row (final quality, and learning speed in steps)
    is one pair of the page's family: :func:`~convs2s_edu.lab.experiments.verdicts`
    judges them all together, so the chance of any false verdict on the page stays at 5%
    or less.

    Parameters
    ----------
    results : mapping of str to ExperimentResult
        Every experiment the claims use.
    timings : mapping, optional
        ``{"steps": step_seconds(...), "generation": generation_speed(...)}``
        (:mod:`~convs2s_edu.lab.experiments.timings`); claims that need a missing one
        are "not tested".
    claims : sequence of Claim
    plan : sequence of dict, optional
        :func:`plan_seeds` of the pilot: a judged row whose pairs have fewer seeds than
        the plan asks for says so in its reason (the pair is underpowered, and its "not
        resolved" says little).

    Returns
    -------
    list of dict
        ``claim`` (the Claim); ``measured`` (both sides' means); ``difference`` (the
        mean paired difference as a ratio with its 90% interval, per pair when
        several); ``min_effect``; ``verdict`` (one of
        :data:`~convs2s_edu.lab.experiments.inference.VERDICTS`,
        :data:`~convs2s_edu.lab.experiments.NOT_JUDGED`,
        :data:`~convs2s_edu.lab.experiments.DERIVED` or
        ``"not tested at this budget"``); ``agrees`` (``"yes"``, ``"no"`` or
        ``"undecided"``); ``reason`` (why it is not judged, or which pair decided
        it); ``judged`` (whether its pairs are in the family); ``pairs`` (per pair:
        ``against``, ``test``, ``difference``, ``verdict``, ``reason``,
        ``detectable``); ``test`` (the deciding pair's PairedTest); ``decided_by``;
        ``detectable`` (the effect the rule supports four times in five here);
        ``budget``; ``n_seeds``.
    """
    timings = dict(timings or {})
    rows = [_measure(claim, results, timings, claims) for claim in claims]
    family = [p for r in rows if r["judged"] for p in r["pairs"]]
    for pair, verdict in zip(family, verdicts([p["test"] for p in family])):
        _censor(pair, verdict)
    largest = max((abs(p["test"].mean) for p in family), default=0.0)
    planned = {(p["claim"], p["arms"][1]): p["seeds"] for p in plan}
    for r in rows:
        if r["judged"]:
            _decide(r)
            short = [
                f"against {p['against']}: {p['test'].n} of the {need} it needs"
                for (other, _), p in zip(r["claim"].others, r["pairs"])
                if (need := planned.get((r["claim"].key, other), 0)) > p["test"].n
            ]
            if short:  # capped at MAX_SEEDS, or a budget that gives fewer
                under = f"fewer seeds than the pilot asks for ({', '.join(short)})"
                r["reason"] = "; ".join(filter(None, (r["reason"], under)))
            for p in r["pairs"]:
                metric = r["claim"].claimed[1]
                p["detectable"] = _detectable(p["test"], metric, len(family), largest)
            r["detectable"] = _each_pair(r["pairs"], "detectable")
        r["agrees"] = _agrees(r)
    return rows


@dataclass
class CheckedClaims:
    """The claims checked on one budget's runs, with what they were checked on
    (:func:`checked_claims`).

    Attributes
    ----------
    rows : list of dict
        :func:`check_claims`'s rows.
    results : dict of str to ExperimentResult
        Every experiment the claims use.
    record : Record or None
        The experiment record the results come from (``None``: trained by this build).
    timings : dict or None
        This build's timings (``None``: not timed, and the rows that need them are "not
        tested").
    plan : list of dict
        The pilot's :func:`plan_seeds` (empty outside the full budget).
    """

    rows: list
    results: dict
    record: object
    timings: dict | None
    plan: list

    @property
    def budget(self):
        """The budget of the runs (:class:`~convs2s_edu.lab.experiments.Budget`)."""
        return next(iter(self.results.values())).budget

    def counts(self) -> str:
        """How many claims each verdict got, and from which runs, in one sentence."""
        counts: dict[str, int] = dict.fromkeys(VERDICTS, 0)  # the rule's first
        for r in self.rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        counts = {verdict: n for verdict, n in counts.items() if n}
        each = ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
        runs = "this build's runs"
        if self.record is not None:
            runs = f"the runs of the experiment record's {self.record.path.name} budget"
        return f"{each} (of {len(self.rows)} claims, on {runs})"


def checked_claims(quick: bool | None = None, timed: bool = True) -> CheckedClaims:
    """The claims page's rows: every claim checked on the runs of the experiment record
    of the budget ``quick`` names (by default this build's), or trained by this build
    where there is no record
    (:func:`~convs2s_edu.lab.experiments.experiment_result`: a stale record is an
    error); with ``timed``, on timings of training steps and generation taken now at
    that budget (:mod:`~convs2s_edu.lab.experiments.timings`, alone, minutes); and, for
    the full budget, with the pilot's plan of seeds (:func:`plan_seeds`)."""
    record = load_record(quick=quick)
    needed = sorted({c.experiment for c in CLAIMS})
    results = {n: experiment_result(n, record, say=False) for n in needed}
    b = results[needed[0]].budget
    timings = None
    if timed:
        timings = {"steps": step_seconds(b), "generation": generation_speed(b)}
    pilot = load_record(pilot=True)  # None outside the docs build
    plan = (
        plan_seeds({n: pilot.result(n) for n in needed})
        if pilot and not b.quick
        else []
    )
    rows = check_claims(results, timings, plan=plan)
    return CheckedClaims(rows, results, record, timings, plan)
