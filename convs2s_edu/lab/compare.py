"""The seed's central measurement: both models, same data, same epochs, side by side.

:func:`compare` trains (or loads) both models with one :class:`~convs2s_edu.TrainConfig`, scores
them on the same test set, times them *interleaved* (:mod:`convs2s_edu.lab.timing`) and, with a
learning curve, reads their convergence speed (:mod:`convs2s_edu.lab.convergence`). The speed
figures come from the alternating windows, not from the two training runs, which ran at
different times and may have shared the machine with different programs.
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass, field

import torch

from .._checks import check_int
from .._machine import usable_cores
from ..metrics import evaluate
from ..training.cache import train_or_load
from ..training.checkpoint import TrainResult
from ..training.config import MODEL_NAMES, TrainConfig, make_datasets
from ..training.device import resolve_device
from ..training.loop import train
from .convergence import convergence, hardware_label
from .timing import (
    SpeedMeasurement,
    SpeedVerdict,
    ThreadScaling,
    measure_config,
    measure_threads,
    speed_verdict,
    thread_verdict,
)

__all__ = [
    "Comparison",
    "summarise",
    "compare",
    "seconds_per_step",
    "format_table",
    "format_speed",
    "format_threads",
    "epoch_tokens",
]

#: Columns of :func:`format_table` when the rows carry an interleaved measurement.
COLUMNS = [
    ("model", "model", "{}"),
    ("n_parameters", "params", "{:,}"),
    ("tokens_per_second", "tokens/s (median)", "{:,.0f}"),
    ("tokens_per_second_range", "windows min-max", "{0[0]:,.0f}-{0[1]:,.0f}"),
    ("sec_per_epoch", "s/epoch", "{:.2f}"),
    ("final_train_loss", "train loss", "{:.4f}"),
    ("final_valid_loss", "valid loss", "{:.4f}"),
    ("exact_match", "exact match", "{:.1%}"),
    ("token_accuracy", "token acc.", "{:.1%}"),
]
#: Columns of :func:`format_table` without one: the training run's own clock.
RUN_COLUMNS = [
    *COLUMNS[:2],
    ("run_sec_per_epoch", "s/epoch (this run)", "{:.2f}"),
    ("run_tokens_per_second", "tokens/s (this run)", "{:,.0f}"),
    *COLUMNS[5:],
]


def epoch_tokens(cfg: TrainConfig) -> int:
    """Target tokens (``<eos>`` included, padding excluded) in one epoch of ``cfg``'s
    training set."""
    return sum(len(y) + 1 for _, y in make_datasets(cfg)[0].examples)


def _timed_on(machine) -> str:
    """The hardware label of a measurement: its thread count on a CPU, else the device."""
    return hardware_label(machine.threads) if machine.device == "cpu" else machine.device


def summarise(
    result: TrainResult,
    test_set=None,
    beam_size: int = 1,
    measurement: SpeedMeasurement | None = None,
) -> dict:
    """One row of the speed table for a trained model, scored on ``test_set`` (default the test set
    of ``result.config``) with beam size ``beam_size`` (1: greedy decoding): a dict of ``model``,
    ``device``, ``n_parameters``, ``epochs``, ``final_train_loss``, ``final_valid_loss``,
    ``exact_match``, ``token_accuracy``, and the training run's own clock, ``run_sec_per_epoch``
    (median over epochs), ``run_total_seconds`` and ``run_tokens_per_second`` (median). With
    ``measurement`` (an interleaved measurement that includes the model): ``tokens_per_second``
    (median over its windows), ``tokens_per_second_range`` (min, max), ``sec_per_epoch`` (the
    epoch's target tokens divided by that median) and ``timed_on`` (its hardware label)."""
    h = result.history
    test_set = make_datasets(result.config)[2] if test_set is None else test_set
    scores = evaluate(result.model, test_set, beam_size=beam_size)
    row = {
        "model": result.config.model,
        "device": h.device,
        "n_parameters": h.n_parameters,
        "epochs": len(h.epochs),
        "run_sec_per_epoch": statistics.median(h.column("seconds")),
        "run_total_seconds": sum(h.column("seconds")),
        "run_tokens_per_second": statistics.median(h.column("tokens_per_second")),
        "final_train_loss": h.epochs[-1]["train_loss"],
        "final_valid_loss": h.epochs[-1]["valid_loss"],
        "exact_match": scores["exact_match"],
        "token_accuracy": scores["token_accuracy"],
    }
    if measurement is not None:
        t = measurement.throughput[result.config.model]
        row["tokens_per_second"] = t.median
        row["tokens_per_second_range"] = (t.min, t.max)
        row["sec_per_epoch"] = epoch_tokens(result.config) / t.median
        row["timed_on"] = _timed_on(measurement.machine)
    return row


def _verdict_dict(v: SpeedVerdict, by_threads: bool = True) -> dict:
    d = {"ok": v.ok, "resolved": v.resolved, "text": v.text, "faster": v.faster}
    if by_threads:
        d["by_threads"] = {str(t): _verdict_dict(x, False) for t, x in v.by_threads.items()}
    return d


@dataclass
class Comparison:
    """What :func:`compare` returns.

    ``rows``: :func:`summarise` of every model; ``results``: the trained runs by name;
    ``speed``: the interleaved measurement at this process's thread count (``None`` when
    ``measure=False``); ``verdict``: :func:`~convs2s_edu.lab.timing.thread_verdict` (CPU) or
    :func:`~convs2s_edu.lab.timing.speed_verdict` (GPU); ``threads``: the
    :class:`~convs2s_edu.lab.timing.ThreadScaling` (CPU only); ``convergence``: the runs'
    :func:`~convs2s_edu.lab.convergence.convergence` (``None`` without learning curves).
    """

    rows: list
    results: dict = field(repr=False, default_factory=dict)
    speed: SpeedMeasurement | None = None
    verdict: SpeedVerdict | None = None
    threads: ThreadScaling | None = None
    convergence: list | None = None

    def to_dict(self) -> dict:
        """Rows, measurements, verdict and convergence as plain JSON-ready data."""
        return {
            "config": next(iter(self.results.values())).config.to_dict() if self.results else None,
            "rows": self.rows,
            "speed": None if self.speed is None else self.speed.to_dict(),
            "threads": None if self.threads is None else self.threads.to_dict(),
            "verdict": None if self.verdict is None else _verdict_dict(self.verdict),
            "convergence": self.convergence,
        }


def compare(
    cfg: TrainConfig | None = None,
    use_cache: bool = True,
    progress: bool | None = None,
    models=MODEL_NAMES[:2],
    measure: bool = True,
    steps_per_window: int = 4,
    n_rounds: int = 6,
    warmup_steps: int = 2,
    max_spread: float = 1.5,
    threads=None,
) -> Comparison:
    """Train every model in ``models`` (default: ConvS2S and the GRU) with ``cfg`` (only
    ``model`` changes), score each, time them interleaved and read their convergence speed.

    With ``use_cache`` the runs come from (and go to) :func:`~convs2s_edu.train_or_load`'s
    cache. The speed figures, measured afresh on every call, come from
    :func:`~convs2s_edu.lab.timing.measure_threads` at the thread counts ``threads`` (default
    all) on a CPU, and from :func:`~convs2s_edu.lab.timing.measure_config` on a GPU
    (``steps_per_window``, ``n_rounds``, ``warmup_steps``); ``max_spread`` goes to the verdict.
    The rows' speed columns are at this process's thread count if measured, else at the first.
    """
    cfg = cfg if cfg is not None else TrainConfig()
    check_int("n_rounds", n_rounds, 2)  # before any training
    check_int("steps_per_window", steps_per_window, 1)
    check_int("warmup_steps", warmup_steps, 0)
    on_cpu = resolve_device(cfg.device).type == "cpu"
    if threads is not None and not on_cpu:
        raise ValueError("threads are a CPU setting: leave them out with a GPU device")
    if threads is not None:  # checked before anything trains
        threads = [check_int("thread count", t, 1, usable_cores()) for t in threads]
    test_set = make_datasets(cfg)[2]
    fit = lambda c: train_or_load(c, progress) if use_cache else train(c, progress=progress)
    results = {name: fit(cfg.replace(model=name)) for name in models}
    m = verdict = scaling = None
    per_step, unsteady = {}, []
    if measure and len(models) >= 2:
        budget = {"steps_per_window": steps_per_window, "n_rounds": n_rounds}
        if on_cpu:
            scaling = measure_threads(cfg, models, threads, warmup_steps=warmup_steps, **budget)
            now = torch.get_num_threads()
            m = scaling.at(now if now in scaling.thread_counts else scaling.thread_counts[0])
            verdict = thread_verdict(scaling, max_spread=max_spread)
            unsteady = [hardware_label(t) for t, v in verdict.by_threads.items() if not v.ok]
        else:
            m = measure_config(cfg, models, warmup_steps=warmup_steps, **budget)
            verdict = speed_verdict(m, max_spread=max_spread)
            unsteady = [] if verdict.ok else [_timed_on(m.machine)]
        per_step = seconds_per_step(scaling or m)
    rows = [summarise(results[name], test_set, measurement=m) for name in models]
    curves = all(r.history.evals for r in results.values())
    conv = convergence(results, per_step, unsteady=unsteady) if curves else None
    return Comparison(rows, results, m, verdict, scaling, conv)


def seconds_per_step(measured: SpeedMeasurement | ThreadScaling) -> dict:
    """Per model, the median seconds per training step of an interleaved measurement, by the
    hardware it ran on (:func:`~convs2s_edu.lab.convergence.hardware_label`): what
    :func:`~convs2s_edu.lab.convergence.convergence` turns steps into seconds with."""
    if isinstance(measured, ThreadScaling):
        at = {hardware_label(t): measured.at(t) for t in measured.thread_counts}
    else:
        at = {_timed_on(measured.machine): measured}
    return {n: {w: m.seconds_per_step(n).median for w, m in at.items()} for n in measured.models}


def format_table(rows: list[dict]) -> str:
    """The rows as an aligned text table: their interleaved speed figures when every row
    has them (``tokens_per_second``), else the training runs' own clocks, "(this run)"."""
    columns = COLUMNS if all("tokens_per_second" in r for r in rows) else RUN_COLUMNS
    header = [h for _, h, _ in columns]
    body = [[fmt.format(row[key]) for key, _, fmt in columns] for row in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, body)])


