"""Tests of ``convs2s_edu.lab.experiments.inference``, the claims' verdict rule: Student's t
against known quantiles, the paired test by hand, Holm's and Shaffer's step-down rules by
hand, every verdict's threshold and sign, and the rule by seeded, vectorised simulation of
whole pages: with identical arms a page of the site's size gives any wrong verdict at most 5%
of the time (normal, bimodal and censored per-seed results, five and ten seeds; pages of
mixed effects and shared arms too), the design effect is supported and equal arms read *no
practical difference* at least 80% of the time at the seeds :func:`seeds_for_power` gives;
the conclusion sentence of an experiment's page; and the summary of an arm over its seeds
(``lab.experiments.statistics``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convs2s_edu.lab.experiments import CLAIMS
from convs2s_edu.lab.experiments import claims as claims_mod
from convs2s_edu.lab.experiments.inference import (
    VERDICTS,
    PairedTest,
    _pvalues,
    _verdict_codes,
    holm,
    min_detectable_effect,
    paired_test,
    rule_power,
    seeds_for_power,
    shaffer,
    verdicts,
)

SUPPORTED, CONTRADICTED, SAME, UNRESOLVED = range(4)

#: Judged pairs on the site's claims page: the family's size.
P_SITE = 15


def test_the_site_judges_fifteen_pairs():
    judged = [c for c in CLAIMS if c.kind == "final quality" or c.claimed[1] == "steps_to_0.9"]
    assert sum(len(c.others) for c in judged) == P_SITE
    assert not any(c.claimed[1] == "seconds_to_0.9" for c in judged)  # derived, not judged
    assert claims_mod.DERIVED not in VERDICTS


# --------------------------------------------------------------------------
# By hand
# --------------------------------------------------------------------------


def test_holm_by_hand():
    # sorted 0.01 <= 0.05/3, then 0.03 > 0.05/2: stop
    assert holm([0.01, 0.04, 0.03]) == [True, False, False]
    assert holm([0.001, 0.02, 0.04]) == [True, True, True]  # 0.001<.0167, 0.02<.025, 0.04<.05
    assert holm([0.2, 0.001]) == [False, True]
    assert holm([]) == []


def test_shaffer_counts_the_pairs_that_still_have_an_open_hypothesis():
    # 0.001 <= 0.05/2 (pair 0 keeps its equivalence: t stays 2), 0.02 <= 0.05/2 (pair 0 is
    # done: t = 1), 0.03 <= 0.05/1; 0.9 > 0.05. Holm over the four hypotheses stops at
    # 0.02 > 0.05/3, and a count that never falls (Bonferroni over pairs) at 0.03 > 0.05/2
    directional, equivalent = shaffer([0.001, 0.03], [0.02, 0.9])
    assert directional.tolist() == [True, True] and equivalent.tolist() == [True, False]
    # one rejection in a pair leaves it open: 0.04 > 0.05/2, though a count that fell with
    # every rejection (t = 1) would take it
    directional, equivalent = shaffer([0.001, 0.04], [0.9, 0.9])
    assert directional.tolist() == [True, False] and not equivalent.any()
    # leading axes are independent pages
    d, e = shaffer([[0.001, 0.03], [0.03, 0.001]], [[0.02, 0.9], [0.9, 0.02]])
    assert d.tolist() == [[True, True], [True, True]]
    assert e.tolist() == [[True, False], [False, True]]
    with pytest.raises(ValueError, match="one equivalence p-value per pair"):
        shaffer([0.1, 0.2], [0.1])


def test_paired_test_by_hand():
    from scipy.stats import t as student_t

    t = paired_test([0.9, 0.8, 0.95], [0.7, 0.7, 0.75], min_effect=0.05)
    # d = 0.2, 0.1, 0.2: mean 1/6, sd = sqrt(((1/30)^2*2 + (1/15)^2)/2)
    assert t.diffs == pytest.approx((0.2, 0.1, 0.2))
    assert t.mean == pytest.approx(1 / 6)
    sd = math.sqrt(((0.2 - 1 / 6) ** 2 * 2 + (0.1 - 1 / 6) ** 2) / 2)
    assert t.sd == pytest.approx(sd) and t.se == pytest.approx(sd / math.sqrt(3))
    stat = (1 / 6) / (sd / math.sqrt(3))
    assert t.p_greater == pytest.approx(1 - student_t.cdf(stat, 2))
    assert t.p_less == pytest.approx(student_t.cdf(stat, 2))
    assert t.p_directional == pytest.approx(2 * (1 - student_t.cdf(stat, 2)))  # two-sided
    # TOST: the larger of P(T >= (mean + delta) / se) and P(T <= (mean - delta) / se)
    se = sd / math.sqrt(3)
    tost = max(1 - student_t.cdf((1 / 6 + 0.05) / se, 2), student_t.cdf((1 / 6 - 0.05) / se, 2))
    assert t.p_equivalent == pytest.approx(tost) and tost > 0.9
    lo, hi = t.interval(0.90)
    assert lo == pytest.approx(1 / 6 - 2.919986 * sd / math.sqrt(3), abs=1e-6)
    assert hi == pytest.approx(1 / 6 + 2.919986 * sd / math.sqrt(3), abs=1e-6)
    assert paired_test([0.1, 0.2, 0.3], [0.9, 0.8, 0.9], 0.05).p_directional <= 1.0


def test_paired_test_refuses_what_it_cannot_judge():
    with pytest.raises(ValueError, match="same seeds, got 3 and 2"):
        paired_test([1, 2, 3], [1, 2], 0.1)
    with pytest.raises(ValueError, match="at least 2 seeds, got 1"):
        paired_test([1], [0], 0.1)
    with pytest.raises(ValueError, match="min_effect must be a number > 0"):
        paired_test([1, 2], [0, 1], 0)
    with pytest.raises(ValueError, match="NaN"):
        paired_test([1, float("nan")], [0, 1], 0.1)


def test_verdicts_of_clear_cases():
    big = paired_test([0.9, 0.91, 0.92, 0.9, 0.93], [0.5, 0.52, 0.5, 0.51, 0.5], 0.05)
    mirror = paired_test([0.5, 0.52, 0.5, 0.51, 0.5], [0.9, 0.91, 0.92, 0.9, 0.93], 0.05)
    same = paired_test([0.9, 0.901, 0.899, 0.9, 0.9005], [0.9, 0.9, 0.9, 0.9, 0.9], 0.05)
    noisy = paired_test([0.9, 0.1, 0.9, 0.1, 0.5], [0.1, 0.9, 0.5, 0.2, 0.8], 0.05)
    small = paired_test([0.901, 0.902, 0.9015, 0.9012, 0.9018], [0.9] * 5, 0.05)
    assert verdicts([big, mirror, same, noisy, small]) == [
        "supported",
        "contradicted",
        "no practical difference",
        "not resolved",
        "no practical difference",  # clearly positive, but far below the minimum effect
    ]
    assert set(VERDICTS) == {
        "supported",
        "contradicted",
        "no practical difference",
        "not resolved",
    }
    assert verdicts([]) == []


def _made(mean, p_greater=0.5, p_less=0.5, p_equivalent=0.9, delta=1.0) -> PairedTest:
    """A paired test with the statistics given (the rest does not enter a verdict)."""
    return PairedTest(5, (), mean, 1.0, 0.45, delta, p_greater, p_less, p_equivalent)


def _say(test: PairedTest, pairs: int = 4) -> str:
    """The verdict of ``test`` on a page of ``pairs`` pairs whose other pairs say nothing
    (every p-value 1): the family's count stays at ``pairs`` while ``test`` is judged."""
    nothing = _made(0.0, 1.0, 1.0, 1.0)
    return verdicts([test] + [nothing] * (pairs - 1))[0]


