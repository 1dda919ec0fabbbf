r"""Honest speed measurement: the two models timed *interleaved*, with their spread.

Timing one model's training run, then the other's, measures the machine as much
as the models: a program that starts in between, a CPU that heats up and slows
down, or OpenMP threads that compete with another busy process can change one
run's speed several times over and leave the other's alone. This module times
the models in one process, in alternating **windows** of a fixed number of
training steps on the *same* batches, so that whatever slows the machine down
slows both models alike, and reports the spread of the windows next to their
median, so that a reader can see when the machine, not the model, moved the
numbers.

The method
----------
1. Every model takes ``warmup_steps`` untimed training steps (memory
   allocation, library initialisation).
2. Then ``n_rounds`` rounds: in each, every model runs one window of
   ``steps_per_window`` training steps, in the order A B in even rounds and
   B A in odd rounds (A B B A A B ...), so that a slow drift of the machine
   favours neither model.
3. A window's throughput is its target tokens (padding excluded, ``<eos>``
   included) divided by its wall-clock seconds (read after
   :func:`torch.cuda.synchronize` on a GPU). Per model: the median, the minimum,
   the maximum and the quartiles over windows. Per round: the ratio of each
   model's throughput to the first model's, taken within the round, so that the
   two windows of a ratio ran seconds apart; the median and range of these ratios
   is the speed ratio.
4. With every measurement: the load average before and after
   (:func:`os.getloadavg`), the number of runnable threads of *other* processes
   at each window (``/proc/loadavg`` less this process's own running threads,
   from ``/proc/self/task``, where they exist), the CPU model (read from
   ``/proc/cpuinfo``, else ``platform``), the cores this process may use, the
   intra-op threads of PyTorch, the OpenMP environment, the PyTorch version and
   the device.

:func:`speed_verdict` turns a measurement into a sentence: a warning, with no
conclusion drawn, when the windows of a model vary by more than a stated factor
or the machine was busier than its cores; otherwise the ratio with its range,
and "not resolved" when the two models' window ranges overlap.

:func:`time_incremental_vs_full` measures what the incremental decoder state
buys ConvS2S: greedy decoding with and without it.

Everything returned is a plain dataclass of numbers and strings
(:meth:`SpeedMeasurement.to_dict` is JSON-ready), so that other tools can store
and compare measurements.
"""

from __future__ import annotations

import html
import numbers
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import torch
from torch import nn

from .._checks import check_int
from .._machine import cpu_model, usable_cores
from ..data import length_batches
from ..decode import greedy_decode
from ..loss import sequence_loss
from ..seq2seq import EncoderDecoder
from ..training.config import build_model, make_datasets
from ..training.device import device_label, resolve_device, synchronize
from ..training.step import make_train_step

__all__ = [
    "MachineInfo",
    "WindowStats",
    "SpeedMeasurement",
    "SpeedVerdict",
    "machine_info",
    "time_interleaved",
    "window_runner",
    "warmup_runner",
    "measure_training",
    "training_batches",
    "measure_config",
    "ThreadScaling",
    "measure_threads",
    "speed_verdict",
    "thread_verdict",
    "training_flops_per_token",
    "measure_generation",
    "time_incremental_vs_full",
]


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------


