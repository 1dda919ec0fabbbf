r"""The machine decides the path: the fast paths only where they time faster than the
reference.

:class:`~convs2s_edu.TrainConfig`'s ``fast=None`` (the default) asks this module which
path a configuration trains on, the way ``torch.backends.cudnn.benchmark`` lets cuDNN
pick a convolution algorithm by timing the candidates. A fast path of
:mod:`convs2s_edu.fast` computes the same function as the reference model (dropout: in
distribution); whether it
is *faster* depends on the CPU's kernels, the thread count and the shapes: the fast
ConvS2S block was faster than the reference on two CPUs and slower on a third.

:func:`calibrate` times the training step of the configuration, reference and fast
paths in turn (interleaved rounds, so that a slow minute of the machine slows both);
:func:`prefers_fast` chooses the fast paths only when *every* round's speed-up clears
:data:`FAST_MARGIN`, else the reference, so that noise can never choose the fast path.
:func:`~convs2s_edu.train` writes the choice into the config it trains (``fast=True`` or
``False``, :func:`resolve_path`): its checkpoint, the run's provenance and the
experiment record name the path taken. The training cache keys the entry by the request
(``fast=None``: "the path this machine chose"), so that a process with other threads,
whose choice may differ, loads the run instead of training it again; a resumed run goes
on on the path it began with.

The choice is cached, once per machine and configuration, in ``paths.json`` of the
training cache (:func:`~convs2s_edu.training.cache_dir`), keyed by the device,
the CPU's model and kernels, the thread count, torch's version, the fingerprint of the
training code and the configuration's shapes (model, its options, batch size, lengths,
vocabulary, precision). A build that trains dozens of runs of one configuration times
it once. ``TrainConfig(fast=True)`` or ``fast=False`` (``convs2s-edu train --fast`` /
``--no-fast``) skips all this.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch
from torch.utils import benchmark

from ..data import collate_batch, generate_dataset
from ..fast.paths import (
    MEASURED_FASTEST,
    ExecutionPath,
    bf16_support,
    has_fast_path,
    use_fast_paths,
)
from .config import TrainConfig, build_model
from .device import MACHINE_KEYS, cache_dir, provenance, resolve_device
from .fingerprint import TRAINING_FILES, fingerprint
from .step import make_train_step

__all__ = [
    "FAST_MARGIN",
    "prefers_fast",
    "calibrate",
    "resolve_path",
    "machine_choice",
    "choices_file",
    "default_path",
]

#: The fast paths must be at least this much faster than the reference in every round.
FAST_MARGIN = 0.05

#: The fields of a config that set the shapes and arithmetic of its training step.
_SHAPE_FIELDS = (
    "model",
    "model_options",
    "paper_normalisation",
    "vocab_size",
    "min_len",
    "max_len",
    "batch_size",
    "clip_norm",
    "precision",
)


def prefers_fast(speedups, margin: float = FAST_MARGIN) -> bool:
    """Whether rounds with these speed-ups (reference time / fast time, one per round)
    choose the fast paths: only when the slowest round is ``1 + margin`` or more.

    >>> prefers_fast([1.21, 1.18, 1.25]), prefers_fast([1.30, 1.02, 1.25])
    (True, False)
    """
    return min(speedups) >= 1 + margin


def calibrate(cfg: TrainConfig, rounds: int = 4, steps: int = 2) -> dict:
    """Time ``cfg``'s training step on the reference and on the fast paths.

    Both paths train a copy of the same freshly built model with Adam on one batch of
    ``cfg.batch_size`` examples of the task, on ``cfg``'s device and precision, with the
    threads PyTorch has now. After two warm-up steps each, ``rounds`` rounds time
    ``steps`` steps of each path (:class:`torch.utils.benchmark.Timer`), in alternating
    order; the first round whose speed-up misses the margin ends the timing (the
    reference wins).

    Returns
    -------
    dict
        ``speedups`` (reference time / fast time, per round), ``fast`` (the choice of
        :func:`prefers_fast`) and ``margin``.
    """
    # the caller's random state is left as it was
    with torch.random.fork_rng(devices=[]):
        return _calibrate(cfg, rounds, steps)


def _calibrate(cfg: TrainConfig, rounds: int, steps: int) -> dict:
    device = resolve_device(cfg.device)
    torch.manual_seed(cfg.seed)
    reference = build_model(cfg).to(device)
    models = {False: reference, True: use_fast_paths(copy.deepcopy(reference))}
    examples = generate_dataset(
        cfg.batch_size, cfg.min_len, cfg.max_len, cfg.vocab_size, seed=0, task=cfg.task
    )
    batch = collate_batch(examples, cfg.vocab_size).to(device)
    timers = {}
    for fast, model in models.items():
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        step = make_train_step(model.train(), optimizer, cfg.clip_norm, cfg.precision)
        for _ in range(2):  # warm-up: allocations, the optimiser's state
            step(batch)
        timers[fast] = benchmark.Timer(
            "step(batch)", globals={"step": step, "batch": batch}
        )
    speedups = []
    for r in range(rounds):
        seconds = {}
        for fast in (False, True) if r % 2 == 0 else (True, False):
            seconds[fast] = timers[fast].timeit(steps).mean
        speedups.append(seconds[False] / seconds[True])
        if not prefers_fast(speedups):
            break  # one round short of the margin decides: the reference
    return {"speedups": speedups, "fast": prefers_fast(speedups), "margin": FAST_MARGIN}


def choices_file() -> Path:
    """Where the choices are cached: ``paths.json`` in the training cache's folder."""
    return cache_dir() / "paths.json"


