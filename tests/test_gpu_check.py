"""The GPU check's orchestration (``tools/gpu_check.py``): it gets one run on a machine lent for
minutes, so a run must end inside the machine's limit with what it measured. Its steps
themselves run on the CPU in ``tox -e gpu-dry``; these tests replace them with stand-ins."""

from __future__ import annotations

import json

import pytest
from _files import load_module

gpu_check = load_module("tools/gpu_check.py", "gpu_check_under_test")


def test_steps_after_the_deadline_are_skipped_and_the_summary_is_written_after_each(
    tmp_path, monkeypatch
):
    clock = [0.0]
    monkeypatch.setattr(gpu_check.time, "perf_counter", lambda: clock[0])
    path = tmp_path / "gpu_check.json"
    summary: dict = {}
    on_disk = []  # the summary as read back after each step

    def write():
        path.write_text(json.dumps(summary))
        on_disk.append(json.loads(path.read_text()))

    def step(seconds, fail=False):
        def run(left):
            clock[0] += seconds
            if fail:
                raise RuntimeError("planted")
            return {"left": left}

        return run

    steps = {"a": step(100), "b": step(250, fail=True), "c": step(100), "d": step(1)}
    gpu_check.run_steps(steps, summary, 420, write)
    # a and b start before the deadline (b's failure does not stop c); d starts at 450 s
    assert [summary[k]["ok"] for k in "abcd"] == [True, False, True, False]
    assert summary["a"]["left"] == 420 and summary["c"]["left"] == 70
    assert summary["b"]["error"] == "RuntimeError: planted"
    assert "skipped" not in summary["c"] and "420 s deadline" in summary["d"]["skipped"]
    # one write per step, each with the steps done so far
    assert [sorted(s) for s in on_disk] == [["a"], ["a", "b"], ["a", "b", "c"], list("abcd")]


def test_generation_takes_the_convergence_steps_models(monkeypatch):
    import convs2s_edu
    import convs2s_edu.lab.timing as timing

    seen = {}

    def measure(models, sources, beam_sizes, n_rounds):
        seen["models"] = models
        return {}

    monkeypatch.setattr(timing, "measure_generation", measure)
    monkeypatch.setattr(convs2s_edu, "train", lambda *a, **k: pytest.fail("trained again"))
    trained = {"convs2s": object(), "gru": object()}
    out = gpu_check.generation("cpu", True, trained)
    assert seen["models"] == trained and out["models"] == "from the convergence step"


@pytest.mark.parametrize("option", ["--deadline", "--train-budget"])
@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_budgets_must_be_positive(option, value, tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        gpu_check.main([str(tmp_path), "--device", "cpu", option, value])
    assert err.value.code == 2
    assert "must be > 0 seconds" in capsys.readouterr().err
    assert not (tmp_path / "gpu_check.json").exists()
