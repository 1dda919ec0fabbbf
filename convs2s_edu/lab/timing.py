r"""Honest speed measurement: the two models timed *interleaved*, with their spread.

Timing one model's training run, then the other's, measures the machine as much as the models:
a program that starts in between, a CPU that heats up, or OpenMP threads that compete with
another busy process can change one run's speed several times over and leave the other's
alone. This module times the models in one process, in alternating **windows** of a fixed
number of training steps on the *same* batches, so that whatever slows the machine down slows
both models alike, and reports the windows' spread next to their median, so that a reader can
see when the machine, not the model, moved the numbers.

The method
----------
1. Every model takes ``warmup_steps`` untimed training steps (memory allocation, library
   initialisation).
2. Then ``n_rounds`` rounds: in each, every model runs one window of ``steps_per_window``
   training steps, in the order A B in even rounds and B A in odd rounds, so that a slow
   drift of the machine favours neither model.
3. A window's throughput is its target tokens (padding excluded, ``<eos>`` included) divided by its
   wall-clock seconds (:func:`torch.utils.benchmark.timer`, which first waits for an accelerator's
   queued work). Per model: the median, minimum, maximum and quartiles over windows. Per round: the
   ratio of each model's throughput to the first model's, taken within the round, so that the two
   windows of a ratio ran seconds apart; the median and range of these ratios is the speed ratio.
4. With every measurement: the machine and its load (:class:`MachineInfo`), among them the
   runnable threads of *other* processes at every window.

:mod:`torch.utils.benchmark` computes the medians and quartiles, sets thread counts and times
work without state (decoding, a matrix product) with a :class:`~torch.utils.benchmark.Timer`, at
this process's thread count. The windows are ours: a Timer calls its statement as often as it
decides, but a training step changes the weights and consumes a batch, so a window must run
exactly the steps asked for, and the models must alternate within one measurement.
"""

from __future__ import annotations

import contextlib
import copy
import html
import numbers
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

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
from ..seq2seq import EncoderDecoder
from ..training.calibrate import resolve_path
from ..training.config import build_model, make_datasets
from ..training.device import device_label, resolve_device
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


def _loadavg() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def _runnable() -> int | None:
    """Threads of *other* processes runnable right now: ``/proc/loadavg``'s runnable threads
    less this process's own in state ``R`` (``/proc/self/task/*/stat``): a spinning OpenMP
    worker of ours is runnable too, and must not count as load."""
    try:
        with open("/proc/loadavg") as f:
            total = int(f.read().split()[3].split("/")[0])
        tasks = os.listdir("/proc/self/task")
    except (OSError, IndexError, ValueError):
        return None
    own = 0
    for task in tasks:  # a thread that ends meanwhile, or an odd line, is not counted
        with contextlib.suppress(OSError, IndexError), open(f"/proc/self/task/{task}/stat") as f:
            own += f.read().rsplit(")", 1)[1].split()[0] == "R"
    return max(total - own, 0)


@dataclass
class MachineInfo:
    """Where and under what load a measurement ran.

    ``cpu``: the CPU model (``/proc/cpuinfo``, else ``platform``); ``cores``: the cores this
    process may use (its CPU affinity where the OS reports it); ``threads``: PyTorch's intra-op
    threads; ``omp_*``: those environment variables (``""`` when unset); ``device``: ``"cpu"``
    or ``"cuda (<GPU name>)"``; ``load_before``, ``load_after``: the one-minute load average
    before and after the windows (``None`` where the OS has none); ``runnable``: the runnable
    threads of other processes at the start of every window (empty without ``/proc``).
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


@dataclass
class WindowStats:
    """Median and spread of one model's (or one ratio's) values over windows: the median and
    quartiles ``q1``, ``q3`` that a :class:`torch.utils.benchmark.Measurement` computes
    (interpolating between the sorted values); ``spread`` is ``max / min`` (1.0: all equal)."""

    median: float
    min: float
    max: float
    q1: float
    q3: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float] | Measurement) -> WindowStats:
        """The statistics of ``values``, or of a Measurement's times per run."""
        if not isinstance(values, Measurement):
            values = Measurement(1, [float(v) for v in values], TaskSpec("windows", ""))
        v = values.times
        if not v:
            raise ValueError("need at least one window, got none")
        median = values.median  # computes the quartiles too, kept as _p25 and _p75
        return cls(median, min(v), max(v), values._p25, values._p75, len(v))

    @property
    def spread(self) -> float:
        return self.max / self.min if self.min > 0 else float("inf")

    def overlaps(self, other: WindowStats) -> bool:
        """True when the min-max ranges of the two share a value."""
        return self.min <= other.max and other.min <= self.max


