r"""Timing the models: interleaved windows, their spread, the machine, and what they
allow.

Timing one model's training run, then the other's, measures the machine as much as the
models: a program that starts in between, a CPU that heats up, or OpenMP threads that
compete with another busy process can change one run's speed several times over and
leave the other's alone. This module times the models in one process, in alternating
**windows** of a fixed number of steps on the *same* batches, so that whatever slows the
machine slows both alike, and reports the windows' spread next to their median.

The method
----------
1. Every model takes ``warmup_steps`` untimed steps (memory, library initialisation,
   compilation; their seconds are kept).
2. Then ``n_rounds`` rounds: in each, every model runs one window, in the order A B in
   even rounds and B A in odd ones, so that a slow drift of the machine favours neither.
3. A window's throughput is its target tokens (padding excluded, ``<eos>`` included), or
   sentences when decoding, over its wall-clock seconds
   (:func:`torch.utils.benchmark.timer`, which first waits for an accelerator's queued
   work). Per model: median, range and quartiles over windows; per round, every model's
   throughput over the first model's, so that the two windows of a ratio ran seconds
   apart.
4. With every measurement, the machine and its load (:class:`MachineInfo`), among them the
   runnable threads of *other* processes at every window. :func:`speed_verdict` refuses
   to compare on a busy or unsteady machine and says "not resolved" when the models'
   window ranges overlap; :func:`speed_table` lays the numbers out.

:mod:`torch.utils.benchmark` sets the thread count of each window
(:func:`~torch.utils.benchmark.set_torch_threads`), holds a model's windows as a
:class:`~torch.utils.benchmark.Measurement` (:meth:`SpeedMeasurement.measurement`, for its
:class:`~torch.utils.benchmark.Compare`) and times work without state (decoding, a matrix
product) with a :class:`~torch.utils.benchmark.Timer`. The windows are ours: a Timer
calls its statement as often as it decides, but a training step changes the weights and
consumes a batch, so a window must run exactly the steps asked for, and the models must
alternate.

The same data, both models (:func:`compare`) adds their scores, and their
**convergence** (:func:`convergence`): the steps, examples and seconds (steps times the
windows' median seconds per step) until held-out exact match first reached each of
:data:`LEVELS`.
"""

from __future__ import annotations

import contextlib
import copy
import html
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
from torch import nn
from torch.utils.benchmark import Measurement, TaskSpec, Timer, set_torch_threads, timer
from torch.utils.flop_counter import FlopCounterMode

from .._checks import check_int
from .._machine import cpu_model, usable_cores
from ..data import length_batches
from ..decode import decode_all, greedy_decode
from ..fast.paths import ExecutionPath, apply_path
from ..loss import sequence_loss
from ..metrics import evaluate
from ..registry import model_entry
from ..seq2seq import EncoderDecoder
from ..training.cache import train_or_load
from ..training.calibrate import resolve_path
from ..training.checkpoint import TrainResult
from ..training.config import MODEL_NAMES, TrainConfig, build_model, make_datasets
from ..training.device import device_label, resolve_device
from ..training.loop import train
from ..training.step import make_train_step

__all__ = [
    "MachineInfo",
    "machine_info",
    "WindowStats",
    "SpeedMeasurement",
    "time_interleaved",
    "window_runner",
    "training_batches",
    "measure_training",
    "measure_config",
    "ThreadScaling",
    "measure_threads",
    "SpeedVerdict",
    "speed_verdict",
    "speed_table",
    "seconds_per_step",
    "training_flops_per_token",
    "measure_generation",
    "time_incremental_vs_full",
    "LEVELS",
    "hardware_label",
    "convergence",
    "format_convergence",
    "epoch_tokens",
    "summarise",
    "format_table",
    "Comparison",
    "compare",
]

# --------------------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------------------


def _loadavg() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def _runnable() -> int | None:
    """Threads of *other* processes runnable now: ``/proc/loadavg``'s runnable threads
    less this process's own in state ``R`` (a spinning OpenMP worker of ours is not
    load)."""
    try:
        with open("/proc/loadavg") as f:
            total = int(f.read().split()[3].split("/")[0])
        tasks = os.listdir("/proc/self/task")
    except (OSError, IndexError, ValueError):
        return None
    own = 0
    for task in tasks:  # a thread that ends meanwhile, or an odd line, is not counted
        with (
            contextlib.suppress(OSError, IndexError),
            open(f"/proc/self/task/{task}/stat") as f,
        ):
            own += f.read().rsplit(")", 1)[1].split()[0] == "R"
    return max(total - own, 0)


@dataclass
class MachineInfo:
    """Where and under what load a measurement ran.

    Attributes
    ----------
    cpu : str
        The CPU model (``/proc/cpuinfo``, else ``platform``).
    cores : int
        The cores this process may use (its CPU affinity where the OS reports it).
    threads : int
        PyTorch's intra-op threads.
    omp_wait_policy, omp_num_threads : str
        Those environment variables (``""`` when unset).
    torch_version : str
    device : str
        ``"cpu"`` or ``"cuda (<GPU name>)"``.
    load_before, load_after : float or None
        The one-minute load average before and after the windows.
    runnable : list of int
        Runnable threads of other processes at the start of every window.
    """

    cpu: str = ""
    cores: int = 1
    threads: int = 1
    omp_wait_policy: str = ""
    omp_num_threads: str = ""
    torch_version: str = ""
    device: str = "cpu"
    load_before: float | None = None
    load_after: float | None = None
    runnable: list = field(default_factory=list)

    @property
    def load(self) -> float | None:
        """The higher of the two load averages (``None`` when neither is known)."""
        known = [x for x in (self.load_before, self.load_after) if x is not None]
        return max(known) if known else None

    def describe(self) -> str:
        """One line: CPU, cores, threads, device, torch, load average."""
        load = "unknown" if self.load is None else f"{self.load:.2f}"
        return (
            f"{self.cpu}, {self.cores} cores usable, {self.threads} PyTorch thread(s), "
            f"OMP_WAIT_POLICY={self.omp_wait_policy or 'unset'}, device {self.device}, "
            f"torch {self.torch_version}, load average {load}"
        )


