"""Tests of ``convs2s_edu.lab.experiments.inference``, the claims' verdict rule: Student's t
against known quantiles, Holm's step-down rule by hand, the paired test by hand, and the rule
by seeded simulation: with identical arms a table of eleven claims says *supported* falsely at
most 5% of the time (normal and bimodal per-seed results), and an effect of the stated size is
supported at least 80% of the time (a rule that never says *supported* fails here); and
the summary of an arm over its seeds (``lab.experiments.statistics``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convs2s_edu.lab.experiments.inference import (
    VERDICTS,
    holm,
    min_detectable_effect,
    paired_test,
    rule_power,
    verdicts,
)

#: Claims per table on the site (the family Holm corrects over).
M_CLAIMS = 16


def test_holm_by_hand():
    # sorted 0.01 <= 0.05/3, then 0.03 > 0.05/2: stop
    assert holm([0.01, 0.04, 0.03]) == [True, False, False]
    assert holm([0.001, 0.02, 0.04]) == [True, True, True]  # 0.001<.0167, 0.02<.025, 0.04<.05
    assert holm([0.2, 0.001]) == [False, True]
    assert holm([]) == []


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
    # TOST: the larger of P(T >= (mean + delta) / se) and P(T <= (mean - delta) / se)
    se = sd / math.sqrt(3)
    tost = max(1 - student_t.cdf((1 / 6 + 0.05) / se, 2), student_t.cdf((1 / 6 - 0.05) / se, 2))
    assert t.p_equivalent == pytest.approx(tost) and tost > 0.9
    lo, hi = t.interval(0.90)
    assert lo == pytest.approx(1 / 6 - 2.919986 * sd / math.sqrt(3), abs=1e-6)
    assert hi == pytest.approx(1 / 6 + 2.919986 * sd / math.sqrt(3), abs=1e-6)
    assert t.lower_bound(0.95) == pytest.approx(lo, abs=1e-6)


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


# --------------------------------------------------------------------------
# The rule by simulation
# --------------------------------------------------------------------------


def _normal(rng, n):
    return rng.normal(0.9, 0.03, n)


def _bimodal(rng, n):
    """A run either learns the task (~0.97) or does not (~0.10): per-seed results in two
    clusters, as duplicates make them on sorting."""
    learned = rng.random(n) < 0.5
    return np.where(learned, 0.97, 0.10) + rng.normal(0, 0.01, n)


def _false_rates(n_seeds, draw, tables=3000, seed=1234):
    """Over ``tables`` simulated claims tables of identical arms: the fraction of tables with a
    false *supported*, and of claims falsely *supported*."""
    rng = np.random.default_rng(seed + n_seeds)
    false_tables = false_claims = 0
    for _ in range(tables):
        tests = [
            paired_test(draw(rng, n_seeds), draw(rng, n_seeds), min_effect=0.02)
            for _ in range(M_CLAIMS)
        ]
        said = verdicts(tests).count("supported")
        false_tables += said > 0
        false_claims += said
    return false_tables / tables, false_claims / (tables * M_CLAIMS)


@pytest.mark.parametrize(
    "n_seeds, draw",
    [(5, _normal), (5, _bimodal), (3, _normal)],
    ids=["5-normal", "5-bimodal", "3-normal"],
)
def test_identical_arms_are_falsely_supported_at_most_five_percent(n_seeds, draw):
    tables, claims = _false_rates(n_seeds, draw)
    # Holm keeps the chance of any false *supported* in a table at <= 5%; the margin (one
    # point) covers the simulation's own error (sd ~ 0.4 points for 3,000 tables)
    assert tables <= 0.05 + 0.01
    assert claims <= 0.05 / M_CLAIMS + 0.001


def test_three_seeds_are_not_safe_against_bimodal_results():
    # why the site's claims use five seeds: with three, three runs that all learnt against
    # three that all failed (a 1-in-64 event per claim) look like a certain difference
    tables, _ = _false_rates(3, _bimodal, tables=1000)
    assert tables > 0.05


@pytest.mark.parametrize("n_seeds", [3, 5])
def test_an_effect_of_the_stated_size_is_supported_four_times_in_five(n_seeds):
    sd = 0.03  # of the per-seed differences
    effect = min_detectable_effect(n_seeds, M_CLAIMS) * sd  # the stated detectable size
    rng = np.random.default_rng(99 + n_seeds)
    sims, hits = 2000, 0
    for _ in range(sims):
        other = rng.normal(0.8, 0.05, n_seeds)
        real = paired_test(other + effect + rng.normal(0, sd, n_seeds), other, 0.01)
        nulls = [
            paired_test(x + rng.normal(0, sd, n_seeds), x, 0.01)
            for x in (rng.normal(0.8, 0.05, n_seeds) for _ in range(M_CLAIMS - 1))
        ]
        hits += verdicts([real, *nulls])[0] == "supported"
    assert hits / sims >= 0.8 - 0.03  # 80%, less the simulation's error (sd ~ 0.9 points)
    assert rule_power(effect / sd, n_seeds, M_CLAIMS) == pytest.approx(0.8, abs=0.01)


@pytest.mark.parametrize("n_seeds", [3, 5])
def test_the_power_counts_the_minimum_effect_as_the_rule_does(n_seeds):
    # a true effect of 1.5 sd with a minimum effect of 1.4 sd: the mean difference falls
    # short of the minimum effect about half the time, whatever the t statistic says
    effect, floor = 1.5, 1.4
    rng = np.random.default_rng(7 + n_seeds)
    sims = 4000
    hits = sum(
        verdicts([paired_test(rng.normal(effect, 1.0, n_seeds), [0.0] * n_seeds, floor)])[0]
        == "supported"
        for _ in range(sims)
    )
    predicted = rule_power(effect, n_seeds, 1, min_effect_in_sd=floor)
    assert hits / sims == pytest.approx(predicted, abs=0.025)  # simulation sd ~ 0.8 points
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


def test_three_seeds_and_eleven_claims_detect_only_large_effects():
    assert min_detectable_effect(3, 11) > 5 * min_detectable_effect(3, 1) / 2
    assert min_detectable_effect(5, 11) < min_detectable_effect(3, 11) / 2


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
