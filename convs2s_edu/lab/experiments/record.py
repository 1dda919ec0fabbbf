r"""The experiment record: every run the claims need, trained once and kept with the
code.

The claims page judges 17 claims on the runs of six experiments, arms × seeds. Training
them takes most of an hour on two cores, so a docs build does not:
``convs2s-edu experiment --all`` (``tox -e experiments``) trains them once, on one
machine or many, and writes a record that is committed beside the code and read by the
pages (:func:`load_record`, :meth:`Record.result`). Every build checks that the record
still belongs to the code (:meth:`Record.stale`), stops with the changed files named when
it does not (:func:`experiment_result`), and retrains a few of its runs drawn at random to
compare (:func:`spot_check`).

The format
----------
A folder per budget, ``docs/experiment_record/full`` and
``docs/experiment_record/quick`` (``$CONVS2S_EDU_RECORD`` names the parent folder), and
``docs/experiment_record/pilot``, the five-seed record whose spreads fixed the full
build's seeds (:func:`~convs2s_edu.lab.experiments.plan_seeds`), each of two text
files:

``record.json``
    ``format`` (1); ``budget`` (the :class:`~convs2s_edu.lab.experiments.Budget` of
    every run); ``code``: the fingerprint of the code that shapes the numbers and the
    hash of each of its files (:mod:`convs2s_edu.training.fingerprint`); ``made``: the
    command, when it started, its wall-clock seconds, the runs and the workers.
``runs.jsonl``
    One run a line, in the order of the experiments' arms: ``run`` (a hash of the
    configuration but its ``fast``: what the run computes, not the path it took),
    ``seed``, ``arms`` (the ``[experiment, arm]`` pairs it serves: one run serves every
    arm of the same configuration), ``config`` (the whole
    :class:`~convs2s_edu.TrainConfig`, ``fast`` as the machine decided it), ``scores``
    (each measure group's numbers, as
    :func:`~convs2s_edu.lab.experiments.runner.measured_run` computes them), ``curve`` (the
    held-out learning curve: step, exact match, loss) and ``provenance`` (where and how
    it trained: :func:`~convs2s_edu.training.device.provenance`, with its wall-clock
    seconds).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import math
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.benchmark import set_torch_threads

from ...training.cache import run_dir
from ...training.checkpoint import read_checkpoint
from ...training.config import TrainConfig
from ...training.device import MACHINE_KEYS
from ...training.fingerprint import changed_files, file_hashes, fingerprint
from ...training.schedule import run_jobs
from ..site import is_quick_mode
from .registry import EXPERIMENTS, Budget, budget
from .runner import (
    ExperimentResult,
    _write,
    cached_groups,
    experiment_configs,
    group_names,
    measure_groups_job,
    measured_run,
    run_experiment,
)
from .statistics import summarise_runs

__all__ = [
    "RECORD_ENV",
    "Record",
    "record_dir",
    "distinct_runs",
    "load_record",
    "make_record",
    "experiment_result",
    "claim_runs",
    "spot_check",
    "spot_check_rate",
    "spot_range_factor",
]

#: Environment variable: the folder that holds the record's ``full`` and ``quick``
#: folders (``docs/conf.py`` and ``tools/prepare_site.py`` set it to
#: ``docs/experiment_record``).
RECORD_ENV = "CONVS2S_EDU_RECORD"
FORMAT = 1
#: The scores the spot check compares (every run has them).
SPOT_SCORES = ("test_loss", "exact_match", "sequence_errors")
#: Off the recording machine, the chance that a spot check of an honest record flags
#: any score of the runs it retrains, in the worst case its tolerance allows for (each
#: retrained run as far from the recorded one as another seed), whatever the number of
#: runs: each score is held to this rate divided by the scores checked (Bonferroni),
#: :data:`SPOT_INDEPENDENT_SCORES` a run.
SPOT_FALSE_ALARM = 0.01
#: The scores of a run with separate information: the test loss and the wrong sequences
#: (exact match restates the latter).
SPOT_INDEPENDENT_SCORES = 2


def record_dir(quick: bool | None = None, pilot: bool = False) -> Path | None:
    """The record's folder of the budget (``$CONVS2S_EDU_RECORD/full`` or ``/quick``;
    ``pilot``: ``/pilot``, the five-seed record whose spreads fixed the full build's
    seeds), or ``None`` when the variable is not set."""
    root = os.environ.get(RECORD_ENV)
    quick = is_quick_mode() if quick is None else quick
    name = "pilot" if pilot else "quick" if quick else "full"
    return Path(root) / name if root else None


def _run_key(cfg: TrainConfig) -> str:
    # what a run computes, not how: the path it took (fast) is in its provenance
    blob = json.dumps(
        {k: v for k, v in cfg.to_dict().items() if k != "fast"}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def distinct_runs(b: Budget, names=None) -> dict[str, dict]:
    """Every distinct run of the experiments ``names`` (default: every one) at budget
    ``b``, by its key: ``config``, ``seed``, ``arms`` (the ``[experiment, arm]`` pairs
    it serves: the same configuration in several experiments is one run), ``measures``
    (the union of the measure groups they ask for) and ``label`` (how progress lines
    name it)."""
    runs: dict[str, dict] = {}
    for name, exp in EXPERIMENTS.items():
        if names is not None and name not in names:
            continue
        for arm, seed, cfg in experiment_configs(name, b):
            label = f"{name}/{arm.name} seed {seed}"
            run = runs.setdefault(
                _run_key(cfg),
                {
                    "config": cfg,
                    "seed": seed,
                    "arms": [],
                    "measures": set(),
                    "label": label,
                },
            )
            run["arms"].append([name, arm.name])
            run["measures"].update(exp.measures)
    return runs


def _null_nans(x):
    """``x`` with every NaN as ``None`` (JSON has no NaN: a level never reached is null)."""
    if isinstance(x, dict):
        return {k: _null_nans(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_null_nans(v) for v in x]
    return None if isinstance(x, float) and x != x else x


def make_record(
    directory=None,
    quick: bool | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    cache=None,
    command: str = "convs2s-edu experiment --all",
    address: str | None = None,
) -> Path:
    """Train and score every run of every experiment at the budget, and write the
    record.

    Parameters
    ----------
    directory : str or Path, optional
        Where to write ``record.json`` and ``runs.jsonl`` (default :func:`record_dir`).
    quick : bool, optional
        The quick build's budget (default: ``CONVS2S_EDU_QUICK``).
    workers : int, optional
        Concurrent runs (default: one per usable core).
    progress : bool, optional
        A line per finished run.
    cache : str or Path, optional
        The training cache the runs go through (default
        :func:`~convs2s_edu.training.cache_dir`): a run already there is read, not trained.
    command : str
        How the record was made, for its header.
    address : str, optional
        A Dask scheduler's address: the runs go to its workers
        (:func:`~convs2s_edu.training.run_jobs`), which share the training cache
        ``cache``.

    Returns
    -------
    Path
        The folder written.
    """
    quick = is_quick_mode() if quick is None else bool(quick)
    directory = Path(directory) if directory is not None else record_dir(quick)
    if directory is None:
        raise ValueError(f"no folder for the record: pass one, or set ${RECORD_ENV}")
    b = budget(quick)
    runs = distinct_runs(b)
    jobs = [
        measure_groups_job(r["config"], r["measures"], b.beam_sizes, cache, r["label"])
        for r in runs.values()
    ]
    # the code that trains
    code = {"fingerprint": fingerprint(), "files": file_hashes()}
    started, t0 = datetime.datetime.now(datetime.timezone.utc), time.perf_counter()
    run_jobs(jobs, workers, progress=progress, name="record", address=address)
    if fingerprint() != code["fingerprint"] or file_hashes() != code["files"]:
        raise RuntimeError(
            "the fingerprinted code changed while the runs trained: record again"
        )
    wall = time.perf_counter() - t0
    lines = []
    for key, r in runs.items():
        cfg, where = r["config"], run_dir(r["config"], cache)
        state = read_checkpoint(where)
        history = state["history"]
        groups = cached_groups(cfg, r["measures"], b.beam_sizes, cache)
        if groups is None:
            raise RuntimeError(
                f"run {key} ({' '.join(r['arms'][0])} seed {r['seed']}) has no scores of this "
                f"code in {where}: was it trained by other code (a cluster worker with "
                "another version)?"
            )
        curve = [
            [e["step"], e["exact_match"], e["valid_loss"]] for e in history["evals"]
        ]
        # with the path it trained on: a spot check's too
        config = state["config"].to_dict()
        line = {"run": key, "seed": r["seed"], "arms": r["arms"], "config": config}
        line |= {"scores": groups, "curve": curve, "provenance": history["provenance"]}
        lines.append(json.dumps(_null_nans(line), sort_keys=True, allow_nan=False))
    header = {
        "format": FORMAT,
        "budget": b.__dict__,
        "code": code,
        "made": {
            "command": command,
            "started": started.isoformat(timespec="seconds"),
            "wall_seconds": round(wall, 1),
            "runs": len(lines),
            "workers": workers,
            "cluster": address,
        },
    }
    directory.mkdir(parents=True, exist_ok=True)
    _write(directory / "runs.jsonl", "\n".join(lines) + "\n")
    _write(
        directory / "record.json", json.dumps(header, indent=1, sort_keys=True) + "\n"
    )
    return directory


@dataclass
class Record:
    """A record read back (:func:`load_record`).

    Attributes
    ----------
    header : dict
        ``record.json``.
    runs : dict
        ``runs.jsonl``'s runs by their ``run`` key.
    path : Path
        The folder.
    """

    header: dict
    runs: dict
    path: Path

    @property
    def budget(self) -> Budget:
        b = self.header["budget"]
        return Budget(
            **{
                **b,
                "beam_sizes": tuple(b["beam_sizes"]),
                # the records made before it was recorded decoded 200
                "beam_examples": b.get("beam_examples", 200),
                # JSON's lists back to the tuples the registry gives
                "arm_seeds": tuple((tuple(k), n) for k, n in b.get("arm_seeds", ())),
            }
        )

    def stale(self) -> str:
        """Why the record no longer belongs to this code ("" when it does): the files
        whose code changed since it was made, or a budget the registry no longer gives."""
        problems = []
        if changed := changed_files(self.header["code"]["files"]):
            problems.append(f"code changed since it was made: {', '.join(changed)}")
        now = budget(self.budget.quick)
        if self.budget != now:
            problems.append("the registry's budget is not the record's")
        missing = [k for k in distinct_runs(now) if k not in self.runs]
        if missing:
            problems.append(f"{len(missing)} run(s) of the registry are not in it")
        if not problems:
            return ""
        return (
            f"the experiment record in {self.path} is stale: {'; '.join(problems)} "
            f"(recorded {self.header['code']['fingerprint']}, now {fingerprint()}); "
            "`tox -e experiments` records it again"
        )

    def describe(self) -> str:
        """Where the record's numbers come from, in one line (and whether it is stale)."""
        made, runs = self.header["made"], self.runs.values()

        def each(*keys):
            seen = {
                " ".join(str(r["provenance"].get(k, "?")) for k in keys) for r in runs
            }
            return " / ".join(sorted(seen))

        line = (
            f"from the experiment record ({self.path.parent.name}/{self.path.name}): "
            f"{made['runs']} runs of `{made['command']}`, started {made['started'][:10]}, "
            f"{made['wall_seconds']:,.0f} s; on {each('cpu', 'cpu_kernels')}, "
            f"{each('threads')} thread(s) a run, path {each('path')}, torch {each('torch')}"
        )
        stale = self.stale()
        return f"{line}; {stale}" if stale else f"{line}; made by this code"

    def run(self, cfg: TrainConfig) -> dict:
        """The recorded run of ``cfg``; ``ValueError`` when the record has none."""
        try:
            return self.runs[_run_key(cfg)]
        except KeyError:
            raise ValueError(
                f"the experiment record in {self.path} has no run of this configuration "
                f"(model {cfg.model!r}, seed {cfg.seed}, options {cfg.model_options}): "
                "`tox -e experiments` records it"
            ) from None

    def result(self, name: str) -> ExperimentResult:
        """Experiment ``name``'s runs, rows and learning curves as the record holds
        them: what
        :func:`~convs2s_edu.lab.experiments.run_experiment` returns, trained nothing."""
        exp, b = EXPERIMENTS[name], self.budget
        runs, curves = [], {}
        for arm, seed, cfg in experiment_configs(name, b):
            run = self.run(cfg)
            groups = [run["scores"][g] for g in group_names(exp.measures, b.beam_sizes)]
            # null: a level never reached (NaN, as run_experiment gives it)
            scores = {
                k: math.nan if v is None else v for g in groups for k, v in g.items()
            }
            runs.append({"arm": arm.name, "seed": seed, **scores})
            curves[arm.name, seed] = [
                {"step": s, "exact_match": em, "valid_loss": loss}
                for s, em, loss in run["curve"]
            ]
        return ExperimentResult(exp, b, runs, summarise_runs(runs, exp.arms), curves)