def _loadavg() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def _runnable() -> int | None:
    """Threads of *other* processes runnable right now.

    The machine's runnable threads (4th field of ``/proc/loadavg``) less this
    process's own threads in state ``R`` (``/proc/self/task/*/stat``): a spinning
    OpenMP worker of this process is runnable too, and must not count as load.
    """
    try:
        with open("/proc/loadavg") as f:
            total = int(f.read().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return None
    own = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        tasks = []
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        own += state == "R"
    return max(total - own, 0)


@dataclass
class MachineInfo:
    """Where and under what load a measurement ran.

    Attributes
    ----------
    cpu : str
        CPU model name (``/proc/cpuinfo``, else ``platform``).
    cores : int
        Cores this process may use (its CPU affinity where the OS reports it).
    threads : int
        PyTorch intra-op threads (:func:`torch.get_num_threads`).
    omp_wait_policy, omp_num_threads : str
        The ``OMP_WAIT_POLICY`` and ``OMP_NUM_THREADS`` environment variables
        (``""`` when unset).
    torch_version : str
    device : str
        ``"cpu"`` or ``"cuda (<GPU name>)"``.
    load_before, load_after : float or None
        One-minute load average (:func:`os.getloadavg`) before and after the
        timed windows; ``None`` where the OS has none.
    runnable : list of int
        Runnable threads of other processes, sampled at the start of every
        window (``/proc/loadavg`` less this process's running threads; empty
        where it does not exist).
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
        policy = self.omp_wait_policy or "unset"
        return (
            f"{self.cpu}, {self.cores} cores usable, {self.threads} PyTorch thread(s), "
            f"OMP_WAIT_POLICY={policy}, device {self.device}, torch {self.torch_version}, "
            f"load average {load}"
        )


def machine_info(device: torch.device | str = "cpu") -> MachineInfo:
    """A :class:`MachineInfo` of this process now (loads not yet filled in)."""
    return MachineInfo(
        cpu=cpu_model(),
        cores=usable_cores(),
        threads=torch.get_num_threads(),
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", ""),
        omp_num_threads=os.environ.get("OMP_NUM_THREADS", ""),
        torch_version=torch.__version__,
        device=device_label(device),
    )


# --------------------------------------------------------------------------
# The measurement
# --------------------------------------------------------------------------


@dataclass
class WindowStats:
    """Median and spread of one model's (or one ratio's) values over windows.

    ``spread`` is ``max / min``: 1.0 when every window gave the same value.
    """

    median: float
    min: float
    max: float
    q1: float
    q3: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> WindowStats:
        values = sorted(float(v) for v in values)
        if not values:
            raise ValueError("need at least one window, got none")
        if len(values) >= 2:
            q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        else:
            q1 = q3 = values[0]
        return cls(statistics.median(values), values[0], values[-1], q1, q3, len(values))

    @property
    def spread(self) -> float:
        return self.max / self.min if self.min > 0 else float("inf")

    def overlaps(self, other: WindowStats) -> bool:
        """True when the min-max ranges of the two share a value."""
        return self.min <= other.max and other.min <= self.max


@dataclass
class SpeedMeasurement:
    """Interleaved windows of training steps: raw timings and their summary.

    Attributes
    ----------
    models : list of str
        The models, in the order of the first round; the first is the
        reference of ``ratios``.
    steps_per_window, n_rounds, warmup_steps : int
    order : list of str
        The model of every timed window, in the order they ran.
    window_seconds, window_tokens : dict of str to list
        Per model, every window's wall-clock seconds and target tokens.
    throughput : dict of str to WindowStats
        Per model, target tokens per second over windows.
    ratios : dict of str to WindowStats
        Per model, its throughput divided by the first model's, one value per
        round (the first model's own entry is all ones).
    machine : MachineInfo
    unit : str
        What a window's "tokens" count: ``"target tokens"`` (training steps) or
        ``"sentences"`` (:func:`measure_generation`); :func:`speed_verdict` words it.
    """

    models: list
    steps_per_window: int
    n_rounds: int
    warmup_steps: int
    order: list
    window_seconds: dict
    window_tokens: dict
    throughput: dict
    ratios: dict
    machine: MachineInfo
    unit: str = "target tokens"

    def window_throughputs(self, model: str) -> list[float]:
        """Tokens per second of every window of ``model``, in the order they ran."""
        return [t / s for t, s in zip(self.window_tokens[model], self.window_seconds[model])]

    def seconds_per_step(self, model: str) -> WindowStats:
        """Median and spread of the seconds per training step over windows."""
        return WindowStats.of([s / self.steps_per_window for s in self.window_seconds[model]])

    def to_dict(self) -> dict:
        """Plain numbers and strings, ready for :func:`json.dump`."""
        d = asdict(self)
        d["machine"]["load"] = self.machine.load
        return d


def time_interleaved(
    windows: Mapping[str, Callable[[], int]],
    n_rounds: int = 6,
    device: torch.device | str = "cpu",
    clock: Callable[[], float] = time.perf_counter,
    warmup: Mapping[str, Callable[[], object]] | None = None,
    steps_per_window: int = 1,
    warmup_steps: int = 0,
) -> SpeedMeasurement:
    """Time ``windows`` interleaved: A B, then B A, for ``n_rounds`` rounds.

    Parameters
    ----------
    windows : mapping of str to callable
        Per model, a function that runs one window of work and returns the
        number of target tokens it processed. At least two models.
    n_rounds : int
        Rounds; each model runs one window per round (>= 2).
    device : torch.device or str
        Where the work runs: on CUDA, the clock is read after
        :func:`torch.cuda.synchronize`.
    clock : callable
        Returns seconds (default :func:`time.perf_counter`; tests pass a fake).
    warmup : mapping of str to callable, optional
        Run once per model, untimed, before the first window.
    steps_per_window, warmup_steps : int
        Recorded in the result (the callables do the work).

    Returns
    -------
    SpeedMeasurement
    """
    names = list(windows)
    if len(names) < 2:
        raise ValueError(f"need at least two models to interleave, got {names}")
    check_int("n_rounds", n_rounds, 2)
    device = torch.device(device)
    info = machine_info(device)
    for name in names:
        if warmup is not None and name in warmup:
            warmup[name]()
    synchronize(device)
    info.load_before = _loadavg()
    seconds = {n: [] for n in names}
    tokens = {n: [] for n in names}
    order = []
    for r in range(n_rounds):
        for name in names if r % 2 == 0 else names[::-1]:  # A B, B A, A B, ...
            runnable = _runnable()
            if runnable is not None:
                info.runnable.append(runnable)
            synchronize(device)
            t0 = clock()
            n_tokens = windows[name]()
            synchronize(device)
            dt = clock() - t0
            if not dt > 0:
                raise RuntimeError(f"the clock did not advance during a window of {name}")
            seconds[name].append(dt)
            tokens[name].append(int(n_tokens))
            order.append(name)
    info.load_after = _loadavg()

    tput = {n: [t / s for t, s in zip(tokens[n], seconds[n])] for n in names}
    ref = names[0]
    ratios = {n: WindowStats.of([a / b for a, b in zip(tput[n], tput[ref])]) for n in names}
    return SpeedMeasurement(
        models=names,
        steps_per_window=steps_per_window,
        n_rounds=n_rounds,
        warmup_steps=warmup_steps,
        order=order,
        window_seconds=seconds,
        window_tokens=tokens,
        throughput={n: WindowStats.of(tput[n]) for n in names},
        ratios=ratios,
        machine=info,
    )


def window_runner(step: Callable, batches: Sequence, steps_per_window: int) -> Callable[[], int]:
    """One timed window: ``steps_per_window`` calls of ``step`` on ``batches[0]``,
    ``batches[1]``, ... (cycling); returns the window's target tokens (counted once, here,
    off the clock)."""
    schedule = [i % len(batches) for i in range(steps_per_window)]
    counts = [b.n_target_tokens for b in batches]
    tokens = sum(counts[i] for i in schedule)

    def run() -> int:
        for i in schedule:
            step(batches[i])
        return tokens

    return run


def warmup_runner(step: Callable, batches: Sequence, warmup_steps: int) -> Callable[[], None]:
    """The untimed warm-up: ``warmup_steps`` calls of ``step`` on the batches in turn."""

    def run() -> None:
        for i in range(warmup_steps):
            step(batches[i % len(batches)])

    return run


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
        At least two models, already on their device (all on the same one).
        They are trained by the measurement: pass fresh copies, not the ones
        you want to keep. How long a step takes does not depend on the weights.
    batches : sequence of Batch
        Every window runs ``steps_per_window`` steps on ``batches[0]``,
        ``batches[1]``, ... (cycling), so every window of every model sees the
        same data. Moved to the models' device once, before timing.
    steps_per_window : int
        Training steps per timed window (>= 1).
    n_rounds : int
        Windows per model (>= 2); see :func:`time_interleaved`.
    warmup_steps : int
        Untimed steps per model before the first window (>= 0).
    lr, clip_norm : float
        Adam's learning rate and the gradient clipping of :func:`~convs2s_edu.train`.

    Returns
    -------
    SpeedMeasurement
    """
    check_int("steps_per_window", steps_per_window, 1)
    check_int("warmup_steps", warmup_steps, 0)
    if len(batches) == 0:
        raise ValueError("batches must hold at least one batch, got none")
    devices = {next(m.parameters()).device for m in models.values()}
    if len(devices) != 1:
        raise ValueError(f"all models must be on one device, got {sorted(map(str, devices))}")
    device = devices.pop()
    batches = [b.to(device) for b in batches]
    steps = {}
    for name, m in models.items():
        m.train()
        steps[name] = make_train_step(m, torch.optim.Adam(m.parameters(), lr=lr), clip_norm)
    return time_interleaved(
        {n: window_runner(s, batches, steps_per_window) for n, s in steps.items()},
        n_rounds,
        device,
        warmup={n: warmup_runner(s, batches, warmup_steps) for n, s in steps.items()},
        steps_per_window=steps_per_window,
        warmup_steps=warmup_steps,
    )


