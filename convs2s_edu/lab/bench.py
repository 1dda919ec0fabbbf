r"""``convs2s-edu bench``: both models against the machine's limits, on every execution path.

What :func:`run_bench` measures, in one process, on the machine it runs on:

1. **Training throughput** (target tokens per second) of every model on every execution
   path (:mod:`convs2s_edu.fast.paths`), timed interleaved
   (:func:`~convs2s_edu.lab.timing.time_interleaved`), after untimed warm-up steps whose
   seconds (the compile time of compiled paths included) are reported.
2. **FLOPs per target token** of a training step, forward and backward
   (:func:`~convs2s_edu.lab.timing.training_flops_per_token`).
3. **The machine's limits** (:func:`machine_limits`): the CPU's theoretical peak from its
   documented figures (``convs2s_edu._machine.theoretical_peak``, none on a GPU) and
   the measured rate of a large dense ``torch.mm``, each in the precision of the path
   (fp32, or bf16 where the device multiplies it in hardware). A model and path reaches

   .. math::

      \frac{\text{FLOPs per token} \times \text{tokens per second}}{\text{limit FLOP/s}}

   of each limit. The *GEMM-bound* share of an fp32 step (:func:`step_gemm_seconds`) is
   the time the step's own matrix products take at their measured fp32 rates over the
   time of the whole step: the rest is everything else.
4. **Decoding**: greedy and beam-5 sentences per second, and ConvS2S incremental against
   full-recompute greedy decoding (:func:`~convs2s_edu.lab.timing.time_incremental_vs_full`).
5. **Where the time goes**: a :mod:`torch.profiler` table of a few eager training steps
   per model (top rows by self CPU time, or CUDA time on a GPU).
6. **Parallel hardware** (on a CPU): training throughput of both models at every thread
   count, and the verdict at each (:func:`~convs2s_edu.lab.timing.measure_threads`).

Models are untrained (how long a step takes does not depend on the weights); an untrained model
decodes to the length limit (source length + 1), which a trained one also reaches on this task.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils.benchmark import Timer, timer

from .._machine import theoretical_peak
from ..convs2s import ConvS2S
from ..decode import beam_search, greedy_decode
from ..fast import paths as execution
from ..loss import sequence_loss
from ..training.calibrate import default_path
from ..training.config import TrainConfig, build_model, make_datasets
from ..training.device import resolve_device, synchronize
from ..training.step import make_train_step
from .compare import format_threads
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

__all__ = [
    "BenchBudget",
    "run_bench",
    "format_bench",
    "gemm_shapes",
    "step_gemm_seconds",
    "machine_limits",
]


@dataclass
class BenchBudget:
    """How much the bench times: the full budget, or ``BenchBudget.quick()`` (the tests, the
    quick site)."""

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
    large_gemm: int = 2048  # the size of the large GEMM of machine_limits
    batch_size: int | None = None  # None: the seed's 128
    is_quick: bool = False  # on a CPU: eager paths only (compiling takes minutes)

    @classmethod
    def quick(cls) -> BenchBudget:
        training = dict(n_batches=2, steps_per_window=1, n_rounds=2, warmup_steps=1, batch_size=32)
        decoding = dict(decode_sentences=16, beam_sentences=4, incremental_lengths=(20, 50))
        rest = dict(incremental_batch=4, profile_steps=1, peak_repeats=2, is_quick=True)
        return cls(**training, **decoding, **rest)


def gemm_shapes(model, batch) -> list[tuple[int, int, int]]:
    """The ``(m, k, n)`` of every matrix product of one training step.

    ConvS2S's convolutions are among them: a 1-D convolution of ``C_in -> C_out`` channels,
    kernel ``k``, over ``B x T`` output positions is the GEMM
    ``(B T) x (k C_in) . (k C_in) x C_out`` (as :class:`~convs2s_edu.fast.FastConvBlock`
    computes it; a :class:`torch.nn.Conv1d` is recorded as that product), and its backward two
    more products of the same FLOPs (input and weight gradients).
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    shapes = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            p = func._overloadpacket
            if p in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm):
                a, b = args[:2] if p in (aten.mm, aten.bmm) else args[1:3]
                n = a.shape[0] if a.dim() == 3 else 1  # a bmm is a batch of n products
                shapes.extend([(a.shape[-2], a.shape[-1], b.shape[-1])] * n)
            elif p is aten.convolution:  # weight (C_out, C_in, k) -> output (B, C_out, T)
                y, w = func(*args, **(kwargs or {})), args[1]
                shapes.append((y.shape[0] * y.shape[2:].numel(), w[0].numel(), w.shape[0]))
                return y
            elif p is aten.convolution_backward:  # grad_output, input, weight, ..., output_mask
                g, w, mask = args[0], args[2], args[10]
                bt, kc = g.shape[0] * g.shape[2:].numel(), w[0].numel()
                shapes.extend([(bt, w.shape[0], kc)] * mask[0] + [(kc, bt, w.shape[0])] * mask[1])
            return func(*args, **(kwargs or {}))

    model.train()
    batch = batch.to(next(model.parameters()).device)
    with Record():
        sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out).backward()
    model.zero_grad(set_to_none=True)
    return shapes


