"""Tests of ``convs2s_edu.lab.timing.compare``, the comparison of the original
notebook's two models (through ``convs2s-edu compare``): the tables, the interleaved
speed measurement and its verdict, and the window settings checked before anything trains."""

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
    assert "(2 windows of 1 step(s) per model, interleaved)" in printed
    assert "1 thread  convs2s" in printed and "x convs2s" in printed
    assert "convergence speed (seconds: steps x median s/step" in printed
    assert "seconds, 1 thread" in printed
    saved = json.loads(rows_file.read_text())
    rows, speed = saved["rows"], saved["speed"]
    assert [r["model"] for r in rows] == ["convs2s", "gru"]
    assert speed["order"] == ["convs2s", "gru", "gru", "convs2s"]
    assert saved["threads"]["thread_counts"] == [1]
    assert saved["config"]["eval_every"] == 1
    assert " ".join(saved["verdict"]["text"].split()) in " ".join(printed.split())
    assert set(saved["verdict"]["by_hardware"]) == {"1 thread"}
    one = saved["verdict"]["by_hardware"]["1 thread"]
    assert one["by_hardware"] == {}
    assert one["text"].removeprefix("WARNING: ") in saved["verdict"]["text"]
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
    from convs2s_edu.lab.timing import compare

    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    result = compare(tiny_config(n_train=32), n_rounds=2, steps_per_window=1, warmup_steps=0)
    assert result.threads.thread_counts == list(range(1, usable_cores() + 1))
    assert result.convergence is None  # no learning curve without eval_every


