r"""Running an experiment: every arm with every seed, trained and scored concurrently.

:func:`run_experiment` trains every arm with every seed through the training cache
and scores each run once (:func:`measured_run`: the test set's loss, exact match and
sequence errors in one teacher-forced pass, greedy token accuracy, what the learning
curve says about convergence, beam accuracies), one process per usable core
(:func:`convs2s_edu.training.run_jobs`); the scores are cached next to the checkpoint,
so a second call trains and decodes nothing.
Nothing here is timed: the runs share the machine. What the claims time (generation,
seconds per step) is measured alone by :mod:`convs2s_edu.lab.experiments.timings`.

What the learning curve of a run gives
--------------------------------------
``steps_to_<level>``
    The first evaluated step at which held-out exact match reached the level
    (:data:`CURVE_LEVELS`), or ``nan`` when the run never did
    (with ``reached_<level>`` 0: a result, not a gap).
``final_valid_em``
    Held-out exact match at the end of the budget. Claims are judged at the budget
    (:attr:`Budget.label <convs2s_edu.lab.experiments.Budget.label>`), never gated on
    whether a curve still moves: with the learning rate decaying to zero, the loss of a
    deterministic task keeps falling to the end, and every arm tends to 100%.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ...data import generate_dataset
from ...metrics import evaluate, teacher_forced_scores
from ...training.cache import run_dir, train_or_load
from ...training.config import TrainConfig, make_datasets
from ...training.fingerprint import fingerprint
from ...training.schedule import Job, run_jobs, train_cost
from .registry import (
    BEAM_EXAMPLES,
    DECODE_BATCH,
    GREEDY_EXAMPLES,
    LONG_LENGTHS,
    Budget,
    Experiment,
    budget,
    get_experiment,
)
from .statistics import summarise_runs

__all__ = [
    "CURVE_LEVELS",
    "ExperimentResult",
    "measured_run",
    "group_names",
    "cached_groups",
    "cached_measures",
    "measure_groups_job",
    "experiment_configs",
    "run_experiment",
]


#: The held-out exact-match levels whose first crossing every run keeps
#: (``steps_to_<level>``; the claims read 0.9).
CURVE_LEVELS = (0.5, 0.9, 0.95)


def _curve_summary(evals: list) -> dict:
    out = {}
    for level in CURVE_LEVELS:
        hit = next((e for e in evals if e["exact_match"] >= level), None)
        out[f"steps_to_{level}"] = float(hit["step"]) if hit else math.nan
        out[f"reached_{level}"] = 1.0 if hit else 0.0
    out["final_valid_em"] = evals[-1]["exact_match"]
    return out


def _measure(cfg: TrainConfig, group: str, result) -> dict:
    """The values of one measure group (``"base"``, ``"long"``, ``"beam:1,2,5"``) of a run."""
    test = make_datasets(cfg)[2]
    if group == "base":
        h = result.history
        # the whole test set in one teacher-forced pass; greedy token accuracy on a part
        tf = teacher_forced_scores(result.model, test, batch_size=DECODE_BATCH)
        greedy = evaluate(
            result.model, test.examples[:GREEDY_EXAMPLES], batch_size=DECODE_BATCH
        )
        return {
            "exact_match": tf["exact_match"],
            "sequence_errors": float(tf["n_examples"] - sum(tf["correct"])),
            "test_loss": tf["loss"],
            "token_accuracy": greedy["token_accuracy"],
            "valid_loss": h.epochs[-1]["valid_loss"],
            "n_parameters": float(h.n_parameters),
            "steps": float(h.steps),
            **_curve_summary(h.evals),
        }
    values = {}
    if group == "long":
        for lo, hi in LONG_LENGTHS:
            # seeds 10_000 + ...: apart from the training, held-out and test seeds
            seed = 10_000 + 100 * cfg.seed + lo
            n = min(GREEDY_EXAMPLES, cfg.n_test)
            longer = generate_dataset(n, lo, hi, cfg.vocab_size, seed, cfg.task)
            s = evaluate(result.model, longer, batch_size=DECODE_BATCH)
            values[f"exact_match_{lo}_{hi}"] = s["exact_match"]
            values[f"token_accuracy_{lo}_{hi}"] = s["token_accuracy"]
        return values
    examples = test.examples[:BEAM_EXAMPLES]
    for k in (int(x) for x in group.removeprefix("beam:").split(",")):
        s = evaluate(result.model, examples, batch_size=DECODE_BATCH, beam_size=k)
        values[f"exact_match_beam{k}"] = s["exact_match"]
        values[f"token_accuracy_beam{k}"] = s["token_accuracy"]
    return values


def group_names(measures, beam_sizes) -> list[str]:
    """The measure groups of an experiment's measures (``base`` always)."""
    out = ["base"]
    if "long" in measures:
        out.append("long")
    if "beam" in measures:
        out.append("beam:" + ",".join(str(k) for k in beam_sizes))
    return out


