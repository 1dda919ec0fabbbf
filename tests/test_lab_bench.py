"""Tests of ``convs2s_edu.lab.bench`` (issues 10 and 53) and the limits it reads from
``convs2s_edu._machine``: the bench's arithmetic checked
against independent counts (FLOPs, the GEMM time, the theoretical peak of a CPU read from a
fake ``/proc/cpuinfo``, the fractions of the machine's limits)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from _tiny import tiny_model
from torch.utils.flop_counter import FlopCounterMode

import convs2s_edu._machine as machine
import convs2s_edu.lab.bench as bench
import convs2s_edu.lab.timing as timing
from convs2s_edu import SortingDataset, sequence_loss
from convs2s_edu.fast.paths import ExecutionPath
from convs2s_edu.lab.bench import (
    BenchBudget,
    format_bench,
    gemm_shapes,
    machine_limits,
    run_bench,
    step_gemm_seconds,
)
from convs2s_edu.training import TrainConfig
from convs2s_edu.training.calibrate import default_path


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_gemm_shapes_account_for_the_counted_flops(kind):
    model = tiny_model(kind)
    ds = SortingDataset.generate(8, 3, 6, 10, seed=0)
    batch = ds.collate([ds[i] for i in range(8)])
    counter = FlopCounterMode(display=False)
    with counter:
        sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out).backward()
    shapes = gemm_shapes(model, batch)
    # every recorded product, at 2 m k n FLOPs, adds up to what the counter counted
    # (ConvS2S's convolutions are matrix products over windows, forward and backward)
    assert sum(2 * m * k * n for m, k, n in shapes) == pytest.approx(
        counter.get_total_flops(), rel=0.02
    )


def test_step_gemm_seconds_adds_every_product_at_its_shapes_rate(monkeypatch):
    timed = []

    def fake_rate(m, k, n, device, repeats, dtype=torch.float32):
        timed.append((m, k, n))
        return 1e9 * m  # FLOP/s

    monkeypatch.setattr(bench, "_mm_rate", fake_rate)
    shapes = [(64, 32, 16), (64, 32, 16), (8, 8, 8)]
    # each distinct shape timed once; the repeated product counted twice
    expected = 2 * (2 * 64 * 32 * 16 / 64e9) + 2 * 8 * 8 * 8 / 8e9
    assert step_gemm_seconds(shapes, "cpu", repeats=1) == pytest.approx(expected)
    assert sorted(timed) == [(8, 8, 8), (64, 32, 16)]


def fake_cpu(monkeypatch, cpuinfo: dict, sysfs: dict, usable: int) -> None:
    """Make ``convs2s_edu._machine`` read ``cpuinfo``, ``sysfs`` and ``usable`` cores."""
    monkeypatch.setattr(machine, "_cpuinfo", lambda: dict(cpuinfo))
    monkeypatch.setattr(machine, "_sysfs_cpu0", sysfs.get)
    monkeypatch.setattr(machine, "usable_cores", lambda: usable)


HASWELL = {  # 12 cores, 2 threads each; idle at 1.2 GHz, base 2.5 GHz, turbo 3.3 GHz
    "vendor_id": "GenuineIntel",
    "cpu family": "6",
    "model": "63",
    "model name": "Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz",
    "cpu MHz": "1200.000",
    "siblings": "24",
    "cpu cores": "12",
    "flags": "fpu sse2 avx avx2 fma",
}
EMERALD_RAPIDS = {  # the site's virtual machine: 2 vCPUs, no cpufreq in sysfs
    "vendor_id": "GenuineIntel",
    "cpu family": "6",
    "model": "207",
    "model name": "Intel(R) Xeon(R) Processor",
    "cpu MHz": "2100.000",
    "siblings": "2",
    "cpu cores": "2",
    "flags": "avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile",
}


def test_theoretical_peak_of_an_avx2_cpu(monkeypatch):
    fake_cpu(monkeypatch, HASWELL, {"cpufreq/cpuinfo_max_freq": "3300000"}, usable=24)
    # 2 FMA units x 8 fp32 lanes x 2 FLOPs, at the highest clock read (cpufreq's 3.3 GHz)
    p = machine.theoretical_peak(4)
    assert p["fp32_flops"] == pytest.approx(4 * 3.3e9 * 8 * 2 * 2)
    assert p["bf16_flops"] is None and p["clock_source"] == "cpufreq's cpuinfo_max_freq"
    assert p["fma_units"] == 2 and p["fp32_lanes"] == 8 and "assumed" in p["note"]
    # 16 threads on 24 logical CPUs, 2 per core (24 siblings, 12 cores): 12 physical cores
    assert machine.theoretical_peak(16)["cores"] == 12
    assert machine.theoretical_peak(16)["threads_per_core"] == 2
    # without cpufreq, the model name's base clock
    fake_cpu(monkeypatch, HASWELL, {}, usable=24)
    p = machine.theoretical_peak(1)
    assert p["clock_ghz"] == 2.5 and p["fp32_flops"] == pytest.approx(2.5e9 * 32)


def test_theoretical_peak_of_an_avx512_xeon_with_amx(monkeypatch):
    fake_cpu(monkeypatch, EMERALD_RAPIDS, {}, usable=2)
    p = machine.theoretical_peak(2)
    # no cpufreq: the line's highest max turbo (4.1 GHz), not the base clock of cpu MHz
    # 2 cores x 4.1 GHz x (16 lanes x 2 FMA units x 2); AMX: 1024 bf16 FLOP/cycle/core
    assert p["fp32_flops"] == pytest.approx(2 * 4.1e9 * 64)
    assert p["bf16_flops"] == pytest.approx(2 * 4.1e9 * 1024)
    assert p["threads_per_core"] == 1 and p["cores"] == 2
    for stated in ("Emerald Rapids", "2 FMA units/core", "16 fp32 lanes", "4.10 GHz", "turbo"):
        assert stated in p["text"]
    # where Linux gives the CPU's own maximum clock, that is the clock
    fake_cpu(monkeypatch, EMERALD_RAPIDS, {"cpufreq/cpuinfo_max_freq": "3000000"}, usable=2)
    assert machine.theoretical_peak(1)["fp32_flops"] == pytest.approx(3.0e9 * 64)
    # AVX512_BF16 without AMX: two bf16 products per fp32 lane
    no_amx = EMERALD_RAPIDS | {"flags": "avx2 fma avx512f avx512_bf16"}
    fake_cpu(monkeypatch, no_amx, {}, usable=2)
    assert machine.theoretical_peak(2)["bf16_flops"] == pytest.approx(2 * 4.1e9 * 128)


def test_theoretical_peak_of_zen_3_and_zen_4(monkeypatch):
    zen3 = {"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "33", "cpu MHz": "3000"}
    fake_cpu(monkeypatch, zen3, {}, usable=1)
    assert machine.theoretical_peak(1)["microarchitecture"] == "Zen 3"
    fake_cpu(monkeypatch, zen3 | {"model": "17"}, {}, usable=1)  # Genoa
    p = machine.theoretical_peak(1)
    # 512-bit instructions in two 256-bit halves: 2 units x 8 lanes x 2, at Genoa's 4.4 GHz
    assert p["microarchitecture"] == "Zen 4" and p["fp32_flops"] == pytest.approx(4.4e9 * 32)


@pytest.mark.parametrize(
    "cpuinfo, why",
    [
        ({"model name": "ARMv8 Processor", "cpu MHz": "2000"}, "not in the table"),
        (HASWELL | {"flags": "sse2 avx"}, "not in the table"),  # no AVX2: not assumed
        (HASWELL | {"cpu MHz": "", "model name": "Intel(R) Xeon(R) CPU"}, "no clock"),
    ],
)
def test_an_unknown_cpu_or_clock_gives_no_peak_and_says_why(monkeypatch, cpuinfo, why):
    fake_cpu(monkeypatch, cpuinfo, {}, usable=2)
    p = machine.theoretical_peak(2)
    assert p["fp32_flops"] is None and p["bf16_flops"] is None
    assert why in p["text"]


def test_machine_limits_state_the_large_gemm_against_the_peak():
    limits = machine_limits("cpu", repeats=1, size=64)
    peak, row = limits["theoretical"], limits["fp32"]
    assert row["peak_flops"] == peak["fp32_flops"] and row["large_gemm_flops"] > 0
    if peak["fp32_flops"]:
        assert row["fraction"] == pytest.approx(row["large_gemm_flops"] / peak["fp32_flops"])
    assert ("bf16" in limits) == bench.bf16_support("cpu")[0]


@pytest.mark.parametrize(
    "fraction, said",
    [(0.7, ""), (1.5, "3.15 GHz"), (0.3, "below half"), (None, "no theoretical peak")],
)
def test_a_large_gemm_outside_half_to_all_of_the_peak_is_explained(monkeypatch, fraction, said):
    peak = {"clock_ghz": 2.1, "clock_source": "/proc/cpuinfo's cpu MHz", "text": ""}
    peak |= {"fp32_flops": None if fraction is None else 1e11, "bf16_flops": None}
    monkeypatch.setattr(bench, "theoretical_peak", lambda threads: peak)
    monkeypatch.setattr(bench, "bf16_support", lambda device: (False, "none"))
    monkeypatch.setattr(bench, "_mm_rate", lambda *args: 1e11 * (fraction or 1))
    text = machine_limits("cpu", repeats=1, size=8)["fp32"]["check"]
    assert said in text and bool(text) == (fraction != 0.7)


LIMITS = {  # a bf16 path beats the fp32 limits, never its own precision's
    "theoretical": {"text": "fake"},
    "size": 2048,
    "fp32": {"peak_flops": 1e11, "large_gemm_flops": 5e10, "fraction": 0.5, "check": ""},
    "bf16": {"peak_flops": 2e12, "large_gemm_flops": 1e12, "fraction": 0.5, "check": ""},
}


def fake_rows(tokens: dict) -> dict:
    """A model's bench entry from fake median tokens per second of each path."""
    rate = lambda x: SimpleNamespace(median=x, min=x, max=x, spread=0.0)
    m = SimpleNamespace(throughput={f"convs2s/{p}": rate(x) for p, x in tokens.items()})
    m.warmup_seconds = {f"convs2s/{p}": 1.0 for p in tokens}
    entry = {"flops_per_token": 1e8, "gemm_seconds_per_token": 2e-4, "paths": {}}
    paths = [ExecutionPath(), ExecutionPath(fast=True, precision="bf16")]
    bench._path_rows(entry, "convs2s", paths, m, LIMITS)
    return entry