def format_speed(
    m: SpeedMeasurement,
    verdict: SpeedVerdict | None = None,
    labels: dict | None = None,
    width: int = 99,
) -> str:
    """The interleaved measurement in a few lines: method, per-model throughput with its
    range, every model's throughput ratio to the first with its range, the verdict, the
    machine; long lines wrapped at ``width``."""
    lab = lambda n: (labels or {}).get(n, n)
    mach, t, r, w = m.machine, m.throughput, m.ratios, max(len(lab(n)) for n in m.models)
    load = lambda x: "unknown" if x is None else f"{x:.2f}"
    head = (
        f"speed, measured interleaved: {m.n_rounds} windows of {m.steps_per_window} "
        f"training steps per model, in the order {', '.join(map(lab, m.models))}, then "
        f"back, on the same batches, after {m.warmup_steps} warm-up steps"
    )
    indented = [
        f"  {lab(n):{w}s} {t[n].median:>8,.0f} tokens/s  (windows {t[n].min:,.0f}-"
        f"{t[n].max:,.0f}, spread {t[n].spread:.2f}x)"
        for n in m.models
    ] + [
        f"  throughput ratio {lab(n)} / {lab(m.models[0])}: {r[n].median:.2f} (per round "
        f"{r[n].min:.2f}-{r[n].max:.2f}; above 1: {lab(n)} faster)"
        for n in m.models[1:]
    ]
    machine = (
        f"machine: {mach.cpu}; {mach.cores} cores usable, {mach.threads} PyTorch thread(s), "
        f"OMP_WAIT_POLICY={mach.omp_wait_policy or 'unset'}; device {mach.device}; torch "
        f"{mach.torch_version}; load average {load(mach.load_before)} before, "
        f"{load(mach.load_after)} after"
    )
    fill = lambda text, indent="    ": textwrap.fill(text, width, subsequent_indent=indent)
    verdict_line = [] if verdict is None else [fill(verdict.text, "")]
    return "\n".join([fill(head, ""), *map(fill, indented), *verdict_line, fill(machine)])