def _measure_file(cfg: TrainConfig, directory) -> Path:
    """Where a run's measurements live: next to its checkpoint, one file for every group."""
    return run_dir(cfg, directory) / "measures.json"


def _read(path: Path) -> dict:
    """The groups measured so far (nothing when the file is missing or was measured by
    other code: :func:`~convs2s_edu.training.fingerprint.fingerprint`)."""
    if not path.is_file():
        return {}
    stored = json.loads(path.read_text())
    same = stored.get("code") == fingerprint() and stored.get("params") == _PARAMS
    return stored["groups"] if same else {}


#: What the measurements depend on beyond the run (a change measures again), as read
#: back from JSON (tuples become lists).
_PARAMS = json.loads(
    json.dumps({"beam": BEAM_EXAMPLES, "greedy": GREEDY_EXAMPLES, "long": LONG_LENGTHS})
)


def cached_groups(
    cfg: TrainConfig, measures=(), beam_sizes=(), directory=None
) -> dict | None:
    """The cached measurements of ``cfg``'s run by group (:func:`group_names`), or
    ``None`` when one of the groups asked for is not cached (or was measured by other
    code)."""
    groups = _read(_measure_file(cfg, directory))
    wanted = group_names(measures, beam_sizes)
    return {g: groups[g] for g in wanted} if all(g in groups for g in wanted) else None


def cached_measures(
    cfg: TrainConfig, measures=(), beam_sizes=(), directory=None
) -> dict | None:
    """The cached measurements of ``cfg``'s run (every group asked for, in one dict), or
    ``None`` when one of them is not cached."""
    groups = cached_groups(cfg, measures, beam_sizes, directory)
    if groups is None:
        return None
    return {k: v for g in groups.values() for k, v in g.items()}


def measured_run(cfg: TrainConfig, measures=(), beam_sizes=(), directory=None) -> dict:
    """Train (or load) ``cfg``'s run and measure what is not measured yet; the
    measurements are kept in one file next to its checkpoint (updated under a lock,
    written atomically), so that the next call only reads them, whichever experiment
    asks. The lock is a ``filelock.FileLock`` on a file of its own (the training holds
    the cache entry's)."""
    from filelock import FileLock  # imported here, as in training.cache (the GPU image)

    cached = cached_measures(cfg, measures, beam_sizes, directory)
    if cached is not None:
        return cached
    result = train_or_load(cfg, progress=False, directory=directory)
    path = _measure_file(cfg, directory)
    with FileLock(path.parent / ".measures.lock"):
        groups = _read(path)
        for group in group_names(measures, beam_sizes):
            if group not in groups:
                groups[group] = _measure(cfg, group, result)
        state = {"code": fingerprint(), "params": _PARAMS, "groups": groups}
        _write(path, json.dumps(state))
    return cached_measures(cfg, measures, beam_sizes, directory)


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file, then renamed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def measure_groups_job(cfg, measures, beam_sizes, directory=None, label="") -> Job:
    """The scheduler's job of one run: :func:`measured_run` (skipped when cached) with
    ``measures``, e.g. the union of every experiment's measures of the run."""
    args = (cfg, tuple(sorted(measures)), tuple(beam_sizes), directory)
    return Job(
        "convs2s_edu.lab.experiments.runner:measured_run",
        args,
        label=label or run_dir(cfg, directory).name,
        cost=train_cost(cfg),
        key=f"{run_dir(cfg, directory)}:{','.join(group_names(measures, beam_sizes))}",
        done="convs2s_edu.lab.experiments.runner:cached_measures",
    )


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
        One row per arm
        (:func:`~convs2s_edu.lab.experiments.statistics.summarise_runs`).
    curves : dict, optional
        ``{(arm, seed): learning curve}`` when the runs come from the experiment record
        (:mod:`~convs2s_edu.lab.experiments.record`); ``None``: the curves are in the
        training cache.
    """

    experiment: Experiment
    budget: Budget
    runs: list
    rows: list
    curves: dict | None = None

    def row(self, arm: str) -> dict:
        """The row of ``arm``; unknown names raise ``ValueError``."""
        for row in self.rows:
            if row["arm"] == arm:
                return row
        raise ValueError(
            f"no arm {arm!r} in experiment {self.experiment.name!r}; "
            f"allowed: {', '.join(r['arm'] for r in self.rows)}"
        )

    @property
    def left_out(self) -> tuple:
        """The experiment's arms without a row here (a run of some ``arms`` only)."""
        have = {r["arm"] for r in self.rows}
        return tuple(a.name for a in self.experiment.arms if a.name not in have)

    def to_dict(self) -> dict:
        return {
            "experiment": self.experiment.name,
            "budget": self.budget.__dict__,
            "runs": self.runs,
            "rows": self.rows,
        }