def test_supported_needs_the_corrected_two_sided_test_and_the_minimum_effect():
    # four pairs: the first threshold is 0.05 / 4 = 0.0125 on the two-sided p-value
    assert _say(_made(1.0, p_greater=0.001, p_less=0.999)) == "supported"  # mean = delta
    assert _say(_made(0.99, p_greater=0.001, p_less=0.999)) == "not resolved"  # under delta
    assert _say(_made(2.0, p_greater=0.006, p_less=0.994)) == "supported"  # 0.012 <= 0.0125
    # one-sided 0.007, two-sided 0.014 > 0.0125 (a one-sided test, or no correction, says
    # supported)
    assert _say(_made(2.0, p_greater=0.007, p_less=0.993)) == "not resolved"


def test_contradicted_needs_the_corrected_two_sided_test_and_minus_the_minimum_effect():
    assert _say(_made(-1.0, p_greater=0.999, p_less=0.001)) == "contradicted"  # mean = -delta
    assert _say(_made(-0.99, p_greater=0.999, p_less=0.001)) == "not resolved"
    # a clear gain below the minimum effect is neither supported nor contradicted
    assert _say(_made(0.5, p_greater=0.001, p_less=0.999)) == "not resolved"
    assert _say(_made(-2.0, p_greater=0.993, p_less=0.007)) == "not resolved"  # 0.014
    assert _say(_made(-2.0, p_greater=0.994, p_less=0.006)) == "contradicted"