def training_batches(cfg, n_batches: int) -> list:
    """``n_batches`` batches of ``cfg``'s first epoch, as its training loop draws them: the
    data every timing of a config uses.

    The epoch's batches are made the way :func:`~convs2s_edu.train` makes them (random
    or equal-length batches, ``cfg.batching``, shuffled with ``cfg.seed``); of those,
    ``n_batches`` are taken at evenly spaced ranks of their padded width, so that a few
    batches cost, on average, what the epoch's batches cost (with equal-length batches,
    the first few could all be short or all long). Fewer batches in the epoch than asked
    for: they are cycled.
    """
    check_int("n_batches", n_batches, 1)
    train_ds = make_datasets(cfg)[0]
    g = torch.Generator().manual_seed(cfg.seed)
    sampler = length_batches(train_ds.lengths, cfg.batch_size, cfg.batching, g)
    if sampler is not None:
        epoch = list(sampler)
    else:
        order = torch.randperm(len(train_ds), generator=g).tolist()
        epoch = [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
    if n_batches >= len(epoch):
        chosen = [epoch[i % len(epoch)] for i in range(n_batches)]
    else:
        width = lambda idx: max(len(train_ds[j][0]) for j in idx)  # noqa: E731
        ranked = sorted(range(len(epoch)), key=lambda k: (width(epoch[k]), k))
        picks = sorted(ranked[int((i + 0.5) * len(epoch) / n_batches)] for i in range(n_batches))
        chosen = [epoch[k] for k in picks]
    return [train_ds.collate([train_ds[j] for j in idx]) for idx in chosen]


def measure_config(
    cfg,
    models: Sequence[str] = ("convs2s", "gru"),
    steps_per_window: int = 4,
    n_rounds: int = 6,
    warmup_steps: int = 2,
    n_batches: int | None = None,
) -> SpeedMeasurement:
    """:func:`measure_training` for the models of a :class:`~convs2s_edu.TrainConfig`.

    Fresh models of ``cfg`` (only ``model`` changes) on ``cfg``'s device, with
    ``cfg``'s optimiser settings, on the first ``n_batches`` (default
    ``steps_per_window``) batches of ``cfg``'s training set, shuffled with
    ``cfg.seed``: the data and the step of :func:`~convs2s_edu.train`.
    """
    n_batches = steps_per_window if n_batches is None else check_int("n_batches", n_batches, 1)
    batches = training_batches(cfg, n_batches)
    dev = resolve_device(cfg.device)
    built = {}
    for name in models:
        torch.manual_seed(cfg.seed)
        built[name] = build_model(cfg.replace(model=name)).to(dev)
    return measure_training(
        built,
        batches,
        steps_per_window,
        n_rounds,
        warmup_steps,
        lr=cfg.lr,
        clip_norm=cfg.clip_norm,
    )


# --------------------------------------------------------------------------
# Parallel hardware: the same measurement at every thread count
# --------------------------------------------------------------------------


@dataclass
class ThreadScaling:
    """Training throughput of the same models at several thread counts, all interleaved.

    Attributes
    ----------
    models : list of str
        The models; the first is the reference of the ratios.
    thread_counts : list of int
    measurement : SpeedMeasurement
        Every window, keyed ``"<model>@<threads>"`` (e.g. ``"gru@2"``): in every round
        each model ran one window at each thread count.
    """

    models: list
    thread_counts: list
    measurement: SpeedMeasurement

    def at(self, threads: int) -> SpeedMeasurement:
        """The windows of ``threads`` threads as a measurement of its own (the models' keys,
        ratios within each round, ``machine.threads`` set to ``threads``): what
        :func:`speed_verdict` reads."""
        if threads not in self.thread_counts:
            raise ValueError(f"no windows at {threads} threads; measured: {self.thread_counts}")
        raw = self.measurement
        key = {m: f"{m}@{threads}" for m in self.models}
        seconds = {m: raw.window_seconds[key[m]] for m in self.models}
        tokens = {m: raw.window_tokens[key[m]] for m in self.models}
        tput = {m: [t / s for t, s in zip(tokens[m], seconds[m])] for m in self.models}
        ref = self.models[0]
        ratios = {
            m: WindowStats.of([a / b for a, b in zip(tput[m], tput[ref])]) for m in self.models
        }
        suffix = f"@{threads}"
        order = [k.removesuffix(suffix) for k in raw.order if k.endswith(suffix)]
        machine = MachineInfo(**{**asdict(raw.machine), "threads": threads})
        return SpeedMeasurement(
            models=list(self.models),
            steps_per_window=raw.steps_per_window,
            n_rounds=raw.n_rounds,
            warmup_steps=raw.warmup_steps,
            order=order,
            window_seconds=seconds,
            window_tokens=tokens,
            throughput={m: WindowStats.of(tput[m]) for m in self.models},
            ratios=ratios,
            machine=machine,
        )

    def to_dict(self) -> dict:
        """Per thread count: each model's throughput (median, min, max), the ratio of
        every model to the first (median, min, max over rounds); and the raw windows."""
        points = {}
        for t in self.thread_counts:
            m = self.at(t)
            points[str(t)] = {
                "throughput": {n: asdict(m.throughput[n]) for n in self.models},
                "ratio": {n: asdict(m.ratios[n]) for n in self.models[1:]},
            }
        return {
            "models": list(self.models),
            "thread_counts": list(self.thread_counts),
            "points": points,
            "measurement": self.measurement.to_dict(),
        }


def _with_threads(threads: int, run: Callable):
    def call():
        torch.set_num_threads(threads)
        return run()

    return call


def measure_threads(
    cfg,
    models: Sequence[str] = ("convs2s", "gru"),
    thread_counts: Sequence[int] | None = None,
    steps_per_window: int = 4,
    n_rounds: int = 6,
    warmup_steps: int = 2,
    n_batches: int | None = None,
    configs: Mapping | None = None,
) -> ThreadScaling:
    """:func:`measure_config` at every thread count, in one interleaved measurement.

    Parameters
    ----------
    cfg : TrainConfig
        The configuration (on the CPU: threads are a CPU matter).
    models : sequence of str
    thread_counts : sequence of int, optional
        PyTorch intra-op thread counts (:func:`torch.set_num_threads`), each in
        ``1..usable cores``; default every count from 1 to the usable cores.
    steps_per_window, n_rounds, warmup_steps, n_batches
        As :func:`measure_config`. Every round runs one window of every model at
        every thread count, the order reversed every other round; each count gets
        its own warm-up steps.
    configs : mapping of str to TrainConfig, optional
        Per model, its own configuration (e.g. the GRU of another width); then
        ``models`` are its keys. Default: ``cfg`` with ``model`` changed. The batches
        are ``cfg``'s either way.

    Returns
    -------
    ThreadScaling

    Notes
    -----
    The process's thread count is restored afterwards. ``OMP_WAIT_POLICY``
    stays what the process started with (PASSIVE by default: waiting threads
    sleep); ``MachineInfo.omp_wait_policy`` records it.
    """
    cores = usable_cores()
    counts = list(range(1, cores + 1)) if thread_counts is None else list(thread_counts)
    if not counts:
        raise ValueError("thread_counts must hold at least one count, got none")
    counts = [check_int("thread count", t, 1, cores) for t in counts]
    if len(set(counts)) != len(counts):
        raise ValueError(f"thread_counts must be distinct, got {counts}")
    dev = resolve_device(cfg.device)
    if dev.type != "cpu":
        raise ValueError(f"thread counts are measured on the CPU, got device {dev}")
    n_batches = steps_per_window if n_batches is None else check_int("n_batches", n_batches, 1)
    check_int("steps_per_window", steps_per_window, 1)
    check_int("warmup_steps", warmup_steps, 0)
    batches = training_batches(cfg, n_batches)
    if configs is not None:
        models = list(configs)
    configs = configs or {name: cfg.replace(model=name) for name in models}
    windows, warmups = {}, {}
    for name in models:
        torch.manual_seed(cfg.seed)
        model = build_model(configs[name]).to(dev).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.adam_betas)
        step = make_train_step(model, optimizer, cfg.clip_norm)
        for t in counts:
            key = f"{name}@{t}"
            windows[key] = _with_threads(t, window_runner(step, batches, steps_per_window))
            warmups[key] = _with_threads(t, warmup_runner(step, batches, warmup_steps))
    before = torch.get_num_threads()
    try:
        raw = time_interleaved(
            windows,
            n_rounds,
            dev,
            warmup=warmups,
            steps_per_window=steps_per_window,
            warmup_steps=warmup_steps,
        )
    finally:
        torch.set_num_threads(before)
    return ThreadScaling(list(models), counts, raw)