def experiment_configs(name: str, b: Budget, arms=None, task=None) -> list[tuple]:
    """``(arm, seed, TrainConfig)`` of every chosen arm x seed of experiment ``name``."""
    out = []
    for arm in get_experiment(name).select(arms):
        for seed in b.seeds_of(name, arm.name):
            cfg = b.train_config(arm, seed)
            out.append((arm, seed, cfg if task is None else cfg.replace(task=task)))
    return out


def run_experiment(
    name: str,
    *,
    seeds: int | None = None,
    steps: int | None = None,
    arms: Sequence[str] | None = None,
    quick: bool | None = None,
    task: str | None = None,
    progress: bool | None = None,
    directory=None,
    workers: int | None = None,
    custom_budget: Budget | None = None,
) -> ExperimentResult:
    """Run (or load from the cache) every arm of experiment ``name`` with every seed.

    Parameters
    ----------
    name : str
        A key of :data:`~convs2s_edu.lab.experiments.EXPERIMENTS`.
    seeds, steps : int, optional
        Override the budget's seeds per arm / steps per run (:func:`budget`).
    arms : sequence of str, optional
        Run only these arms (default: every arm).
    quick : bool, optional
        The quick build's budget (default: ``CONVS2S_EDU_QUICK``).
    task : {"sort", "reverse", "copy"}, optional
        Run every arm on this task instead of its own.
    progress : bool, optional
        One line per finished run (a bar on a terminal); ``False``: silent.
    directory : str or Path, optional
        The training cache (default :func:`~convs2s_edu.training.cache_dir`).
    workers : int, optional
        Concurrent runs (default: one per usable core,
        :func:`~convs2s_edu.training.run_jobs`).
    custom_budget : Budget, optional
        Use this budget instead of :func:`budget`'s (``seeds``, ``steps``, ``quick`` are
        then ignored); for tests and explorations.
    Returns
    -------
    ExperimentResult
    """
    exp = get_experiment(name)
    b = custom_budget if custom_budget is not None else budget(quick, seeds, steps)
    chosen = exp.select(arms)
    if task is not None:  # the rows say the task the runs were trained on
        chosen = [replace(arm, task=task) for arm in chosen]
    jobs = [  # every chosen arm x seed, trained and measured
        measure_groups_job(
            cfg, exp.measures, b.beam_sizes, directory, f"{name}/{arm.name} seed {seed}"
        )
        for arm, seed, cfg in experiment_configs(name, b, arms, task)
    ]
    done = {
        r.job.key: r.value
        for r in run_jobs(jobs, workers, progress=progress, name=name)
    }
    runs, keys = [], iter(job.key for job in jobs)
    for arm in chosen:
        for seed in b.seeds_of(name, arm.name):
            runs.append({"arm": arm.name, "seed": seed, **done[next(keys)]})
    return ExperimentResult(exp, b, runs, summarise_runs(runs, chosen))