def machine_info(device: torch.device | str = "cpu") -> MachineInfo:
    """A :class:`MachineInfo` of this process now, its loads not yet filled in."""
    return MachineInfo(
        cpu=cpu_model(),
        cores=usable_cores(),
        threads=torch.get_num_threads(),
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", ""),
        omp_num_threads=os.environ.get("OMP_NUM_THREADS", ""),
        torch_version=torch.__version__,
        device=device_label(device),
    )


def hardware_label(threads: int | None = None, device: str = "cpu") -> str:
    """How tables name where a step was timed: ``"1 thread"``, ``"2 threads"``, or the
    device.

    >>> hardware_label(1), hardware_label(2), hardware_label(device="cuda (NVIDIA H200)")
    ('1 thread', '2 threads', 'cuda (NVIDIA H200)')
    """
    if threads is None:
        return device
    return f"{threads} thread{'s' if threads != 1 else ''}"


# --------------------------------------------------------------------------------------
# Interleaved windows
# --------------------------------------------------------------------------------------


@dataclass
class WindowStats:
    """Median, range and quartiles of values over windows (or over rounds, for ratios).

    Notes
    -----
    The quartiles ``q1``, ``q3`` interpolate between the sorted values
    (:func:`numpy.percentile`), as :class:`torch.utils.benchmark.Measurement` does;
    ``spread`` is ``max / min`` (1.0: all equal).
    """

    median: float
    min: float
    max: float
    q1: float
    q3: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> WindowStats:
        """The statistics of ``values`` (at least one)."""
        q1, median, q3 = (float(q) for q in np.percentile(values, [25, 50, 75]))
        return cls(median, float(min(values)), float(max(values)), q1, q3, len(values))

    @property
    def spread(self) -> float:
        return self.max / self.min if self.min > 0 else float("inf")

    def overlaps(self, other: WindowStats) -> bool:
        """True when the min-max ranges of the two share a value."""
        return self.min <= other.max and other.min <= self.max


@dataclass
class SpeedMeasurement:
    """Interleaved windows: the raw timings, and their statistics.

    Attributes
    ----------
    window_seconds, window_tokens : dict
        Per model, in the order of the first round (the first model is the reference of
        ``ratios``), every window's wall-clock seconds and tokens (or sentences).
    order : list of str
        The model of every timed window, in the order they ran.
    machine : MachineInfo
    steps_per_window, warmup_steps : int
        Recorded only.
    warmup_seconds : dict
        Per model, the seconds of its warm-up (a compiled path's compile time shows
        here).
    unit : str
        What a window counts: ``"target tokens"`` or ``"sentences"``.
    throughput, ratios : dict
        Computed: per model, the :class:`WindowStats` of its throughput over windows,
        and of its throughput over the first model's, one value per round.
    """

    window_seconds: dict
    window_tokens: dict
    order: list
    machine: MachineInfo
    steps_per_window: int = 1
    warmup_steps: int = 0
    warmup_seconds: dict = field(default_factory=dict)
    unit: str = "target tokens"
    throughput: dict = field(init=False)
    ratios: dict = field(init=False)

    def __post_init__(self):
        ref = self.models[0]
        self.throughput = {
            n: WindowStats.of(self.window_throughputs(n)) for n in self.models
        }
        self.ratios = {n: self.round_ratios(n, ref) for n in self.models}

    @property
    def models(self) -> list[str]:
        return list(self.window_seconds)

    @property
    def n_rounds(self) -> int:
        return len(self.window_seconds[self.models[0]])

    def window_throughputs(self, model: str) -> list[float]:
        """Tokens (or sentences) per second of every window of ``model``, in order."""
        return [
            t / s for t, s in zip(self.window_tokens[model], self.window_seconds[model])
        ]

    def round_ratios(self, model: str, reference: str) -> WindowStats:
        """``model``'s throughput over ``reference``'s, taken within each round."""
        pairs = zip(self.window_throughputs(model), self.window_throughputs(reference))
        return WindowStats.of([a / b for a, b in pairs])

    def measurement(self, model: str) -> Measurement:
        """The windows of ``model`` as a :class:`torch.utils.benchmark.Measurement` of
        one step (``steps_per_window`` runs a window; the machine's threads; its device
        as ``env``), e.g. for :class:`torch.utils.benchmark.Compare`."""
        spec = TaskSpec(
            model,
            "",
            label=f"interleaved windows, {self.unit}",
            sub_label=model,
            description="time per step",
            env=self.machine.device,
            num_threads=self.machine.threads,
        )
        return Measurement(
            self.steps_per_window, list(self.window_seconds[model]), spec
        )

    def seconds_per_step(self, model: str) -> WindowStats:
        """The seconds per step of ``model`` over windows."""
        return WindowStats.of(self.measurement(model).times)

    def to_dict(self) -> dict:
        """Plain numbers and strings, ready for :func:`json.dump`."""
        d = asdict(self)
        d |= {"models": self.models, "n_rounds": self.n_rounds}
        d["machine"]["load"] = self.machine.load
        return d


