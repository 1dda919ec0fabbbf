r"""``convs2s-edu bench``: the report of both models against the machine's limits.

:func:`run_bench` gathers, in one process, what :mod:`convs2s_edu.lab.timing` measures on
the machine it runs on; this module only chooses what to time and lays the result out:

1. **Training throughput** (target tokens per second) of every model on every execution
   path (:mod:`convs2s_edu.fast.paths`), all timed interleaved
   (:func:`~convs2s_edu.lab.timing.time_interleaved`), with the seconds of each path's
   warm-up (the compile time of compiled paths included).
2. **FLOPs per target token** of a training step
   (:func:`~convs2s_edu.lab.timing.training_flops_per_token`).
3. **The machine's limits** (:func:`machine_limits`): the CPU's
   theoretical peak and a large GEMM's measured rate, in the path's precision. A model
   on a path reaches

   .. math::

      \frac{\text{FLOPs per token} \times \text{tokens per second}}{\text{limit FLOP/s}}

   of each limit. The *GEMM-bound* share of an fp32 step is the time its own matrix
   products take at their measured rates
   (:func:`step_gemm_seconds`) over the time of the whole step.
4. **Decoding**: greedy and beam-5 sentences per second, interleaved
   (:func:`~convs2s_edu.lab.timing.measure_generation`), and ConvS2S incremental against
   full-recompute decoding (:func:`~convs2s_edu.lab.timing.time_incremental_vs_full`).
5. **Where the time goes**: :func:`profile_table` of a few eager
   training steps per model.
6. **Parallel hardware** (on a CPU): training throughput at every thread count and the
   verdict at each (:func:`~convs2s_edu.lab.timing.measure_threads`).

Models are untrained (how long a step takes does not depend on the weights); an
untrained model decodes to the length limit, which a trained one also reaches on this
task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.benchmark import Timer

from .._machine import theoretical_peak
from ..convs2s import ConvS2S
from ..fast import paths as execution
from ..fast.paths import bf16_support
from ..loss import sequence_loss
from ..training.calibrate import default_path
from ..training.config import TrainConfig, build_model, make_datasets
from ..training.device import resolve_device, synchronize
from ..training.step import make_train_step
from .timing import (
    _table,
    _time_steps,
    measure_generation,
    measure_threads,
    speed_table,
    speed_verdict,
    time_incremental_vs_full,
    training_batches,
    training_flops_per_token,
    window_runner,
)

__all__ = [
    "BenchBudget",
    "run_bench",
    "format_bench",
    "gemm_shapes",
    "step_gemm_seconds",
    "machine_limits",
    "profile_table",
]


class _RecordProducts(TorchDispatchMode):
    """Records the ``(m, k, n)`` of every matrix product run under it in ``shapes``."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        aten, p = torch.ops.aten, func._overloadpacket
        out = func(*args, **(kwargs or {}))
        if p in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm):
            a, b = args[:2] if p in (aten.mm, aten.bmm) else args[1:3]
            n = a.shape[0] if a.dim() == 3 else 1  # a bmm is a batch of n products
            self.shapes += [(a.shape[-2], a.shape[-1], b.shape[-1])] * n
        elif p is aten.convolution:  # weight (C_out, C_in, k) -> output (B, C_out, T)
            w = args[1]
            self.shapes.append(
                (out.shape[0] * out.shape[2:].numel(), w[0].numel(), w.shape[0])
            )
        elif p is aten.convolution_backward:  # grad_output, input, weight, ..., mask
            g, w, mask = args[0], args[2], args[10]
            bt, kc = g.shape[0] * g.shape[2:].numel(), w[0].numel()
            self.shapes += [(bt, w.shape[0], kc)] * mask[0] + [
                (kc, bt, w.shape[0])
            ] * mask[1]
        return out


