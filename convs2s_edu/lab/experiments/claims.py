r"""The claims of the paper and of the seed article, and how the experiments check them.

Every :class:`Claim` says what its source claims, with the source's own numbers
(``Claim.reported``), which kind of claim it is, the arms and the metric that
test it and the smallest difference that would matter (``Claim.min_effect``,
stated here, before any run). :func:`check_claims` turns the experiments' runs into
one row per claim, the verdict from :mod:`~convs2s_edu.lab.experiments.inference`
(paired seeds, the minimum effect, Holm across the claims tested).

Kinds of claim
--------------
*final quality*
    Scored on every seed's test set (2,000 sources in the full build) at the end of the
    budget the row names (:attr:`Budget.label <convs2s_edu.lab.experiments.Budget.label>`):
    a small-scale check of the source's statement, not the statement itself. The paper's
    claims by the test loss in nats per target token (its perplexity's log), the article's
    by the sequence errors (1 - exact match) as a ratio, which stays informative near 100%.
*learning speed*
    Training steps, or seconds (steps times the median seconds per step of interleaved
    windows at a stated thread count, :func:`~convs2s_edu.lab.experiments.timings.step_seconds`),
    to 90% held-out exact match. A run that never got there counts at the budget, a lower
    bound: a verdict stands only where the bounds count against it (*supported* needs every
    claimed run, *contradicted* every other run to reach the level), else *not resolved*.
*generation speed*
    Sentences decoded per second on the same test sources, in batches of equal length,
    interleaved (:func:`~convs2s_edu.lab.experiments.timings.generation_speed`): this
    implementation on this machine, not the paper's GPUs against GNMT. Shown with its
    interval, apart from the verdicts and out of Holm's family
    (:data:`~convs2s_edu.lab.experiments.NOT_JUDGED`).

Differences
-----------
Per seed, oriented so that a positive ``d`` is what the claim says: for the test loss,
:math:`\text{loss}_{other} - \text{loss}_{claimed}` in nats per token; for the sequence
errors, :math:`\log\big((e_{other} + \tfrac12) / (e_{claimed} + \tfrac12)\big)` (half an
error added to each count, so that no errors still gives a ratio), shown as the ratio; for
steps, seconds and speeds the log ratio, shown in percent; for beam search's exact match
(200 sources) points. Each minimum effect says why it is that size (``Claim.why``): the
source's own effect where it reports one, else the smallest difference a user would act
on. A claim against several arms holds only if it holds against each (an
intersection-union test: its p-value is the largest of the pairs').
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .inference import VERDICTS, PairedTest, min_detectable_effect, paired_test, verdicts
from .registry import BEAM_EXAMPLES

__all__ = ["KINDS", "NOT_JUDGED", "Claim", "CLAIMS", "claim_values", "check_claims"]

#: The kinds of claim (see the module's notes).
KINDS = ("final quality", "learning speed", "generation speed")
#: The verdict of a generation-speed row: measured with its interval, never judged.
NOT_JUDGED = "measured here, not judged"

#: 10% (steps, seconds and speeds compared as log ratios)
TEN_PERCENT = math.log(1.1)
#: An error ratio of 1.25 (sequence errors compared as log ratios)
ERROR_RATIO = math.log(1.25)
#: Table 4's effect of removing both position embeddings: perplexity 6.68 against 6.64,
#: in nats per token
TABLE4_NATS = math.log(6.68 / 6.64)

#: Metrics where lower is better.
LOWER_IS_BETTER = ("test_loss", "sequence_errors", "steps_to_0.9", "seconds_to_0.9")
#: Metrics compared as log ratios (claimed over other when higher is better).
LOG_METRICS = ("sequence_errors", "steps_to_0.9", "seconds_to_0.9", "sentences_per_second")
#: Learning-speed metrics: a run that never reached the level counts at the budget.
CENSORED = ("steps_to_0.9", "seconds_to_0.9")

_NO_NUMBERS = "the source gives no number: the smallest difference a user would act on"
_TABLE4 = "Table 4: perplexity 6.68 without positions, 6.64 with, ln(6.68 / 6.64)"
_BLEU_ONLY = "the paper's depth tables give BLEU only: Table 4's loss effect, its smallest"


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
        What the source reports for it (its numbers), or that it gives none.
    kind : str
        One of :data:`KINDS`.
    experiment : str
        The experiment whose runs test it.
    claimed : tuple of (str, str)
        ``(arm, metric)`` the claim says is better.
    others : tuple of (str, str)
        What it must be better than (every one of them).
    min_effect : float
        The smallest difference that would matter, in the units of the differences (see
        the module's notes).
    expects : str
        ``"better"`` (the claim is a difference) or ``"equivalent"`` (it says the arms do
        about as well: *no practical difference* agrees with it, and so does *supported*,
        the claimed arm doing better still).
    note : str
        What a reader should know when reading the row (e.g. why the task matters).
    hardware : str
        For learning-speed claims, the thread count of the seconds (e.g. ``"1 thread"``).
    why : str
        Why the minimum effect is what it is (the source's effect, or the smallest
        difference a user would act on).
    """

    key: str
    text: str
    source: str
    reported: str
    kind: str
    experiment: str
    claimed: tuple
    others: tuple
    min_effect: float
    expects: str = "better"
    note: str = ""
    hardware: str = ""
    why: str = _NO_NUMBERS

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.expects not in ("better", "equivalent"):
            raise ValueError(f"expects must be 'better' or 'equivalent', got {self.expects!r}")