def _mm_rate(m: int, k: int, n: int, device, repeats: int, dtype=torch.float32) -> float:
    """FLOP/s of a dense ``torch.mm`` of ``(m, k) x (k, n)``: the fastest of ``repeats``
    :meth:`torch.utils.benchmark.Timer.timeit`, each of enough products for ~0.2 GFLOP."""
    mats = {"a": torch.randn(m, k, device=device, dtype=dtype)}
    mats["b"] = torch.randn(k, n, device=device, dtype=dtype)
    reps = max(1, min(200, int(2e8 // max(1, 2 * m * k * n))))
    t = Timer("torch.mm(a, b)", globals=mats, num_threads=torch.get_num_threads())
    return 2 * m * k * n / min(t.timeit(reps).median for _ in range(repeats))


def step_gemm_seconds(shapes: Sequence[tuple[int, int, int]], device, repeats: int = 5) -> float:
    r"""The seconds a step's matrix products take, each at its own shape's measured rate.

    Parameters
    ----------
    shapes : sequence of (int, int, int)
        The ``(m, k, n)`` of every product (:func:`gemm_shapes`); a shape may repeat.
    device : torch.device or str
        Where to time them.
    repeats : int
        Timings of each distinct shape, by :meth:`torch.utils.benchmark.Timer.timeit` (of
        enough products for about 0.2 GFLOP each); the fastest gives its rate.

    Returns
    -------
    float
        The seconds

        .. math:: \sum_{(m, k, n)} \frac{2 m k n}{\text{rate}(m, k, n)}

        over ``shapes``, each rate that of a dense float32 ``torch.mm`` of that shape.
    """
    rates = {mkn: _mm_rate(*mkn, torch.device(device), repeats) for mkn in set(shapes)}
    return sum(2 * m * k * n / rates[(m, k, n)] for m, k, n in shapes)


def _limit_check(fraction: float | None, peak: dict) -> str:
    """Why a large GEMM's rate lies outside 50-100% of the theoretical peak ("" inside)."""
    if fraction is None:
        return "no theoretical peak to check it against"
    if 0.5 <= fraction <= 1:
        return ""
    if fraction > 1:
        return (
            f"above the stated peak: the cores ran above the {peak['clock_ghz']:.2f} GHz "
            f"read from {peak['clock_source']} (this rate needs at least "
            f"{peak['clock_ghz'] * fraction:.2f} GHz, e.g. a turbo clock), or the CPU has "
            "more FMA units than the table says"
        )
    return (
        "below half the stated peak: the cores may run below the clock read under this "
        "load, have fewer FMA units than the table says, share physical cores (SMT, "
        "vCPUs), or PyTorch's GEMM does not use these instructions or waits on memory"
    )


def machine_limits(device, repeats: int = 5, size: int = 2048) -> dict:
    """The machine's limits: the theoretical peak, and a large GEMM's measured rate.

    Parameters
    ----------
    device : torch.device or str
        The device of the bench. On a CPU the peak is
        ``convs2s_edu._machine.theoretical_peak`` at torch's thread count; on another
        device there is none.
    repeats : int
        Timings of the large GEMM, as :func:`step_gemm_seconds` times a product.
    size : int
        The large GEMM is a dense ``torch.mm`` of two ``size x size`` matrices.

    Returns
    -------
    dict
        ``{"theoretical": peak, "size": size, "fp32": row}``, and ``"bf16": row`` where the
        device multiplies bf16 in hardware (:func:`~convs2s_edu.fast.paths.bf16_support`).
        A row is ``{"peak_flops", "large_gemm_flops", "fraction", "check"}``: ``fraction``
        is the large GEMM's rate over the peak (None without one); ``check`` says plainly
        why the rate lies outside 50-100% of the peak where it does ("" where inside).
    """
    device = torch.device(device)
    if device.type == "cpu":
        peak = theoretical_peak(torch.get_num_threads())
    else:
        text = f"no theoretical peak: the table covers CPUs, not {device.type} devices"
        peak = {"fp32_flops": None, "bf16_flops": None, "text": text}
    limits = {"theoretical": peak, "size": size}
    dtypes = {"fp32": torch.float32}
    if execution.bf16_support(device)[0]:
        dtypes["bf16"] = torch.bfloat16
    for name, dtype in dtypes.items():
        rate, top = _mm_rate(size, size, size, device, repeats, dtype), peak[f"{name}_flops"]
        fraction = rate / top if top else None
        limits[name] = {"peak_flops": top, "large_gemm_flops": rate, "fraction": fraction}
        limits[name]["check"] = _limit_check(fraction, peak)
    return limits


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
    """Greedy and beam-5 sentences per second, by the median of a
    :meth:`~torch.utils.benchmark.Timer.blocked_autorange`."""
    out = {}
    for name, n, fn in (
        ("greedy", budget.decode_sentences, greedy_decode),
        ("beam5", budget.beam_sentences, lambda m, s: beam_search(m, s, beam_size=5)),
    ):
        batch = test_ds.collate([test_ds[j] for j in range(min(n, len(test_ds)))]).to(device)
        scope = {"fn": fn, "model": model, "src": batch.src}
        t = Timer("fn(model, src)", globals=scope, num_threads=torch.get_num_threads())
        out[f"{name}_sentences_per_second"] = len(batch.src) / t.blocked_autorange().median
    return out


def _choose_paths(paths, dev, budget: BenchBudget) -> tuple[list, dict]:
    """The paths to time (eager fp32 first, the reference of every speed-up) and why the
    others are not timed. Names or paths this device cannot run are a ``ValueError``."""
    runnable, skipped = execution.available_paths(dev)
    if paths is None:
        chosen = runnable
        if budget.is_quick and dev.type == "cpu":
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
    """What does not depend on the path: FLOPs per token, the GEMM time, decoding."""
    counts = [b.n_target_tokens for b in batches]
    torch.manual_seed(cfg.seed)
    ref = build_model(cfg).to(dev)
    flops = sum(training_flops_per_token(ref, b) * b.n_target_tokens for b in batches)
    gemm = step_gemm_seconds(gemm_shapes(ref, batches[0]), dev, budget.peak_repeats)
    entry = {
        "flops_per_token": flops / sum(counts),
        "gemm_seconds_per_token": gemm / counts[0],
        "n_parameters": sum(p.numel() for p in ref.parameters()),
        "paths": {},
        "decoding": _decode_rates(ref, make_datasets(cfg)[2], budget, dev),
    }
    if cfg.model == "convs2s":
        lengths = budget.incremental_lengths
        long = ConvS2S(ref.cfg.replace(max_positions=max(lengths) + 1)).to(dev)
        batch, repeats = budget.incremental_batch, budget.incremental_repeats
        entry["incremental"] = time_incremental_vs_full(long, lengths, batch, repeats)
    return entry


def _timed_warmup(run, seconds: dict, key: str):
    """``run``, a warm-up, with its own clock: the compile time of a compiled path shows there."""

    def timed() -> None:
        t0 = timer()
        run()
        seconds[key] = timer() - t0

    return timed


def _path_rows(entry: dict, name: str, chosen, m, warm: dict, limits: dict) -> None:
    """Fill ``entry["paths"]`` and ``entry["fastest"]`` from the interleaved measurement; a
    path's FLOP/s as fractions of ``limits`` (:func:`machine_limits`) of its precision."""
    eager = m.throughput[f"{name}/eager-fp32"].median
    for p in chosen:
        s, limit = m.throughput[f"{name}/{p.name}"], limits[p.precision]
        flops = s.median * entry["flops_per_token"]
        peak, fp32 = limit["peak_flops"], p.precision == "fp32"
        entry["paths"][p.name] = {
            "tokens_per_second": s.median,
            "min": s.min,
            "max": s.max,
            "spread": s.spread,
            "warmup_seconds": warm[f"{name}/{p.name}"],
            "speedup_vs_eager": s.median / eager,
            "flops_per_second": flops,
            "fraction_of_theoretical_peak": flops / peak if peak else None,
            "fraction_of_large_gemm": flops / limit["large_gemm_flops"],
            "gemm_bound_fraction": s.median * entry["gemm_seconds_per_token"] if fp32 else None,
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
    """Measure ``models`` (names of :data:`~convs2s_edu.training.config.MODEL_NAMES`, at the seed's
    configuration) on ``paths`` (:class:`~convs2s_edu.fast.paths.ExecutionPath` or their names,
    ``"eager-fp32"``, ``"compile-fp32"``, ...; default every path ``device`` can run). ``budget``
    sets how much is timed (default ``BenchBudget.quick()`` with ``quick``, else the full one);
    ``out``: a JSON file to write the result to; ``profile``: include the profiler tables.

    Returns a dict: ``machine``, ``paths``, ``skipped_paths``, ``limits``
    (:func:`machine_limits`), per model ``models[name]``: ``flops_per_token``,
    ``gemm_seconds_per_token``, ``paths[path]`` (``tokens_per_second`` median/min/max,
    ``flops_per_second``, ``fraction_of_theoretical_peak``, ``fraction_of_large_gemm``,
    ``gemm_bound_fraction``, ``warmup_seconds``, ``speedup_vs_eager``), decoding rates,
    ``incremental`` (ConvS2S), ``profile`` (text) and ``fastest``; ``measurement``, the raw
    :class:`~convs2s_edu.lab.timing.SpeedMeasurement`; on a CPU ``threads``
    (:meth:`~convs2s_edu.lab.timing.ThreadScaling.to_dict`, its ``verdict`` and ``table``).
    """
    budget = budget or (BenchBudget.quick() if quick else BenchBudget())
    dev = resolve_device(device)
    chosen, skipped = _choose_paths(paths, dev, budget)
    result = {"machine": None, "device": str(dev), "quick": budget.is_quick}  # machine: below
    result |= {"paths": [p.name for p in chosen], "skipped_paths": skipped, "models": {}}
    result["limits"] = machine_limits(dev, budget.peak_repeats, budget.large_gemm)
    windows, warmups, warm_seconds = {}, {}, {}
    for name in models:
        cfg = TrainConfig(model=name, device=str(dev))
        if budget.batch_size:
            cfg = cfg.replace(batch_size=budget.batch_size)
        batches = [b.to(dev) for b in training_batches(cfg, budget.n_batches)]
        entry = result["models"][name] = _measure_model(cfg, batches, budget, dev)
        for p in chosen:
            key = f"{name}/{p.name}"
            torch.manual_seed(cfg.seed)  # a fresh model of cfg on path p, and its training step
            model = execution.apply_path(build_model(cfg).to(dev), p)
            optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
            step = make_train_step(model, optimizer, cfg.clip_norm, p.precision)
            windows[key] = window_runner(step, batches, budget.steps_per_window)
            warm = warmup_runner(step, batches, budget.warmup_steps)
            warmups[key] = _timed_warmup(warm, warm_seconds, key)
            if profile and p == execution.ExecutionPath():
                entry["profile"] = _profile(step, batches, budget.profile_steps, dev)

    steps = {"steps_per_window": budget.steps_per_window, "warmup_steps": budget.warmup_steps}
    m = time_interleaved(windows, budget.n_rounds, dev, warmup=warmups, **steps)
    result["measurement"] = m.to_dict()
    result["machine"] = {**result["measurement"]["machine"], "describe": m.machine.describe()}
    for name in models:
        _path_rows(result["models"][name], name, chosen, m, warm_seconds, result["limits"])
    if dev.type == "cpu" and len(models) >= 2:
        cfg = TrainConfig(device="cpu", batch_size=budget.batch_size or 128)
        n = {"n_rounds": max(budget.n_rounds, 2), "n_batches": budget.n_batches}
        scaling = measure_threads(cfg, models, **steps, **n)
        v = thread_verdict(scaling)
        table = format_threads(scaling, verdict=v)
        # the paths the thread table timed: each model's, as this machine chose it
        paths = {n: default_path(dev, cfg.replace(model=n)).name for n in models}
        path = ", ".join(f"{n} {p}" for n, p in paths.items())
        result["threads"] = {**scaling.to_dict(), "verdict": v.text, "table": table, "path": path}
    if out is not None:
        with open(out, "w") as f:
            json.dump(result, f, indent=2, default=str)
    return result


def _percent(fraction: float | None, width: int) -> str:
    """A fraction as a percentage, "-" where there is none, starred above 100%."""
    if fraction is None:
        return f"{'-':>{width - 1}} "
    return f"{100 * fraction:>{width - 1}.1f}" + ("*" if fraction > 1 else " ")


def _limit_lines(limits: dict) -> list[str]:
    """The lines of :func:`machine_limits`'s result: the peak, each large GEMM, the checks."""
    lines = [f"theoretical peak: {limits['theoretical']['text']}"]
    for name in ("fp32", "bf16"):
        if name in limits:
            r, n = limits[name], limits["size"]
            of = f" = {100 * r['fraction']:.1f}% of its peak" if r["fraction"] else ""
            line = f"large GEMM ({name} torch.mm {n}x{n}x{n}): "
            lines.append(line + f"{r['large_gemm_flops'] / 1e9:,.1f} GFLOP/s{of}")
            lines += [f"  check: {r['check']}"] if r["check"] else []
    return lines


def format_bench(result: dict, profile: bool = True) -> str:
    """The bench as text: the machine, the training table against the machine's limits
    (:func:`machine_limits`), decoding, incremental, profiles."""
    lines = [f"machine: {result['machine']['describe']}", ""]
    head = (
        f"{'model':<9} {'path':<30} {'tokens/s':>9} {'range':>15} {'x eager':>7} "
        f"{'GFLOP/tok':>9} {'% peak':>7} {'% big GEMM':>10} {'GEMM-bound %':>12} {'warm-up s':>9}"
    )
    rows = []
    for name, e in result["models"].items():
        for path, r in e["paths"].items():
            rows.append(
                f"{name:<9} {path:<30} {r['tokens_per_second']:>9,.0f} "
                f"{r['min']:>7,.0f}-{r['max']:<7,.0f} {r['speedup_vs_eager']:>7.2f} "
                f"{e['flops_per_token'] / 1e9:>9.4f} "
                f"{_percent(r['fraction_of_theoretical_peak'], 7)} "
                f"{_percent(r['fraction_of_large_gemm'], 10)} "
                f"{_percent(r['gemm_bound_fraction'], 12)} {r['warmup_seconds']:>9.1f}"
            )
    lines += [head, "-" * len(head), *rows, "", *_limit_lines(result["limits"])]
    if any("*" in row for row in rows):
        lines.append("* above 100%: this machine exceeded that limit (see the checks above)")
    lines.append("")
    for name, e in result["models"].items():
        dec = e["decoding"]
        lines.append(
            f"{name}: fastest path {e['fastest']}, "
            f"greedy {dec['greedy_sentences_per_second']:,.1f} sentences/s, "
            f"beam 5 {dec['beam5_sentences_per_second']:,.1f} sentences/s"
        )
    lines += [
        f"{name} greedy decoding T={r['target_len']:>3}: full recompute "
        f"{r['seconds_full']:.3f} s, incremental {r['seconds_incremental']:.3f} s"
        f" ({r['speedup']:.1f}x)"
        for name, e in result["models"].items()
        for r in e.get("incremental", [])
    ]
    if result.get("threads"):
        lines += [
            "",
            f"threads, on the paths {result['threads']['path']}:",
            result["threads"]["table"],
        ]
    if result["skipped_paths"]:
        lines += [""] + [f"not run: {p}: {why}" for p, why in result["skipped_paths"].items()]
    tables = {n: e["profile"] for n, e in result["models"].items() if "profile" in e}
    for name, table in tables.items() if profile else ():
        lines += ["", f"{name}: where the time of eager fp32 training steps goes", table]
    return "\n".join(lines)