@dataclass
class SpeedMeasurement:
    """Interleaved windows of training steps: raw timings and their summary.

    ``models``: in the order of the first round, the first the reference of ``ratios``;
    ``order``: the model of every timed window, in the order they ran; ``window_seconds``,
    ``window_tokens``: per model, every window's wall-clock seconds and tokens; ``throughput``:
    per model, the :class:`WindowStats` of its tokens per second; ``ratios``: per model, those
    of its throughput divided by the first model's, one value per round; ``unit``: what a
    window's "tokens" count, ``"target tokens"`` or ``"sentences"`` (:func:`measure_generation`).
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

    @classmethod
    def of_windows(cls, models, order, seconds, tokens, machine, **counts) -> SpeedMeasurement:
        """The summary of raw windows (``counts``: ``steps_per_window``, ``n_rounds``,
        ``warmup_steps``): throughputs per model, ratios to the first model per round."""
        tput = {n: [t / s for t, s in zip(tokens[n], seconds[n])] for n in models}
        ratio = lambda n: [a / b for a, b in zip(tput[n], tput[models[0]])]  # one per round
        throughput = {n: WindowStats.of(tput[n]) for n in models}
        ratios = {n: WindowStats.of(ratio(n)) for n in models}
        raw = dict(order=order, window_seconds=seconds, window_tokens=tokens, machine=machine)
        return cls(list(models), throughput=throughput, ratios=ratios, **raw, **counts)

    def window_throughputs(self, model: str) -> list[float]:
        """Tokens per second of every window of ``model``, in the order they ran."""
        return [t / s for t, s in zip(self.window_tokens[model], self.window_seconds[model])]

    def round_ratios(self, model: str, reference: str) -> WindowStats:
        """``model``'s throughput over ``reference``'s, taken within each round (a slow
        minute of the machine slows both): median and range over the rounds."""
        pairs = zip(self.window_throughputs(model), self.window_throughputs(reference))
        return WindowStats.of([a / b for a, b in pairs])

    def measurement(self, model: str) -> Measurement:
        """The windows of ``model`` as a :class:`torch.utils.benchmark.Measurement` of one
        step (``steps_per_window`` runs per window; the machine's threads; its device as
        ``env``), e.g. for :class:`torch.utils.benchmark.Compare`."""
        spec = TaskSpec(model, "", label=f"interleaved windows, {self.unit}", sub_label=model)
        spec = replace(spec, description="time per step", env=self.machine.device)
        spec = replace(spec, num_threads=self.machine.threads)
        return Measurement(self.steps_per_window, list(self.window_seconds[model]), spec)

    def seconds_per_step(self, model: str) -> WindowStats:
        """Median and spread of the seconds per training step over windows."""
        return WindowStats.of(self.measurement(model))

    def to_dict(self) -> dict:
        """Plain numbers and strings, ready for :func:`json.dump`."""
        d = asdict(self)
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
    """Time ``windows`` interleaved: A B, then B A, for ``n_rounds`` rounds (>= 2).

    ``windows`` maps each of at least two models to a function that runs one window of work and
    returns the number of target tokens it processed; each is called exactly once per round, and
    nothing else is on the clock. ``warmup`` (optional) maps models to work run once, untimed,
    before the first window. ``device`` (where the work runs), ``steps_per_window`` and
    ``warmup_steps`` are only recorded; ``clock`` returns seconds (tests pass a fake).
    """
    names = list(windows)
    if len(names) < 2:
        raise ValueError(f"need at least two models to interleave, got {names}")
    check_int("n_rounds", n_rounds, 2)
    info = machine_info(torch.device(device))
    for name in [n for n in names if n in (warmup or {})]:
        warmup[name]()
    info.load_before = _loadavg()
    seconds, tokens, order = {n: [] for n in names}, {n: [] for n in names}, []
    for r in range(n_rounds):
        for name in names if r % 2 == 0 else names[::-1]:  # A B, B A, A B, ...
            if (runnable := _runnable()) is not None:
                info.runnable.append(runnable)
            t0 = clock()
            n_tokens = windows[name]()
            dt = clock() - t0
            if not dt > 0:
                raise RuntimeError(f"the clock did not advance during a window of {name}")
            seconds[name].append(dt)
            tokens[name].append(int(n_tokens))
            order.append(name)
    info.load_after = _loadavg()
    counts = dict(steps_per_window=steps_per_window, n_rounds=n_rounds, warmup_steps=warmup_steps)
    return SpeedMeasurement.of_windows(names, order, seconds, tokens, info, **counts)


def window_runner(step: Callable, batches: Sequence, steps_per_window: int) -> Callable[[], int]:
    """One timed window: ``steps_per_window`` calls of ``step`` on ``batches[0]``,
    ``batches[1]``, ... (cycling); returns the window's target tokens (counted once, here,
    off the clock)."""
    schedule = [i % len(batches) for i in range(steps_per_window)]
    tokens = sum(batches[i].n_target_tokens for i in schedule)

    def run() -> int:
        for i in schedule:
            step(batches[i])
        return tokens

    return run


def warmup_runner(step: Callable, batches: Sequence, warmup_steps: int) -> Callable[[], int]:
    """The untimed warm-up: ``warmup_steps`` calls of ``step`` on the batches in turn (a
    :func:`window_runner` that nobody times)."""
    return window_runner(step, batches, warmup_steps)


def _one_device(models: Mapping[str, nn.Module]) -> torch.device:
    devices = {next(m.parameters()).device for m in models.values()}
    if len(devices) != 1:
        raise ValueError(f"all models must be on one device, got {sorted(map(str, devices))}")
    return devices.pop()


def measure_training(
    models: Mapping[str, nn.Module],
    batches: Sequence,
    steps_per_window: int = 4,
    n_rounds: int = 6,
    warmup_steps: int = 2,
    lr: float = 1e-3,
    clip_norm: float | None = 1.0,
) -> SpeedMeasurement:
    """Training throughput of ``models`` (at least two, on one device), interleaved, on the same
    ``batches`` (moved to the models' device once, before timing). The measurement trains the
    models, so pass fresh copies (how long a step takes does not depend on the weights). Every
    model takes ``warmup_steps`` (>= 0) untimed steps, then ``n_rounds`` (>= 2) windows of
    ``steps_per_window`` (>= 1) steps (:func:`window_runner`). ``lr``, ``clip_norm``: Adam's
    learning rate and gradient clipping (:func:`~convs2s_edu.train`)."""
    check_int("steps_per_window", steps_per_window, 1)
    check_int("warmup_steps", warmup_steps, 0)
    if len(batches) == 0:
        raise ValueError("batches must hold at least one batch, got none")
    device = _one_device(models)
    batches = [b.to(device) for b in batches]
    steps = {
        n: make_train_step(m.train(), torch.optim.Adam(m.parameters(), lr=lr), clip_norm)
        for n, m in models.items()
    }
    windows = {n: window_runner(s, batches, steps_per_window) for n, s in steps.items()}
    warmup = {n: warmup_runner(s, batches, warmup_steps) for n, s in steps.items()}
    counts = dict(steps_per_window=steps_per_window, warmup_steps=warmup_steps)
    return time_interleaved(windows, n_rounds, device, warmup=warmup, **counts)


def training_batches(cfg, n_batches: int) -> list:
    """``n_batches`` batches of ``cfg``'s first epoch as :func:`~convs2s_edu.train` draws them
    (``cfg.batching``, shuffled with ``cfg.seed``): the data every timing of a config uses.
    They are taken at evenly spaced ranks of padded width, so that a few batches cost, on
    average, what the epoch's batches cost (with equal-length batches, the first few could
    all be short or all long); an epoch of fewer batches is cycled."""
    check_int("n_batches", n_batches, 1)
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
    """:func:`measure_training` of fresh models of ``cfg`` (only ``model`` changes) on its
    device, with its optimiser settings, on ``n_batches`` (default ``steps_per_window``)
    batches of :func:`training_batches`: the data and the step of :func:`~convs2s_edu.train`."""
    n_batches = steps_per_window if n_batches is None else check_int("n_batches", n_batches, 1)
    batches = training_batches(cfg, n_batches)
    dev = resolve_device(cfg.device)
    built = {}
    for name in models:
        # what train() runs: the fast paths or the reference, as this machine chose
        path = ExecutionPath.of(resolve_path(cfg.replace(model=name), say=False))
        torch.manual_seed(cfg.seed)
        built[name] = apply_path(build_model(cfg.replace(model=name)).to(dev), path)
    return measure_training(
        built, batches, steps_per_window, n_rounds, warmup_steps, cfg.lr, cfg.clip_norm
    )


@dataclass
class ThreadScaling:
    """Training throughput of the same models at several thread counts, all interleaved:
    ``measurement`` holds every window, keyed ``"<model>@<threads>"`` (e.g. ``"gru@2"``)."""

    models: list
    thread_counts: list
    measurement: SpeedMeasurement

    def at(self, threads: int) -> SpeedMeasurement:
        """The windows of ``threads`` threads as a measurement of its own (keyed by model,
        ``machine.threads`` set to ``threads``), for :func:`speed_verdict`."""
        if threads not in self.thread_counts:
            raise ValueError(f"no windows at {threads} threads; measured: {self.thread_counts}")
        raw, at = self.measurement, f"@{threads}"
        order = [k.removesuffix(at) for k in raw.order if k.endswith(at)]
        seconds = {m: raw.window_seconds[m + at] for m in self.models}
        tokens = {m: raw.window_tokens[m + at] for m in self.models}
        machine = replace(raw.machine, threads=threads, runnable=list(raw.machine.runnable))
        counts = {k: getattr(raw, k) for k in ("steps_per_window", "n_rounds", "warmup_steps")}
        return SpeedMeasurement.of_windows(self.models, order, seconds, tokens, machine, **counts)

    def to_dict(self) -> dict:
        """Per thread count, every model's throughput and ratio to the first (statistics of
        :class:`WindowStats`); and the raw windows."""
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

    ``cfg`` is a CPU configuration. ``thread_counts`` are PyTorch intra-op thread counts in
    ``1..usable cores`` (default all), set for each window and its warm-up by
    :func:`torch.utils.benchmark.set_torch_threads`; every round runs one window of every model
    at every count, and each count gets its own warm-up steps. ``steps_per_window``,
    ``n_rounds``, ``warmup_steps``, ``n_batches``: as in :func:`measure_config`. ``configs``
    (optional) gives each model its own configuration (e.g. the GRU of another width), and then
    ``models`` are its keys; the batches are ``cfg``'s either way. ``OMP_WAIT_POLICY`` is left.
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
        # the path train() runs (as chosen at this thread count)
        apply_path(model, ExecutionPath.of(resolve_path(configs[name], say=False)))
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.adam_betas)
        # the configuration's precision too: a bf16 configuration is timed in bf16
        step = make_train_step(model, optimizer, cfg.clip_norm, configs[name].precision)
        for t in counts:  # set_torch_threads(t) as a decorator: each call at t, then back
            key = f"{name}@{t}"
            windows[key] = set_torch_threads(t)(window_runner(step, batches, steps_per_window))
            warmups[key] = set_torch_threads(t)(warmup_runner(step, batches, warmup_steps))
    counts_kw = dict(steps_per_window=steps_per_window, warmup_steps=warmup_steps)
    raw = time_interleaved(windows, n_rounds, dev, warmup=warmups, **counts_kw)
    return ThreadScaling(list(models), counts, raw)


@dataclass
class SpeedVerdict:
    """What a measurement allows one to say.

    ``ok``: False when the measurement is not trustworthy; ``resolved``: True when ``ok`` and
    the two models' window ranges do not overlap; ``text``: the sentence to print, a warning
    starting with ``"WARNING"`` when not ``ok``; ``reasons``: why it is not ``ok``; ``faster``:
    the faster model when ``resolved``; ``by_threads``: see :func:`thread_verdict`.
    """

    ok: bool
    resolved: bool
    text: str
    reasons: list = field(default_factory=list)
    faster: str | None = None
    by_threads: dict = field(default_factory=dict)

    def _repr_html_(self) -> str:
        """A warning box when not ``ok`` (notebooks, gallery cells), else a note."""
        text = self.text.removeprefix("WARNING: ")  # the box says "Warning"
        body = html.escape(text[:1].upper() + text[1:])
        kind = "note" if self.ok else "warning"
        title = "" if self.ok else '<p class="admonition-title">Warning</p>'
        return f'<div class="admonition {kind}">{title}<p>{body}</p></div>'


def speed_verdict(
    m: SpeedMeasurement,
    max_spread: float = 1.5,
    labels: Mapping[str, str] | None = None,
    max_load: float | None = None,
) -> SpeedVerdict:
    """Say what ``m`` shows about the first two models, and only that.

    ``labels`` are display names, e.g. ``{"gru": "GRU + attention"}``. The machine counts as
    quiet when every model's window throughputs vary by at most ``max_spread`` (> 1;
    ``max / min``, not the interquartile range a :class:`~torch.utils.benchmark.Measurement`
    warns about, which one slow window hardly moves), the median number of other processes'
    runnable threads at the windows is at most the cores this measurement leaves free
    (``max_load``, by default the usable cores, less the PyTorch threads), and the one-minute
    load average at most ``max_load``, by default the cores + 0.5: that average also counts
    this process's own threads and lags by about a minute, so a build that kept every core
    busy just before reads about ``cores`` on an otherwise idle machine.

    Returns a :class:`SpeedVerdict`: a warning and no comparison when the machine was not quiet;
    otherwise the throughput ratio of the two models (median and range over rounds) and the
    faster model in words, or "not resolved" when their window ranges overlap. It never says
    *why* one was faster: the reasons (arithmetic per token, sequential steps) hold either way.
    """
    if not (isinstance(max_spread, (int, float)) and max_spread > 1):
        raise ValueError(f"max_spread must be a number > 1, got {max_spread!r}")
    if len(m.models) < 2:
        raise ValueError(f"need two models, got {m.models}")
    lab = lambda n: (labels or {}).get(n, n)
    a, b = m.models[0], m.models[1]
    limit = float(m.machine.cores if max_load is None else max_load)
    per_s = f"{m.unit.split()[-1]}/s"  # "tokens/s" or "sentences/s"
    reasons = [
        f"the timing windows of {lab(n)} varied by {s.spread:.2f}x (from {s.min:,.0f} to "
        f"{s.max:,.0f} {per_s}), more than the {max_spread:g}x allowed"
        for n, s in ((n, m.throughput[n]) for n in (a, b))
        if s.spread > max_spread
    ]
    load, slack = m.machine.load, 0.5 if max_load is None else 0.0
    if load is not None and load > limit + slack:
        allowed = "cores usable (+0.5 for this process's own recent work)" if slack else "allowed"
        reasons.append(f"the load average was {load:.2f}, more than the {limit:g} {allowed}")
    others = statistics.median(m.machine.runnable) if m.machine.runnable else 0  # other processes
    free = max(limit - m.machine.threads, 0)  # cores our PyTorch threads leave free
    if others > free:
        reasons.append(
            f"a median of {others:g} thread(s) of other processes were runnable during the "
            f"windows, more than the {free:g} of the {limit:g} cores usable that this "
            f"measurement's {m.machine.threads} PyTorch thread(s) leave free"
        )
    if reasons:
        text = (
            f"WARNING: this speed measurement is not reliable: {'; '.join(reasons)}. The machine "
            "was busy or unsteady, so no conclusion about the models is drawn from it. Measure "
            "again on an idle machine."
        )
        return SpeedVerdict(False, False, text, reasons)

    r, ta, tb = m.ratios[b], m.throughput[a], m.throughput[b]  # r: b / a, per round
    if ta.overlaps(tb):
        text = (
            f"The difference is not resolved: the window throughputs of {lab(a)} "
            f"({ta.min:,.0f}-{ta.max:,.0f} {per_s}) and {lab(b)} ({tb.min:,.0f}-"
            f"{tb.max:,.0f}) overlap; {lab(b)}/{lab(a)} throughput ratio {r.median:.2f} "
            f"(rounds: {r.min:.2f}-{r.max:.2f}, {r.n} rounds)."
        )
        return SpeedVerdict(True, False, text)
    if r.median >= 1:
        faster, slow, x, lo, hi = b, a, r.median, r.min, r.max
    else:
        faster, slow, x, lo, hi = a, b, 1 / r.median, 1 / r.max, 1 / r.min
    what = (
        f"trained {x:.2f}x as fast as {lab(slow)} in target tokens per second"
        if m.unit == "target tokens"
        else f"decoded {x:.2f}x as many {m.unit} per second as {lab(slow)}"
    )
    text = (
        f"{lab(faster)} {what} (per-round ratios {lo:.2f}-{hi:.2f} over {r.n} rounds; "
        f"every window of {lab(faster)} was faster than every window of {lab(slow)})."
    )
    return SpeedVerdict(True, True, text, faster=faster)


def thread_verdict(
    scaling: ThreadScaling, max_spread: float = 1.5, labels: Mapping[str, str] | None = None
) -> SpeedVerdict:
    """:func:`speed_verdict` at every thread count of ``scaling``, in one statement that names
    the hardware each holds for: the verdicts by count in ``by_threads``, their texts after the
    CPU and its cores in ``text``; ``ok`` and ``resolved`` when every count's verdict is.
    ``faster`` is ``None``: which model is faster depends on the hardware."""
    by = {t: speed_verdict(scaling.at(t), max_spread, labels) for t in scaling.thread_counts}
    mach = scaling.measurement.machine
    parts = []
    for i, (t, v) in enumerate(by.items()):
        what = v.text.removeprefix("WARNING: ")
        if what.startswith(("The ", "This ")):  # not a model's name: lower-case it
            what = what[:1].lower() + what[1:]
        parts.append(f"{'With' if i else 'with'} {t} thread{'s' if t > 1 else ''}: {what}")
    ok = all(v.ok for v in by.values())
    head = f"On {mach.cpu} ({mach.cores} cores usable, device {mach.device}), "
    text = ("" if ok else "WARNING: ") + head + " ".join(parts)
    reasons = [f"{t} threads: {r}" for t, v in by.items() for r in v.reasons]
    return SpeedVerdict(ok, ok and all(v.resolved for v in by.values()), text, reasons, None, by)


def training_flops_per_token(model: nn.Module, batch) -> float:
    """Floating-point operations of one training step's forward and backward pass, per
    target token (padding excluded), counted by :class:`torch.utils.flop_counter.FlopCounterMode`:
    matrix products and convolutions, not element-wise operations; a multiply-add is 2.

    A fact about the model and the batch: a model on a GPU is counted through a copy on the CPU,
    because there its GRU runs through cuDNN, whose fused operation the counter has no formula
    for (it would count the recurrent products as nothing).
    """
    if next(model.parameters()).device.type != "cpu":
        model = copy.deepcopy(model).cpu()
    was_training = model.training
    batch = batch.to("cpu")
    with FlopCounterMode(display=False) as counter:
        sequence_loss(model.train()(batch.src, batch.tgt_in), batch.tgt_out).backward()
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return counter.get_total_flops() / batch.n_target_tokens


def measure_generation(
    models: Mapping[str, nn.Module],
    sources: Sequence[Sequence[int]],
    beam_sizes: Sequence[int] = (1, 5),
    batch_size: int = 128,
    n_rounds: int = 4,
) -> dict:
    """Generation throughput of ``models`` on the same ``sources``, interleaved, per beam size.

    As Gehring et al. time generation (§5.3, Table 3): the sources decoded in batches of up to
    ``batch_size`` sentences of equal length (:func:`~convs2s_edu.decode.decode_all` with
    ``bucket=True``), greedily (``beam_sizes`` 1) and with beam search (5), the incremental
    decoder state of each model (ConvS2S shifts its convolution windows, it does not recompute
    them). For every beam size, every model (at least two, on one device) decodes all the
    sources once per window, ``n_rounds`` (>= 2) windows each (:func:`time_interleaved`), after
    an untimed warm-up decoding of the first batch. Returns a :class:`SpeedMeasurement` per beam
    size, whose "tokens" are the sentences decoded: the throughput is in sentences per second.
    """
    if len(models) < 2:
        raise ValueError(f"need at least two models to interleave, got {list(models)}")
    sources = [list(x) for x in sources]
    if not sources:
        raise ValueError("need at least one source sentence, got none")
    device = _one_device(models)
    out = {}
    for k in beam_sizes:
        k = check_int("beam size", k)
        window = lambda m, k=k: lambda: len(decode_all(m, sources, k, batch_size))  # sentences
        warm = lambda m, k=k: lambda: decode_all(m, sources[:batch_size], beam_size=k)
        windows = {n: window(m) for n, m in models.items()}
        warmup = {n: warm(m) for n, m in models.items()}
        measured = time_interleaved(windows, n_rounds, device, warmup=warmup)
        out[k] = replace(measured, unit="sentences")
    return out


def time_incremental_vs_full(
    model,
    target_lengths: Sequence[int] = (20, 50, 100),
    batch_size: int = 32,
    repeats: int = 3,
    seed: int = 0,
) -> list[dict]:
    r"""Time greedy decoding with and without the incremental state.

    ``model`` is an EncoderDecoder (ConvS2S, RNNSeq2Seq or a HybridSeq2Seq);
    ``target_lengths`` are the numbers of decoding steps to time, each in ``1..max_positions``
    (build the model with a larger ``max_positions`` for longer ones). ``batch_size`` (>= 1)
    random sources of ``target_len`` tokens (drawn with ``seed``) are decoded together, forced
    to exactly ``target_len`` steps (``stop_at_eos=False``), so that both methods do the same
    steps; the encoder runs once in both. Each setting is timed by
    :meth:`torch.utils.benchmark.Timer.timeit`: two untimed decodings (its warm-up), then
    ``repeats`` (>= 1) on the clock, whose mean per run is reported.

    Returns one record per target length with keys ``target_len``, ``batch_size``,
    ``seconds_full``, ``seconds_incremental`` and ``speedup`` (``seconds_full /
    seconds_incremental``).

    For ConvS2S the full recompute costs :math:`\sum_{t=1}^{T} t = T(T+1)/2` decoder columns
    against :math:`T` with the cache, so the speedup should grow roughly linearly with :math:`T`
    (on small models per-call overhead hides part of it).
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"cannot time a {type(model).__name__}; expected an EncoderDecoder")
    if isinstance(target_lengths, numbers.Integral):
        target_lengths = (target_lengths,)
    if not list(target_lengths):
        raise ValueError("target_lengths must hold at least one length, got none")
    top = model.max_positions
    name = f"target length (at most max_positions={top}; build the model with a larger one)"
    lengths = [check_int(name, T, 1, top) for T in target_lengths]
    batch_size, repeats = check_int("batch_size", batch_size), check_int("repeats", repeats)
    device = next(model.parameters()).device
    gen, threads = torch.Generator().manual_seed(int(seed)), torch.get_num_threads()
    run = "decode(model, src, max_len=T, incremental=inc, stop_at_eos=False)"
    records = []
    for T in lengths:
        src = torch.randint(1, model.vocab_size + 1, (batch_size, T), generator=gen)  # (B, T)
        scope = {"decode": greedy_decode, "model": model, "src": src.to(device), "T": T}
        inc, full = (
            Timer(run, globals={**scope, "inc": i}, num_threads=threads).timeit(repeats).median
            for i in (True, False)
        )
        record = {"target_len": T, "batch_size": batch_size, "seconds_full": full}
        speedup = full / inc if inc > 0 else float("inf")
        records.append({**record, "seconds_incremental": inc, "speedup": speedup})
    return records