_SER, _LOSS = "sequence_errors", "test_loss"
_TABLE3 = (
    "Table 3 (WMT'14 En-Fr, 6,003 sentences, batches of equal length): GNMT (8-layer LSTM) "
    "3,028 s on a K80 GPU and 1,322 s on 88 CPU cores; ConvS2S 142-327 s on GPUs and "
    "142 s on 48 CPU cores greedily, 256-587 s with a beam of 5"
)


def _generation(key: str, beam: int, other: str, against: str) -> Claim:
    """A row of Table 3's claim: ConvS2S against ``other``, decoding with a beam of ``beam``."""
    how, metric = (
        "greedy decoding" if beam == 1 else f"beam of {beam}",
        f"sentences_per_second@beam{beam}",
    )
    return Claim(
        key,
        f"ConvS2S generates faster than a recurrent model ({how}, against {against})",
        "paper, §5.3 Generation Speed, Table 3",
        _TABLE3,
        "generation speed",
        "generation",
        ("convs2s", metric),
        ((other, metric),),
        TEN_PERCENT,
        why="not judged: this implementation on this machine",
    )


#: The claims checked on the site, in the order of the table.
CLAIMS = (
    Claim(
        "rnn-cnn-best",
        '"an RNN (encoder) - CNN (decoder) architecture can be expected to achieve better '
        'performance" (than every other encoder-decoder pair, sorting)',
        "seed article, §1 Encoder-decoder Architecture",
        "no numbers (an expectation)",
        "final quality",
        "encoder_decoder",
        ("gru+conv", _SER),
        (("convs2s", _SER), ("gru", _SER), ("conv+gru", _SER)),
        ERROR_RATIO,
    ),
    Claim(
        "cnn-decoder-gru-encoder",
        '"A CNN-decoder has an advantage over an RNN-decoder in handling such target '
        'language texts" (GRU encoder, sorting)',
        "seed article, §2 Selections Based on Data Characteristics",
        "no numbers",
        "final quality",
        "encoder_decoder",
        ("gru+conv", _SER),
        (("gru", _SER),),
        ERROR_RATIO,
    ),
    Claim(
        "cnn-decoder-conv-encoder",
        '"A CNN-decoder has an advantage over an RNN-decoder in handling such target '
        'language texts" (convolutional encoder, sorting)',
        "seed article, §2 Selections Based on Data Characteristics",
        "no numbers",
        "final quality",
        "encoder_decoder",
        ("convs2s", _SER),
        (("conv+gru", _SER),),
        ERROR_RATIO,
    ),
    Claim(
        "learns-in-fewer-steps",
        "ConvS2S learns the task in fewer training steps than the recurrent model "
        "(steps of 128 examples to 90% held-out exact match, sorting)",
        "seed notebook; paper, abstract and §1",
        "no steps-to-quality comparison with an RNN",
        "learning speed",
        "encoder_decoder",
        ("convs2s", "steps_to_0.9"),
        (("gru", "steps_to_0.9"),),
        TEN_PERCENT,
        note="the same budget of steps for both arms; seconds are the steps times a step's cost",
    ),
    Claim(
        "learns-faster-1",
        "ConvS2S learns the task in less training time than the recurrent model "
        "(seconds to 90% held-out exact match, sorting, one thread)",
        'seed notebook ("the central claim of the paper"); paper, abstract and §1',
        'the paper: translation quality "at an order of magnitude faster speed, both on '
        'GPU and CPU" (generation; no training-time comparison with an RNN)',
        "learning speed",
        "encoder_decoder",
        ("convs2s", "seconds_to_0.9"),
        (("gru", "seconds_to_0.9"),),
        TEN_PERCENT,
        hardware="1 thread",
    ),
    Claim(
        "learns-faster-all",
        "ConvS2S learns the task in less training time than the recurrent model "
        "(seconds to 90% held-out exact match, sorting, every core)",
        "seed notebook; paper, abstract and §1",
        "as above",
        "learning speed",
        "encoder_decoder",
        ("convs2s", "seconds_to_0.9"),
        (("gru", "seconds_to_0.9"),),
        TEN_PERCENT,
        hardware="all",
    ),
    Claim(
        "positions-help-reverse",
        "Position embeddings help (paraphrased; source and target positions against "
        "none, on reversing, where the source order determines the target)",
        "paper, §5.4 Position Embeddings, Table 4",
        "validation perplexity 6.64 with both, 6.68 without either (BLEU 21.7 / 21.2)",
        "final quality",
        "positions",
        ("reverse/both", _LOSS),
        (("reverse/none", _LOSS),),
        TABLE4_NATS,
        why=_TABLE4,
    ),
    Claim(
        "source-positions-matter-more",
        "Removing the source positions costs more than removing the target positions "
        "(paraphrased; reversing)",
        "paper, §5.4 Position Embeddings, Table 4",
        "perplexity 6.69 without source positions, 6.63 without target positions",
        "final quality",
        "positions",
        ("reverse/source", _LOSS),
        (("reverse/target", _LOSS),),
        math.log(6.69 / 6.63),
        why="Table 4: perplexity 6.69 without source positions, 6.63 without target positions",
        note="the arm 'reverse/source' keeps the source positions (removes the target's)",
    ),
    Claim(
        "positions-help-sort",
        "Position embeddings help (paraphrased; on sorting, where the source order "
        "carries no information about the target)",
        "paper, §5.4 Position Embeddings, Table 4 (transplanted to sorting)",
        "perplexity 6.64 with both, 6.68 without either, on translation",
        "final quality",
        "positions",
        ("sort/both", _LOSS),
        (("sort/none", _LOSS),),
        TABLE4_NATS,
        why=_TABLE4,
        note="a transplanted claim: in sorting the positions may be useless or harmful",
    ),
    Claim(
        "attention-every-layer",
        "Attention in every decoder layer gives a better model than attention in one "
        "layer (paraphrased; against the first only and the last only)",
        "paper, §5.5 Multi-step Attention, Table 5",
        "perplexity 6.65 with attention in all five layers, 7.15 in the first only, 7.66 "
        "in the last only",
        "final quality",
        "attention_layers",
        ("all", _LOSS),
        (("first", _LOSS), ("last", _LOSS)),
        math.log(7.15 / 6.65),
        why="Table 5: perplexity 7.15 with attention in the first layer only, 6.65 in all, "
        "the smaller of its two gaps",
    ),
    Claim(
        "deeper-encoder",
        "A deeper encoder helps (paraphrased; 4 encoder layers against 2, the decoder fixed at 4)",
        "paper, §5.6 Kernel Size and Depth, Figure 2 and Table 7",
        "encoder of 5 / 9 / 13 layers (k = 3, decoder fixed): 20.61 / 21.17 / 21.63 BLEU; "
        "depth helps the encoder up to about 9 layers",
        "final quality",
        "depth",
        ("enc4-dec4", _LOSS),
        (("enc2-dec4", _LOSS),),
        TABLE4_NATS,
        why=_BLEU_ONLY,
    ),
    Claim(
        "two-decoder-layers",
        "Two decoder layers already do well (paraphrased; 2 decoder layers against 4, the "
        "encoder fixed at 4)",
        "paper, §5.6 Kernel Size and Depth, Figure 2 and Table 8",
        "decoder of 3 / 5 / 7 layers (k = 3, encoder fixed): 21.10 / 21.71 / 21.62 BLEU; "
        "the text on Figure 2: decoders with two layers already do well (paraphrased)",
        "final quality",
        "depth",
        ("enc4-dec2", _LOSS),
        (("enc4-dec4", _LOSS),),
        TABLE4_NATS,
        why=_BLEU_ONLY,
        expects="equivalent",
    ),
    *(
        _generation(f"generates-faster-{key}", beam, other, against)
        for key, beam, other, against in (
            ("gru", 1, "gru", "the 1-layer GRU of the site"),
            ("matched", 1, "gru-matched", "a GRU of ConvS2S's parameter count"),
            ("beam", 5, "gru-matched", "a GRU of ConvS2S's parameter count"),
        )
    ),
    Claim(
        "beam-convs2s",
        'beam search "selects the translation that is most likely to be correct" '
        "(ConvS2S, beam 5 against greedy)",
        "seed article, §2 Selections Based on Data Characteristics",
        "no numbers; the paper: beam 5 34.10 BLEU against 33.45 greedy (Table 3)",
        "final quality",
        "beam",
        ("convs2s", "exact_match_beam5"),
        (("convs2s", "exact_match_beam1"),),
        0.005,
        why="the paper: +0.65 BLEU with a beam of 5 (Table 3), no accuracy: one source in 200",
    ),
    Claim(
        "beam-gru",
        'beam search "selects the translation that is most likely to be correct" '
        "(GRU, beam 5 against greedy)",
        "seed article, §2 Selections Based on Data Characteristics",
        "no numbers",
        "final quality",
        "beam",
        ("gru", "exact_match_beam5"),
        (("gru", "exact_match_beam1"),),
        0.005,
        why="no number: one source in 200",
    ),
)