def test_no_practical_difference_needs_the_corrected_equivalence_test():
    assert _say(_made(0.1, p_equivalent=0.0125)) == "no practical difference"
    assert _say(_made(0.1, p_equivalent=0.013)) == "not resolved"  # > 0.05 / 4
    # a real difference, inside the minimum effect: both nulls rejected, no practical one
    both = _made(0.5, p_greater=0.001, p_less=0.999, p_equivalent=0.001)
    assert _say(both) == "no practical difference"


# --------------------------------------------------------------------------
# The rule by simulation: whole pages at once
# --------------------------------------------------------------------------


def _page(d, min_effect, resolution=0.0):
    """The verdict codes of simulated pages: ``d`` of shape (pages, pairs, seeds)."""
    s = _pvalues(d, min_effect, resolution)
    return _verdict_codes(s["mean"], min_effect, s["p_directional"], s["p_equivalent"])


def _normal(rng, shape):
    """Exact match of runs that all learnt the task, as points (minimum effect 0.001: the
    hardest case, where the minimum effect filters nothing)."""
    a, b = rng.normal(0.9, 0.03, shape), rng.normal(0.9, 0.03, shape)
    return a - b, 0.001, 0.0


def _bimodal(rng, shape):
    """Sequence errors of runs that learnt the task (~20 of 2,000) or did not (~1,500), half
    and half, as log ratios with half an error added, the resolution one error at the
    claimed arm's mean count (as the claims compare them)."""

    def errors():
        learnt = rng.random(shape) < 0.5
        return np.where(learnt, rng.poisson(20, shape), rng.poisson(1500, shape))

    a, b = errors() + 0.5, errors() + 0.5
    resolution = np.log((a.mean(-1) + 1.0) / a.mean(-1))
    return np.log(b) - np.log(a), claims_mod.ERROR_RATIO, resolution


def _censored(rng, shape):
    """Steps to 90% from one law for both arms, in evaluations of 50 steps, about a quarter of
    the runs never there in 800 steps and counted at the budget, as log ratios."""

    def steps():
        return np.minimum(np.ceil(rng.lognormal(math.log(650), 0.3, shape) / 50) * 50, 800)

    return np.log(steps()) - np.log(steps()), claims_mod.TEN_PERCENT, math.log1p(50 / 800)


@pytest.mark.parametrize("n_seeds", [5, 10])
@pytest.mark.parametrize("draw", [_normal, _bimodal, _censored], ids=lambda f: f.__name__[1:])
def test_identical_arms_give_any_wrong_verdict_on_a_page_at_most_five_percent(draw, n_seeds):
    pages = 4000
    rng = np.random.default_rng(1234 + n_seeds)
    d, delta, resolution = draw(rng, (pages, P_SITE, n_seeds))
    codes = _page(d, delta, resolution)
    wrong = ((codes == SUPPORTED) | (codes == CONTRADICTED)).any(axis=1).mean()
    # the margin (one point) covers the simulation's own error (sd ~ 0.35 points)
    assert wrong <= 0.05 + 0.01