def gemm_shapes(model: nn.Module, batch) -> list[tuple[int, int, int]]:
    """The ``(m, k, n)`` of every matrix product of one training step.

    Parameters
    ----------
    model : nn.Module
    batch : Batch

    Returns
    -------
    list of (int, int, int)

    Notes
    -----
    A 1-D convolution of ``C_in -> C_out`` channels, kernel ``k``, over ``B x T`` output
    positions is the GEMM ``(B T) x (k C_in) . (k C_in) x C_out`` (as
    :class:`~convs2s_edu.fast.FastConvBlock` computes it), and its backward two more
    products of the same FLOPs (input and weight gradients).
    """
    model.train()
    batch = batch.to(next(model.parameters()).device)
    with _RecordProducts() as record:
        sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out).backward()
    model.zero_grad(set_to_none=True)
    return record.shapes


def _mm_rate(
    m: int, k: int, n: int, device, repeats: int, dtype=torch.float32
) -> float:
    """FLOP/s of a dense ``torch.mm`` of ``(m, k) x (k, n)``: the fastest of ``repeats``
    :meth:`~torch.utils.benchmark.Timer.timeit`, each of enough products for ~0.2 GFLOP."""
    mats = {
        "a": torch.randn(m, k, device=device, dtype=dtype),
        "b": torch.randn(k, n, device=device, dtype=dtype),
    }
    reps = max(1, min(200, int(2e8 // max(1, 2 * m * k * n))))
    t = Timer("torch.mm(a, b)", globals=mats, num_threads=torch.get_num_threads())
    return 2 * m * k * n / min(t.timeit(reps).median for _ in range(repeats))


def step_gemm_seconds(
    shapes: Sequence[tuple[int, int, int]], device, repeats: int = 5
) -> float:
    r"""The seconds a step's matrix products take, each at its own shape's measured
    rate.

    Parameters
    ----------
    shapes : sequence of (int, int, int)
        The ``(m, k, n)`` of every product (:func:`gemm_shapes`); a shape may repeat.
    device : torch.device or str
    repeats : int
        Timings of each distinct shape; the fastest gives its rate.

    Returns
    -------
    float
        :math:`\sum_{(m, k, n)} 2 m k n / \text{rate}(m, k, n)`, each rate that of a
        dense float32 ``torch.mm`` of that shape.
    """
    rates = {mkn: _mm_rate(*mkn, torch.device(device), repeats) for mkn in set(shapes)}
    return sum(2 * m * k * n / rates[(m, k, n)] for m, k, n in shapes)


def machine_limits(device, repeats: int = 5, size: int = 2048) -> dict:
    """The machine's limits: the theoretical peak, and a large GEMM's measured rate.

    Parameters
    ----------
    device : torch.device or str
        On a CPU the peak is ``convs2s_edu._machine.theoretical_peak`` at torch's thread
        count; on another device there is none.
    repeats : int
        Timings of the large GEMM, as in :func:`step_gemm_seconds`.
    size : int
        The large GEMM multiplies two ``size x size`` matrices.

    Returns
    -------
    dict
        ``{"theoretical": peak, "size": size, "fp32": row}``, and ``"bf16": row`` where
        the device multiplies bf16 in hardware. A row is
        ``{"peak_flops", "large_gemm_flops", "fraction", "check"}``: ``fraction`` is the
        rate over the peak (None without one); ``check`` is ``""`` when it lies within
        50-100%, else what is off.
    """
    device = torch.device(device)
    if device.type == "cpu":
        peak = theoretical_peak(torch.get_num_threads())
    else:
        text = f"no theoretical peak: the table covers CPUs, not {device.type} devices"
        peak = {"fp32_flops": None, "bf16_flops": None, "text": text}
    limits = {"theoretical": peak, "size": size}
    dtypes = {"fp32": torch.float32}
    if bf16_support(device)[0]:
        dtypes["bf16"] = torch.bfloat16
    for name, dtype in dtypes.items():
        rate, top = (
            _mm_rate(size, size, size, device, repeats, dtype),
            peak[f"{name}_flops"],
        )
        fraction = rate / top if top else None
        check = "no theoretical peak to check it against" if fraction is None else ""
        if fraction is not None and fraction > 1:
            check = (
                f"above the stated peak: it needs {peak['clock_ghz'] * fraction:.2f} GHz, "
                f"{peak['clock_source']} gave {peak['clock_ghz']:.2f} GHz"
            )
        elif fraction is not None and fraction < 0.5:
            check = f"below half the stated peak ({100 * fraction:.0f}%)"
        limits[name] = {
            "peak_flops": top,
            "large_gemm_flops": rate,
            "fraction": fraction,
            "check": check,
        }
    return limits


def profile_table(step: Callable, batches: Sequence, n_steps: int, device) -> str:
    """A :mod:`torch.profiler` table of ``n_steps`` calls of ``step`` on ``batches`` (in
    turn): the top rows by self CPU time, or CUDA time on a GPU."""
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(device)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        window_runner(step, batches, n_steps)()
        synchronize(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(
        sort_by=key, row_limit=12, max_name_column_width=40
    )


@dataclass
class BenchBudget:
    """How much the bench times: the full budget, or ``BenchBudget.quick()`` (the tests,
    the quick site)."""

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
    large_gemm: int = 2048  # the size of machine_limits's large GEMM
    batch_size: int | None = None  # None: the original notebook's 128
    is_quick: bool = False  # on a CPU: eager paths only (compiling takes minutes)

    @classmethod
    def quick(cls) -> BenchBudget:
        training = dict(n_batches=2, steps_per_window=1, n_rounds=2, warmup_steps=1)
        decoding = dict(
            decode_sentences=16, beam_sentences=4, incremental_lengths=(20, 50)
        )
        rest = dict(incremental_batch=4, profile_steps=1, peak_repeats=2, batch_size=32)
        return cls(**training, **decoding, **rest, is_quick=True)


def _choose_paths(paths, dev, budget: BenchBudget) -> tuple[list, dict]:
    """The paths to time (eager fp32 first, the reference of every speed-up) and why the
    others are not timed. A name or path this device cannot run is a ``ValueError``."""
    runnable, skipped = execution.available_paths(dev)
    chosen = runnable
    if paths is None and budget.is_quick and dev.type == "cpu":
        chosen = [p for p in runnable if not p.compile]
        why = "not timed in quick mode on a CPU (compile time)"
        skipped |= {p.name: why for p in runnable if p.compile}
    elif paths is not None:
        by_name = {p.name: p for p in execution.PATHS}
        chosen = [by_name.get(p, p) if isinstance(p, str) else p for p in paths]
        for p in chosen:
            if p not in execution.PATHS:
                raise ValueError(f"unknown path {p!r}; known: {sorted(by_name)}")
            if p.name in skipped:
                raise ValueError(
                    f"path {p.name} cannot run on {dev.type}: {skipped[p.name]}"
                )
    eager = execution.ExecutionPath()
    return [eager] + [p for p in chosen if p != eager], skipped


def _path_rows(entry: dict, name: str, chosen, m, limits: dict) -> None:
    """Fill ``entry["paths"]`` and ``entry["fastest"]`` from the interleaved measurement
    ``m``; a path's FLOP/s as fractions of the limits of its own precision."""
    eager = m.throughput[f"{name}/eager-fp32"].median
    for p in chosen:
        key, limit = f"{name}/{p.name}", limits[p.precision]
        s = m.throughput[key]
        flops, peak = s.median * entry["flops_per_token"], limit["peak_flops"]
        gemm_bound = s.median * entry["gemm_seconds_per_token"]
        entry["paths"][p.name] = {
            "tokens_per_second": s.median,
            "min": s.min,
            "max": s.max,
            "spread": s.spread,
            "warmup_seconds": m.warmup_seconds[key],
            "speedup_vs_eager": s.median / eager,
            "flops_per_second": flops,
            "fraction_of_theoretical_peak": flops / peak if peak else None,
            "fraction_of_large_gemm": flops / limit["large_gemm_flops"],
            "gemm_bound_fraction": gemm_bound if p.precision == "fp32" else None,
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
    """Measure ``models`` at the original notebook's configuration on ``paths``.

    Parameters
    ----------
    models : sequence of str
        Names of :data:`~convs2s_edu.training.config.MODEL_NAMES`.
    paths : sequence of ExecutionPath or str, optional
        :class:`~convs2s_edu.fast.paths.ExecutionPath` or their names (``"eager-fp32"``,
        ``"compile-fp32"``, ...); default every path ``device`` can run.
    device : str
    quick : bool
        Use ``BenchBudget.quick()`` when ``budget`` is not given.
    budget : BenchBudget, optional
    out : path, optional
        A JSON file to write the result to.
    profile : bool
        Include the profiler tables.

    Returns
    -------
    dict
        ``machine``, ``device``, ``quick``, ``paths``, ``skipped_paths``, ``limits``
        (:func:`machine_limits`), ``measurement`` (every
        window), and per model ``models[name]``: ``flops_per_token``,
        ``gemm_seconds_per_token``, ``n_parameters``, ``paths[path]``
        (``tokens_per_second`` with ``min``, ``max``, ``spread``, ``warmup_seconds``,
        ``speedup_vs_eager``, ``flops_per_second``, ``fraction_of_theoretical_peak``,
        ``fraction_of_large_gemm``, ``gemm_bound_fraction``), ``fastest``, ``decoding``,
        ``incremental`` (ConvS2S) and ``profile``; on a CPU, ``threads`` (the thread
        scaling, its ``verdict``, ``table`` and the ``path`` each model trains on).
    """
    budget = budget or (BenchBudget.quick() if quick else BenchBudget())
    dev = resolve_device(device)
    chosen, skipped = _choose_paths(paths, dev, budget)
    limits = machine_limits(dev, budget.peak_repeats, budget.large_gemm)
    base = TrainConfig(device=str(dev), batch_size=budget.batch_size or 128)
    batches = [b.to(dev) for b in training_batches(base, budget.n_batches)]
    entries, refs, steps = {}, {}, {}
    for name in models:
        cfg = base.replace(model=name)
        torch.manual_seed(cfg.seed)
        ref = refs[name] = build_model(cfg).to(dev)
        tokens = sum(b.n_target_tokens for b in batches)
        flops = sum(
            training_flops_per_token(ref, b) * b.n_target_tokens for b in batches
        )
        gemm = step_gemm_seconds(gemm_shapes(ref, batches[0]), dev, budget.peak_repeats)
        entry = entries[name] = {
            "flops_per_token": flops / tokens,
            "gemm_seconds_per_token": gemm / batches[0].n_target_tokens,
            "n_parameters": sum(p.numel() for p in ref.parameters()),
            "paths": {},
        }
        if isinstance(ref, ConvS2S):
            lengths = budget.incremental_lengths
            long = ConvS2S(ref.cfg.replace(max_positions=max(lengths) + 1)).to(dev)
            entry["incremental"] = time_incremental_vs_full(
                long, lengths, budget.incremental_batch, budget.incremental_repeats
            )
        for p in chosen:
            torch.manual_seed(cfg.seed)  # a fresh model of cfg on path p, and its step
            model = execution.apply_path(build_model(cfg).to(dev), p)
            optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
            step = make_train_step(model, optimizer, cfg.clip_norm, p.precision)
            steps[f"{name}/{p.name}"] = step
            if profile and p == execution.ExecutionPath():
                entry["profile"] = profile_table(
                    step, batches, budget.profile_steps, dev
                )
    windows = dict(
        steps_per_window=budget.steps_per_window,
        n_rounds=budget.n_rounds,
        warmup_steps=budget.warmup_steps,
    )
    m = _time_steps(steps, batches, dev, **windows)
    # the models share the data
    sources = [x for x, _ in make_datasets(base)[2].examples]
    rounds = {"n_rounds": budget.n_rounds}
    greedy = measure_generation(
        refs, sources[: budget.decode_sentences], (1,), **rounds
    )[1]
    beam = measure_generation(refs, sources[: budget.beam_sentences], (5,), **rounds)[5]
    for name, entry in entries.items():
        _path_rows(entry, name, chosen, m, limits)
        entry["decoding"] = {
            "greedy_sentences_per_second": greedy.throughput[name].median,
            "beam5_sentences_per_second": beam.throughput[name].median,
        }
    result = {
        "machine": {**m.to_dict()["machine"], "describe": m.machine.describe()},
        "device": str(dev),
        "quick": budget.is_quick,
        "paths": [p.name for p in chosen],
        "skipped_paths": skipped,
        "limits": limits,
        "models": entries,
        "measurement": m.to_dict(),
    }
    if dev.type == "cpu" and len(models) >= 2:
        scaling = measure_threads(base, models, n_batches=budget.n_batches, **windows)
        # the path each model trains on, as this machine chose it
        path = ", ".join(
            f"{n} {default_path(dev, base.replace(model=n)).name}" for n in models
        )
        result["threads"] = scaling.to_dict() | {
            "verdict": speed_verdict(scaling).text,
            "table": speed_table(scaling),
            "path": path,
        }
    if out is not None:
        with open(out, "w") as f:
            json.dump(result, f, indent=2, default=str)
    return result


def _percent(fraction: float | None) -> str:
    """A fraction as a percentage, "-" where there is none, starred above 100%."""
    if fraction is None:
        return "- "
    return f"{100 * fraction:.1f}" + ("*" if fraction > 1 else " ")


def format_bench(result: dict, profile: bool = True) -> str:
    """:func:`run_bench`'s result as text: the machine, the training table against the
    machine's limits, the limits, decoding, incremental decoding, threads, profiles."""
    head = ["model", "path", "tokens/s", "range", "x eager", "GFLOP/tok", "% peak"]
    head += ["% big GEMM", "GEMM-bound %", "warm-up s"]
    rows = [
        [
            name,
            path,
            f"{r['tokens_per_second']:,.0f}",
            f"{r['min']:,.0f}-{r['max']:,.0f}",
            f"{r['speedup_vs_eager']:.2f}",
            f"{e['flops_per_token'] / 1e9:.4f}",
            _percent(r["fraction_of_theoretical_peak"]),
            _percent(r["fraction_of_large_gemm"]),
            _percent(r["gemm_bound_fraction"]),
            f"{r['warmup_seconds']:.1f}",
        ]
        for name, e in result["models"].items()
        for path, r in e["paths"].items()
    ]
    lines = [f"machine: {result['machine']['describe']}", "", _table(head, rows), ""]
    limits = result["limits"]
    lines.append(f"theoretical peak: {limits['theoretical']['text']}")
    for name in [n for n in ("fp32", "bf16") if n in limits]:
        r, n = limits[name], limits["size"]
        of = f" = {100 * r['fraction']:.1f}% of its peak" if r["fraction"] else ""
        rate = f"{r['large_gemm_flops'] / 1e9:,.1f} GFLOP/s{of}"
        lines.append(f"large GEMM ({name} torch.mm {n}x{n}x{n}): {rate}")
        lines += [f"  check: {r['check']}"] if r["check"] else []
    if any("*" in cell for row in rows for cell in row):
        lines.append(
            "* above 100%: this machine exceeded that limit (see the checks above)"
        )
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
            f"{r['seconds_full']:.3f} s, incremental {r['seconds_incremental']:.3f} s "
            f"({r['speedup']:.1f}x)"
            for r in e.get("incremental", [])
        ]
    if result.get("threads"):
        threads = result["threads"]
        lines += ["", f"threads, on the paths {threads['path']}:", threads["table"]]
    lines += [""] * bool(result["skipped_paths"])
    lines += [f"not run: {p}: {why}" for p, why in result["skipped_paths"].items()]
    for name, e in result["models"].items() if profile else ():
        if "profile" in e:
            lines += ["", f"{name}: where the time of eager fp32 training steps goes"]
            lines.append(e["profile"])
    return "\n".join(lines)