# --------------------------------------------------------------------------
# The verdict
# --------------------------------------------------------------------------


@dataclass
class SpeedVerdict:
    """What a measurement allows one to say.

    Attributes
    ----------
    ok : bool
        False when the measurement is not trustworthy (see :func:`speed_verdict`).
    resolved : bool
        True when ``ok`` and the two models' window ranges do not overlap.
    text : str
        The sentence to print: a warning starting with ``"WARNING"`` when not
        ``ok``.
    reasons : list of str
        Why it is not ``ok`` (empty when it is).
    faster : str or None
        The faster model when ``resolved``, else ``None``.
    by_threads : dict of int to SpeedVerdict
        For a verdict over thread counts (:func:`thread_verdict`): the verdict at
        each count; empty otherwise.
    """

    ok: bool
    resolved: bool
    text: str
    reasons: list = field(default_factory=list)
    faster: str | None = None
    by_threads: dict = field(default_factory=dict)

    def _repr_html_(self) -> str:
        """A warning box when not ``ok`` (notebooks, and gallery pages that end a cell with
        the verdict), else a plain paragraph."""
        text = self.text.removeprefix("WARNING: ")  # the box says "Warning"
        body = html.escape(text[:1].upper() + text[1:])
        if self.ok:
            return f'<div class="admonition note"><p>{body}</p></div>'
        return (
            '<div class="admonition warning"><p class="admonition-title">Warning</p>'
            f"<p>{body}</p></div>"
        )


