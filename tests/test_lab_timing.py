"""Tests of ``convs2s_edu.lab.timing``: interleaved timing and the speed verdict, checked on
synthetic window timings; the machine line; training and decoding timed on tiny models.

A fake clock makes every window take a chosen number of seconds, so the
throughputs, ratios and verdicts can be computed by hand. Speed itself is never
asserted.
"""

import io
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from _tiny import KINDS, decoding_model

from convs2s_edu import ConvS2S, RNNSeq2Seq, collate_batch
from convs2s_edu.lab import timing as speed
from convs2s_edu.lab.timing import (
    SpeedMeasurement,
    WindowStats,
    measure_training,
    speed_verdict,
    time_incremental_vs_full,
    time_interleaved,
)

pytestmark = pytest.mark.usefixtures("single_thread")


class FakeClock:
    """A clock that only moves when a window tells it to."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def synthetic(
    seconds: dict,
    tokens: int = 1000,
    load=0.5,
    runnable=(0,),
    cores=2,
    threads=2,
    monkeypatch=None,
) -> SpeedMeasurement:
    """A measurement whose window k of model m takes ``seconds[m][k]`` seconds for ``tokens``."""
    clock = FakeClock()
    done = {m: 0 for m in seconds}

    def window(m):
        def run():
            clock.now += seconds[m][done[m]]
            done[m] += 1
            return tokens

        return run

    samples = iter(list(runnable) * 100)
    monkeypatch.setattr(speed, "_loadavg", lambda: load)
    monkeypatch.setattr(speed, "_runnable", lambda: next(samples))
    monkeypatch.setattr(speed, "usable_cores", lambda: cores)
    monkeypatch.setattr(speed.torch, "get_num_threads", lambda: threads)
    n_rounds = len(next(iter(seconds.values())))
    return time_interleaved({m: window(m) for m in seconds}, n_rounds=n_rounds, clock=clock)


def test_windows_alternate_ab_ba(monkeypatch):
    m = synthetic({"a": [1.0] * 4, "b": [2.0] * 4}, monkeypatch=monkeypatch)
    assert m.order == ["a", "b", "b", "a", "a", "b", "b", "a"]


def test_throughput_median_and_range_by_hand(monkeypatch):
    m = synthetic(
        {"a": [2.0, 4.0, 5.0, 1.0], "b": [1.0, 1.0, 2.0, 0.5]},
        tokens=1000,
        monkeypatch=monkeypatch,
    )
    # a: 500, 250, 200, 1000 tokens/s -> sorted 200, 250, 500, 1000: median 375
    assert m.throughput["a"].median == pytest.approx(375.0)
    assert (m.throughput["a"].min, m.throughput["a"].max) == pytest.approx((200.0, 1000.0))
    assert m.throughput["a"].spread == pytest.approx(5.0)
    # per-round ratios b/a: 1000/500, 1000/250, 500/200, 2000/1000 = 2, 4, 2.5, 2
    assert m.ratios["b"].median == pytest.approx(2.25)
    assert (m.ratios["b"].min, m.ratios["b"].max) == pytest.approx((2.0, 4.0))
    assert m.window_throughputs("b") == pytest.approx([1000.0, 1000.0, 500.0, 2000.0])
    # any pair within each round: a/b = 0.5, 0.25, 0.4, 0.5
    r = m.round_ratios("a", "b")
    assert (r.min, r.median, r.max) == pytest.approx((0.25, 0.45, 0.5))
    assert m.seconds_per_step("a").median == pytest.approx(3.0)
    # quartiles of 200, 250, 500, 1000, interpolated between the sorted values
    assert (m.throughput["a"].q1, m.throughput["a"].q3) == pytest.approx((237.5, 625.0))


def test_a_window_is_exactly_its_steps_and_the_warm_up_is_off_the_clock(monkeypatch):
    # a step of "a" takes 1 s, one of "b" 2 s, on a clock that only steps move; the warm-up
    # steps move it too, so a warm-up step counted in a window would show in its seconds
    from types import SimpleNamespace

    from torch.utils.benchmark import Compare

    clock, calls = FakeClock(), {"a": 0, "b": 0}
    batches = [SimpleNamespace(n_target_tokens=10), SimpleNamespace(n_target_tokens=5)]

    def step(name):
        def run(batch):
            calls[name] += 1
            clock.now += 1.0 if name == "a" else 2.0

        return run

    steps = {n: step(n) for n in calls}
    m = time_interleaved(
        {n: speed.window_runner(s, batches, 3) for n, s in steps.items()},
        n_rounds=2,
        clock=clock,
        warmup={n: speed.window_runner(s, batches, 2) for n, s in steps.items()},
        steps_per_window=3,
        warmup_steps=2,
    )
    assert calls == {"a": 2 + 2 * 3, "b": 2 + 2 * 3}  # warm-up, then 3 steps per window
    assert m.window_seconds == {"a": [3.0, 3.0], "b": [6.0, 6.0]}
    assert m.warmup_seconds == {"a": 2.0, "b": 4.0}  # on its own clock: compile time shows
    assert m.window_tokens == {"a": [25, 25], "b": [25, 25]}  # batches 0, 1, 0
    assert m.seconds_per_step("b").median == pytest.approx(2.0)
    # the windows as the library's Measurement: 3 runs per window, at the machine's threads
    b = m.measurement("b")
    assert b.number_per_run == 3 and b.times == pytest.approx([2.0, 2.0])
    assert b.num_threads == m.machine.threads and b.env == m.machine.device
    assert "b" in str(Compare([m.measurement(n) for n in m.models]))


def test_a_drifting_machine_leaves_the_paired_ratio_exact(monkeypatch):
    # the machine slows down 1.5x every round: each model's windows vary a lot,
    # but within a round both models are slowed alike, so every paired ratio is 3
    slow = [1.5**r for r in range(6)]
    m = synthetic(
        {"a": [3.0 * s for s in slow], "b": [1.0 * s for s in slow]}, monkeypatch=monkeypatch
    )
    assert m.throughput["a"].spread == pytest.approx(1.5**5)
    assert m.ratios["b"].min == pytest.approx(3.0) and m.ratios["b"].max == pytest.approx(3.0)


def test_tight_spread_states_the_ratio_and_the_faster_model(monkeypatch):
    m = synthetic(
        {"convs2s": [2.0, 2.1, 2.0, 2.05], "gru": [1.0, 1.05, 1.0, 1.0]}, monkeypatch=monkeypatch
    )
    v = speed_verdict(m, labels={"convs2s": "ConvS2S", "gru": "GRU"})
    assert v.ok and v.resolved and v.faster == "gru"
    assert "WARNING" not in v.text
    # ratios per round: 2.0, 2.0, 2.0, 2.05 -> median 2.00 (the range is the table's)
    assert v.text == "GRU 2.00x as fast as ConvS2S in target tokens per second"


def test_the_faster_model_is_named_whichever_comes_first(monkeypatch):
    m = synthetic(
        {"convs2s": [1.0, 1.0, 1.1, 1.0], "gru": [3.0, 3.0, 3.0, 3.3]}, monkeypatch=monkeypatch
    )
    v = speed_verdict(m)
    assert v.resolved and v.faster == "convs2s"
    # gru/convs2s per round: 1/3, 1/3, 1.1/3, 1/3.3 -> inverted: 3, 3, 2.73, 3.3: median 3.00
    assert v.text.startswith("convs2s 3.00x as fast as gru")


def test_large_spread_warns_and_draws_no_conclusion(monkeypatch):
    m = synthetic(
        {"convs2s": [2.0, 6.0, 2.0, 2.0], "gru": [1.0, 1.0, 1.0, 1.0]}, monkeypatch=monkeypatch
    )
    v = speed_verdict(m, max_spread=1.5)
    assert not v.ok and not v.resolved and v.faster is None
    assert v.text.startswith("WARNING")
    assert "convs2s's windows varied 3.00x" in v.text and "1.5x allowed" in v.text
    assert "as fast as" not in v.text
    # the same windows pass with a looser limit
    assert speed_verdict(m, max_spread=4.0).ok


def test_overlapping_ranges_are_not_resolved(monkeypatch):
    # a: 1000/1.0 .. 1000/1.2 = 833-1000 tokens/s; b: 1000/1.1 .. 1000/1.3 = 769-909
    m = synthetic({"a": [1.0, 1.2, 1.1, 1.0], "b": [1.1, 1.3, 1.2, 1.1]}, monkeypatch=monkeypatch)
    v = speed_verdict(m)
    assert v.ok and not v.resolved and v.faster is None
    assert "not resolved" in v.text and "WARNING" not in v.text


@pytest.mark.parametrize(
    "load, runnable, threads, ok",
    [
        (0.9, (0, 0), 2, True),
        (1.9, (0, 1, 0), 2, True),  # a thread of another process ran at one window only
        # the build's own work of the last minute: about the cores, not another program's
        (2.02, (0, 0), 2, True),
        (2.6, (0, 0), 2, False),  # the load average exceeds the 2 cores + 0.5
        # one competing busy process next to 2 PyTorch threads on 2 cores: the load
        # average had not caught up yet (2.12 in a quick build here), the threads have
        (2.12, (1, 1, 1), 2, False),
        (0.5, (3, 4, 3), 2, False),  # many threads runnable while the windows ran
        (1.5, (1, 1, 1), 1, True),  # one PyTorch thread leaves the other core free
    ],
)
def test_a_busy_machine_warns(monkeypatch, load, runnable, threads, ok):
    m = synthetic(
        {"a": [2.0] * 4, "b": [1.0] * 4},
        load=load,
        runnable=runnable,
        cores=2,
        threads=threads,
        monkeypatch=monkeypatch,
    )
    v = speed_verdict(m)
    assert v.ok is ok
    assert v.text.startswith("WARNING") is (not ok)
    if not ok:
        assert "2 cores" in v.text


def test_other_processes_runnable_threads_exclude_this_process(monkeypatch):
    # /proc/loadavg says 3 runnable; two of them are this process's own running threads
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc/self/task on this OS")
    real_open = open
    own = {t: "R" if i < 2 else "S" for i, t in enumerate(sorted(os.listdir("/proc/self/task")))}

    def fake_open(path, *a, **k):
        path = str(path)
        if path == "/proc/loadavg":
            return io.StringIO("0.50 0.40 0.30 3/200 12345\n")
        if path.startswith("/proc/self/task/") and path.endswith("/stat"):
            task = path.split("/")[4]
            return io.StringIO(f"{task} (python (x)) {own.get(task, 'S')} 1 2 3\n")
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", fake_open)
    monkeypatch.setattr(speed.os, "listdir", lambda p: sorted(own))
    expected = 3 - min(2, len(own))
    assert speed._runnable() == expected


def test_fewer_than_two_rounds_are_refused():
    # one round would not alternate the order: the tools' --rounds reaches this check
    with pytest.raises(ValueError, match="n_rounds must be an integer >= 2, got 1"):
        time_interleaved({"a": lambda: 1, "b": lambda: 1}, n_rounds=1)


def test_one_window_and_the_machine_line():
    s = WindowStats.of([5.0])
    assert (s.median, s.min, s.max, s.q1, s.q3, s.n) == (5.0, 5.0, 5.0, 5.0, 5.0, 1)
    info = speed.MachineInfo(cpu="Test CPU", cores=2, threads=1, load_before=1.25, load_after=0.5)
    assert info.describe().endswith("load average 1.25")
    assert speed.MachineInfo(cpu="Test CPU").describe().endswith("load average unknown")


def test_measurement_is_json_ready(monkeypatch):
    m = synthetic({"a": [2.0] * 2, "b": [1.0] * 2}, load=0.7, monkeypatch=monkeypatch)
    d = json.loads(json.dumps(m.to_dict()))
    assert d["throughput"]["b"]["median"] == pytest.approx(1000.0)
    assert d["machine"]["load"] == pytest.approx(0.7)
    assert d["machine"]["cores"] == 2 and d["machine"]["threads"] == torch.get_num_threads()


def test_cpu_model_is_read_from_the_machine():
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
    except OSError:
        names = []
    model = speed.cpu_model()
    assert model and model != "unknown CPU"
    if names:
        assert " ".join(names[0].split()) == model


def test_measure_training_counts_the_real_target_tokens(tiny_convs2s_cfg, tiny_rnn_cfg):
    examples = [([5, 3, 9, 1, 3], [1, 3, 3, 5, 9]), ([7, 2], [2, 7])]
    other = [([4, 4, 10, 6], [4, 4, 6, 10])]
    batches = [collate_batch(examples, 10), collate_batch(other, 10)]
    torch.manual_seed(0)
    models = {"convs2s": ConvS2S(tiny_convs2s_cfg()), "gru": RNNSeq2Seq(tiny_rnn_cfg())}
    before = {n: [p.detach().clone() for p in m.parameters()] for n, m in models.items()}
    m = measure_training(models, batches, steps_per_window=3, n_rounds=2, warmup_steps=1)
    # a window of 3 steps cycles batches 0, 1, 0: (6 + 3) + (5) + (6 + 3) real targets
    assert m.window_tokens == {"convs2s": [23, 23], "gru": [23, 23]}
    assert m.order == ["convs2s", "gru", "gru", "convs2s"]
    assert m.steps_per_window == 3 and m.warmup_steps == 1
    for n, model in models.items():  # the steps really trained the models
        assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), before[n]))


@pytest.mark.parametrize("kind", KINDS)
def test_time_incremental_vs_full_records(kind):
    model = decoding_model(kind, 0)
    was_training = model.training
    records = time_incremental_vs_full(model, target_lengths=(3, 6), batch_size=2, repeats=1)
    assert [r["target_len"] for r in records] == [3, 6]
    for r in records:
        assert set(r) >= {"target_len", "seconds_full", "seconds_incremental", "speedup"}
        assert r["seconds_full"] > 0 and r["seconds_incremental"] > 0
        assert r["speedup"] == pytest.approx(r["seconds_full"] / r["seconds_incremental"])
    assert model.training == was_training
    with pytest.raises(ValueError, match=r"\(3, 25\) exceed the model's max_positions=24"):
        time_incremental_vs_full(model, target_lengths=(3, 25), batch_size=1, repeats=1)


# --------------------------------------------------------------------------
# Thread counts: the same measurement on more parallel hardware
# --------------------------------------------------------------------------


def _scaling(monkeypatch, seconds, runnable=(0,)):
    from convs2s_edu.lab.timing import ThreadScaling

    m = synthetic(seconds, tokens=1000, runnable=runnable, monkeypatch=monkeypatch)
    counts = sorted({int(k.split("@")[1]) for k in seconds})
    return ThreadScaling(["convs2s", "gru"], counts, m)


#: On 1 thread the GRU is twice as fast; on 2 threads ConvS2S is 1.5x as fast.
CROSSING = {
    "convs2s@1": [2.0, 2.0, 2.0, 2.0],
    "gru@1": [1.0, 1.0, 1.0, 1.0],
    "convs2s@2": [1.0, 1.0, 1.0, 1.0],
    "gru@2": [1.5, 1.5, 1.5, 1.5],
}


def test_thread_scaling_splits_the_windows_by_count_and_pairs_them_by_round(monkeypatch):
    s = _scaling(monkeypatch, {**CROSSING, "gru@2": [1.5, 3.0, 1.5, 1.5]})
    one, two = s.at(1), s.at(2)
    assert one.throughput["convs2s"].median == pytest.approx(500.0)
    assert one.ratios["gru"].median == pytest.approx(2.0)  # gru / convs2s, per round
    assert two.throughput["convs2s"].median == pytest.approx(1000.0)
    # per round at 2 threads: (1000/1.5)/1000, (1000/3)/1000, ...
    assert two.ratios["gru"].min == pytest.approx(1 / 3)
    assert two.ratios["gru"].median == pytest.approx(2 / 3)
    assert two.machine.threads == 2 and one.machine.threads == 1
    assert two.order == ["convs2s", "gru", "gru", "convs2s"] * 2  # A B B A within the count
    with pytest.raises(ValueError, match="no windows at 3 threads; measured: \\[1, 2\\]"):
        s.at(3)
    d = json.loads(json.dumps(s.to_dict()))
    assert d["thread_counts"] == [1, 2] and d["measurement"]["n_rounds"] == 4
    assert d["measurement"]["throughput"]["gru@1"]["median"] == pytest.approx(1000.0)


def test_the_verdict_over_thread_counts_names_the_hardware_each_ranking_holds_for(monkeypatch):
    s = _scaling(monkeypatch, CROSSING)
    v = speed_verdict(s, labels={"convs2s": "ConvS2S", "gru": "GRU"})
    assert v.ok and v.resolved and v.faster is None
    one, two = v.by_hardware["1 thread"], v.by_hardware["2 threads"]
    assert one.faster == "gru" and two.faster == "convs2s"
    assert v.text == (
        "1 thread: GRU 2.00x as fast as ConvS2S in target tokens per second; "
        "2 threads: ConvS2S 1.50x as fast as GRU in target tokens per second"
    )


def test_the_verdict_warns_when_the_machine_was_busy_at_two_threads(monkeypatch):
    # another process's thread was runnable: nothing is left free for 2 threads on 2 cores
    s = _scaling(monkeypatch, CROSSING, runnable=(1,))
    v = speed_verdict(s)
    assert v.by_hardware["1 thread"].ok and not v.by_hardware["2 threads"].ok and not v.ok
    assert v.text.startswith("WARNING: 1 thread: gru 2.00x as fast")
    assert "; 2 threads: not compared, the machine was busy" in v.text
    assert v.reasons == ["2 threads: " + r for r in v.by_hardware["2 threads"].reasons]


def test_measure_threads_times_every_model_at_every_count():
    from _tiny import tiny_config

    from convs2s_edu.lab.timing import measure_threads

    cfg = tiny_config(n_train=64)
    before = torch.get_num_threads()
    s = measure_threads(cfg, thread_counts=[1], steps_per_window=1, n_rounds=2, warmup_steps=0)
    assert s.thread_counts == [1] and set(s.measurement.models) == {"convs2s@1", "gru@1"}
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="thread count must be an integer in 1.."):
        measure_threads(cfg, thread_counts=[os.cpu_count() + 64])
    with pytest.raises(ValueError, match="distinct and at least one, got \\[1, 1\\]"):
        measure_threads(cfg, thread_counts=[1, 1])


def test_measure_threads_times_the_configurations_precision(monkeypatch):
    # a bf16 configuration was timed in fp32: the step was built without its precision
    from _tiny import tiny_config

    from convs2s_edu.lab import timing as timing_mod

    asked, real = [], timing_mod.make_train_step

    def spy(model, optimizer, clip_norm, precision="fp32", *args, **kwargs):
        asked.append(precision)
        return real(model, optimizer, clip_norm, "fp32", *args, **kwargs)  # any CPU runs it

    monkeypatch.setattr(timing_mod, "make_train_step", spy)
    cfg = tiny_config(n_train=64, precision="bf16")
    timing_mod.measure_threads(
        cfg, thread_counts=[1], steps_per_window=1, n_rounds=2, warmup_steps=0
    )
    assert asked == ["bf16", "bf16"]  # both models


def test_every_window_runs_at_its_thread_count_and_the_process_keeps_its_own(monkeypatch):
    from _tiny import tiny_config

    seen = []  # the thread count at every training step
    real = speed.make_train_step

    def spied(*args):
        step = real(*args)
        return lambda batch: (seen.append(torch.get_num_threads()), step(batch))[1]

    monkeypatch.setattr(speed, "make_train_step", spied)
    monkeypatch.setattr(speed, "usable_cores", lambda: 2)
    before = torch.get_num_threads()
    cfg = tiny_config(n_train=64)
    s = speed.measure_threads(cfg, thread_counts=[2, 1], steps_per_window=1, n_rounds=2)
    # 2 warm-up steps at each count, then round 1: convs2s@2, convs2s@1, gru@2, gru@1;
    # round 2 the other way round
    assert s.measurement.order[:4] == ["convs2s@2", "convs2s@1", "gru@2", "gru@1"]
    assert seen == [2, 2, 1, 1] * 2 + [2, 1, 2, 1] + [1, 2, 1, 2]
    assert torch.get_num_threads() == before
    assert s.at(2).machine.threads == 2 and s.at(1).machine.threads == 1


def test_decoding_is_timed_at_the_process_thread_count(monkeypatch):
    # torch.utils.benchmark.Timer runs its statement at one thread unless told otherwise
    from torch.utils.benchmark import set_torch_threads

    seen = []
    real = speed.greedy_decode
    spy = lambda *a, **k: (seen.append(torch.get_num_threads()), real(*a, **k))[1]
    monkeypatch.setattr(speed, "greedy_decode", spy)
    with set_torch_threads(2):
        time_incremental_vs_full(decoding_model("convs2s", 0), (3,), batch_size=1, repeats=1)
    assert seen and set(seen) == {2}


def test_training_batches_follow_the_configs_batching_and_span_its_widths():
    from _tiny import tiny_config

    from convs2s_edu.data import padding_fraction
    from convs2s_edu.lab.timing import training_batches

    cfg = tiny_config(n_train=400, batch_size=16, min_len=2, max_len=12)
    bucket = training_batches(cfg.replace(batching="bucket"), 6)
    widths = [b.src.shape[1] for b in bucket]
    assert padding_fraction(bucket) < padding_fraction(training_batches(cfg, 6))
    assert max(widths) - min(widths) >= 6  # short and long batches, not the first six
    assert len(training_batches(cfg.replace(n_train=32), 5)) == 5  # two batches, cycled


def test_generation_speed_is_worded_in_sentences_not_training_tokens(monkeypatch):
    # the generation timing's windows count sentences: its verdict and warnings said
    # "trained ... in target tokens per second" and "tokens/s"
    models = {k: decoding_model(k, seed=1) for k in ("convs2s", "gru")}
    sources = [[3, 1, 2], [4, 4], [5, 2, 1], [1]]
    measured = speed.measure_generation(models, sources, beam_sizes=(1,), n_rounds=2)
    assert measured[1].unit == "sentences"
    assert sorted(set(measured[1].window_tokens["gru"])) == [len(sources)]
    m = synthetic(
        {"a": [2.0, 2.1, 2.0, 2.05], "b": [1.0, 1.05, 1.0, 1.0]}, monkeypatch=monkeypatch
    )
    v = speed_verdict(replace(m, unit="sentences"))
    assert v.text.startswith("b 2.00x as fast as a in sentences per second")
    assert "token" not in v.text
    assert speed_verdict(m).text.endswith("in target tokens per second")  # training windows


class _Bag(torch.nn.Module):
    """Logits from the decoder input's embeddings through one linear map: its arithmetic by
    hand is one (B T, d) x (d, V) product forward and two of the same size backward."""

    def __init__(self, V, d):
        super().__init__()
        self.emb, self.out = torch.nn.Embedding(V, d), torch.nn.Linear(d, V)

    def forward(self, src, tgt_in):
        return self.out(self.emb(tgt_in))


def test_training_flops_per_token_by_hand_with_the_padding_left_out():
    V, d = 13, 6  # vocabulary 10 plus <pad>, <sos>, <eos>
    model = _Bag(V, d).eval()
    # targets of 2 and 5 tokens (+ <eos>): padded to 6 positions, 9 real target tokens
    batch = collate_batch([([3, 1], [1, 3]), ([5, 4, 3, 2, 1], [1, 2, 3, 4, 5])], 10)
    assert batch.tgt_in.shape == (2, 6) and batch.n_target_tokens == 9
    # forward, the input's gradient and the weight's: 3 products of 2 x (B T) x d x V
    expected = 3 * 2 * (2 * 6) * d * V / 9
    assert speed.training_flops_per_token(model, batch) == expected
    # the model is left as it came: its mode, and no gradients
    assert not model.training and all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_training_flops_per_token_of_one_length_do_not_depend_on_the_batch_size(kind):
    # what lets the length-scaling page count two sequences of a length instead of all
    from _tiny import VOCAB, tiny_model

    from convs2s_edu import generate_dataset

    model = tiny_model(kind)
    examples = generate_dataset(8, 7, 7, VOCAB, seed=0)
    two, eight = (collate_batch(examples[:b], VOCAB) for b in (2, 8))
    count = speed.training_flops_per_token(model, two)
    assert count == speed.training_flops_per_token(model, eight) > 0


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_training_flops_per_token_are_the_same_on_every_device(kind, device):
    # on CUDA the GRU runs through cuDNN, which the counter cannot see into: counted on the CPU
    from _tiny import VOCAB, tiny_model

    from convs2s_edu import generate_dataset

    model = tiny_model(kind)
    batch = collate_batch(generate_dataset(4, 3, 6, VOCAB, seed=1), VOCAB)
    on_cpu = speed.training_flops_per_token(model, batch)
    there = model.to(device)
    assert speed.training_flops_per_token(there, batch.to(device)) == on_cpu > 0
    assert next(there.parameters()).device.type == device.type  # the model stays where it was


def test_measure_training_takes_its_warm_up_steps_then_every_window(monkeypatch, tiny_rnn_cfg):
    steps = []  # every training step of every model
    real = speed.make_train_step

    def spied(*args):
        step = real(*args)
        return lambda batch: (steps.append(batch), step(batch))[1]

    monkeypatch.setattr(speed, "make_train_step", spied)
    batches = [collate_batch([([5, 3, 9], [3, 5, 9])], 10)]
    torch.manual_seed(0)
    models = {"a": RNNSeq2Seq(tiny_rnn_cfg()), "b": RNNSeq2Seq(tiny_rnn_cfg())}
    m = measure_training(models, batches, steps_per_window=3, n_rounds=2, warmup_steps=1)
    assert len(steps) == 2 * (1 + 3 * 2) and m.warmup_steps == 1  # per model: 1, then 2 x 3


def test_random_training_batches_are_the_epochs_full_batches():
    from _tiny import tiny_config

    from convs2s_edu.lab.timing import training_batches

    cfg = tiny_config(n_train=64, batch_size=16, batching="random")
    assert [len(b.src) for b in training_batches(cfg, 4)] == [16] * 4


def test_measure_config_builds_fresh_models_on_the_path_train_runs(monkeypatch):
    from _tiny import tiny_config

    from convs2s_edu.fast.paths import ExecutionPath

    seen = []
    monkeypatch.setattr(speed, "apply_path", lambda model, path: seen.append(path) or model)
    monkeypatch.setattr(speed, "time_interleaved", lambda windows, *a, **k: sorted(windows))
    cfg = tiny_config(n_train=32).replace(fast=True)
    assert speed.measure_config(cfg, n_batches=1) == ["convs2s", "gru"]
    assert seen == [ExecutionPath.of(cfg)] * 2 and seen[0] != ExecutionPath()


def test_a_thread_counts_measurement_keeps_the_window_settings(monkeypatch):
    s = _scaling(monkeypatch, CROSSING)
    raw, one = s.measurement, s.at(1)
    counts = ("steps_per_window", "n_rounds", "warmup_steps")
    assert [getattr(one, k) for k in counts] == [getattr(raw, k) for k in counts]
    assert raw.n_rounds == 4


def test_the_verdict_in_a_notebook_is_a_note_or_a_warning_box():
    from convs2s_edu.lab.timing import SpeedVerdict

    note = SpeedVerdict(True, True, "gru <b> faster")._repr_html_()
    assert note == '<div class="admonition note"><p>Gru &lt;b&gt; faster</p></div>'
    box = SpeedVerdict(False, False, "WARNING: busy")._repr_html_()
    title = '<p class="admonition-title">Warning</p>'
    assert box == f'<div class="admonition warning">{title}<p>Busy</p></div>'