def test_a_path_is_a_fraction_of_the_limits_of_its_own_precision():
    e = fake_rows({"eager-fp32": 250.0, "fast-bf16": 2000.0})
    fp32, bf16 = e["paths"]["eager-fp32"], e["paths"]["fast-bf16"]
    # 2.5e10 and 2e11 FLOP/s: the bf16 path is 2x the fp32 peak, 0.1 of its own
    assert fp32["fraction_of_theoretical_peak"] == pytest.approx(0.25)
    assert fp32["fraction_of_large_gemm"] == pytest.approx(0.5)
    assert bf16["fraction_of_theoretical_peak"] == pytest.approx(0.1)
    assert bf16["fraction_of_large_gemm"] == pytest.approx(0.2)
    # the step's fp32 products at their fp32 rates: not a bound of a bf16 step
    assert fp32["gemm_bound_fraction"] == pytest.approx(0.05)
    assert bf16["gemm_bound_fraction"] is None


DECODING = ("greedy_sentences_per_second", "beam5_sentences_per_second")


def test_a_fraction_above_one_is_starred_and_explained():
    def text(tokens):
        e = fake_rows(tokens) | {"decoding": dict.fromkeys(DECODING, 1.0)}
        result = {"machine": {"describe": "fake"}, "models": {"convs2s": e}, "limits": LIMITS}
        return format_bench(result | {"skipped_paths": {}}, profile=False)

    # 6e10 FLOP/s: 60% of the fp32 peak, 120% of the fp32 large GEMM
    over = text({"eager-fp32": 600.0, "fast-bf16": 2000.0})
    assert "120.0*" in over and " 60.0 " in over and "* above 100%" in over
    within = text({"eager-fp32": 250.0, "fast-bf16": 2000.0})
    assert "*" not in within and "theoretical peak: fake" in within