def test_the_normal_page_spends_its_five_percent():
    # where the minimum effect filters nothing, the rule errs at close to its level (a rule
    # whose thresholds were too strict, e.g. alpha / 2P, would sit near 2.5%)
    rng = np.random.default_rng(77)
    d, delta, _ = _normal(rng, (8000, P_SITE, 5))
    wrong = ((_page(d, delta) < SAME).any(axis=1)).mean()
    assert 0.035 <= wrong <= 0.06


def test_pages_of_mixed_effects_and_shared_arms_err_at_most_five_percent():
    # every kind of wrong verdict: supported or contradicted against the true sign (or at
    # 0), no practical difference for a true difference of delta or more. Seven pairs of
    # well-measured small effects leave the count (both nulls rejected), raising the
    # thresholds of the others: four near zero, four exactly at delta. The pairs compare a
    # chain of arms (a_j - a_{j+1}), so neighbouring pairs share an arm and correlate
    rng = np.random.default_rng(5)
    mu = np.array([0.5] * 7 + [1e-9] * 4 + [1.0] * 4)
    sd = np.array([0.05] * 7 + [3.0] * 4 + [0.3] * 4)
    arms = rng.normal(0.0, 1.0, (6000, len(mu) + 1, 5))
    d = mu[:, None] + sd[:, None] * (arms[:, 1:] - arms[:, :-1]) / math.sqrt(2)
    codes = _page(d, 1.0)
    wrong = (
        ((codes == SUPPORTED) & (mu <= 0))
        | ((codes == CONTRADICTED) & (mu >= 0))
        | ((codes == SAME) & (np.abs(mu) >= 1.0))
    )
    assert (codes[:, :7] == SAME).mean() > 0.99  # they did leave the count
    assert wrong.any(axis=1).mean() <= 0.05 + 0.01


def test_three_seeds_are_not_safe_against_bimodal_results():
    # why the site's claims use five seeds: with three, three runs that all learnt against
    # three that all failed (a 1-in-64 event per pair) look like a certain difference
    rng = np.random.default_rng(3)
    d, delta, resolution = _bimodal(rng, (2000, P_SITE, 3))
    codes = _page(d, delta, resolution)
    assert (codes < SAME).any(axis=1).mean() > 0.05


def _one_effect_page(rng, pages, n_seeds, effect, sd, delta=1.0):
    """Pages whose first pair has a true difference ``effect`` and the other pairs none, every
    pair's per-seed differences of standard deviation ``sd``."""
    d = rng.normal(0.0, sd, (pages, P_SITE, n_seeds))
    d[:, 0] += effect
    return _page(d, delta)


def test_seeds_for_power_gives_the_fewest_seeds_that_support_the_design_effect():
    # per-seed differences with a standard deviation of delta: twice delta (the effect a
    # claim is designed to find) needs eight seeds on a page of fifteen pairs
    n = seeds_for_power(1.0, P_SITE)
    assert n == 8
    assert rule_power(2.0, n, P_SITE, min_effect_in_sd=1.0) >= 0.8
    assert rule_power(2.0, n - 1, P_SITE, min_effect_in_sd=1.0) < 0.8
    rng = np.random.default_rng(99)
    codes = _one_effect_page(rng, 6000, n, effect=2.0, sd=1.0)
    hit = (codes[:, 0] == SUPPORTED).mean()
    assert hit >= 0.8 - 0.015  # sd of the simulation ~ 0.5 points
    assert hit == pytest.approx(rule_power(2.0, n, P_SITE, min_effect_in_sd=1.0), abs=0.015)
    codes = _one_effect_page(rng, 6000, n - 1, effect=2.0, sd=1.0)
    assert (codes[:, 0] == SUPPORTED).mean() < 0.8  # one seed fewer falls short