def format_threads(
    scaling: ThreadScaling, labels: dict | None = None, verdict: SpeedVerdict | None = None
) -> str:
    """Throughput at every thread count: one line per count with each model's median and
    window range and the ratio of every model to the first (median and range over rounds),
    then the verdict."""
    lab = lambda n: (labels or {}).get(n, n)
    ref = scaling.models[0]
    out = [
        f"training throughput (target tokens/s, padding excluded) by PyTorch thread count, "
        f"interleaved ({scaling.measurement.n_rounds} rounds):"
    ]
    for t in scaling.thread_counts:
        m = scaling.at(t)
        cells = [
            f"{lab(n)} {s.median:,.0f} ({s.min:,.0f}-{s.max:,.0f})"
            for n, s in ((n, m.throughput[n]) for n in scaling.models)
        ]
        ratios = [
            f"{lab(n)}/{lab(ref)} {r.median:.2f} ({r.min:.2f}-{r.max:.2f})"
            for n, r in ((n, m.ratios[n]) for n in scaling.models[1:])
        ]
        out.append(f"  {hardware_label(t):>10s}: {'; '.join(cells)}; ratio {', '.join(ratios)}")
    if verdict is not None:
        out.append(textwrap.fill(verdict.text, 99))
    return "\n".join(out)