def test_products_and_decoding_are_timed_at_the_process_thread_count(monkeypatch):
    # torch.utils.benchmark.Timer runs its statement at one thread unless told otherwise
    from torch.utils.benchmark import set_torch_threads

    seen = {"mm": set(), "decode": set()}

    def spy(kind, fn):
        return lambda *a, **k: (seen[kind].add(torch.get_num_threads()), fn(*a, **k))[1]

    monkeypatch.setattr(torch, "mm", spy("mm", torch.mm))
    monkeypatch.setattr(timing, "decode_all", spy("decode", timing.decode_all))
    sources = [[3, 1, 2], [4, 4]]
    with set_torch_threads(2):
        step_gemm_seconds([(8, 8, 8)], "cpu", repeats=1)
        rates = timing.measure_generation({"gru": tiny_model("gru")}, sources, (1, 5), n_rounds=2)
    assert seen == {"mm": {2}, "decode": {2}}
    assert rates[5].window_tokens == {"gru": [2, 2]}


def test_quick_bench_runs_and_is_consistent(tmp_path, single_thread):
    budget = BenchBudget.quick()
    budget.n_batches, budget.batch_size, budget.incremental_lengths = 1, 8, (20,)
    budget.large_gemm = 256
    r = run_bench(budget=budget, device="cpu", out=tmp_path / "b.json", profile=True)
    saved = json.loads((tmp_path / "b.json").read_text())
    assert saved["paths"] == r["paths"] and "eager-fp32" in r["paths"]
    for name in ("convs2s", "gru"):
        e = r["models"][name]
        eager = e["paths"]["eager-fp32"]
        assert eager["speedup_vs_eager"] == 1.0
        # fractions of the limits: the product of the measured numbers, recomputed here
        flops = eager["tokens_per_second"] * e["flops_per_token"]
        fp32 = r["limits"]["fp32"]
        assert eager["fraction_of_large_gemm"] == pytest.approx(flops / fp32["large_gemm_flops"])
        if fp32["peak_flops"]:
            assert eager["fraction_of_theoretical_peak"] == pytest.approx(
                flops / fp32["peak_flops"]
            )
        assert "Self CPU" in e["profile"]
    assert [x["target_len"] for x in r["models"]["convs2s"]["incremental"]] == [20]
    text = format_bench(r)
    assert "convs2s" in text and "gru" in text and "measured peak" not in text
    assert r["limits"]["theoretical"]["text"] in text and "large GEMM (fp32" in text
    # on a CPU: both models at every thread count, as compare prints them, and the verdict
    assert r["threads"]["table"] in text and "x convs2s" in r["threads"]["table"]
    # every path and model warmed up on its own clock; decoding interleaved, per model
    assert all(
        e["paths"][p]["warmup_seconds"] > 0 for e in r["models"].values() for p in r["paths"]
    )
    assert set(r["models"]["gru"]["decoding"]) == {
        "greedy_sentences_per_second",
        "beam5_sentences_per_second",
    }
    # labelled with the paths it timed: each model's default, as this machine chose it
    cfg = TrainConfig(device="cpu", batch_size=budget.batch_size or 128)
    chosen = {n: default_path("cpu", cfg.replace(model=n)).name for n in ("convs2s", "gru")}
    assert r["threads"]["path"] == f"convs2s {chosen['convs2s']}, gru {chosen['gru']}"
    assert f"threads, on the paths {r['threads']['path']}:\n{r['threads']['table']}" in text
    assert r["threads"]["verdict"] in r["threads"]["table"].replace("\n", " ")
    # the settings and the machine it ran on, and the profile's table only when asked for
    assert [x["batch_size"] for x in r["models"]["convs2s"]["incremental"]] == [4]
    machine = r["measurement"]["machine"]
    assert r["machine"] == {**machine, "describe": r["machine"]["describe"]} and "cores" in machine
    assert "where the time of eager fp32 training steps goes" in text
    assert "where the time" not in format_bench(r, profile=False)


def test_full_budget_is_not_quick():
    # the full bench times every path this device can run (compiled ones included)
    assert BenchBudget().is_quick is False and BenchBudget.quick().is_quick is True