def speed_verdict(
    m: SpeedMeasurement,
    max_spread: float = 1.5,
    labels: Mapping[str, str] | None = None,
    max_load: float | None = None,
) -> SpeedVerdict:
    """Say what ``m`` shows about the first two models, and only that.

    Parameters
    ----------
    m : SpeedMeasurement
    max_spread : float
        The largest ``max / min`` of a model's window throughputs that still
        counts as a quiet machine (> 1).
    labels : mapping of str to str, optional
        Display names, e.g. ``{"gru": "GRU + attention"}``.
    max_load : float, optional
        The highest load that counts as quiet. Default: the usable cores of
        ``m.machine``. The median number of other processes' runnable threads
        at the windows may reach the cores this measurement leaves free
        (cores - PyTorch threads); the one-minute load average (before and
        after) may reach the cores + 0.5:
        that average also counts this process's own threads and lags by about a
        minute, so a build that kept every core busy just before reads about
        ``cores`` on an otherwise idle machine; half a core more means another
        program's work was waiting.

    Returns
    -------
    SpeedVerdict
        Not ``ok`` (a warning, no comparison) when a model's windows vary by
        more than ``max_spread`` or the load exceeds ``max_load``. Otherwise the
        throughput ratio of the two models (median over rounds, with the range of
        the per-round ratios), the faster model in words, or "not resolved" when
        the two models' window ranges overlap.

    Notes
    -----
    The verdict never explains *why* one model was faster: the reasons
    (arithmetic per token, sequential steps) are facts about the models that
    hold whichever model wins, and are stated as such by the pages.
    """
    if not (isinstance(max_spread, (int, float)) and max_spread > 1):
        raise ValueError(f"max_spread must be a number > 1, got {max_spread!r}")
    if len(m.models) < 2:
        raise ValueError(f"need two models, got {m.models}")
    labels = dict(labels or {})
    a, b = m.models[0], m.models[1]
    la, lb = labels.get(a, a), labels.get(b, b)
    limit = float(m.machine.cores if max_load is None else max_load)
    load_limit = limit + 0.5 if max_load is None else limit

    per_s = f"{m.unit.split()[-1]}/s"  # "tokens/s" or "sentences/s"
    reasons = []
    for name in (a, b):
        s = m.throughput[name]
        if s.spread > max_spread:
            reasons.append(
                f"the timing windows of {labels.get(name, name)} varied by "
                f"{s.spread:.2f}x (from {s.min:,.0f} to {s.max:,.0f} {per_s}), "
                f"more than the {max_spread:g}x allowed"
            )
    load = m.machine.load
    if load is not None and load > load_limit:
        reasons.append(
            f"the load average was {load:.2f}, more than the {limit:g} cores usable "
            f"(+0.5 for this process's own recent work)"
            if max_load is None
            else f"the load average was {load:.2f}, more than the {limit:g} allowed"
        )
    if m.machine.runnable:
        others = statistics.median(m.machine.runnable)  # threads of other processes
        free = max(limit - m.machine.threads, 0)  # cores our PyTorch threads leave free
        if others > free:
            reasons.append(
                f"a median of {others:g} thread(s) of other processes were runnable during "
                f"the windows, more than the {free:g} of the {limit:g} cores usable that "
                f"this measurement's {m.machine.threads} PyTorch thread(s) leave free"
            )
    if reasons:
        text = (
            "WARNING: this speed measurement is not reliable: "
            + "; ".join(reasons)
            + ". The machine was busy or unsteady, so no conclusion about the models is "
            "drawn from it. Measure again on an idle machine."
        )
        return SpeedVerdict(False, False, text, reasons)

    r = m.ratios[b]  # throughput(b) / throughput(a), per round
    ta, tb = m.throughput[a], m.throughput[b]
    if ta.overlaps(tb):
        text = (
            f"The difference is not resolved: the window throughputs of {la} "
            f"({ta.min:,.0f}-{ta.max:,.0f} {per_s}) and {lb} ({tb.min:,.0f}-{tb.max:,.0f}) "
            f"overlap; {lb}/{la} throughput ratio {r.median:.2f} (rounds: "
            f"{r.min:.2f}-{r.max:.2f}, {r.n} rounds)."
        )
        return SpeedVerdict(True, False, text)
    if r.median >= 1:
        fast, slow, x, lo, hi, faster = lb, la, r.median, r.min, r.max, b
    else:
        fast, slow, x, lo, hi, faster = la, lb, 1 / r.median, 1 / r.max, 1 / r.min, a
    what = (
        f"trained {x:.2f}x as fast as {slow} in target tokens per second"
        if m.unit == "target tokens"
        else f"decoded {x:.2f}x as many {m.unit} per second as {slow}"
    )
    text = (
        f"{fast} {what} "
        f"(per-round ratios {lo:.2f}-{hi:.2f} over {r.n} rounds; every window of {fast} "
        f"was faster than every window of {slow})."
    )
    return SpeedVerdict(True, True, text, faster=faster)