def _key(cfg: TrainConfig) -> str:
    device = resolve_device(cfg.device)
    here = provenance(device, "")
    machine = {k: here[k] for k in MACHINE_KEYS}
    shapes = {k: getattr(cfg, k) for k in _SHAPE_FIELDS}
    code = fingerprint(TRAINING_FILES)
    return json.dumps(
        {"machine": machine, "config": shapes, "code": code}, sort_keys=True
    )


def resolve_path(cfg: TrainConfig, say: bool = True) -> TrainConfig:
    """``cfg`` with ``fast`` decided: as given when it is ``True`` or ``False``;
    ``False`` when the model has no fast path or compiles; else the machine's choice
    (:func:`machine_choice`)."""
    if cfg.fast is not None:
        return cfg
    if cfg.compile or not has_fast_path(build_model(cfg)):
        return cfg.replace(fast=False)
    return cfg.replace(fast=machine_choice(cfg, say)["fast"])


def machine_choice(cfg: TrainConfig, say: bool = True) -> dict:
    """What :func:`calibrate` found for ``cfg`` on this machine: read from
    :func:`choices_file`, or timed the first time (and printed to stderr unless
    ``say=False``)."""
    from filelock import FileLock

    where, key = choices_file(), _key(cfg)
    where.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{where}.lock"):  # one process times it; the others read its choice
        choices = json.loads(where.read_text()) if where.is_file() else {}
        if key not in choices:
            choices[key] = calibrate(cfg)
            where.write_text(json.dumps(choices, indent=1))
            if say:
                _say(cfg, choices[key])
    return choices[key]


def default_path(
    device: torch.device | str, cfg: TrainConfig | None = None
) -> ExecutionPath:
    """The path ``cfg`` (default: ``TrainConfig()``'s model and sizes) trains on by
    default on ``device``.

    Notes
    -----
    * CPU: eager fp32, through the fast paths only where a timing of ``cfg``'s training
      step on this machine chose them (:func:`resolve_path`: no rule fixed from some
      CPUs held on every CPU). :func:`torch.compile` is not the default: a compiled
      ConvS2S step is faster than the eager fast paths on the CPUs measured, but the
      compilation costs tens of seconds from an empty inductor cache, more than a short
      run saves; ``compile=True`` (``convs2s-edu train --compile``) is the choice for
      long runs. bf16 stays off so that the site
      trains the same arithmetic on every CPU, with or without bf16 instructions;
      ``precision="bf16"`` (``convs2s-edu train --precision bf16``) is the choice to
      make on a CPU that has them.
    * CUDA (:data:`~convs2s_edu.fast.paths.MEASURED_FASTEST`): compiled with CUDA graphs
      (``mode="reduce-overhead"``) in bf16 where the GPU supports it, else fp32: at
      these sizes a step is hundreds of tiny kernels, and launch overhead, not
      arithmetic, sets the time. This is the expectation that ``tools/gpu_check.py``
      measures; it has not yet run on a GPU.
    """
    device = torch.device(device)
    if device.type != "cuda":
        cfg = (cfg or TrainConfig()).replace(device=str(device))
        return ExecutionPath(fast=resolve_path(cfg, say=False).fast)
    path = MEASURED_FASTEST["cuda"]
    if not bf16_support(device)[0]:
        path = ExecutionPath(path.compile, path.compile_mode, "fp32", path.fast)
    return path


def _say(cfg: TrainConfig, choice: dict) -> None:
    s = choice["speedups"]
    path = "the fast paths" if choice["fast"] else "the reference"
    print(
        f"convs2s_edu: {cfg.model} trains on {path} on this machine ({torch.get_num_threads()}"
        f" thread(s)): the fast paths ran {min(s):.2f}-{max(s):.2f}x the reference's speed "
        f"in {len(s)} rounds (needed: {1 + choice['margin']:.2f}x in every round)",
        file=sys.stderr,
    )
