"""The GPU check's orchestration (``tools/gpu_check.py``): it gets one run on a machine lent for
minutes, so a run must end inside the machine's limit with what it measured. Its steps
themselves run on the CPU in ``tox -e gpu-dry``; these tests replace them with stand-ins."""

from __future__ import annotations

import json
import os
import time

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


def _stand_ins(monkeypatch, slow: str, seconds: float):
    """Every step of ``main`` replaced by one that returns at once, but ``slow``."""
    calls = []

    def step(name):
        def run(*args, **kwargs):
            calls.append(name)
            if name == slow:
                time.sleep(seconds)
            return {}

        return run

    for name, fn in (("tests", "run_tests"), ("convergence", "convergence")):
        monkeypatch.setattr(gpu_check, fn, step(name))
    for name in ("generation", "threads", "bench"):
        monkeypatch.setattr(gpu_check, name, step(name))
    monkeypatch.setattr(gpu_check, "train_all", step("train"))
    monkeypatch.setattr(gpu_check, "compile_check", lambda device: None)
    monkeypatch.setattr(gpu_check, "T_START", time.perf_counter())
    return calls


def test_the_hard_stop_ends_the_running_step_and_starts_no_other(tmp_path, monkeypatch):
    calls = _stand_ins(monkeypatch, slow="convergence", seconds=30)
    t0 = time.perf_counter()
    assert gpu_check.main([str(tmp_path), "--device", "cpu", "--stop", "1"]) == 1
    assert time.perf_counter() - t0 < 10  # not the 30 s of the slow step
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert calls == ["tests", "convergence"]
    assert summary["tests"]["ok"] and summary["finished"]
    assert summary["convergence"]["error"].startswith("TimeoutError: stopped at the check's")
    assert all("skipped" in summary[k] for k in ("generation", "threads", "bench", "train"))
    assert summary["compile"] == "ok"


def test_a_failed_compile_check_leaves_the_compiled_paths_out_of_the_runs(monkeypatch):
    import torch

    import convs2s_edu

    def broken(*args, **kwargs):
        raise RuntimeError("no C compiler")

    monkeypatch.setattr(torch, "compile", broken)
    why = gpu_check.compile_check("cpu")
    assert why == "torch.compile failed on cpu: RuntimeError: no C compiler"
    trained = []

    class Result:  # what train_all reads of a run
        class history:
            epochs = [{"tokens_per_second": 1.0, "train_loss": 1.0, "valid_loss": 1.0}]

            @staticmethod
            def column(name):
                return [0.0]

        model = None

    def train(cfg, progress):
        trained.append(cfg.compile)
        return Result()

    monkeypatch.setattr(convs2s_edu, "train", train)
    scores = {"exact_match": 1.0, "token_accuracy": 1.0}
    monkeypatch.setattr(convs2s_edu, "evaluate", lambda model, data: scores)
    out = gpu_check.train_all("cpu", True, 60.0, no_compile=why)
    assert trained and not any(trained)  # eager runs only
    assert out["skipped_paths"]["compile-fp32"] == why


def test_the_tests_step_kills_its_workers_when_it_runs_out_of_time(tmp_path, monkeypatch):
    pid_file = tmp_path / "pid"
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_paths_sleep.py").write_text(
        "import subprocess, time\n"
        "def test_paths_sleeps():\n"  # a process of its own, as a compiler's would be
        "    child = subprocess.Popen(['sleep', '60'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "    time.sleep(60)\n"
    )
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="the tests did not end within 6 s"):
        gpu_check.run_tests("cpu", timeout=6)
    assert time.perf_counter() - t0 < 20
    pid = int(pid_file.read_text())  # the process the test started
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the process {pid} the test started outlived the step")


def test_the_convergence_step_hands_its_two_models_to_the_generation_step(monkeypatch):
    import convs2s_edu.lab.timing as timing

    models = {"convs2s": object(), "gru": object()}

    class Run:
        def __init__(self, model):
            self.model = model

    class Comparison:
        rows, convergence = [], []
        results = {name: Run(m) for name, m in models.items()}

    monkeypatch.setattr(timing, "compare", lambda cfg, **kwargs: Comparison())
    monkeypatch.setattr(timing, "format_table", lambda rows: "")
    monkeypatch.setattr(timing, "format_convergence", lambda rows: "")
    trained: dict = {}
    gpu_check.convergence("cpu", True, trained)
    assert trained == models