def time_interleaved(
    windows: Mapping[str, Callable[[], int]],
    n_rounds: int = 6,
    device: torch.device | str = "cpu",
    clock: Callable[[], float] = timer,
    warmup: Mapping[str, Callable[[], object]] | None = None,
    steps_per_window: int = 1,
    warmup_steps: int = 0,
) -> SpeedMeasurement:
    """Time ``windows`` interleaved: A B, then B A, for ``n_rounds`` rounds.

    Parameters
    ----------
    windows : mapping of str to callable
        Per model, a function that runs one window of work and returns the tokens (or
        sentences) it processed; each is called exactly once a round, and nothing else
        is on the clock.
    n_rounds : int
        At least 2.
    device : torch.device or str
        Where the work runs (recorded only).
    clock : callable
        Returns seconds (tests pass a fake).
    warmup : mapping of str to callable, optional
        Per model, work run once, before the first window, on its own clock.
    steps_per_window, warmup_steps : int
        Recorded only.

    Returns
    -------
    SpeedMeasurement
    """
    check_int("n_rounds", n_rounds, 2)  # the entry point of the tools and pages
    names = list(windows)
    info = machine_info(torch.device(device))
    warmup_seconds = {}
    for name in [n for n in names if n in (warmup or {})]:
        t0 = clock()
        warmup[name]()
        warmup_seconds[name] = clock() - t0
    info.load_before = _loadavg()
    seconds, tokens, order = {n: [] for n in names}, {n: [] for n in names}, []
    for r in range(n_rounds):
        for name in names if r % 2 == 0 else names[::-1]:  # A B, B A, A B, ...
            if (runnable := _runnable()) is not None:
                info.runnable.append(runnable)
            t0 = clock()
            n_tokens = windows[name]()
            seconds[name].append(clock() - t0)
            tokens[name].append(int(n_tokens))
            order.append(name)
    info.load_after = _loadavg()
    return SpeedMeasurement(
        seconds, tokens, order, info, steps_per_window, warmup_steps, warmup_seconds
    )


def window_runner(step: Callable, batches: Sequence, n_steps: int) -> Callable[[], int]:
    """One window (or warm-up): ``n_steps`` calls of ``step`` on ``batches[0]``,
    ``batches[1]``, ... (cycling); it returns the target tokens, counted here, off the
    clock."""
    schedule = [i % len(batches) for i in range(n_steps)]
    tokens = sum(batches[i].n_target_tokens for i in schedule)

    def run() -> int:
        for i in schedule:
            step(batches[i])
        return tokens

    return run


def _time_steps(
    steps, batches, device, steps_per_window, n_rounds, warmup_steps, threads=None
) -> SpeedMeasurement:
    """Training ``steps`` on ``batches``, interleaved; with ``threads``, every step at
    every thread count (:func:`torch.utils.benchmark.set_torch_threads` around each
    window and warm-up), keyed ``"<name>@<threads>"``."""
    windows = {n: window_runner(s, batches, steps_per_window) for n, s in steps.items()}
    warmups = {n: window_runner(s, batches, warmup_steps) for n, s in steps.items()}
    if threads is not None:
        at = lambda fn, t: set_torch_threads(t)(fn)  # each call at t threads, then back
        windows = {f"{n}@{t}": at(w, t) for n, w in windows.items() for t in threads}
        warmups = {f"{n}@{t}": at(w, t) for n, w in warmups.items() for t in threads}
    counts = dict(steps_per_window=steps_per_window, warmup_steps=warmup_steps)
    return time_interleaved(windows, n_rounds, device, warmup=warmups, **counts)


def training_batches(cfg: TrainConfig, n_batches: int) -> list:
    """``n_batches`` batches of ``cfg``'s first epoch, as :func:`~convs2s_edu.train`
    draws them.

    Notes
    -----
    The batches follow ``cfg.batching``, shuffled with ``cfg.seed``, taken at evenly
    spaced ranks of padded width, so that a few batches cost, on average, what the
    epoch's cost (with equal-length batches the first few could all be short or all
    long); an epoch of fewer batches is cycled.
    """
    train_ds = make_datasets(cfg)[0]
    g = torch.Generator().manual_seed(cfg.seed)
    sampler = length_batches(train_ds.lengths, cfg.batch_size, cfg.batching, g)
    if sampler is None:  # random batches
        order = torch.randperm(len(train_ds), generator=g)
        sampler = [b.tolist() for b in order.split(cfg.batch_size)]
    epoch = list(sampler)
    if n_batches >= len(epoch):
        chosen = [epoch[i % len(epoch)] for i in range(n_batches)]
    else:
        width = lambda idx: max(len(train_ds[j][0]) for j in idx)
        ranked = sorted(range(len(epoch)), key=lambda k: (width(epoch[k]), k))
        ranks = [int((i + 0.5) * len(epoch) / n_batches) for i in range(n_batches)]
        chosen = [epoch[k] for k in sorted(ranked[r] for r in ranks)]
    return [train_ds.collate([train_ds[j] for j in idx]) for idx in chosen]


def _device(models: Mapping[str, nn.Module]) -> torch.device:
    """The device of the first model (all are on one device)."""
    return next(next(iter(models.values())).parameters()).device


def measure_training(
    models: Mapping[str, nn.Module],
    batches: Sequence,
    steps_per_window: int = 4,
    n_rounds: int = 6,
    warmup_steps: int = 2,
    lr: float = 1e-3,
    clip_norm: float | None = 1.0,
) -> SpeedMeasurement:
    """Training throughput of ``models``, interleaved, on the same ``batches``.

    Parameters
    ----------
    models : mapping of str to nn.Module
        On one device. The measurement trains them: pass fresh copies (how long a step
        takes does not depend on the weights).
    batches : sequence of Batch
        At least one; moved to the models' device once, before timing.
    steps_per_window, n_rounds, warmup_steps : int
        Steps per window (>= 1), rounds (>= 2) and untimed steps first (>= 0).
    lr, clip_norm : float
        Adam's learning rate and gradient clipping (:func:`~convs2s_edu.train`).

    Returns
    -------
    SpeedMeasurement
    """
    device = _device(models)
    batches = [b.to(device) for b in batches]
    steps = {
        n: make_train_step(
            m.train(), torch.optim.Adam(m.parameters(), lr=lr), clip_norm
        )
        for n, m in models.items()
    }
    return _time_steps(steps, batches, device, steps_per_window, n_rounds, warmup_steps)