def load_record(
    directory=None, quick: bool | None = None, pilot: bool = False
) -> Record | None:
    """The record in ``directory`` (default :func:`record_dir`, of the pilot with
    ``pilot``), or ``None`` when there is none."""
    directory = Path(directory) if directory is not None else record_dir(quick, pilot)
    if directory is None or not (directory / "record.json").is_file():
        return None
    header = json.loads((directory / "record.json").read_text(encoding="utf-8"))
    if header.get("format") != FORMAT:
        raise ValueError(
            f"{directory}: record format {header.get('format')!r}, expected {FORMAT}"
        )
    lines = (directory / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    runs = {r["run"]: r for r in map(json.loads, filter(None, lines))}
    return Record(header, runs, directory)


def experiment_result(name: str, record: Record | None = None, say: bool = True):
    """Experiment ``name`` from the record of this build's budget when there is one
    (:func:`load_record`), else trained (or loaded from the cache) by
    :func:`~convs2s_edu.lab.experiments.run_experiment`; ``say`` prints which, with the
    record's provenance (``Record.describe()``). A stale record (:meth:`Record.stale`:
    made by other code, or for another budget) is an error whose message names what
    changed: its numbers are not this code's."""
    record = record if record is not None else load_record()
    if record is None:
        if say:
            print("trained by this build (there is no experiment record)")
        return run_experiment(name, progress=False)
    if stale := record.stale():  # its numbers are not this code's
        raise RuntimeError(stale)
    if say:
        print(record.describe())
    return record.result(name)


def claim_runs(record: Record, claim) -> list[str]:
    """The record's keys of the runs ``claim`` compares, for :func:`spot_check`: for
    each of its pairs, both arms on the seeds both have."""
    b, claimed = record.budget, claim.claimed[0]
    seeds = {}
    for other, _ in claim.others:
        mine, its = (set(b.seeds_of(claim.experiment, arm)) for arm in (claimed, other))
        for arm in (claimed, other):
            seeds[arm] = seeds.get(arm, set()) | (mine & its)
    configs = experiment_configs(claim.experiment, b, sorted(seeds))
    # ValueError: a run the record does not hold
    return [record.run(c)["run"] for arm, s, c in configs if s in seeds[arm.name]]


def spot_check(
    record: Record,
    n: int = 2,
    seed: int | None = None,
    strict: bool = False,
    runs=None,
) -> list[dict]:
    """Retrain ``n`` runs of ``record`` drawn at random and compare their scores with
    the recorded ones.

    Each run is trained afresh, in a temporary folder (never a cache that may hold it),
    with the recorded configuration and scored as the record was. Where the machine,
    torch, the execution path and the threads are the recorded run's, the scores must be
    equal (the training is deterministic there). Elsewhere rounding differs from the
    first step on, and a run trained for the full budget drifts about as far as another
    seed would: each score may then differ from the recorded one by
    :func:`spot_range_factor` times the range of the arm's other recorded seeds and the
    retrained value (the recorded value itself left out, so that a wrong one cannot
    widen its own tolerance), and a count by one sequence at least. The factor depends
    on the arm's seeds and on the runs checked: in that worst case, the chance that the
    check flags anything of an honest record is at most ``SPOT_FALSE_ALARM`` for a
    continuous score (the counts' floor only lowers it); :func:`spot_check_rate` gives
    how often a wrong number is caught.

    Parameters
    ----------
    record : Record
    n : int
        Runs to retrain.
    seed : int, optional
        The draw's seed (default: a fresh one; every result names it as ``draw``).
    strict : bool
        Raise ``ValueError`` naming the run and its two numbers when a score differs by
        more than allowed.
    runs : sequence of str, optional
        Check these runs (their ``run`` keys, e.g. from
        :func:`~convs2s_edu.lab.experiments.record.claim_runs`) instead of ``n`` drawn at
        random.

    Returns
    -------
    list of dict
        Per run: ``run``, ``arm``, ``seed``, ``draw``, ``exact`` (same machine),
        ``scores``: ``{score: (recorded, now, allowed difference)}``, ``ok``.

    Notes
    -----
    To see the check off the recording machine without a second machine: on an x86 CPU
    with AVX-512, ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
    MKL_ENABLE_INSTRUCTIONS=AVX2`` make PyTorch, oneDNN and MKL choose the kernels of a
    CPU with AVX2 alone, with their rounding, and the provenance names them
    (``cpu_kernels``); ``convs2s-edu experiment --verify --claim N`` then retrains a
    claim's runs that way. The quick budget's runs barely move; the full budget's drift
    about as far as another seed's, which is why the tolerance allows for that.
    """
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    drawn = (
        list(runs)
        if runs is not None
        else random.Random(seed).sample(sorted(record.runs), n)
    )
    out, bad = [], []
    alarm = _score_alarm(len(drawn))
    # the smallest difference a score can show: a count moves by one sequence
    n_test = record.budget.n_test
    step = {"test_loss": 0.0, "exact_match": 1 / n_test, "sequence_errors": 1.0}
    with tempfile.TemporaryDirectory() as tmp:
        for key in drawn:
            run = record.runs[key]
            cfg = TrainConfig.from_dict(run["config"])
            threads = run["provenance"].get("threads", torch.get_num_threads())
            with set_torch_threads(threads):  # as recorded
                now = measured_run(cfg, directory=tmp)  # the base scores
            here = read_checkpoint(run_dir(cfg, tmp))["history"]["provenance"]
            # the same machine, torch, threads and path: the same numbers
            same = (*MACHINE_KEYS, "path")
            exact = all(here.get(k) == run["provenance"].get(k) for k in same)
            arm = run["arms"][0]
            # the other seeds of the arms it serves, as recorded (a run serves every arm
            # of its configuration, and lists them in the order of the experiments)
            peers = [
                r
                for r in record.runs.values()
                if r is not run and any(a in r["arms"] for a in run["arms"])
            ]
            if not exact and not peers:
                raise ValueError(
                    f"run {key} ({'/'.join(arm)} seed {run['seed']}) has no other seed in "
                    "the record: off the recording machine it cannot be checked"
                )
            factor = 0.0 if exact else spot_range_factor(len(peers) + 1, alarm)
            scores, ok = {}, True
            for s in SPOT_SCORES:
                values = [r["scores"]["base"][s] for r in peers] + [now[s]]
                spread = max(values) - min(values)
                allowed = 0.0 if exact else max(factor * spread, step[s])
                recorded = run["scores"]["base"][s]
                scores[s] = (recorded, now[s], allowed)
                if _beyond(abs(recorded - now[s]), allowed):
                    ok = False
                    bad.append(
                        f"{'/'.join(arm)} seed {run['seed']} (run {key}): {s} recorded "
                        f"{recorded!r}, retrained {now[s]!r} (allowed difference "
                        f"{allowed:.3g})"
                    )
            out.append(
                {"run": key, "arm": "/".join(arm), "seed": run["seed"], "draw": seed}
                | {"exact": exact, "scores": scores, "ok": ok}
            )
    if strict and bad:
        raise ValueError(
            f"the spot check of the experiment record in {record.path} failed (draw {seed}): "
            + "; ".join(bad)
        )
    return out


def _score_alarm(n_runs: int) -> float:
    """The worst-case false alarm each score of a check of ``n_runs`` runs is held to, so
    that the whole check's is at most ``SPOT_FALSE_ALARM`` (Bonferroni)."""
    return SPOT_FALSE_ALARM / (SPOT_INDEPENDENT_SCORES * n_runs)


def _beyond(off: float, allowed: float) -> bool:
    """Whether a score ``off`` from the recorded one breaks the spot check's ``allowed``
    difference, rounding apart (one sequence in 2,000 apart is ``0.9995 - 0.999``, a
    hair above ``1 / 2000``); any difference when none is allowed, and a score that is
    not a number (a diverged retraining)."""
    return not math.isfinite(off) or (off > allowed and not math.isclose(off, allowed))


@functools.cache
def spot_range_factor(
    n_seeds: int, false_alarm: float, draws: int = 1_000_000
) -> float:
    """The factor on the seeds' range that :func:`spot_check` allows off the recording
    machine, for an arm of ``n_seeds`` recorded seeds, by simulation.

    The worst case the check allows for: the retrained value as far from the recorded
    one as another seed's would be, the arm's seeds independent and normal. The factor
    is the ``1 - false_alarm`` quantile of the recorded value's distance from the
    retrained one, over the range of the arm's other seeds and the retrained value: the
    smallest factor that flags an honest run's score no more often than
    ``false_alarm``. With few seeds it is wide (two values say little about the
    spread), and the check can then catch only a gross error.

    Parameters
    ----------
    n_seeds : int
        The arm's seeds in the record (2 or more: the recorded run and its peers).
    false_alarm : float
        The worst-case chance of flagging one continuous score of an honest run.
    draws : int, optional
        Simulated checks (on a stream of their own, the same in every build).

    Returns
    -------
    float
        The factor: a score may differ from the recorded one by this times the range.
    """
    if n_seeds < 2:
        raise ValueError(
            f"n_seeds must be at least 2 (a run and a peer), got {n_seeds}"
        )
    if not 0 < false_alarm < 1:
        raise ValueError(f"false_alarm must be in (0, 1), got {false_alarm}")
    recorded, now, values = _simulated_check(n_seeds, 0.0, draws, seed=20171)
    spread = values.max(axis=1) - values.min(axis=1)
    return float(np.quantile(np.abs(recorded - now) / spread, 1 - false_alarm))


def _simulated_check(n_seeds, shift, draws, seed):
    """``draws`` spot checks of an arm of ``n_seeds`` independent normal seeds, the
    recorded value shifted by ``shift`` SDs: ``(recorded, now, values)``, ``values`` the
    arm's other seeds and the retrained value, a row a check."""
    rng = np.random.default_rng(seed)
    others = rng.standard_normal((draws, n_seeds - 1))  # the arm's other seeds
    now = rng.standard_normal(draws)  # the retrained run
    recorded = rng.standard_normal(draws) + shift
    return recorded, now, np.column_stack([others, now])


def spot_check_rate(
    n_seeds: int,
    shift: float = 0.0,
    n_runs: int = 2,
    draws: int = 100_000,
    seed: int = 0,
) -> float:
    """How often :func:`spot_check` of ``n_runs`` runs, off the recording machine, flags
    one score of a run, by simulation.

    The worst case its tolerance allows for: the retrained value as far from the
    recorded one as another seed's would be, the arm's seeds independent and normal.
    For an honest run (``shift`` 0) that is ``SPOT_FALSE_ALARM`` divided by the scores
    the check compares (``SPOT_INDEPENDENT_SCORES`` a run), by the construction of
    :func:`spot_range_factor`, up to the simulations' noise. The one-sequence floor of
    the counts is not simulated: for them both rates are at most these.

    Parameters
    ----------
    n_seeds : int
        The arm's seeds in the record (2 or more: the recorded run and its peers).
    shift : float, optional
        How far the recorded value is off, in standard deviations of the arm's seeds:
        0 for an honest run, more for a wrong number or a change that moved the arm.
    n_runs : int, optional
        The runs the check retrains (a docs build: 2).
    draws : int, optional
        Simulated checks.
    seed : int, optional
        The simulation's seed.

    Returns
    -------
    float
        The share of checks that flag the score: the false-alarm rate with ``shift``
        0, else the chance of catching the shift.
    """
    factor = spot_range_factor(
        n_seeds, _score_alarm(n_runs)
    )  # ValueError below 2 seeds
    recorded, now, values = _simulated_check(n_seeds, shift, draws, seed)
    allowed = factor * (values.max(axis=1) - values.min(axis=1))
    return float(np.mean(np.abs(recorded - now) > allowed))