def _base(metric: str) -> str:
    return metric.split("@")[0]


def _step_hardware(per_step: Mapping, model: str, hardware: str) -> str:
    """The thread count (or device) whose seconds per step a learning-speed claim uses:
    ``hardware``, or the last one timed (every core) for ``"all"``."""
    return hardware if hardware != "all" else list(per_step[model])[-1]


def _unreliable_step_timing(claim: Claim, result, steps: Mapping) -> str:
    """Why the seconds per step a learning-speed claim needs cannot be trusted ("" when they
    can): the timing windows at that thread count varied too much, or the machine was busy
    (:func:`~convs2s_edu.lab.timing.speed_verdict`). Steps times an unsteady median would
    turn a judgement of the models into one of the machine."""
    per_step, reliable = steps["seconds_per_step"], steps["reliable"]
    for arm in (claim.claimed[0], *(o[0] for o in claim.others)):
        model = result.experiment.select([arm])[0].model
        where = _step_hardware(per_step, model, claim.hardware)
        if not reliable.get(where, False):
            return (
                f"timing unsteady: the seconds per training step at {where} were not "
                f"reliable on this machine (the interleaved windows varied more than allowed, "
                f"or the machine was busy; the speed pages show them); the row in steps "
                f"judges steps to 90% without them"
            )
    return ""