def thread_verdict(
    scaling: ThreadScaling,
    max_spread: float = 1.5,
    labels: Mapping[str, str] | None = None,
) -> SpeedVerdict:
    """:func:`speed_verdict` at every thread count of ``scaling``, in one statement that
    names the hardware each holds for.

    Returns
    -------
    SpeedVerdict
        ``by_threads`` holds the verdict at every count; ``text`` says, for each,
        which model was faster and by how much (or why nothing can be said), after
        the CPU and its usable cores; ``ok`` and ``resolved`` when every count's
        verdict is. ``faster`` is ``None``: which model is faster depends on the
        hardware, and the point of the measurement is to say how.
    """
    by = {t: speed_verdict(scaling.at(t), max_spread, labels) for t in scaling.thread_counts}
    mach = scaling.measurement.machine
    parts = []
    for t, v in by.items():
        what = v.text.removeprefix("WARNING: ")
        if what.startswith(("The ", "This ")):  # not a model's name: lower-case it
            what = what[:1].lower() + what[1:]
        parts.append(f"with {t} thread{'s' if t > 1 else ''}: {what}")
    head = f"On {mach.cpu} ({mach.cores} cores usable, device {mach.device}), "
    ok = all(v.ok for v in by.values())
    text = (
        ("" if ok else "WARNING: ")
        + head
        + " ".join(p if i == 0 else p[:1].upper() + p[1:] for i, p in enumerate(parts))
    )
    reasons = [f"{t} threads: {r}" for t, v in by.items() for r in v.reasons]
    return SpeedVerdict(ok, ok and all(v.resolved for v in by.values()), text, reasons, None, by)