def test_equal_arms_read_no_practical_difference_at_the_seeds_for_that_case():
    n = seeds_for_power(0.5, P_SITE, effect_in_delta_units=0.0)  # sd of delta / 2
    predicted = rule_power(0.0, n, P_SITE, min_effect_in_sd=2.0, verdict=VERDICTS[2])
    assert predicted >= 0.8
    assert rule_power(0.0, n - 1, P_SITE, min_effect_in_sd=2.0, verdict=VERDICTS[2]) < 0.8
    rng = np.random.default_rng(11)
    codes = _one_effect_page(rng, 4000, n, effect=0.0, sd=0.5)
    same = (codes == SAME).mean()  # every pair of every page
    assert same >= 0.8 - 0.01
    assert same == pytest.approx(predicted, abs=0.01)
    with pytest.raises(ValueError, match="no practical difference needs a minimum effect > 0"):
        rule_power(0.0, 5, 1, verdict=VERDICTS[2])
    with pytest.raises(ValueError, match="not reached with 64 seeds"):
        seeds_for_power(100.0, P_SITE, max_seeds=64)


@pytest.mark.parametrize("n_seeds", [5, 10])
def test_an_effect_of_the_stated_size_is_supported_four_times_in_five(n_seeds):
    effect = min_detectable_effect(n_seeds, P_SITE)  # in sd, no minimum effect to reach
    rng = np.random.default_rng(99 + n_seeds)
    d = rng.normal(0.0, 1.0, (6000, P_SITE, n_seeds))
    d[:, 0] += effect
    s = _pvalues(d, 1e-9)
    codes = _verdict_codes(s["mean"], 1e-9, s["p_directional"], s["p_equivalent"])
    assert (codes[:, 0] == SUPPORTED).mean() == pytest.approx(0.8, abs=0.015)
    assert rule_power(effect, n_seeds, P_SITE) == pytest.approx(0.8, abs=1e-6)


@pytest.mark.parametrize("n_seeds", [3, 5])
def test_the_power_counts_the_minimum_effect_as_the_rule_does(n_seeds):
    # a true effect of 1.5 sd with a minimum effect of 1.4 sd: the mean difference falls
    # short of the minimum effect about half the time, whatever the t statistic says
    effect, floor = 1.5, 1.4
    rng = np.random.default_rng(7 + n_seeds)
    codes = _page(rng.normal(effect, 1.0, (8000, 1, n_seeds)), floor)
    predicted = rule_power(effect, n_seeds, 1, min_effect_in_sd=floor)
    assert (codes == SUPPORTED).mean() == pytest.approx(predicted, abs=0.015)
    assert predicted < rule_power(effect, n_seeds, 1) - 0.05  # the floor costs power here
    mde = min_detectable_effect(n_seeds, 1, min_effect_in_sd=floor)
    assert rule_power(mde, n_seeds, 1, min_effect_in_sd=floor) == pytest.approx(0.8, abs=0.01)


def test_equal_differences_are_weighed_by_the_resolution():
    # five seeds that all gave the same difference: without a resolution nothing weighs the
    # mean (not resolved); with one test example in 500 as the resolution it is a clear gain
    same = [0.5] * 5
    bare = paired_test(same, [0.0] * 5, min_effect=0.01)
    assert (bare.p_greater, bare.p_less, bare.p_equivalent) == (1.0, 1.0, 1.0)
    assert verdicts([bare]) == ["not resolved"]
    floored = paired_test(same, [0.0] * 5, min_effect=0.01, resolution=1 / 500)
    assert floored.sd == pytest.approx(1 / 500)
    assert verdicts([floored]) == ["supported"]
    # the floor only ever widens: a spread larger than the resolution is kept
    spread = paired_test([0.1, 0.3, 0.2], [0.0] * 3, 0.01, resolution=1 / 500)
    assert spread.sd == pytest.approx(0.1)
    with pytest.raises(ValueError, match="resolution must be a number >= 0, got -1"):
        paired_test(same, [0.0] * 5, 0.01, resolution=-1)


def test_five_seeds_and_fifteen_pairs_detect_only_large_effects():
    assert min_detectable_effect(5, P_SITE) > 2 * min_detectable_effect(5, 1)
    assert min_detectable_effect(10, P_SITE) < min_detectable_effect(5, P_SITE) / 2


