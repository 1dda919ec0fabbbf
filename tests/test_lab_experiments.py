"""Tests of ``convs2s_edu.lab.experiments`` (issue 9): the registry (budgets, arms, receptive
fields), the statistics (summaries over seeds, verdicts), the runner (rows against a hand
computation, the cache, progress lines), the claims and the report (conclusions, the claims
table)."""

from __future__ import annotations

import io
import math
import statistics
import sys

import pytest

from convs2s_edu import training as train_mod
from convs2s_edu.lab import experiments as ex
from convs2s_edu.lab.experiments import (
    VERDICTS,
    Arm,
    Budget,
    Claim,
    Experiment,
    ExperimentResult,
    check_claims,
    receptive_field,
    run_experiment,
    summarise_runs,
    verdict,
)
from convs2s_edu.lab.experiments import registry as registry_mod
from convs2s_edu.lab.experiments import runner as runner_mod
from convs2s_edu.metrics import evaluate
from convs2s_edu.training import cache as cache_mod
from convs2s_edu.training import make_datasets, train_or_load

pytestmark = pytest.mark.usefixtures("single_thread")

SUPPORTED, NOT_SUPPORTED, NOT_RESOLVED = VERDICTS
TINY_BUDGET = Budget(seeds=2, n_train=48, n_valid=16, n_test=16, epochs=1, beam_sizes=(1, 2))


# --------------------------------------------------------------------------
# registry: budgets, arms, receptive fields
# --------------------------------------------------------------------------


def test_budgets_share_one_task_and_full_build_has_three_seeds():
    full, quick = ex.budget(quick=False), ex.budget(quick=True)
    assert full.seeds >= 3 and quick.seeds >= 1
    arms = [a for e in ex.EXPERIMENTS.values() for a in e.arms]
    cfgs = [full.train_config(a, 0) for a in arms]
    # the same data and schedule for every arm of every experiment
    assert len({(c.n_train, c.epochs, c.min_len, c.max_len, c.vocab_size) for c in cfgs}) == 1
    # every arm builds (option names are real), and the longer test lengths fit the models
    for cfg in cfgs:
        model = train_mod.build_model(cfg)
        assert model.max_positions >= ex.LONG_LENGTHS[-1][1] + 1


def test_every_arm_builds_the_model_it_names():
    # checked on the built model, not on the arm's own options: a depth/width arm that fell
    # back to the default model (or lost its options on the way) would train the wrong thing
    b = ex.budget(quick=True)
    for arm in ex.EXPERIMENTS["depth_kernel"].arms:
        model = train_mod.build_model(b.train_config(arm, 0))
        n_layers, k = arm.columns["layers"], arm.columns["kernel_size"]
        assert (model.cfg.n_encoder_layers, model.cfg.n_decoder_layers) == (n_layers, n_layers)
        assert model.cfg.kernel_size == k, arm.name
        assert arm.columns["receptive_field"] == 1 + n_layers * (k - 1)
    for arm in ex.EXPERIMENTS["positions"].arms:
        model = train_mod.build_model(b.train_config(arm, 0))
        assert model.cfg.__class__.__name__ == {"convs2s": "ConvS2SConfig"}.get(
            arm.model, model.cfg.__class__.__name__
        )
        for key, value in arm.options.items():
            assert getattr(model.cfg, key) == value, (arm.name, key)


def test_bad_sizes_name_the_argument():
    with pytest.raises(ValueError, match="n_layers"):
        receptive_field(0, 3)
    with pytest.raises(ValueError, match="kernel_size"):
        receptive_field(2, "3")


