"""Tests of ``convs2s_edu.lab.bench`` (issue 10): the bench's arithmetic checked against
independent counts (FLOPs, the peak, the fraction of peak)."""

from __future__ import annotations

import json

import pytest
from _tiny import tiny_model
from torch.utils.flop_counter import FlopCounterMode

from convs2s_edu import SortingDataset, sequence_loss
from convs2s_edu.lab.bench import BenchBudget, format_bench, gemm_shapes, measured_peak, run_bench


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


def test_measured_peak_times_the_given_shapes():
    shapes = [(64, 32, 16), (64, 32, 16), (8, 8, 8)]
    p = measured_peak(shapes, "cpu", repeats=1)
    assert tuple(p["shape"]) in set(shapes)
    assert p["peak_flops"] > 0
    # the step's products at their own rates: at least the time of the fastest shape
    assert (
        p["gemm_seconds_per_step"]
        >= sum(2 * m * k * n for m, k, n in shapes) / p["peak_flops"] * 0.999
    )


def test_products_and_decoding_are_timed_at_the_process_thread_count(monkeypatch):
    # torch.utils.benchmark.Timer runs its statement at one thread unless told otherwise
    import torch
    from torch.utils.benchmark import set_torch_threads

    import convs2s_edu.lab.bench as bench

    seen = {"mm": set(), "decode": set()}

    def spy(kind, fn):
        return lambda *a, **k: (seen[kind].add(torch.get_num_threads()), fn(*a, **k))[1]

    monkeypatch.setattr(torch, "mm", spy("mm", torch.mm))
    monkeypatch.setattr(bench, "greedy_decode", spy("decode", bench.greedy_decode))
    monkeypatch.setattr(bench, "beam_search", spy("decode", bench.beam_search))
    ds = SortingDataset.generate(4, 3, 6, 10, seed=0)
    budget = BenchBudget(decode_sentences=2, beam_sentences=2)
    with set_torch_threads(2):
        measured_peak([(8, 8, 8)], "cpu", repeats=1)
        rates = bench._decode_rates(tiny_model("gru"), ds, budget, torch.device("cpu"))
    assert seen == {"mm": {2}, "decode": {2}}
    assert set(rates) == {"greedy_sentences_per_second", "beam5_sentences_per_second"}


def test_quick_bench_runs_and_is_consistent(tmp_path, single_thread):
    budget = BenchBudget.quick()
    budget.n_batches, budget.batch_size, budget.incremental_lengths = 1, 8, (20,)
    r = run_bench(budget=budget, device="cpu", out=tmp_path / "b.json", profile=True)
    saved = json.loads((tmp_path / "b.json").read_text())
    assert saved["paths"] == r["paths"] and "eager-fp32" in r["paths"]
    for name in ("convs2s", "gru"):
        e = r["models"][name]
        eager = e["paths"]["eager-fp32"]
        assert eager["speedup_vs_eager"] == 1.0
        # fraction of peak is the product of the three measured numbers, recomputed here
        assert eager["fraction_of_peak"] == pytest.approx(
            eager["tokens_per_second"] * e["flops_per_token"] / e["peak"]["peak_flops"]
        )
        assert "Self CPU" in e["profile"]
    assert [x["target_len"] for x in r["models"]["convs2s"]["incremental"]] == [20]
    text = format_bench(r)
    assert "convs2s" in text and "gru" in text and "measured peak" in text
    # on a CPU: both models at every thread count, as compare prints them, and the verdict
    assert r["threads"]["table"] in text and "ratio gru/convs2s" in r["threads"]["table"]
    # labelled with the path it timed (TrainConfig's default, the fast one), not "eager fp32"
    assert r["threads"]["path"] == "fast-fp32"
    assert f"fast-fp32 {r['threads']['table']}" in text
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