def _why_not_tested(claim: Claim, result, timings: Mapping) -> str:
    """Why this build cannot judge ``claim`` ("" when it can): an arm it did not train, a
    timing it lacks, or seconds per step too unsteady to trust."""
    arms = (claim.claimed[0], *(o[0] for o in claim.others))
    if missing := [a for a in arms if a in result.left_out]:
        return (
            f"{', '.join(missing)} not in these runs of the experiment: "
            f"`convs2s-edu experiment {claim.experiment}` trains every arm"
        )
    needs = {"seconds_to_0.9": "steps"}.get(claim.claimed[1])
    needs = "generation" if claim.kind == "generation speed" else needs
    if needs and needs not in timings:
        return f"no {needs} timing"
    return _unreliable_step_timing(claim, result, timings["steps"]) if needs == "steps" else ""


def claim_values(
    claim_arm: tuple, result, timings: Mapping | None = None, hardware: str = ""
) -> tuple[list[float], list[bool]]:
    """Per seed, the value of ``(arm, metric)`` in ``result`` (an ExperimentResult), and
    whether each is a real measurement (``False``: a run that never reached the level,
    counted as the whole budget)."""
    arm, metric = claim_arm
    row = result.row(arm)
    if metric in CENSORED:
        steps = row["steps_to_0.9_values"]
        reached = [math.isfinite(s) for s in steps]
        values = [s if ok else row["steps"] for s, ok in zip(steps, reached)]
        if metric == "seconds_to_0.9":
            per_step = timings["steps"]["seconds_per_step"]
            model = result.experiment.select([arm])[0].model
            values = [
                v * per_step[model][_step_hardware(per_step, model, hardware)] for v in values
            ]
        return values, reached
    if metric.startswith("sentences_per_second@"):
        beam = metric.split("@")[1]
        values = list(timings["generation"][beam][arm])
        return values, [True] * len(values)
    values = list(row[f"{metric}_values"])
    return values, [math.isfinite(v) for v in values]