def test_receptive_field_by_enumeration():
    """Brute force: the inputs that can reach output 0 of L centred convolutions of width k."""
    for n_layers in (1, 2, 4):
        for k in (3, 5):
            reach = {0}
            for _ in range(n_layers):
                reach = {i + d for i in reach for d in range(-(k // 2), k // 2 + 1)}
            assert receptive_field(n_layers, k) == len(reach)


# --------------------------------------------------------------------------
# statistics: summaries over seeds, verdicts
# --------------------------------------------------------------------------


def test_summarise_runs_by_hand():
    arms = [Arm("a", "A"), Arm("b", "B", columns={"receptive_field": 9})]
    runs = [
        {"arm": "a", "seed": 1, "x": 0.5},
        {"arm": "a", "seed": 0, "x": 0.2},
        {"arm": "a", "seed": 2, "x": 0.8},
        {"arm": "b", "seed": 0, "x": 3.0},
    ]
    a, b = summarise_runs(runs, arms)
    assert a["x_values"] == [0.2, 0.5, 0.8]  # seed order
    assert (a["x"], a["x_min"], a["x_max"]) == pytest.approx((0.5, 0.2, 0.8))
    # sqrt(((0.3)^2 + 0 + (0.3)^2) / 2) = 0.3
    assert a["x_std"] == pytest.approx(0.3)
    assert (b["x"], b["x_std"], b["n_seeds"], b["receptive_field"]) == (3.0, 0.0, 1, 9)
    with pytest.raises(ValueError, match="no runs of arm 'c'"):
        summarise_runs(runs, [Arm("c", "C")])


@pytest.mark.parametrize(
    "a, b, paired, expected",
    [
        ([0.8, 0.9, 0.85], [0.5, 0.6, 0.7], False, SUPPORTED),
        ([0.5, 0.6, 0.7], [0.8, 0.9, 0.85], False, NOT_SUPPORTED),
        ([0.5, 0.8, 0.7], [0.6, 0.9, 0.65], False, NOT_RESOLVED),  # ranges overlap
        ([0.7, 0.8], [0.6, 0.7], False, NOT_RESOLVED),  # ranges touch
        ([0.9], [0.1], False, NOT_RESOLVED),  # one seed: no spread
        ([0.9, 0.9], [0.1], False, NOT_RESOLVED),
        ([0.5, 0.8, 0.7], [0.4, 0.7, 0.6], True, SUPPORTED),  # overlap, but each seed higher
        ([0.4, 0.7, 0.6], [0.5, 0.8, 0.7], True, NOT_SUPPORTED),
        ([0.5, 0.8, 0.7], [0.4, 0.9, 0.6], True, NOT_RESOLVED),
        ([0.5, 0.5], [0.5, 0.5], True, NOT_RESOLVED),
    ],
)
def test_verdict_cases(a, b, paired, expected):
    assert verdict(a, b, paired=paired) == expected


def test_verdict_bad_input():
    with pytest.raises(ValueError, match="at least one value"):
        verdict([], [0.1])
    with pytest.raises(ValueError, match="NaN"):
        verdict([0.1, float("nan")], [0.1, 0.2])
    with pytest.raises(ValueError, match="same length"):
        verdict([0.1, 0.2], [0.1, 0.2, 0.3], paired=True)


# --------------------------------------------------------------------------
# runner: rows, the cache, progress lines (the tiny_experiment fixture: conftest.py)
# --------------------------------------------------------------------------


def test_runner_rows_and_spreads_match_a_hand_computation(tiny_experiment, tmp_path):
    result = run_experiment("tiny", custom_budget=TINY_BUDGET, directory=tmp_path, progress=False)
    assert [r["arm"] for r in result.rows] == ["conv", "gru"]
    assert [(r["arm"], r["seed"]) for r in result.runs] == [
        ("conv", 0),
        ("conv", 1),
        ("gru", 0),
        ("gru", 1),
    ]
    for row, arm in zip(result.rows, tiny_experiment.arms):
        assert row["n_seeds"] == 2
        # per seed, independently: load the cached run, score it, read its history
        acc, loss, sec = [], [], []
        for seed in range(2):
            run = train_or_load(TINY_BUDGET.train_config(arm, seed), directory=tmp_path)
            assert run.config.model == arm.model and run.config.seed == seed
            acc.append(evaluate(run.model, make_datasets(run.config)[2])["token_accuracy"])
            loss.append(run.history.epochs[-1]["valid_loss"])
            sec.append(statistics.median(run.history.column("seconds")))
        for key, xs in (("token_accuracy", acc), ("valid_loss", loss), ("sec_per_epoch", sec)):
            assert row[f"{key}_values"] == pytest.approx(xs)
            assert row[key] == pytest.approx((xs[0] + xs[1]) / 2)
            assert row[f"{key}_min"] == pytest.approx(min(xs))
            assert row[f"{key}_max"] == pytest.approx(max(xs))
            # sample std of two values: |x0 - x1| / sqrt(2)
            assert row[f"{key}_std"] == pytest.approx(abs(xs[0] - xs[1]) / math.sqrt(2))
        assert row["greedy_seconds_min"] > 0


def test_second_call_trains_and_decodes_nothing(tiny_experiment, tmp_path, monkeypatch):
    first = run_experiment("tiny", custom_budget=TINY_BUDGET, directory=tmp_path, progress=False)

    def boom(*args, **kwargs):
        raise AssertionError("trained or decoded again")

    monkeypatch.setattr(cache_mod, "train", boom)
    monkeypatch.setattr(runner_mod, "train_or_load", boom)
    monkeypatch.setattr(runner_mod, "evaluate", boom)
    second = run_experiment("tiny", custom_budget=TINY_BUDGET, directory=tmp_path, progress=False)
    assert second.rows == first.rows


def test_new_measurement_of_cached_runs_loads_without_training(
    tiny_experiment, tmp_path, monkeypatch
):
    run_experiment("tiny", custom_budget=TINY_BUDGET, directory=tmp_path, progress=False)
    monkeypatch.setattr(cache_mod, "train", lambda *a, **k: pytest.fail("trained again"))
    monkeypatch.setitem(
        ex.EXPERIMENTS,
        "tiny",
        tiny_experiment.__class__(**{**tiny_experiment.__dict__, "measures": ("beam",)}),
    )
    result = run_experiment("tiny", custom_budget=TINY_BUDGET, directory=tmp_path, progress=False)
    assert "token_accuracy_beam2" in result.rows[0]


def test_epochs_and_seeds_overrides_reach_the_runs(tiny_experiment, tmp_path, monkeypatch):
    seen = []
    real = train_mod.train_or_load

    def spy(cfg, **kw):
        seen.append((cfg.epochs, cfg.seed))
        return real(cfg, **kw)

    monkeypatch.setattr(runner_mod, "train_or_load", spy)
    monkeypatch.setattr(
        registry_mod, "QUICK_BUDGET", {"n_train": 16, "n_valid": 8, "n_test": 8, "epochs": 1}
    )
    run_experiment("tiny", quick=True, seeds=2, epochs=2, directory=tmp_path, progress=False)
    assert sorted(seen) == [(2, 0), (2, 0), (2, 1), (2, 1)]  # 2 arms x 2 seeds, 2 epochs each


def test_progress_prints_one_line_per_run_when_not_a_terminal(tiny_experiment, tmp_path, capsys):
    b = Budget(seeds=1, n_train=16, n_valid=8, n_test=8, epochs=1, beam_sizes=(1,))
    run_experiment("tiny", custom_budget=b, directory=tmp_path)  # stderr is captured
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "[1/2] tiny/conv seed 0",
        "[2/2] tiny/gru seed 0",
    ]


def test_run_lines_go_to_the_build_log_under_sphinx_gallery(
    tiny_experiment, tmp_path, monkeypatch, capfd
):
    # in a docs build sphinx-gallery's tee would put the lines into the page and keep the
    # build's log silent for the whole Experiments section
    tee = type("_LoggingTee", (io.StringIO,), {"__module__": "sphinx_gallery.gen_rst"})()
    monkeypatch.setattr(sys, "stderr", tee)
    b = Budget(seeds=1, n_train=16, n_valid=8, n_test=8, epochs=1, beam_sizes=(1,))
    run_experiment("tiny", custom_budget=b, directory=tmp_path)
    monkeypatch.undo()
    assert tee.getvalue() == ""
    assert "[2/2] tiny/gru seed 0" in capfd.readouterr().err


def test_unknown_experiment_and_arm_names_are_rejected():
    with pytest.raises(ValueError, match="unknown experiment 'nope'.*positions"):
        run_experiment("nope")
    with pytest.raises(ValueError, match=r"unknown arm\(s\) \['bogus'\].*both, source"):
        run_experiment("positions", arms=["both", "bogus"])
    with pytest.raises(ValueError, match="seeds"):
        ex.budget(seeds=0)


# --------------------------------------------------------------------------
# claims
# --------------------------------------------------------------------------


def _result(name, values: dict) -> ExperimentResult:
    arms = [Arm(arm, arm) for arm in values]
    runs = [
        {"arm": arm, "seed": s, **{k: v[s] for k, v in cols.items()}}
        for arm, cols in values.items()
        for s in range(len(next(iter(cols.values()))))
    ]
    exp = Experiment(name, name, "?", tuple(arms))
    return ExperimentResult(exp, TINY_BUDGET, runs, summarise_runs(runs, arms))


def test_check_claims_uses_the_strongest_rival_and_the_numbers():
    res = _result(
        "e",
        {
            "x": {"acc": [0.8, 0.82, 0.81]},
            "weak": {"acc": [0.1, 0.2, 0.3]},
            "strong": {"acc": [0.79, 0.9, 0.85]},
        },
    )
    claims = [
        Claim("x beats both", "here", "e", ("x", "acc"), (("weak", "acc"), ("strong", "acc"))),
        Claim("x beats weak", "here", "e", ("x", "acc"), (("weak", "acc"),)),
        Claim("weak beats x", "here", "e", ("weak", "acc"), (("x", "acc"),)),
    ]
    rows = check_claims({"e": res}, claims)
    assert [r["verdict"] for r in rows] == [NOT_RESOLVED, SUPPORTED, NOT_SUPPORTED]
    assert "strong" in rows[0]["measured"] and "81.0% [80.0%–82.0%]" in rows[0]["measured"]
    with pytest.raises(ValueError, match="no result of experiment 'f'"):
        check_claims({"e": res}, [Claim("?", "?", "f", ("x", "acc"), (("x", "acc"),))])


def test_claims_name_real_experiments_arms_and_columns():
    base = {"exact_match", "token_accuracy", "valid_loss", "sec_per_epoch"}
    by_measure = {
        "greedy_time": {"greedy_seconds"},
        "long": {
            f"{m}_{lo}_{hi}"
            for m in ("exact_match", "token_accuracy")
            for lo, hi in ex.LONG_LENGTHS
        },
    }
    for claim in ex.CLAIMS:
        exp = ex.get_experiment(claim.experiment)
        for quick in (False, True):
            columns = set(base).union(*(by_measure.get(m, set()) for m in exp.measures))
            if "beam" in exp.measures:
                columns |= {
                    f"{m}_beam{k}"
                    for m in ("exact_match", "token_accuracy", "seconds")
                    for k in ex.budget(quick=quick).beam_sizes
                }
            for arm, key in (claim.claimed, *claim.others):
                assert arm in exp.arm_names
                assert key in columns, (claim.text, key, quick)


# --------------------------------------------------------------------------
# report: conclusions, the claims table
# --------------------------------------------------------------------------


def test_conclusion_calls_a_winner_only_beyond_every_spread():
    clear = _result(
        "e", {"a": {"acc": [0.8, 0.9]}, "b": {"acc": [0.5, 0.6]}, "c": {"acc": [0.1, 0.7]}}
    )
    assert "a is ahead of every other arm" in ex.conclusion(clear, "acc")
    # b is second by mean, but c's range reaches into a's
    muddy = _result(
        "e", {"a": {"acc": [0.8, 0.9]}, "b": {"acc": [0.6, 0.7]}, "c": {"acc": [0.1, 0.85]}}
    )
    sentence = ex.conclusion(muddy, "acc")
    assert "a is first" in sentence and "b second" in sentence
    assert "not resolved at this scale" in sentence and "ahead" not in sentence
    # lower is better: times
    times = _result("e", {"fast": {"t": [1.0, 1.1]}, "slow": {"t": [2.0, 2.2]}})
    assert "fast is ahead" in ex.conclusion(times, "t", higher_is_better=False)
    assert "not resolved" in ex.conclusion(
        _result("e", {"x": {"t": [1.0]}, "y": {"t": [2.0]}}), "t"
    )


def test_claims_table_html_holds_every_row_escaped():
    res = _result("e", {"x": {"acc": [0.8, 0.9]}, "y": {"acc": [0.1, 0.2]}})
    rows = check_claims(
        {"e": res}, [Claim('"x" <beats> y', "here", "e", ("x", "acc"), (("y", "acc"),))]
    )
    html = ex.ClaimsTable(rows)._repr_html_()
    assert html.count("<tr>") == 2 and "&lt;beats&gt;" in html and SUPPORTED in html
    assert "verdict: SUPPORTED" in repr(ex.ClaimsTable(rows))