# --------------------------------------------------------------------------
# Arithmetic per token
# --------------------------------------------------------------------------


def training_flops_per_token(model: nn.Module, batch) -> float:
    """Floating-point operations of one training step's forward and backward pass, per
    target token (padding excluded), counted by :class:`torch.utils.flop_counter.FlopCounterMode`.

    Counts matrix products and convolutions (what the counter knows), not
    element-wise operations; one multiply-add counts as 2 operations. A fact
    about the model and the batch, independent of the machine: a model on a GPU
    is counted through a copy on the CPU, because there its GRU runs through
    cuDNN, whose fused operation the counter has no formula for (it would count
    the recurrent products as nothing); on the CPU the same products are
    separate matrix products.
    """
    import copy

    from torch.utils.flop_counter import FlopCounterMode

    if next(model.parameters()).device.type != "cpu":
        model = copy.deepcopy(model).cpu()
    was_training = model.training
    model.train()
    batch = batch.to("cpu")
    counter = FlopCounterMode(display=False)
    with counter:
        loss = sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out)
        loss.backward()
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return counter.get_total_flops() / batch.n_target_tokens


# --------------------------------------------------------------------------
# Generation, as the paper times it (Table 3)
# --------------------------------------------------------------------------


def measure_generation(
    models: Mapping[str, nn.Module],
    sources: Sequence[Sequence[int]],
    beam_sizes: Sequence[int] = (1, 5),
    batch_size: int = 128,
    n_rounds: int = 4,
) -> dict:
    """Generation throughput of ``models`` on the same ``sources``, interleaved, per beam size.

    As Gehring et al. time generation (§5.3, Table 3): the sources decoded in batches
    of up to ``batch_size`` sentences of equal length
    (:func:`~convs2s_edu.decode.decode_all` with ``bucket=True``), greedily
    (``beam_sizes`` 1) and with beam search (5), the incremental decoder state of
    each model (ConvS2S shifts its convolution windows, it does not recompute them).
    For every beam size, every model decodes all the sources once per window
    (:func:`time_interleaved`: A B, B A, ...), after an untimed warm-up decoding of
    the first batch.

    Parameters
    ----------
    models : mapping of str to EncoderDecoder
        At least two models, on one device.
    sources : sequence of sequence of int
        The sentences every model decodes.
    beam_sizes : sequence of int
    batch_size : int
        Sentences per batch.
    n_rounds : int
        Windows per model and beam size (>= 2).

    Returns
    -------
    dict of int to SpeedMeasurement
        Per beam size; a window's "tokens" are the sentences it decoded, so the
        throughput is in sentences per second.
    """
    from ..decode import decode_all

    if len(models) < 2:
        raise ValueError(f"need at least two models to interleave, got {list(models)}")
    sources = [list(x) for x in sources]
    if not sources:
        raise ValueError("need at least one source sentence, got none")
    check_int("batch_size", batch_size)
    devices = {next(m.parameters()).device for m in models.values()}
    if len(devices) != 1:
        raise ValueError(f"all models must be on one device, got {sorted(map(str, devices))}")
    device = devices.pop()
    out = {}
    for k in beam_sizes:
        k = check_int("beam size", k)

        def window(model, k=k):
            def run() -> int:
                decode_all(model, sources, beam_size=k, batch_size=batch_size)
                return len(sources)

            return run

        def warm(model, k=k):
            return lambda: decode_all(model, sources[:batch_size], beam_size=k)

        measured = time_interleaved(
            {n: window(m) for n, m in models.items()},
            n_rounds,
            device,
            warmup={n: warm(m) for n, m in models.items()},
        )
        out[k] = replace(measured, unit="sentences")
    return out