def test_convergence_seconds_of_unsteady_windows_are_flagged(tmp_path, monkeypatch):
    from _tiny import tiny_config

    from convs2s_edu.lab import timing
    from convs2s_edu.lab.timing import compare, format_convergence

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
    assert steady.verdict.by_hardware["1 thread"].ok
    assert [c["unsteady"] for c in steady.convergence] == [[], []]
    # the verdict names the models as the site does, by their registry labels
    assert "ConvS2S" in steady.verdict.text and "GRU + attention" in steady.verdict.text


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

    from convs2s_edu.lab import timing

    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(timing, "_loadavg", lambda: 0.0)
    monkeypatch.setattr(timing, "_runnable", lambda: 0)
    real_resolve, real_measure = timing.resolve_device, timing.measure_config

    def measure_config(*args, **kwargs):  # times on the CPU: the device it really has
        with monkeypatch.context() as here:
            here.setattr(timing, "resolve_device", real_resolve)
            return real_measure(*args, **kwargs)

    monkeypatch.setattr(timing, "measure_config", measure_config)
    monkeypatch.setattr(timing, "resolve_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(timing, "device_label", lambda device: "cuda (Test GPU)")
    seen = {}

    def convergence(results, per_step, unsteady):
        seen.update(per_step=per_step, unsteady=unsteady)
        return []

    monkeypatch.setattr(timing, "convergence", convergence)
    cfg = tiny_config(n_train=32, eval_every=1)
    with pytest.raises(ValueError, match="threads are a CPU setting"):
        timing.compare(cfg, threads=[1])
    # no two windows take exactly the same time: a 1.000001x limit makes the measurement unsteady
    result = timing.compare(
        cfg, n_rounds=2, steps_per_window=1, warmup_steps=0, max_spread=1.000001
    )
    assert result.threads is None and result.verdict.by_hardware == {}
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


def test_speed_table_gives_each_models_windows_its_ratio_the_verdict_and_the_machine():
    from convs2s_edu.lab.timing import MachineInfo, SpeedMeasurement, speed_table, speed_verdict

    seconds = {"convs2s": [2.0, 2.5, 2.0, 2.0], "gru": [1.0, 1.0, 1.25, 1.0]}
    tokens = {n: [1000] * 4 for n in seconds}
    mach = MachineInfo(cpu="Test CPU", cores=4, threads=2, torch_version="2.x", load_before=0.5)
    order = ["convs2s", "gru", "gru", "convs2s"] * 2
    m = SpeedMeasurement(seconds, tokens, order, mach, steps_per_window=2, warmup_steps=1)
    lines = speed_table(m, labels={"gru": "GRU"}).splitlines()
    head = ["on", "model", "tokens/s", "windows", "spread", "x", "convs2s", "rounds"]
    assert lines[0].split() == head
    # convs2s: 500, 400, 500, 500 tokens/s; GRU: 1000, 1000, 800, 1000
    assert lines[2].split() == ["2", "threads", "convs2s", "500", "400-500", "1.25x", "1.00"] + [
        "1.00-1.00"
    ]
    # GRU / convs2s per round: 2.0, 2.5, 1.6, 2.0
    assert lines[3].split() == ["GRU", "1,000", "800-1,000", "1.25x", "2.00", "1.60-2.50"]
    assert lines[4] == "(4 windows of 2 step(s) per model, interleaved)"
    assert lines[5] == speed_verdict(m, labels={"gru": "GRU"}).text
    assert lines[6] == mach.describe()


def _two_counts():
    """Windows at 1 and 2 threads: GRU 1.8x as fast at 1 thread (per round 1.6, 2.0), ConvS2S
    1.5x as fast at 2."""
    from convs2s_edu.lab.timing import MachineInfo, SpeedMeasurement, ThreadScaling

    seconds = {"convs2s@1": [2.0, 2.0], "gru@1": [1.0, 1.25], "convs2s@2": [1.0, 1.0]}
    seconds["gru@2"] = [1.5, 1.5]
    order = list(seconds) + list(seconds)[::-1]
    tokens = {k: [1000, 1000] for k in seconds}
    mach = MachineInfo(cpu="Test CPU", cores=2, threads=2)
    raw = SpeedMeasurement(seconds, tokens, order, mach, steps_per_window=2, warmup_steps=1)
    return ThreadScaling(["convs2s", "gru"], [1, 2], raw)


def test_speed_table_gives_every_thread_count_its_throughputs_and_ratios():
    from convs2s_edu.lab.timing import speed_table

    rows = [line.split() for line in speed_table(_two_counts()).splitlines()[2:6]]
    assert rows == [
        ["1", "thread", "convs2s", "500", "500-500", "1.00x", "1.00", "1.00-1.00"],
        ["gru", "900", "800-1,000", "1.25x", "1.80", "1.60-2.00"],
        ["2", "threads", "convs2s", "1,000", "1,000-1,000", "1.00x", "1.00", "1.00-1.00"],
        ["gru", "667", "667-667", "1.00x", "0.67", "0.67-0.67"],
    ]


def test_seconds_per_step_at_every_thread_count():
    from convs2s_edu.lab.timing import seconds_per_step

    # a window of 2 steps: seconds / 2 per step; the GRU's median at 1 thread of 0.5 and 0.625
    assert seconds_per_step(_two_counts()) == {
        "convs2s": {"1 thread": 1.0, "2 threads": 0.5},
        "gru": {"1 thread": 0.5625, "2 threads": 0.75},
    }


def test_format_table_without_a_measurement_shows_the_runs_own_clock():
    from convs2s_edu.lab.timing import format_table

    row = dict(model="convs2s", n_parameters=12345, run_sec_per_epoch=1.5)
    row.update(run_tokens_per_second=9876.5, final_train_loss=0.12345, final_valid_loss=0.5)
    row.update(exact_match=0.97, token_accuracy=0.991)
    assert format_table([row, dict(row, model="gru", n_parameters=99)]).splitlines() == [
        "  model  params  s/epoch (this run)  tokens/s (this run)  train loss  valid loss  "
        "exact match  token acc.",
        "-------  ------  ------------------  -------------------  ----------  ----------  "
        "-----------  ----------",
        "convs2s  12,345                1.50                9,876      0.1235      0.5000  "
        "      97.0%       99.1%",
        "    gru      99                1.50                9,876      0.1235      0.5000  "
        "      97.0%       99.1%",
    ]


def test_compare_converts_steps_to_seconds_at_every_thread_count(tmp_path, monkeypatch):
    from _tiny import tiny_config

    from convs2s_edu._machine import usable_cores
    from convs2s_edu.lab.timing import compare

    if usable_cores() < 2:
        pytest.skip("needs two usable cores")
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    cfg = tiny_config(n_train=32, eval_every=1)
    result = compare(cfg, n_rounds=2, steps_per_window=1, warmup_steps=0, threads=[1, 2])
    assert [c["timed_on"] for c in result.convergence] == [["1 thread", "2 threads"]] * 2


def test_speed_table_lists_the_ratio_of_every_model_to_the_first():
    from convs2s_edu.lab.timing import MachineInfo, SpeedMeasurement, ThreadScaling, speed_table

    seconds = {"a@1": [1.0, 1.0], "b@1": [2.0, 2.0], "c@1": [4.0, 4.0]}
    order = list(seconds) + list(seconds)[::-1]
    tokens = {k: [1000, 1000] for k in seconds}
    raw = SpeedMeasurement(seconds, tokens, order, MachineInfo())
    table = speed_table(ThreadScaling(["a", "b", "c"], [1], raw)).splitlines()
    assert [line.split()[-2:] for line in table[2:5]] == [
        ["1.00", "1.00-1.00"],
        ["0.50", "0.50-0.50"],
        ["0.25", "0.25-0.25"],
    ]