def _shown(result, claim_arm: tuple, values: list) -> str:
    """``arm mean`` for a row's "measured", with the exact match beside the test loss and the
    sequence errors."""
    arm, metric = claim_arm
    shown = f"{arm} {_fmt(metric, float(np.mean(values)))}"
    if metric in (_SER, _LOSS):
        shown += f" ({result.row(arm)['exact_match']:.1%} exact)"
    return shown


def _difference(claimed: list, other: list, metric: str) -> list[float]:
    a, b = np.asarray(claimed, float), np.asarray(other, float)
    base = _base(metric)
    if base == "sequence_errors":  # half an error added to each count
        a, b = a + 0.5, b + 0.5
    if base in LOG_METRICS:
        a, b = np.log(a), np.log(b)
    return (b - a if base in LOWER_IS_BETTER else a - b).tolist()


def _combine(tests: Sequence[PairedTest]) -> PairedTest:
    """One test of a claim against several arms.

    *Better than every other arm* is an intersection-union test: the largest p-value and
    the smallest mean difference of the pairs; so is *equivalent to every one*. *Worse
    than at least one* (contradicted) is a union of the pairs' hypotheses: the smallest
    p-value, Bonferroni-corrected for the number of pairs, so that trying several arms
    does not make a contradiction easier to find than one.
    """
    worst = min(tests, key=lambda t: t.mean)
    return PairedTest(
        worst.n,
        worst.diffs,
        worst.mean,
        worst.sd,
        worst.se,
        worst.min_effect,
        max(t.p_greater for t in tests),
        min(1.0, len(tests) * min(t.p_less for t in tests)),
        max(t.p_equivalent for t in tests),
    )


def _resolution(claim: Claim, budget, errors: float) -> float:
    """The smallest step of the claim's per-seed differences (:func:`paired_test`'s
    ``resolution``): one test example for exact match, one error at the claimed arm's mean
    count ``errors`` for an error ratio, one evaluation interval (as a log ratio at the end
    of the budget) for steps or seconds to a level, none for continuous measures."""
    base = _base(claim.claimed[1])
    if base.startswith("exact_match"):
        return 1.0 / (min(BEAM_EXAMPLES, budget.n_test) if "beam" in base else budget.n_test)
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
    return f"{value:,.0f}/s"


def _fmt_diff(metric: str, d: float) -> str:
    base = _base(metric)
    if base == _SER:
        return f"error ratio {math.exp(d):.2f}"
    if base == _LOSS:
        return f"{d:+.4f} nats/token"
    if base in LOG_METRICS:
        return f"{math.expm1(d):+.0%}"
    return f"{100 * d:+.1f} points"


