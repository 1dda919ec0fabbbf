r"""Running an experiment: every arm with every seed, through the training cache.

:func:`run_experiment` trains every arm with every seed through the training
cache (:func:`~convs2s_edu.train_or_load`), measures each run once (the
measurements are cached next to the checkpoint) and returns one tidy row per
arm (:func:`~convs2s_edu.lab.experiments.statistics.summarise_runs`).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..._version import __version__
from ...data import SortingDataset, generate_dataset
from ...metrics import evaluate
from ...training.cache import run_dir, train_or_load
from ...training.checkpoint import TrainResult
from ...training.config import TrainConfig, make_datasets
from ...training.device import synchronize
from ...training.progress import Progress
from .registry import (
    BEAM_EXAMPLES,
    DECODE_BATCH,
    LONG_LENGTHS,
    Budget,
    Experiment,
    budget,
    get_experiment,
)
from .statistics import summarise_runs

__all__ = ["ExperimentResult", "run_experiment"]

# --------------------------------------------------------------------------
# Measuring one run (cached next to its checkpoint)
# --------------------------------------------------------------------------


def _timed_evaluate(model, examples, beam_size: int = 1) -> tuple[dict, float]:
    """Scores and wall-clock seconds of decoding ``examples`` (after a small warm-up)."""
    device = next(model.parameters()).device
    evaluate(model, examples[:8], batch_size=DECODE_BATCH, beam_size=beam_size)  # warm-up
    synchronize(device)
    start = time.perf_counter()
    scores = evaluate(model, examples, batch_size=DECODE_BATCH, beam_size=beam_size)
    synchronize(device)
    return scores, time.perf_counter() - start


def _measure_base(result: TrainResult, b: Budget) -> dict:
    h = result.history
    scores = evaluate(result.model, make_datasets(result.config)[2], batch_size=DECODE_BATCH)
    return {
        "exact_match": scores["exact_match"],
        "token_accuracy": scores["token_accuracy"],
        "valid_loss": h.epochs[-1]["valid_loss"],
        "sec_per_epoch": statistics.median(h.column("seconds")),
        "n_parameters": h.n_parameters,
    }


def _measure_greedy_time(result: TrainResult, b: Budget) -> dict:
    test = make_datasets(result.config)[2]
    return {"greedy_seconds": _timed_evaluate(result.model, test.examples)[1]}


def _long_test_set(cfg: TrainConfig, lo: int, hi: int) -> SortingDataset:
    # seeds 10_000 + ...: apart from the training/held-out/test seeds (seed, seed+1, seed+2)
    examples = generate_dataset(cfg.n_test, lo, hi, cfg.vocab_size, 10_000 + 100 * cfg.seed + lo)
    return SortingDataset(examples, cfg.vocab_size)


def _measure_long(result: TrainResult, b: Budget) -> dict:
    out = {}
    for lo, hi in LONG_LENGTHS:
        scores = evaluate(
            result.model, _long_test_set(result.config, lo, hi), batch_size=DECODE_BATCH
        )
        out[f"exact_match_{lo}_{hi}"] = scores["exact_match"]
        out[f"token_accuracy_{lo}_{hi}"] = scores["token_accuracy"]
    return out


def _measure_beam(result: TrainResult, b: Budget) -> dict:
    test = make_datasets(result.config)[2].examples[:BEAM_EXAMPLES]
    out = {}
    for k in b.beam_sizes:
        scores, seconds = _timed_evaluate(result.model, test, beam_size=k)
        out[f"exact_match_beam{k}"] = scores["exact_match"]
        out[f"token_accuracy_beam{k}"] = scores["token_accuracy"]
        out[f"seconds_beam{k}"] = seconds
    return out


_MEASURES: dict[str, Callable[[TrainResult, Budget], dict]] = {
    "base": _measure_base,
    "greedy_time": _measure_greedy_time,
    "long": _measure_long,
    "beam": _measure_beam,
}


def _measure_params(name: str, b: Budget) -> dict:
    """What a measurement depends on beyond the trained run (part of its cache key)."""
    params = {"measure": name, "version": __version__, "decode_batch": DECODE_BATCH}
    if name == "long":
        params["lengths"] = LONG_LENGTHS
    if name == "beam":
        params["beam_sizes"] = list(b.beam_sizes)
        params["examples"] = BEAM_EXAMPLES
    return params


def _measured_run(
    cfg: TrainConfig, measures: Sequence[str], b: Budget, directory, progress
) -> tuple[dict, bool]:
    """Train (or load) one run and take the measurements ``measures`` not yet cached.

    Returns the measured values and whether everything came from the cache."""
    where = run_dir(cfg, directory)
    values, result, cached = {}, None, True
    for name in ("base", *measures):
        blob = json.dumps(_measure_params(name, b), sort_keys=True).encode()
        path = where / f"measure-{name}-{hashlib.sha256(blob).hexdigest()[:12]}.json"
        if path.is_file():
            values.update(json.loads(path.read_text()))
            continue
        cached = False
        if result is None:
            result = train_or_load(cfg, progress=progress, directory=directory)
        measured = _MEASURES[name](result, b)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(measured))
        tmp.replace(path)
        values.update(measured)
    return values, cached


@dataclass
class ExperimentResult:
    """What :func:`run_experiment` returns.

    Attributes
    ----------
    experiment : Experiment
    budget : Budget
    runs : list of dict
        One record per (arm, seed).
    rows : list of dict
        One row per arm (:func:`summarise_runs`).
    """

    experiment: Experiment
    budget: Budget
    runs: list
    rows: list

    def row(self, arm: str) -> dict:
        """The row of ``arm``; unknown names raise ``ValueError``."""
        for row in self.rows:
            if row["arm"] == arm:
                return row
        raise ValueError(
            f"no arm {arm!r} in experiment {self.experiment.name!r}; "
            f"allowed: {', '.join(r['arm'] for r in self.rows)}"
        )

    def to_dict(self) -> dict:
        return {
            "experiment": self.experiment.name,
            "budget": self.budget.__dict__,
            "runs": self.runs,
            "rows": self.rows,
        }


def run_experiment(
    name: str,
    *,
    seeds: int | None = None,
    epochs: int | None = None,
    arms: Sequence[str] | None = None,
    quick: bool | None = None,
    progress: bool | None = None,
    directory=None,
    custom_budget: Budget | None = None,
) -> ExperimentResult:
    """Run (or load from the cache) every arm of experiment ``name`` with every seed.

    Parameters
    ----------
    name : str
        A key of :data:`EXPERIMENTS`.
    seeds, epochs : int, optional
        Override the budget's seeds per arm / epochs per run (:func:`budget`).
    arms : sequence of str, optional
        Run only these arms (default: all).
    quick : bool, optional
        The quick build's budget (default: ``CONVS2S_EDU_QUICK``).
    progress : bool, optional
        ``None`` or ``True``: a bar across runs when stderr is a terminal, else one line per
        run (:class:`~convs2s_edu.training.progress.Progress`); ``False``: silent.
    directory : str or Path, optional
        The training cache (default :func:`~convs2s_edu.training.cache_dir`).
    custom_budget : Budget, optional
        Use this budget instead of :func:`budget`'s (``seeds``, ``epochs``, ``quick`` are
        then ignored); for tests and explorations.

    Returns
    -------
    ExperimentResult

    Notes
    -----
    A run is trained only when the cache does not hold it, and measured only when its
    measurements are not cached next to its checkpoint: a second call trains and
    decodes nothing.
    """
    exp = get_experiment(name)
    chosen = exp.select(arms)
    b = custom_budget if custom_budget is not None else budget(quick, seeds, epochs)
    runs = []
    total = len(chosen) * b.seeds
    with Progress(total, name, progress) as bar:  # the build's log, not the page, in a docs build
        for arm in chosen:
            for seed in range(b.seeds):
                cfg = b.train_config(arm, seed)
                start = time.perf_counter()
                values, cached = _measured_run(cfg, exp.measures, b, directory, progress=False)
                runs.append({"arm": arm.name, "seed": seed, **values})
                how = "cached" if cached else f"{time.perf_counter() - start:.1f} s"
                bar.update()
                bar.note(f"[{len(runs)}/{total}] {name}/{arm.name} seed {seed}: {how}")
    return ExperimentResult(exp, b, runs, summarise_runs(runs, chosen))