def _train_step(cfg: TrainConfig, device: torch.device) -> Callable:
    """The step :func:`~convs2s_edu.train` takes: a fresh model of ``cfg`` on the path
    this machine chose, its optimiser, its precision."""
    torch.manual_seed(cfg.seed)
    path = ExecutionPath.of(resolve_path(cfg, say=False))
    model = apply_path(build_model(cfg).to(device), path).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.adam_betas)
    return make_train_step(model, optimizer, cfg.clip_norm, cfg.precision)


def measure_config(
    cfg: TrainConfig,
    models: Sequence[str] = ("convs2s", "gru"),
    steps_per_window: int = 4,
    n_rounds: int = 6,
    warmup_steps: int = 2,
    n_batches: int | None = None,
) -> SpeedMeasurement:
    """Training throughput of fresh models of ``cfg`` (only ``model`` changes),
    interleaved.

    Parameters
    ----------
    cfg : TrainConfig
        Its device, optimiser settings and precision; the path train() runs here.
    models : sequence of str
    steps_per_window, n_rounds, warmup_steps : int
        As in :func:`measure_training`.
    n_batches : int, optional
        Batches of :func:`training_batches` (default ``steps_per_window``).

    Returns
    -------
    SpeedMeasurement
    """
    dev = resolve_device(cfg.device)
    batches = [b.to(dev) for b in training_batches(cfg, n_batches or steps_per_window)]
    steps = {n: _train_step(cfg.replace(model=n), dev) for n in models}
    return _time_steps(steps, batches, dev, steps_per_window, n_rounds, warmup_steps)


def _thread_counts(counts: Sequence[int] | None) -> list[int]:
    """Distinct PyTorch thread counts in ``1..usable cores`` (default all)."""
    cores = usable_cores()
    counts = list(range(1, cores + 1)) if counts is None else list(counts)
    if not counts or len(set(counts)) != len(counts):
        raise ValueError(
            f"thread_counts must be distinct and at least one, got {counts}"
        )
    return [check_int("thread count", t, 1, cores) for t in counts]


@dataclass
class ThreadScaling:
    """The same models at several thread counts, all interleaved in one measurement.

    Attributes
    ----------
    models : list of str
    thread_counts : list of int
    measurement : SpeedMeasurement
        Every window, keyed ``"<model>@<threads>"`` (e.g. ``"gru@2"``).
    """

    models: list
    thread_counts: list
    measurement: SpeedMeasurement

    def at(self, threads: int) -> SpeedMeasurement:
        """The windows at ``threads`` threads as a measurement of their own, keyed by
        model, ``machine.threads`` set to ``threads``."""
        if threads not in self.thread_counts:
            raise ValueError(
                f"no windows at {threads} threads; measured: {self.thread_counts}"
            )
        raw, at = self.measurement, f"@{threads}"
        pick = lambda d: {m: d[m + at] for m in self.models if m + at in d}
        return SpeedMeasurement(
            pick(raw.window_seconds),
            pick(raw.window_tokens),
            [k.removesuffix(at) for k in raw.order if k.endswith(at)],
            replace(raw.machine, threads=threads, runnable=list(raw.machine.runnable)),
            raw.steps_per_window,
            raw.warmup_steps,
            pick(raw.warmup_seconds),
        )

    def to_dict(self) -> dict:
        """The models, the thread counts and every window, ready for :func:`json.dump`."""
        return {**asdict(self), "measurement": self.measurement.to_dict()}


def measure_threads(
    cfg: TrainConfig,
    models: Sequence[str] = ("convs2s", "gru"),
    thread_counts: Sequence[int] | None = None,
    steps_per_window: int = 4,
    n_rounds: int = 6,
    warmup_steps: int = 2,
    n_batches: int | None = None,
    configs: Mapping[str, TrainConfig] | None = None,
) -> ThreadScaling:
    """:func:`measure_config` at every thread count, in one interleaved measurement.

    Parameters
    ----------
    cfg : TrainConfig
        A CPU configuration; its batches are timed.
    models : sequence of str
    thread_counts : sequence of int, optional
        Distinct PyTorch thread counts in ``1..usable cores`` (default all), set for
        each window and its warm-up by :func:`torch.utils.benchmark.set_torch_threads`.
    steps_per_window, n_rounds, warmup_steps, n_batches : int
        As in :func:`measure_config`.
    configs : mapping of str to TrainConfig, optional
        Each model's own configuration (e.g. a GRU of another width); then ``models``
        are its keys.

    Returns
    -------
    ThreadScaling

    Notes
    -----
    Every round runs one window of every model at every count; each count gets its own
    warm-up steps. ``OMP_WAIT_POLICY`` is left as it is.
    """
    counts = _thread_counts(thread_counts)
    dev = resolve_device(cfg.device)
    configs = configs or {n: cfg.replace(model=n) for n in models}
    batches = training_batches(cfg, n_batches or steps_per_window)
    steps = {n: _train_step(c, dev) for n, c in configs.items()}
    windows = (steps_per_window, n_rounds, warmup_steps)
    raw = _time_steps(steps, batches, dev, *windows, threads=counts)
    return ThreadScaling(list(configs), counts, raw)


def _by_hardware(
    measured: SpeedMeasurement | ThreadScaling,
) -> dict[str, SpeedMeasurement]:
    """A measurement per hardware label: per thread count, or the one device."""
    if isinstance(measured, ThreadScaling):
        return {hardware_label(t): measured.at(t) for t in measured.thread_counts}
    mach = measured.machine
    threads = mach.threads if mach.device == "cpu" else None
    return {hardware_label(threads, mach.device): measured}


def seconds_per_step(measured: SpeedMeasurement | ThreadScaling) -> dict:
    """Per model, the median seconds per step by :func:`hardware_label`: what
    :func:`convergence` turns steps into seconds with."""
    by = _by_hardware(measured)
    models = next(iter(by.values())).models
    return {n: {w: m.seconds_per_step(n).median for w, m in by.items()} for n in models}


