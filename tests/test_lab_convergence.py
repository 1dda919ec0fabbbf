"""Tests of ``convs2s_edu.lab.timing.convergence``: the first evaluation at or above each
level, its examples and its seconds (steps x the interleaved seconds per step), a level
never reached reported as such, and a run without a learning curve refused."""

from __future__ import annotations

import pytest

from convs2s_edu.lab.timing import convergence, format_convergence, hardware_label
from convs2s_edu.training import History, TrainConfig, TrainResult


def _run(model: str, curve: list[float], every: int = 10) -> TrainResult:
    evals = [
        {"step": every * (i + 1), "examples": every * (i + 1) * 128, "exact_match": em}
        for i, em in enumerate(curve)
    ]
    h = History(steps=every * len(curve), evals=evals)
    return TrainResult(None, TrainConfig(model=model, eval_every=every), h)


def test_steps_examples_and_seconds_to_each_level():
    results = {
        "convs2s": _run("convs2s", [0.1, 0.55, 0.5, 0.92, 0.96]),  # 0.5 first at step 20
        "gru": _run("gru", [0.0, 0.3, 0.6, 0.89, 0.93]),
    }
    per_step = {"convs2s": {"1 thread": 0.2, "2 threads": 0.1}, "gru": {"1 thread": 0.1}}
    rows = convergence(results, per_step)
    conv, gru = rows
    assert conv["levels"]["0.5"] == {
        "step": 20,
        "examples": 2560,
        "seconds": {"1 thread": pytest.approx(4.0), "2 threads": pytest.approx(2.0)},
    }
    assert conv["levels"]["0.9"]["step"] == 40 and conv["levels"]["0.95"]["step"] == 50
    assert gru["levels"]["0.5"]["step"] == 30 and gru["levels"]["0.9"]["step"] == 50
    assert gru["levels"]["0.95"] is None  # never reached: reported, not dropped
    assert gru["final"] == 0.93 and gru["steps"] == 50 and gru["eval_every"] == 10
    text = format_convergence(rows, {"gru": "GRU"})
    assert "not reached in 50" in text and "seconds, 2 threads" in text
    assert "evaluated every 10 steps" in text
    assert "*" not in text  # every timing steady: nothing flagged


def test_seconds_from_unsteady_windows_are_flagged_not_passed_off_as_measured():
    # a quiet full build timed 2 threads with windows varying 1.7-2x: the page printed
    # those seconds beside the steady ones, unmarked
    results = {"convs2s": _run("convs2s", [0.6, 0.95]), "gru": _run("gru", [0.5, 0.9])}
    per_step = {m: {"1 thread": 0.2, "2 threads": 0.1} for m in results}
    rows = convergence(results, per_step, unsteady=["2 threads"])
    assert [r["unsteady"] for r in rows] == [["2 threads"], ["2 threads"]]
    text = format_convergence(rows)
    assert "seconds, 2 threads*" in text and "seconds, 1 thread*" not in text
    assert "* 2 threads: windows not steady, seconds rough" in text


def test_a_run_needs_its_learning_curve():
    bare = TrainResult(None, TrainConfig(), History(steps=10))
    with pytest.raises(ValueError, match="no learning curve; train it with .*eval_every"):
        convergence({"convs2s": bare})


def test_without_timing_no_seconds_are_invented():
    rows = convergence({"convs2s": _run("convs2s", [0.6])})
    assert rows[0]["levels"]["0.5"]["seconds"] == {}


def test_hardware_labels():
    assert [hardware_label(t) for t in (1, 2, 16)] == ["1 thread", "2 threads", "16 threads"]
    assert hardware_label(device="cuda (H200)") == "cuda (H200)"