# --------------------------------------------------------------------------
# Decoding: incremental state against full recompute
# --------------------------------------------------------------------------


def time_incremental_vs_full(
    model,
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
        Lengths beyond ``model.cfg.max_positions`` need a model built with a
        larger ``max_positions``, e.g. ``ConvS2S(ConvS2SConfig(max_positions=100))``.
    target_lengths : sequence of int, default (20, 50, 100)
        Numbers of decoding steps to time, each in ``1..max_positions``.
    batch_size : int, default 32
        Number of sources decoded together, ``>= 1``.
    repeats : int, default 3
        Timed runs per setting, ``>= 1``; the fastest one is reported (after
        one untimed warm-up run of each kind).
    seed : int, default 0
        Seed of the random sources.

    Returns
    -------
    list of dict
        One record per target length with keys ``target_len``, ``batch_size``,
        ``seconds_full``, ``seconds_incremental`` and ``speedup``
        (``seconds_full / seconds_incremental``).

    Notes
    -----
    Each source is a random sequence of ``target_len`` tokens, and decoding is
    forced to exactly ``target_len`` steps (``stop_at_eos=False``), so both
    methods do the same number of steps. The encoder runs once in both. For
    ConvS2S the full recompute costs :math:`\sum_{t=1}^{T} t = T(T+1)/2`
    decoder columns against :math:`T` with the cache, so the speedup should
    grow roughly linearly with :math:`T` (on small models per-call overhead
    hides part of it). Times come from ``time.perf_counter()``, with
    :func:`torch.cuda.synchronize` around each run on a GPU. Nothing here
    asserts a speed; this is a measurement helper.
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"cannot time a {type(model).__name__}; expected an EncoderDecoder")
    if isinstance(target_lengths, numbers.Integral):
        target_lengths = (target_lengths,)
    target_lengths = list(target_lengths)
    if not target_lengths:
        raise ValueError("target_lengths must hold at least one length, got none")
    lengths = []
    for T in target_lengths:
        if isinstance(T, numbers.Integral) and not isinstance(T, bool) and T > model.max_positions:
            raise ValueError(
                f"target length {T} exceeds the model's max_positions={model.max_positions} "
                f"(allowed 1..{model.max_positions}); build the model with "
                f"max_positions >= {T} to time it"
            )
        lengths.append(check_int("target length", T, 1, model.max_positions))
    batch_size = check_int("batch_size", batch_size)
    repeats = check_int("repeats", repeats)
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(int(seed))

    def run(src, T, incremental):
        synchronize(device)
        start = time.perf_counter()
        greedy_decode(model, src, max_len=T, incremental=incremental, stop_at_eos=False)
        synchronize(device)
        return time.perf_counter() - start

    records = []
    for T in lengths:
        src = torch.randint(1, model.vocab_size + 1, (batch_size, T), generator=gen)  # (B, T)
        src = src.to(device)
        run(src, T, True), run(src, T, False)  # warm-up
        inc = min(run(src, T, True) for _ in range(repeats))
        full = min(run(src, T, False) for _ in range(repeats))
        records.append(
            {
                "target_len": T,
                "batch_size": batch_size,
                "seconds_full": full,
                "seconds_incremental": inc,
                "speedup": full / inc if inc > 0 else float("inf"),
            }
        )
    return records
