r"""What the claims time: generation speed as Table 3 measures it, and seconds per step.

Both are measured in the process that shows them, alone (never in the concurrent
training runs, whose clocks measured each other), interleaved
(:mod:`convs2s_edu.lab.timing`):

* :func:`generation_speed`: for every seed, the trained ConvS2S, 1-layer GRU and
  parameter-matched GRU of the ``generation`` experiment decode the first
  :data:`~convs2s_edu.lab.experiments.registry.GREEDY_EXAMPLES` sources of that seed's test set
  greedily and with a beam of 5, in batches of up to 128 sentences of equal length
  (:func:`~convs2s_edu.lab.timing.measure_generation`): sentences per second per model,
  seed and beam size, paired by seed (the same sources for every model).
* :func:`step_seconds`: ConvS2S and the GRU of the experiments' budget, trained at every
  thread count (:func:`~convs2s_edu.lab.timing.measure_threads`): the median seconds per
  step that turn the learning curves' steps into seconds.

A measurement is kept in the training cache under a key made of the machine (CPU model,
usable cores, PyTorch threads, torch version, device), the budget and the package
version: a second page of the same build, on the same machine, reads it instead of
measuring again; another machine, or another thread setting, measures afresh. Every
stored measurement carries its machine line and the verdict of its windows.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from ..._version import __version__
from ...training.cache import cache_dir, train_or_load
from ...training.config import make_datasets
from ...training.device import resolve_device
from ..timing import (
    machine_info,
    measure_generation,
    measure_threads,
    seconds_per_step,
    speed_verdict,
)
from .registry import GREEDY_EXAMPLES, Budget, budget, get_experiment

__all__ = ["timing_key", "generation_speed", "step_seconds"]

#: Rounds of interleaved windows per beam size and seed (generation) and per thread
#: count (steps).
ROUNDS = {"generation": 3, "steps": 6}


def timing_key(kind: str, b: Budget, **extra) -> str:
    """The key of a stored timing: what it measured and where."""
    machine = asdict(machine_info(resolve_device("auto")))  # its loads not yet read
    what = {
        "kind": kind,
        "budget": asdict(b),
        "version": __version__,
        "machine": machine,
    }
    blob = json.dumps(what | extra, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _stored(kind: str, b: Budget, directory, measure, **extra) -> dict:
    folder = cache_dir() if directory is None else Path(directory)
    path = folder / f"timing-{kind}-{timing_key(kind, b, **extra)}.json"
    if path.is_file():
        return json.loads(path.read_text())
    value = measure()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value))
    tmp.replace(path)
    return value


def generation_speed(
    b: Budget | None = None, beam_sizes=(1, 5), directory=None, batch_size: int = 128
) -> dict:
    """Sentences per second of the ``generation`` experiment's models, per seed and beam
    size.

    Returns
    -------
    dict
        ``{"beam<k>": {"<arm>": [sentences/s per seed], ...}, "verdicts": {"beam<k>":
        [verdict text per seed]}, "ok": bool, "machine": str}``.
    """
    b = b if b is not None else budget()
    arms = get_experiment("generation").arms

    def measure() -> dict:
        out = {f"beam{k}": {a.name: [] for a in arms} for k in beam_sizes}
        verdicts = {f"beam{k}": [] for k in beam_sizes}
        ok, machine = True, machine_info("cpu").describe()
        for seed in b.seeds_of("generation", arms[0].name):  # every arm's seeds
            cfgs = {a.name: b.train_config(a, seed) for a in arms}
            models = {
                n: train_or_load(c, progress=False, directory=directory).model
                for n, c in cfgs.items()
            }
            test = make_datasets(cfgs["convs2s"])[2].examples[:GREEDY_EXAMPLES]
            sources = [x for x, _ in test]
            measured = measure_generation(
                models, sources, beam_sizes, batch_size, n_rounds=ROUNDS["generation"]
            )
            for k, m in measured.items():
                for n in models:
                    out[f"beam{k}"][n].append(m.throughput[n].median)
                v = speed_verdict(m)
                verdicts[f"beam{k}"].append(v.text)
                ok = ok and v.ok
                machine = m.machine.describe()
        return {**out, "verdicts": verdicts, "ok": ok, "machine": machine}

    return _stored("generation", b, directory, measure, beams=list(beam_sizes))


def step_seconds(b: Budget | None = None, directory=None) -> dict:
    """Median seconds per training step of the experiments' ConvS2S and GRU at every
    thread count (:func:`~convs2s_edu.lab.timing.measure_threads` on seed 0's
    configuration).

    Returns
    -------
    dict
        ``{"seconds_per_step": {"convs2s": {"1 thread": s, ...},
        "gru": {...}}, "reliable": {"1 thread": bool, ...},
        "verdict": str, "ok": bool, "machine": str}``: ``reliable`` says, per thread
        count, whether its windows can be trusted
        (:func:`~convs2s_edu.lab.timing.speed_verdict`'s ``ok``); a learning-speed claim
        at a thread count whose windows cannot is not judged.
    """
    b = b if b is not None else budget()
    arms = {a.name: a for a in get_experiment("encoder_decoder").arms}

    def measure() -> dict:
        configs = {n: b.train_config(arms[n], 0) for n in ("convs2s", "gru")}
        scaling = measure_threads(
            configs["convs2s"],
            n_rounds=ROUNDS["steps"],
            steps_per_window=4,
            configs=configs,
        )
        v = speed_verdict(scaling)
        return {
            "seconds_per_step": seconds_per_step(scaling),
            "reliable": {where: w.ok for where, w in v.by_hardware.items()},
            "verdict": v.text,
            "ok": v.ok,
            "machine": scaling.measurement.machine.describe(),
        }

    return _stored("steps", b, directory, measure)