def check_claims(
    results: Mapping, timings: Mapping | None = None, claims: Sequence[Claim] = CLAIMS
) -> list[dict]:
    """One row per claim, filled in from the experiments' runs and the timings.

    Parameters
    ----------
    results : mapping of str to ExperimentResult
        Every experiment the claims use.
    timings : mapping, optional
        ``{"steps": step_seconds(...), "generation": generation_speed(...)}``
        (:mod:`~convs2s_edu.lab.experiments.timings`); claims that need a missing one are
        "not tested".
    claims : sequence of Claim

    Returns
    -------
    list of dict
        ``claim`` (the Claim), ``measured`` (both sides' means), ``difference`` (the mean
        paired difference with its 90% interval), ``verdict`` (one of
        :data:`~convs2s_edu.lab.experiments.inference.VERDICTS`,
        :data:`~convs2s_edu.lab.experiments.NOT_JUDGED` or ``"not tested at this budget"``),
        ``agrees`` (``"yes"``, ``"no"`` or ``"undecided"``), ``reason``, ``detectable`` (the
        effect the rule supports four times in five here), ``budget``, ``n_seeds``.
    """
    timings = dict(timings or {})
    rows, tests = [], []
    for claim in claims:
        if claim.experiment not in results:
            raise ValueError(
                f"no result of experiment {claim.experiment!r} for the claim "
                f"{claim.key!r}; have {sorted(results)}"
            )
        res = results[claim.experiment]
        row = {"claim": claim, "n_seeds": res.budget.seeds, "budget": res.budget.label}
        row["reason"] = _why_not_tested(claim, res, timings)
        if row["reason"]:  # unsteady seconds per step: measured, but not resolved
            unsteady = row["reason"].startswith("timing unsteady")
            row["verdict"] = VERDICTS[3] if unsteady else "not tested at this budget"
            rows.append(row)
            continue
        a_values, a_real = claim_values(claim.claimed, res, timings, claim.hardware)
        step = _resolution(claim, res.budget, float(np.mean(a_values)))
        pairs, measured = [], []
        row["censored"] = [a_real.count(False), 0]  # runs never at the level: claimed, others
        for other in claim.others:
            b_values, b_real = claim_values(other, res, timings, claim.hardware)
            d = _difference(a_values, b_values, claim.claimed[1])  # oriented per seed
            pairs.append(paired_test(d, [0.0] * len(d), claim.min_effect, step))
            measured.append(_shown(res, other, b_values))
            row["censored"][1] += b_real.count(False)
        test = _combine(pairs)
        lo, hi = test.interval(0.90)
        metric = claim.claimed[1]
        row.update(
            test=test,
            measured=f"{_shown(res, claim.claimed, a_values)} vs " + ", ".join(measured),
            difference=f"{_fmt_diff(metric, test.mean)} (90%: {_fmt_diff(metric, lo)} to "
            f"{_fmt_diff(metric, hi)})",
            min_effect=_fmt_diff(metric, claim.min_effect).lstrip("+"),
        )
        if censored := sum(row["censored"]):  # either side: counted at the budget
            row["measured"] += f" ({censored} run(s) never reached 90%: counted at the budget)"
        if claim.kind == "generation speed":  # this implementation, apart from the verdicts
            machine = timings["generation"].get("machine", "this machine")
            row.update(verdict=NOT_JUDGED, reason=f"this implementation on {machine}")
        else:
            tests.append(row)
        rows.append(row)
    m = len(tests)  # Holm's family: every judged row
    for r, v in zip(tests, verdicts([r["test"] for r in tests])):
        # a censored value is a lower bound: it may only work against the verdict, so
        # supported needs the claimed arm's runs uncensored, contradicted the others'
        n = 0
        if v in VERDICTS[:2]:
            n = r["censored"][VERDICTS.index(v)]
        elif v == VERDICTS[2]:
            n = sum(r["censored"])
        r["verdict"] = VERDICTS[3] if n else v
        if n:
            r["reason"] = (
                f"read as {v}, but {n} run(s) it counts in its favour never reached 90%: "
                f"their values are lower bounds of unknown size"
            )
    for r in rows:
        claim, v = r["claim"], r["verdict"]
        if v in (VERDICTS[3], "not tested at this budget", NOT_JUDGED):
            r["agrees"] = "undecided"  # a measurement without a verdict says nothing of it
        elif claim.expects == "better":
            r["agrees"] = "yes" if v == VERDICTS[0] else "no"
        else:  # "about as well": no practical difference, or better, agrees with it
            r["agrees"] = "yes" if v in (VERDICTS[0], VERDICTS[2]) else "no"
        r["detectable"] = ""  # not judged, or no spread over the seeds to scale the effect by
        if v != NOT_JUDGED and "test" in r and m and (sd := r["test"].sd) > 0:
            k = min_detectable_effect(r["n_seeds"], m, min_effect_in_sd=claim.min_effect / sd)
            r["detectable"] = _fmt_diff(claim.claimed[1], k * sd).lstrip("+")
    return rows
