r"""``convs2s-edu bench``: both models against the machine's own limit, on every execution path.

What :func:`run_bench` measures, in one process, on the machine it runs on:

1. **Training throughput** (target tokens per second) of every model on every
   execution path (:mod:`convs2s_edu.training.paths`), timed *interleaved*
   (:func:`convs2s_edu.lab.timing.time_interleaved`: alternating windows of
   training steps on the same batches, median and range over windows), after
   untimed warm-up steps (whose seconds, the compile time of compiled paths
   included, are reported).
2. **FLOPs per target token** of a training step (forward + backward), counted
   by :class:`torch.utils.flop_counter.FlopCounterMode`
   (:func:`convs2s_edu.lab.timing.training_flops_per_token`): matrix products and
   convolutions only.
3. **The measured peak**: every matrix product of one training step
   (ConvS2S's convolutions included, which are matrix products over windows)
   is recorded with its shapes (as a GEMM
   :math:`(m \times k)\cdot(k \times n)`), each distinct shape is timed as a
   dense ``torch.mm`` (float32) on the same device, and the fastest rate is
   the peak. The *fraction of peak* of a model and path is

   .. math:: \frac{\text{FLOPs per token} \times \text{tokens per second}}{\text{peak FLOP/s}}

   and the *GEMM-bound time* of an epoch, the time it would take if every
   product ran at its measured rate and nothing else cost anything, is the
   lower limit that the model's arithmetic sets on this machine.
4. **Decoding**: greedy and beam-5 sentences per second, and ConvS2S
   incremental against full-recompute greedy decoding at target lengths 20,
   50, 100, 200 (:func:`convs2s_edu.lab.timing.time_incremental_vs_full`).
5. **Where the time goes**: a :mod:`torch.profiler` table of a few eager
   training steps per model (top rows by self CPU time, or CUDA time on a GPU).
6. **Parallel hardware** (on a CPU): training throughput of both models at every
   thread count from 1 to the usable cores, interleaved
   (:func:`convs2s_edu.lab.timing.measure_threads`), with the verdict at each
   (:func:`~convs2s_edu.lab.timing.thread_verdict`).

Models are untrained (how long a step takes does not depend on the weights);
the decoding rates of an untrained model decode to the length limit (source
length + 1), which a trained one also reaches on this task.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from ..convs2s import ConvS2S
from ..decode import beam_search, greedy_decode
from ..loss import sequence_loss
from ..training import paths as execution
from ..training.config import TrainConfig, build_model, make_datasets
from ..training.device import resolve_device, synchronize
from ..training.step import make_train_step
from .timing import (
    measure_threads,
    thread_verdict,
    time_incremental_vs_full,
    time_interleaved,
    training_batches,
    training_flops_per_token,
    warmup_runner,
    window_runner,
)

__all__ = ["BenchBudget", "run_bench", "format_bench", "gemm_shapes", "measured_peak"]


@dataclass
class BenchBudget:
    """How much the bench times: the full budget, or ``BenchBudget.quick()`` (tests, quick
    site)."""

    n_batches: int = 4
    steps_per_window: int = 2
    n_rounds: int = 5
    warmup_steps: int = 2
    decode_sentences: int = 128
    beam_sentences: int = 32
    incremental_lengths: tuple = (20, 50, 100, 200)
    incremental_batch: int = 8
    incremental_repeats: int = 1
    profile_steps: int = 3
    peak_repeats: int = 5
    batch_size: int | None = None  # None: the seed's 128
    is_quick: bool = False  # on a CPU: eager paths only (compiling takes minutes)

    @classmethod
    def quick(cls) -> BenchBudget:
        return cls(
            n_batches=2,
            steps_per_window=1,
            n_rounds=2,
            warmup_steps=1,
            decode_sentences=16,
            beam_sentences=4,
            incremental_lengths=(20, 50),
            incremental_batch=4,
            incremental_repeats=1,
            profile_steps=1,
            peak_repeats=2,
            batch_size=32,
            is_quick=True,
        )


def gemm_shapes(model, batch) -> list[tuple[int, int, int]]:
    """The ``(m, k, n)`` of every matrix product of one training step.

    ConvS2S's convolutions are among them: :class:`~convs2s_edu.convs2s.WindowConv1d`
    computes a 1-D convolution of ``C_in -> C_out`` channels, kernel ``k``, over
    ``B x T`` output positions as the GEMM ``(B T) x (k C_in) . (k C_in) x C_out``, and
    its backward as two more products of the same FLOPs (input and weight gradients).
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    shapes = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            p = func._overloadpacket
            if p in (aten.mm, aten.addmm):
                a, b = (args[0], args[1]) if p is aten.mm else (args[1], args[2])
                shapes.append((a.shape[0], a.shape[1], b.shape[1]))
            elif p in (aten.bmm, aten.baddbmm):
                a, b = (args[0], args[1]) if p is aten.bmm else (args[1], args[2])
                shapes.extend([(a.shape[1], a.shape[2], b.shape[2])] * a.shape[0])
            return func(*args, **kwargs)

    model.train()
    batch = batch.to(next(model.parameters()).device)
    with Record():
        sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out).backward()
    model.zero_grad(set_to_none=True)
    return shapes


