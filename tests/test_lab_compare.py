"""Tests of ``convs2s_edu.lab.compare``, the comparison of the seed's two models (through
``convs2s-edu compare``): the table, the interleaved speed measurement and its verdict, and the
window settings checked before anything trains."""

import json

import pytest
from _tiny import SMALL

from convs2s_edu.cli import main

pytestmark = pytest.mark.usefixtures("single_thread")


def test_compare_prints_the_speed_table_threads_and_convergence(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    rows_file = tmp_path / "rows.json"
    args = ["compare", *SMALL, "--rounds", "2", "--window-steps", "1", "--eval-every", "1"]
    assert main([*args, "--threads", "1", "--json", str(rows_file)]) == 0
    printed = capsys.readouterr().out
    assert "tokens/s (median)" in printed and "windows min-max" in printed
    assert "by PyTorch thread count, interleaved (2 rounds)" in printed
    assert "1 thread: convs2s" in printed and "ratio gru/convs2s" in printed
    assert "convergence speed (seconds: steps x median s/step" in printed
    assert "seconds, 1 thread" in printed
    saved = json.loads(rows_file.read_text())
    rows, speed = saved["rows"], saved["speed"]
    assert [r["model"] for r in rows] == ["convs2s", "gru"]
    assert speed["order"] == ["convs2s", "gru", "gru", "convs2s"]
    assert saved["threads"]["thread_counts"] == [1]
    assert saved["config"]["eval_every"] == 1
    assert " ".join(saved["verdict"]["text"].split()) in " ".join(printed.split())
    assert set(saved["verdict"]["by_threads"]) == {"1"}
    for r in rows:
        assert 0.0 <= r["exact_match"] <= 1.0 and 0.0 <= r["token_accuracy"] <= 1.0
        # the table's speed is the interleaved windows' median, not the training run's clock
        assert r["tokens_per_second"] == speed["throughput"][r["model"]]["median"]
        lo, hi = r["tokens_per_second_range"]
        assert lo <= r["tokens_per_second"] <= hi
        assert r["timed_on"] == "1 thread"
    conv = {c["model"]: c for c in saved["convergence"]}
    assert set(conv) == {"convs2s", "gru"}
    for name, c in conv.items():
        assert set(c["levels"]) == {"0.5", "0.9", "0.95"}
        per_step = speed["window_seconds"][name]
        median = sorted(per_step)[len(per_step) // 2] if len(per_step) % 2 else None
        for v in c["levels"].values():
            if v is not None:  # seconds = steps x the windows' median seconds per step
                assert v["seconds"]["1 thread"] > 0
                if median is not None:
                    assert v["seconds"]["1 thread"] == pytest.approx(v["step"] * median)


def test_compare_at_every_thread_count_by_default(tmp_path, monkeypatch):
    from _tiny import tiny_config

    from convs2s_edu._machine import usable_cores
    from convs2s_edu.lab.compare import compare

    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    result = compare(tiny_config(n_train=32), n_rounds=2, steps_per_window=1, warmup_steps=0)
    assert result.threads.thread_counts == list(range(1, usable_cores() + 1))
    assert result.convergence is None  # no learning curve without eval_every


def test_convergence_seconds_of_unsteady_windows_are_flagged(tmp_path, monkeypatch):
    from _tiny import tiny_config

    from convs2s_edu.lab import timing
    from convs2s_edu.lab.compare import compare
    from convs2s_edu.lab.convergence import format_convergence

    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    # a quiet machine, whatever else runs beside the tests: only the windows' spread decides
    monkeypatch.setattr(timing, "_loadavg", lambda: 0.0)
    monkeypatch.setattr(timing, "_runnable", lambda: 0)
    cfg = tiny_config(n_train=32, eval_every=1)
    # no two windows take exactly the same time: a 1.000001x limit makes every count unsteady
    shaky = compare(
        cfg, n_rounds=2, steps_per_window=1, warmup_steps=0, threads=[1], max_spread=1.000001
    )
    assert not shaky.verdict.ok
    assert [c["unsteady"] for c in shaky.convergence] == [["1 thread"], ["1 thread"]]
    assert "seconds, 1 thread*" in format_convergence(shaky.convergence)
    steady = compare(
        cfg, n_rounds=2, steps_per_window=1, warmup_steps=0, threads=[1], max_spread=1e9
    )
    assert steady.verdict.by_threads[1].ok
    assert [c["unsteady"] for c in steady.convergence] == [[], []]


def test_compare_refuses_bad_window_settings_before_training(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    assert main(["compare", *SMALL, "--rounds", "1"]) == 2
    err = capsys.readouterr().err
    assert "n_rounds must be an integer >= 2, got 1" in err
    assert not (tmp_path / "cache").exists()  # nothing was trained
    assert main(["compare", *SMALL, "--threads", "0"]) == 2
    assert "thread count must be an integer in 1.." in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()


def test_compare_on_an_accelerator_times_its_one_setting_and_converts_steps_with_it(
    tmp_path, monkeypatch
):
    """The branch a GPU takes (no thread counts: one interleaved measurement), run on the CPU
    by letting ``compare`` believe its device is CUDA and the measurement's machine line name
    a GPU: the first GPU run must not be the first run of this code."""
    import torch
    from _tiny import tiny_config

    from convs2s_edu.lab import compare as lab_compare
    from convs2s_edu.lab import timing

    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(timing, "_loadavg", lambda: 0.0)
    monkeypatch.setattr(timing, "_runnable", lambda: 0)
    monkeypatch.setattr(lab_compare, "resolve_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(timing, "device_label", lambda device: "cuda (Test GPU)")
    seen = {}

    def convergence(results, per_step, unsteady):
        seen.update(per_step=per_step, unsteady=unsteady)
        return []

    monkeypatch.setattr(lab_compare, "convergence", convergence)
    cfg = tiny_config(n_train=32, eval_every=1)
    with pytest.raises(ValueError, match="threads are a CPU setting"):
        lab_compare.compare(cfg, threads=[1])
    # no two windows take exactly the same time: a 1.000001x limit makes the measurement unsteady
    result = lab_compare.compare(
        cfg, n_rounds=2, steps_per_window=1, warmup_steps=0, max_spread=1.000001
    )
    assert result.threads is None and result.verdict.by_threads == {}
    assert not result.verdict.ok and result.verdict.text.startswith("WARNING")
    m = result.speed
    assert m.order == ["convs2s", "gru", "gru", "convs2s"]
    where = "cuda (Test GPU)"  # the hardware the speed is labelled with: the device
    for row in result.rows:
        assert row["tokens_per_second"] == m.throughput[row["model"]].median
        assert row["timed_on"] == where
    # the convergence steps become seconds at the measurement's median s/step
    assert seen["per_step"] == {n: {where: m.seconds_per_step(n).median} for n in m.models}
    assert seen["unsteady"] == [where]  # its seconds are flagged