# --------------------------------------------------------------------------------------
# What the windows allow one to say
# --------------------------------------------------------------------------------------


@dataclass
class SpeedVerdict:
    """What a measurement allows one to say.

    Attributes
    ----------
    ok : bool
        False when the machine was busy or unsteady: then nothing is compared.
    resolved : bool
        ``ok``, and the two models' window ranges do not overlap.
    text : str
        The short sentence to print; it starts with ``"WARNING"`` when not ``ok``.
    reasons : list of str
        Why it is not ``ok``.
    faster : str or None
        The faster model when ``resolved`` (``None`` over several thread counts).
    by_hardware : dict
        Over several thread counts: the verdict at each, by :func:`hardware_label`.
    """

    ok: bool
    resolved: bool
    text: str
    reasons: list = field(default_factory=list)
    faster: str | None = None
    by_hardware: dict = field(default_factory=dict)

    def _repr_html_(self) -> str:
        """A warning box when not ``ok`` (notebooks, gallery cells), else a note."""
        text = self.text.removeprefix("WARNING: ")  # the box says "Warning"
        body = html.escape(text[:1].upper() + text[1:])
        kind = "note" if self.ok else "warning"
        title = "" if self.ok else '<p class="admonition-title">Warning</p>'
        return f'<div class="admonition {kind}">{title}<p>{body}</p></div>'


def _busy(m: SpeedMeasurement, max_spread: float, max_load: float | None, lab) -> list:
    """Why the machine was too busy or unsteady to compare (empty: it was quiet)."""
    mach = m.machine
    reasons = [
        f"{lab(n)}'s windows varied {s.spread:.2f}x, more than the {max_spread:g}x allowed"
        for n, s in m.throughput.items()
        if s.spread > max_spread
    ]
    limit = float(mach.cores if max_load is None else max_load)
    # this process's own work of the last minute
    slack = 0.5 if max_load is None else 0.0
    if mach.load is not None and mach.load > limit + slack:
        reasons.append(
            f"load average {mach.load:.2f}, above {limit + slack:g} ({limit:g} cores)"
        )
    others = statistics.median(mach.runnable) if mach.runnable else 0
    free = max(limit - mach.threads, 0)  # the cores our PyTorch threads leave free
    if others > free:
        reasons.append(
            f"{others:g} threads of other processes runnable, {free:g} of {limit:g} "
            f"cores free"
        )
    return reasons