# --------------------------------------------------------------------------
# The sentence of an experiment's page, and the summary of an arm
# --------------------------------------------------------------------------


def _experiment(values: dict):
    from convs2s_edu.lab.experiments import (
        Arm,
        Budget,
        Experiment,
        ExperimentResult,
        summarise_runs,
    )

    arms = tuple(Arm(name, name) for name in values)
    runs = [
        {"arm": name, "seed": s, **{k: v[s] for k, v in measures.items()}}
        for name, measures in values.items()
        for s in range(3)
    ]
    return ExperimentResult(
        Experiment("tiny", "", "", arms),
        Budget(3, 800, 64, 500, 500, 50, (1,)),
        runs,
        summarise_runs(runs, arms),
    )


def test_the_conclusion_names_the_best_arm_whichever_way_is_better():
    from convs2s_edu.lab.experiments import conclusion

    result = _experiment(
        {
            "worst": {"exact_match": [0.5, 0.6, 0.55], "test_loss": [0.9, 0.8, 0.85]},
            "best": {"exact_match": [0.95, 0.96, 0.97], "test_loss": [0.05, 0.06, 0.04]},
            "middle": {"exact_match": [0.8, 0.82, 0.81], "test_loss": [0.3, 0.32, 0.31]},
        }
    )
    higher = conclusion(result, "exact_match")
    assert higher.startswith("By mean exact match, best is first (96.0% [95.0%–97.0%]) and middle")
    assert "the paired difference over 3 seeds is 15.0%" in higher
    lower = conclusion(result, "test_loss", higher_is_better=False, fmt="{:.2f}")
    assert lower.startswith(
        "By mean test loss, best is first (0.05 [0.04–0.06]) and middle second"
    )
    assert "is -0.26 (90% interval" in lower and "which excludes zero" in lower


def test_an_arm_is_summarised_by_its_mean_range_and_sample_standard_deviation():
    # ``lab.experiments.statistics``: what the tables show beside the verdicts
    from convs2s_edu.lab.experiments import Arm, summarise_runs

    runs = [{"arm": "a", "seed": s, "acc": v} for s, v in ((2, 0.7), (0, 0.9), (1, 0.8))]
    (row,) = summarise_runs(runs, [Arm("a", "a")])
    assert row["acc"] == pytest.approx(0.8) and (row["acc_min"], row["acc_max"]) == (0.7, 0.9)
    assert row["acc_std"] == pytest.approx(0.1)  # n - 1 in the denominator, not n
    assert row["acc_values"] == [0.9, 0.8, 0.7] and row["acc_n"] == row["n_seeds"] == 3
    (one,) = summarise_runs(runs[:1], [Arm("a", "a")])
    assert one["acc_std"] == 0.0  # a single seed has no spread


def _shaffer_by_hand(p_dir, p_eq, alpha=0.05):
    """Shaffer's S1 as its definition reads, one hypothesis at a time."""
    n_pairs = len(p_dir)
    p = list(p_dir) + list(p_eq)
    order = sorted(range(2 * n_pairs), key=lambda i: p[i])  # stable: ties keep their order
    left, rejected = [2] * n_pairs, [False] * (2 * n_pairs)
    for i in order:
        t = sum(1 for n in left if n > 0)  # pairs with a hypothesis still standing
        if p[i] > alpha / max(t, 1):
            break
        rejected[i] = True
        left[i % n_pairs] -= 1
    return rejected[:n_pairs], rejected[n_pairs:]


def test_shaffer_agrees_with_its_definition_on_random_pages_with_ties():
    rng = np.random.default_rng(7)
    for _ in range(400):
        n_pairs = int(rng.integers(1, 7))
        p = rng.uniform(0, 0.1, size=2 * n_pairs) ** rng.choice([1, 2, 3])
        p = np.round(p, int(rng.integers(2, 5)))  # ties, as rounded p-values make them
        d, e = shaffer(p[:n_pairs], p[n_pairs:])
        want_d, want_e = _shaffer_by_hand(p[:n_pairs], p[n_pairs:])
        assert d.tolist() == want_d and e.tolist() == want_e, p