def measured_peak(shapes: Sequence[tuple[int, int, int]], device, repeats: int = 5) -> dict:
    """Time a dense float32 ``torch.mm`` of every distinct ``(m, k, n)``; the best is the peak.

    Returns ``{"peak_flops": ..., "shape": (m, k, n), "gemm_seconds_per_step": ...}``,
    the last being the seconds the step's products take at their measured rates.
    """
    device = torch.device(device)
    rates = {}
    for m, k, n in sorted(set(shapes)):
        a = torch.randn(m, k, device=device)
        b = torch.randn(k, n, device=device)
        reps = max(1, min(200, int(2e8 // max(1, 2 * m * k * n))))  # ~0.2 GFLOP per timing
        best = float("inf")
        for _ in range(repeats + 1):  # the first is a warm-up
            synchronize(device)
            t0 = time.perf_counter()
            for _ in range(reps):
                torch.mm(a, b)
            synchronize(device)
            best = min(best, (time.perf_counter() - t0) / reps)
        rates[(m, k, n)] = 2 * m * k * n / best
    shape = max(rates, key=rates.get)
    gemm_seconds = sum(2 * m * k * n / rates[(m, k, n)] for m, k, n in shapes)
    return {
        "peak_flops": rates[shape],
        "shape": list(shape),
        "gemm_seconds_per_step": gemm_seconds,
    }


def _profile(step, batches, steps: int, device) -> str:
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for i in range(steps):
            step(batches[i % len(batches)])
        synchronize(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=12, max_name_column_width=40)


def _decode_rates(model, test_ds, budget: BenchBudget, device) -> dict:
    out = {}
    for name, n, fn in (
        ("greedy", budget.decode_sentences, greedy_decode),
        ("beam5", budget.beam_sentences, lambda m, s: beam_search(m, s, beam_size=5)),
    ):
        batch = test_ds.collate([test_ds[j] for j in range(min(n, len(test_ds)))]).to(device)
        fn(model, batch.src[:2])  # warm-up
        synchronize(device)
        t0 = time.perf_counter()
        fn(model, batch.src)
        synchronize(device)
        out[f"{name}_sentences_per_second"] = batch.src.shape[0] / (time.perf_counter() - t0)
    return out


def _choose_paths(paths, dev, budget: BenchBudget) -> tuple[list, dict]:
    """The paths to time (eager fp32 first, the reference of every speed-up) and why the
    others are not timed. Names or paths this device cannot run are a ``ValueError``."""
    runnable, skipped = execution.available_paths(dev)
    if paths is None:
        chosen = runnable
        if budget.is_quick and dev.type == "cpu":
            # compiling takes minutes on a small CPU: quick runs time eager paths only
            chosen = [p for p in runnable if not p.compile]
            why = "not timed in quick mode on a CPU (compile time)"
            skipped.update({p.name: why for p in runnable if p.compile})
    else:
        by_name = {p.name: p for p in execution.PATHS}
        chosen = []
        for p in paths:
            p = by_name.get(p, p) if isinstance(p, str) else p
            if p not in execution.PATHS:
                raise ValueError(f"unknown path {p!r}; known: {sorted(by_name)}")
            if p.name in skipped:
                raise ValueError(f"path {p.name} cannot run on {dev.type}: {skipped[p.name]}")
            chosen.append(p)
    eager = execution.ExecutionPath()
    return ([] if eager in chosen else [eager]) + list(chosen), skipped


def _measure_model(cfg: TrainConfig, batches, budget: BenchBudget, dev) -> dict:
    """What does not depend on the path: FLOPs per token, the measured peak, decoding."""
    counts = [b.n_target_tokens for b in batches]
    torch.manual_seed(cfg.seed)
    ref = build_model(cfg).to(dev)
    flops = sum(training_flops_per_token(ref, b) * b.n_target_tokens for b in batches)
    peak = measured_peak(gemm_shapes(ref, batches[0]), dev, budget.peak_repeats)
    peak["gemm_seconds_per_token"] = peak.pop("gemm_seconds_per_step") / counts[0]
    entry = {
        "flops_per_token": flops / sum(counts),
        "peak": peak,
        "n_parameters": sum(p.numel() for p in ref.parameters()),
        "paths": {},
        "decoding": _decode_rates(ref, make_datasets(cfg)[2], budget, dev),
    }
    if cfg.model == "convs2s":
        long = ConvS2S(ref.cfg.replace(max_positions=max(budget.incremental_lengths) + 1))
        entry["incremental"] = time_incremental_vs_full(
            long.to(dev),
            budget.incremental_lengths,
            budget.incremental_batch,
            budget.incremental_repeats,
        )
    return entry


def _path_step(cfg: TrainConfig, path, dev):
    """A fresh model of ``cfg`` on ``path`` and its training step."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg).to(dev)
    if path.compile:
        execution.apply_compile(model, path.compile_mode)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    return make_train_step(model, optimizer, cfg.clip_norm, path.precision)


def _timed_warmup(run, dev, seconds: dict, key: str):
    """``run`` (an untimed warm-up of the interleaved measurement) with its own clock: the
    compile time of a compiled path shows there."""

    def timed() -> None:
        t0 = time.perf_counter()
        run()
        synchronize(dev)
        seconds[key] = time.perf_counter() - t0

    return timed


def _path_rows(entry: dict, name: str, chosen, m, warm: dict) -> None:
    """Fill ``entry["paths"]`` and ``entry["fastest"]`` from the interleaved measurement."""
    eager = m.throughput[f"{name}/eager-fp32"].median
    for p in chosen:
        s = m.throughput[f"{name}/{p.name}"]
        entry["paths"][p.name] = {
            "tokens_per_second": s.median,
            "min": s.min,
            "max": s.max,
            "spread": s.spread,
            "warmup_seconds": warm[f"{name}/{p.name}"],
            "speedup_vs_eager": s.median / eager,
            "fraction_of_peak": s.median * entry["flops_per_token"] / entry["peak"]["peak_flops"],
            "gemm_bound_fraction": s.median * entry["peak"]["gemm_seconds_per_token"],
        }
    rates = {k: v["tokens_per_second"] for k, v in entry["paths"].items()}
    entry["fastest"] = max(rates, key=rates.get)


def run_bench(
    models: Sequence[str] = ("convs2s", "gru"),
    paths=None,
    device: str = "auto",
    quick: bool = False,
    budget: BenchBudget | None = None,
    out=None,
    profile: bool = True,
) -> dict:
    """Measure ``models`` on ``paths`` (default: every path this device can run).

    Parameters
    ----------
    models : sequence of str
        Names of :data:`~convs2s_edu.training.config.MODEL_NAMES`, at the seed's configuration.
    paths : sequence of :class:`~convs2s_edu.training.paths.ExecutionPath` or str, optional
        Paths or their names (``"eager-fp32"``, ``"compile-fp32"``, ...);
        default :func:`~convs2s_edu.training.paths.available_paths`.
    device : str
        ``"auto"``, ``"cpu"``, ``"cuda"``...
    quick : bool
        Small budgets (``BenchBudget.quick()``): seconds, for tests and the quick site.
    budget : BenchBudget, optional
        Overrides ``quick``.
    out : str or Path, optional
        Write the result as JSON here.
    profile : bool
        Include the profiler tables.

    Returns
    -------
    dict
        ``machine``, ``paths``, ``skipped_paths``, per model ``models[name]``:
        ``flops_per_token``, ``peak``, ``paths[path]`` (``tokens_per_second``
        median/min/max, ``fraction_of_peak``, ``warmup_seconds``,
        ``speedup_vs_eager``), decoding rates, ``incremental`` (ConvS2S) and
        ``profile`` (text); ``fastest`` per model, the raw
        :class:`~convs2s_edu.lab.timing.SpeedMeasurement`, and on a CPU ``threads``
        (:meth:`~convs2s_edu.lab.timing.ThreadScaling.to_dict` and its ``verdict``).
    """
    budget = budget or (BenchBudget.quick() if quick else BenchBudget())
    dev = resolve_device(device)
    chosen, skipped = _choose_paths(paths, dev, budget)
    result = {
        "machine": None,
        "device": str(dev),
        "quick": budget.is_quick,
        "paths": [p.name for p in chosen],
        "skipped_paths": skipped,
        "models": {},
    }
    windows, warmups, warm_seconds = {}, {}, {}
    for name in models:
        cfg = TrainConfig(model=name, device=str(dev))
        if budget.batch_size:
            cfg = cfg.replace(batch_size=budget.batch_size)
        batches = [b.to(dev) for b in training_batches(cfg, budget.n_batches)]
        entry = result["models"][name] = _measure_model(cfg, batches, budget, dev)
        for p in chosen:
            key = f"{name}/{p.name}"
            step = _path_step(cfg, p, dev)
            windows[key] = window_runner(step, batches, budget.steps_per_window)
            warm = warmup_runner(step, batches, budget.warmup_steps)
            warmups[key] = _timed_warmup(warm, dev, warm_seconds, key)
            if profile and p == execution.ExecutionPath():
                entry["profile"] = _profile(step, batches, budget.profile_steps, dev)

    m = time_interleaved(
        windows,
        budget.n_rounds,
        dev,
        warmup=warmups,
        steps_per_window=budget.steps_per_window,
        warmup_steps=budget.warmup_steps,
    )
    result["machine"] = {**asdict(m.machine), "load": m.machine.load}
    result["machine"]["describe"] = m.machine.describe()
    for name in models:
        _path_rows(result["models"][name], name, chosen, m, warm_seconds)
    result["measurement"] = m.to_dict()
    if dev.type == "cpu" and len(models) >= 2:
        cfg = TrainConfig(device="cpu", batch_size=budget.batch_size or 128)
        scaling = measure_threads(
            cfg,
            models,
            steps_per_window=budget.steps_per_window,
            n_rounds=max(budget.n_rounds, 2),
            warmup_steps=budget.warmup_steps,
            n_batches=budget.n_batches,
        )
        result["threads"] = {**scaling.to_dict(), "verdict": thread_verdict(scaling).text}
    if out is not None:
        with open(out, "w") as f:
            json.dump(result, f, indent=2, default=str)
    return result


def format_bench(result: dict, profile: bool = True) -> str:
    """The bench as text: the machine, the training table, decoding, incremental, profiles."""
    lines = [f"machine: {result['machine']['describe']}", ""]
    head = (
        f"{'model':<9} {'path':<30} {'tokens/s':>9} {'range':>15} {'x eager':>7} "
        f"{'GFLOP/tok':>9} {'% peak':>6} {'GEMM-bound %':>12} {'warm-up s':>9}"
    )
    lines += [head, "-" * len(head)]
    for name, e in result["models"].items():
        for path, r in e["paths"].items():
            lines.append(
                f"{name:<9} {path:<30} {r['tokens_per_second']:>9,.0f} "
                f"{r['min']:>7,.0f}-{r['max']:<7,.0f} {r['speedup_vs_eager']:>7.2f} "
                f"{e['flops_per_token'] / 1e9:>9.4f} {100 * r['fraction_of_peak']:>6.1f} "
                f"{100 * r['gemm_bound_fraction']:>12.1f} {r['warmup_seconds']:>9.1f}"
            )
    lines.append("")
    for name, e in result["models"].items():
        pk = e["peak"]
        lines.append(
            f"{name}: measured peak {pk['peak_flops'] / 1e9:,.1f} GFLOP/s "
            f"(dense fp32 mm {tuple(pk['shape'])}), fastest path {e['fastest']}, "
            f"greedy {e['decoding']['greedy_sentences_per_second']:,.1f} sentences/s, "
            f"beam 5 {e['decoding']['beam5_sentences_per_second']:,.1f} sentences/s"
        )
    for name, e in result["models"].items():
        for r in e.get("incremental", []):
            lines.append(
                f"{name} greedy decoding T={r['target_len']:>3}: full recompute "
                f"{r['seconds_full']:.3f} s, incremental {r['seconds_incremental']:.3f} s"
                f" ({r['speedup']:.1f}x)"
            )
    if result.get("threads"):
        th = result["threads"]
        lines.append("")
        lines.append("training tokens/s by PyTorch thread count (interleaved, eager fp32):")
        for t in th["thread_counts"]:
            p = th["points"][str(t)]
            cells = [
                f"{n} {p['throughput'][n]['median']:,.0f} "
                f"({p['throughput'][n]['min']:,.0f}-{p['throughput'][n]['max']:,.0f})"
                for n in th["models"]
            ]
            ratios = [f"{n}/{th['models'][0]} {p['ratio'][n]['median']:.2f}" for n in p["ratio"]]
            lines.append(f"  {t:>2} thread(s): " + "; ".join(cells) + "; " + ", ".join(ratios))
        lines.append(th["verdict"])
    if result["skipped_paths"]:
        lines.append("")
        for p, why in result["skipped_paths"].items():
            lines.append(f"not run: {p}: {why}")
    if profile:
        for name, e in result["models"].items():
            if "profile" in e:
                lines += [
                    "",
                    f"{name}: where the time of eager fp32 training steps goes",
                    e["profile"],
                ]
    return "\n".join(lines)