def speed_verdict(
    measured: SpeedMeasurement | ThreadScaling,
    max_spread: float = 1.5,
    labels: Mapping[str, str] | None = None,
    max_load: float | None = None,
) -> SpeedVerdict:
    """Say what ``measured`` shows about its first two models, and only that.

    Parameters
    ----------
    measured : SpeedMeasurement or ThreadScaling
        Over several thread counts, the verdict at each (``by_hardware``), ``ok`` and
        ``resolved`` when every one is.
    max_spread : float
        The most a model's window throughputs may vary (``max / min``, > 1).
    labels : mapping of str to str, optional
        Display names, e.g. ``{"gru": "GRU + attention"}``.
    max_load : float, optional
        The most load the machine may carry (default: the usable cores).

    Returns
    -------
    SpeedVerdict
        Its ``text`` is one short sentence computed from the checks: ``"WARNING: not
        compared, ..."`` with the failed checks when the machine was not quiet; else
        ``"not resolved: ..."`` when the two models' window ranges overlap; else
        ``"<faster> <x>x as fast as <slower> in <unit> per second"``, ``x`` the median
        of the per-round ratios. The numbers behind it (every model's windows, spread
        and per-round ratios) are :func:`speed_table`'s.

    Notes
    -----
    The machine counts as quiet when every model's windows vary by at most
    ``max_spread`` (max / min, not the interquartile range, which one slow window hardly
    moves); the median number of other processes' runnable threads at the windows is at
    most the cores left free by this measurement's PyTorch threads; and the one-minute
    load average is at most ``max_load``, by default the cores + 0.5, as that average
    also counts this process's own threads of about the last minute. The verdict never
    says *why* one model was faster.
    """
    lab = lambda n: (labels or {}).get(n, n)
    if isinstance(measured, ThreadScaling):
        by = {
            w: speed_verdict(m, max_spread, labels, max_load)
            for w, m in _by_hardware(measured).items()
        }
        ok = all(v.ok for v in by.values())
        resolved = all(v.resolved for v in by.values())
        each = [f"{w}: {v.text.removeprefix('WARNING: ')}" for w, v in by.items()]
        reasons = [f"{w}: {r}" for w, v in by.items() for r in v.reasons]
        text = "WARNING: " * (not ok) + "; ".join(each)
        return SpeedVerdict(ok, resolved, text, reasons, None, by)
    m = measured
    if reasons := _busy(m, max_spread, max_load, lab):
        why = "; ".join(reasons)
        text = f"WARNING: not compared, the machine was busy or unsteady: {why}"
        return SpeedVerdict(False, False, text, reasons)
    a, b = m.models[:2]
    if m.throughput[a].overlaps(m.throughput[b]):
        text = f"not resolved: the windows of {lab(a)} and {lab(b)} overlap"
        return SpeedVerdict(True, False, text)
    ratio = m.ratios[b].median  # b's throughput over a's, per round
    fast, slow, x = (b, a, ratio) if ratio >= 1 else (a, b, 1 / ratio)
    text = f"{lab(fast)} {x:.2f}x as fast as {lab(slow)} in {m.unit} per second"
    return SpeedVerdict(True, True, text, faster=fast)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Right-aligned text columns under a header and a rule."""
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, rows)])


def speed_table(
    measured: SpeedMeasurement | ThreadScaling,
    labels: Mapping[str, str] | None = None,
    verdict: SpeedVerdict | None = None,
) -> str:
    """A measurement as a text table, then its verdict.

    Parameters
    ----------
    measured : SpeedMeasurement or ThreadScaling
        One row per model and hardware (thread count, or the device).
    labels : mapping of str to str, optional
        Display names of the models.
    verdict : SpeedVerdict, optional
        Default: :func:`speed_verdict` of ``measured``.

    Returns
    -------
    str
        Columns: the median throughput, the windows' range and spread, and the ratio to
        the first model (median and range over rounds); then the verdict and the
        machine.
    """
    lab = lambda n: (labels or {}).get(n, n)
    by = _by_hardware(measured)
    first = next(iter(by.values()))
    per_s, ref = f"{first.unit.split()[-1]}/s", first.models[0]
    head = ["on", "model", per_s, "windows", "spread", f"x {lab(ref)}", "rounds"]
    rows = []
    for where, m in by.items():
        for n in m.models:
            s, r = m.throughput[n], m.ratios[n]
            rows.append(
                [
                    where if n == ref else "",
                    lab(n),
                    f"{s.median:,.0f}",
                    f"{s.min:,.0f}-{s.max:,.0f}",
                    f"{s.spread:.2f}x",
                    f"{r.median:.2f}",
                    f"{r.min:.2f}-{r.max:.2f}",
                ]
            )
    verdict = verdict or speed_verdict(measured, labels=labels)
    windows = f"{first.n_rounds} windows of {first.steps_per_window} step(s) per model"
    scaling = isinstance(measured, ThreadScaling)
    machine = measured.measurement.machine if scaling else measured.machine
    lines = [_table(head, rows), f"({windows}, interleaved)", verdict.text]
    return "\n".join(lines + [machine.describe()])


# --------------------------------------------------------------------------------------
# What a step costs: its arithmetic
# --------------------------------------------------------------------------------------


def training_flops_per_token(model: nn.Module, batch) -> float:
    """Floating-point operations of one training step, forward and backward, per target
    token (padding excluded).

    Parameters
    ----------
    model : nn.Module
    batch : Batch

    Returns
    -------
    float

    Notes
    -----
    Counted by :class:`torch.utils.flop_counter.FlopCounterMode`: matrix products and
    convolutions, not element-wise operations; a multiply-add is 2. A model on a GPU is
    counted through a copy on the CPU: there its GRU runs through cuDNN, whose fused
    operation the counter has no formula for.
    """
    if next(model.parameters()).device.type != "cpu":
        model = copy.deepcopy(model).cpu()
    was_training, batch = model.training, batch.to("cpu")
    with FlopCounterMode(display=False) as counter:
        sequence_loss(model.train()(batch.src, batch.tgt_in), batch.tgt_out).backward()
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return counter.get_total_flops() / batch.n_target_tokens


# --------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------


def measure_generation(
    models: Mapping[str, nn.Module],
    sources: Sequence[Sequence[int]],
    beam_sizes: Sequence[int] = (1, 5),
    batch_size: int = 128,
    n_rounds: int = 4,
) -> dict[int, SpeedMeasurement]:
    """Generation throughput of ``models`` on the same ``sources``, interleaved, per
    beam size.

    Parameters
    ----------
    models : mapping of str to nn.Module
        On one device.
    sources : sequence of token lists
        At least one.
    beam_sizes : sequence of int
        1 is greedy decoding.
    batch_size : int
        Sentences of equal length decoded together
        (:func:`~convs2s_edu.decode.decode_all`).
    n_rounds : int
        Windows per model and beam size, each decoding all the sources, after an untimed
        decoding of the first batch.

    Returns
    -------
    dict of int to SpeedMeasurement
        Per beam size; its unit is ``"sentences"``.

    Notes
    -----
    As Gehring et al. time generation (§5.3, Table 3), with each model's incremental
    decoder state (ConvS2S shifts its convolution windows, it does not recompute them).
    """
    sources = [list(x) for x in sources]
    device = _device(models)
    out = {}
    for k in beam_sizes:
        window = lambda m, k=k: lambda: len(decode_all(m, sources, k, batch_size))
        warm = lambda m, k=k: lambda: decode_all(m, sources[:batch_size], beam_size=k)
        windows = {n: window(m) for n, m in models.items()}
        warmup = {n: warm(m) for n, m in models.items()}
        measured = time_interleaved(windows, n_rounds, device, warmup=warmup)
        out[k] = replace(measured, unit="sentences")
    return out


def time_incremental_vs_full(
    model: EncoderDecoder,
    target_lengths: Sequence[int] = (20, 50, 100),
    batch_size: int = 32,
    repeats: int = 3,
    seed: int = 0,
) -> list[dict]:
    r"""Time greedy decoding with and without the incremental state.

    Parameters
    ----------
    model : EncoderDecoder
        ConvS2S, RNNSeq2Seq or a HybridSeq2Seq.
    target_lengths : sequence of int
        Decoding steps to time, each in ``1..model.max_positions``.
    batch_size : int
        Random sources of ``target_len`` tokens (drawn with ``seed``) decoded together,
        forced to exactly ``target_len`` steps, so that both methods do the same steps.
    repeats : int
        Decodings on the clock (:meth:`torch.utils.benchmark.Timer.timeit`), after two
        untimed ones.
    seed : int

    Returns
    -------
    list of dict
        Per target length: ``target_len``, ``batch_size``, ``seconds_full``,
        ``seconds_incremental`` and ``speedup`` (full over incremental).

    Notes
    -----
    For ConvS2S the full recompute costs :math:`\sum_{t=1}^{T} t = T(T+1)/2` decoder
    columns against :math:`T` with the cache.
    """
    if max(target_lengths) > model.max_positions:  # decoding would index past the table
        raise ValueError(
            f"target lengths {tuple(target_lengths)} exceed the model's max_positions="
            f"{model.max_positions}; build the model with a larger one"
        )
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(int(seed))
    run = "decode(model, src, max_len=T, incremental=inc, stop_at_eos=False)"
    records = []
    for T in target_lengths:
        src = torch.randint(1, model.vocab_size + 1, (batch_size, T), generator=gen)
        scope = {"decode": greedy_decode, "model": model, "src": src.to(device), "T": T}
        inc, full = (
            Timer(run, globals={**scope, "inc": i}, num_threads=torch.get_num_threads())
            .timeit(repeats)
            .median
            for i in (True, False)
        )
        record = dict(target_len=T, batch_size=batch_size, seconds_full=full)
        records.append(record | dict(seconds_incremental=inc, speedup=full / inc))
    return records


# --------------------------------------------------------------------------------------
# Both models on the same data: scores, speed, convergence
# --------------------------------------------------------------------------------------

#: Held-out exact-match levels whose first crossing :func:`convergence` reports.
LEVELS = (0.5, 0.9, 0.95)


def convergence(
    results: Mapping[str, TrainResult],
    seconds_per_step: Mapping[str, Mapping[str, float]] | None = None,
    levels: Sequence[float] = LEVELS,
    metric: str = "exact_match",
    unsteady: Sequence[str] = (),
) -> list[dict]:
    """Steps, examples and seconds until each level was first reached, per model.

    Parameters
    ----------
    results : mapping of str to TrainResult
        Runs whose history holds a learning curve (``TrainConfig.eval_every`` set).
    seconds_per_step : mapping, optional
        Per model, the median seconds per step by :func:`hardware_label`
        (:func:`seconds_per_step`); without it no seconds are given.
    levels : sequence of float
        Levels of ``metric`` in ``(0, 1]``.
    metric : str
        A key of the curve's records: ``"exact_match"`` or ``"token_accuracy"``.
    unsteady : sequence of str
        Hardware labels whose windows were not steady: their seconds are flagged.

    Returns
    -------
    list of dict
        Per model: ``model``, ``eval_every``, ``steps`` (the run's), ``final`` (the last
        evaluation's ``metric``), ``timed_on``, ``unsteady`` and ``levels``: per level
        (as ``str``) ``None`` when never reached, else ``step``, ``examples`` (steps x
        batch size) and ``seconds`` by hardware label.

    Notes
    -----
    The step is that of the first evaluation at or above the level: an upper bound, the
    level was reached at most ``eval_every`` steps earlier. The seconds come from the
    interleaved windows, so whatever else the machine did during training stays out.
    """
    rows = []
    for name, result in results.items():
        h = result.history
        if not h.evals:
            raise ValueError(
                f"{name}: the run has no learning curve; train it with TrainConfig.eval_every"
            )
        per_step = dict((seconds_per_step or {}).get(name, {}))
        row = {
            "model": name,
            "eval_every": result.config.eval_every,
            "steps": h.steps,
            "final": h.evals[-1][metric],
            "timed_on": list(per_step),
            "unsteady": [t for t in per_step if t in unsteady],
            "levels": {},
        }
        for level in levels:
            hit = h.reached(level, metric)  # None: never reached
            row["levels"][str(level)] = hit and {
                "step": hit["step"],
                "examples": hit["examples"],
                "seconds": {k: hit["step"] * s for k, s in per_step.items()},
            }
        rows.append(row)
    return rows


def format_convergence(
    rows: Sequence[dict], labels: Mapping[str, str] | None = None
) -> str:
    """The rows of :func:`convergence` as a text table: one line per model and level."""
    labels = dict(labels or {})
    timed = list(dict.fromkeys(t for r in rows for t in r["timed_on"]))
    unsteady = {t for r in rows for t in r["unsteady"]}
    head = ["model", "held-out exact match", "steps", "examples"]
    head += [f"seconds, {t}" + "*" * (t in unsteady) for t in timed]
    body = []
    for r in rows:
        for level, v in r["levels"].items():
            cells = [labels.get(r["model"], r["model"]), f">= {float(level):.0%}"]
            if v is None:
                cells += [f"not reached in {r['steps']:,}", ""] + [""] * len(timed)
            else:
                cells += [f"{v['step']:,}", f"{v['examples']:,}"]
                cells += [
                    f"{v['seconds'][t]:,.0f}" if t in v["seconds"] else ""
                    for t in timed
                ]
            body.append(cells)
    every = sorted({r["eval_every"] for r in rows})
    note = (
        f"(evaluated every {'-'.join(map(str, sorted({every[0], every[-1]})))} steps)"
    )
    if unsteady:
        note += f"\n* {', '.join(sorted(unsteady))}: windows not steady, seconds rough"
    return _table(head, body) + "\n" + note


def epoch_tokens(cfg: TrainConfig) -> int:
    """Target tokens (``<eos>`` included, padding excluded) in one epoch of ``cfg``."""
    return sum(len(y) + 1 for _, y in make_datasets(cfg)[0].examples)


def summarise(
    result: TrainResult,
    test_set=None,
    beam_size: int = 1,
    measurement: SpeedMeasurement | None = None,
) -> dict:
    """One row of the speed table for a trained model.

    Parameters
    ----------
    result : TrainResult
    test_set : SortingDataset, optional
        Default: the test set of ``result.config``.
    beam_size : int
        1: greedy decoding.
    measurement : SpeedMeasurement, optional
        An interleaved measurement that includes the model.

    Returns
    -------
    dict
        ``model``, ``device``, ``n_parameters``, ``epochs``, ``final_train_loss``,
        ``final_valid_loss``, ``exact_match``, ``token_accuracy``, and the run's own
        clock: ``run_sec_per_epoch`` (median), ``run_total_seconds``,
        ``run_tokens_per_second`` (median). With ``measurement``: ``tokens_per_second``
        (median over windows), ``tokens_per_second_range`` (min, max), ``sec_per_epoch``
        and ``timed_on``.
    """
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
        row["timed_on"] = next(iter(_by_hardware(measurement)))
    return row


#: The columns of :func:`format_table`: key, header, format.
_COLUMNS = {
    "model": ("model", "{}"),
    "n_parameters": ("params", "{:,}"),
    "tokens_per_second": ("tokens/s (median)", "{:,.0f}"),
    "tokens_per_second_range": ("windows min-max", "{0[0]:,.0f}-{0[1]:,.0f}"),
    "sec_per_epoch": ("s/epoch", "{:.2f}"),
    "run_sec_per_epoch": ("s/epoch (this run)", "{:.2f}"),
    "run_tokens_per_second": ("tokens/s (this run)", "{:,.0f}"),
    "final_train_loss": ("train loss", "{:.4f}"),
    "final_valid_loss": ("valid loss", "{:.4f}"),
    "exact_match": ("exact match", "{:.1%}"),
    "token_accuracy": ("token acc.", "{:.1%}"),
}


def format_table(rows: Sequence[dict]) -> str:
    """:func:`summarise` rows as a text table: their interleaved speed figures when
    every row has them, else the training runs' own clocks, "(this run)"."""
    timed = all("tokens_per_second" in r for r in rows)
    if timed:
        skip = ("run_sec_per_epoch", "run_tokens_per_second")
    else:
        skip = ("tokens_per_second", "tokens_per_second_range", "sec_per_epoch")
    keys = [k for k in _COLUMNS if k not in skip]
    body = [[_COLUMNS[k][1].format(r[k]) for k in keys] for r in rows]
    return _table([_COLUMNS[k][0] for k in keys], body)


@dataclass
class Comparison:
    """What :func:`compare` returns.

    Attributes
    ----------
    rows : list of dict
        :func:`summarise` of every model.
    results : dict
        The trained runs by name.
    speed : SpeedMeasurement or None
        At this process's thread count (``None`` when not measured).
    verdict : SpeedVerdict or None
    threads : ThreadScaling or None
        On a CPU.
    convergence : list of dict or None
        :func:`convergence` (``None`` without learning curves).
    """

    rows: list
    results: dict = field(repr=False, default_factory=dict)
    speed: SpeedMeasurement | None = None
    verdict: SpeedVerdict | None = None
    threads: ThreadScaling | None = None
    convergence: list | None = None

    def to_dict(self) -> dict:
        """Rows, measurements, verdict and convergence as plain JSON-ready data."""
        first = next(iter(self.results.values()), None)
        return {
            "config": None if first is None else first.config.to_dict(),
            "rows": self.rows,
            "speed": None if self.speed is None else self.speed.to_dict(),
            "threads": None if self.threads is None else self.threads.to_dict(),
            "verdict": None if self.verdict is None else asdict(self.verdict),
            "convergence": self.convergence,
        }


def compare(
    cfg: TrainConfig | None = None,
    use_cache: bool = True,
    progress: bool | None = None,
    models: Sequence[str] = MODEL_NAMES[:2],
    measure: bool = True,
    steps_per_window: int = 4,
    n_rounds: int = 6,
    warmup_steps: int = 2,
    max_spread: float = 1.5,
    threads: Sequence[int] | None = None,
) -> Comparison:
    """Train (or load) every model with ``cfg``, score each, time them interleaved, and
    read their convergence.

    Parameters
    ----------
    cfg : TrainConfig, optional
        Only ``model`` changes between the models (default ``TrainConfig()``).
    use_cache : bool
        Runs come from (and go to) :func:`~convs2s_edu.train_or_load`'s cache.
    progress : bool, optional
    models : sequence of str
        Default: ConvS2S and the GRU.
    measure : bool
        Time the models (afresh on every call).
    steps_per_window, n_rounds, warmup_steps : int
        The windows; checked before anything trains.
    max_spread : float
        For :func:`speed_verdict`.
    threads : sequence of int, optional
        On a CPU, the thread counts of :func:`measure_threads` (default all); a GPU is
        timed by :func:`measure_config`.

    Returns
    -------
    Comparison
        Its rows' speed columns at this process's thread count if measured, else the
        first.
    """
    cfg = cfg if cfg is not None else TrainConfig()
    check_int("n_rounds", n_rounds, 2)
    check_int("steps_per_window", steps_per_window, 1)
    check_int("warmup_steps", warmup_steps, 0)
    on_cpu = resolve_device(cfg.device).type == "cpu"
    if threads is not None and not on_cpu:
        raise ValueError("threads are a CPU setting: leave them out with a GPU device")
    threads = _thread_counts(threads) if on_cpu else None
    test_set = make_datasets(cfg)[2]
    fit = lambda c: (
        train_or_load(c, progress) if use_cache else train(c, progress=progress)
    )
    results = {name: fit(cfg.replace(model=name)) for name in models}
    m = verdict = scaling = None
    per_step, unsteady = {}, []
    if measure and len(models) >= 2:
        windows = dict(steps_per_window=steps_per_window, n_rounds=n_rounds)
        if on_cpu:
            scaling = measure_threads(
                cfg, models, threads, warmup_steps=warmup_steps, **windows
            )
            now = torch.get_num_threads()
            m = scaling.at(now if now in threads else threads[0])
        else:
            m = measure_config(cfg, models, warmup_steps=warmup_steps, **windows)
        labels = {name: model_entry(name).label for name in models}
        verdict = speed_verdict(scaling or m, max_spread, labels)
        by = _by_hardware(scaling or m)
        unsteady = [w for w, x in by.items() if not speed_verdict(x, max_spread).ok]
        per_step = seconds_per_step(scaling or m)
    rows = [summarise(results[name], test_set, measurement=m) for name in models]
    curves = all(r.history.evals for r in results.values())
    conv = convergence(results, per_step, unsteady=unsteady) if curves else None
    return Comparison(rows, results, m, verdict, scaling, conv)
