r"""Many independent jobs at once: one process per usable core, or a Dask cluster's
workers.

The site trains many models that do not depend on each other (the two main
models of each recipe, every run of the experiments), and sphinx-gallery runs
its pages one after another. :func:`run_jobs` runs such jobs concurrently
*before* the pages run, so that they only load what the cache holds. It hands them to
joblib, an existing engine rather than a scheduler of our own:

* on this machine, joblib's loky processes (``joblib.Parallel``'s default backend: a fresh
  Python started by fork+exec, so nothing is forked after OpenMP has started; unlike
  ``multiprocessing``'s ``spawn``, it never imports ``__main__`` again, so a script, a
  notebook or a gallery page that calls this is not run again by the workers), at most
  ``workers`` at a time (by default the usable cores divided by ``threads``,
  :func:`default_workers`), each with ``threads`` OpenMP and PyTorch threads, each
  taking the next job when it finishes one (no job pays for importing PyTorch again);
* on a cluster, the workers of a Dask scheduler at ``address`` (``dask.distributed`` as
  joblib's backend), one job per worker process at a time: start them with
  ``--nthreads 1`` (``threads_per_worker=1``), as many as the machines have cores; every
  worker needs this package and a shared training cache (``$CONVS2S_EDU_CACHE`` on a
  shared file system);
* the longest jobs are handed out first (longest processing time first, from a cost estimate
  the job carries: :func:`train_job` estimates it from the configuration), so that no
  long job starts last and runs alone;
* a training job goes through the cache's lock (:func:`~convs2s_edu.training.cache.train_or_load`),
  so a job that a build, a notebook or another worker is training already is waited for,
  not trained twice; a run trained beside others records ``History.shared_clock``;
* a job that raises is named with its error while the others finish; a worker that dies (a
  segmentation fault, the out-of-memory killer) or a job past ``timeout`` ends the whole
  call with an error that says so (what finished is in the cache: a second call goes on
  from there);
* local workers never outlive their parent: an interrupted :func:`run_jobs` (Ctrl-C) stops
  them (joblib ends its workers), and a worker whose parent process is gone
  (``kill -9``, or tox's interrupt followed by its kill half a second later) ends itself
  within half a second (a worker would otherwise finish its current job, minutes for the
  site's models, for nobody).

On a GPU host the same scheduler runs several jobs per GPU: pass ``workers``
(every worker uses the device of its configuration).
"""

from __future__ import annotations

import os
import pkgutil
import threading
import time
import traceback
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from .._machine import usable_cores
from .cache import is_cached, run_dir, train_or_load
from .calibrate import resolve_path
from .config import TrainConfig, build_model
from .progress import Progress

__all__ = [
    "Job",
    "JobResult",
    "default_workers",
    "train_cost",
    "train_job",
    "run_job",
    "run_jobs",
]


@dataclass
class Job:
    """One unit of work for :func:`run_jobs`: ``function(*args)`` in a worker process.

    Attributes
    ----------
    function : str
        ``"package.module:function"``, imported in the worker (any function of the
        package, or of a module the worker can import); its arguments and its return
        value are pickled.
    args : tuple
        Positional arguments.
    label : str
        How progress lines and errors name the job.
    cost : float
        A relative cost estimate (larger starts first); only the order uses it.
    key : str
        Jobs with the same key are the same work and run once (default: the label).
    done : str, optional
        ``"module:function"`` called with ``args`` in this process before the job is
        started: it returns the job's value when the work is done already (e.g. a
        finished cache entry), else ``None``; then no process is started.
    """

    function: str
    args: tuple = ()
    label: str = ""
    cost: float = 1.0
    key: str = ""
    done: str | None = None

    def __post_init__(self):
        self.label = self.label or self.function
        self.key = self.key or self.label


@dataclass
class JobResult:
    """What one job of :func:`run_jobs` gave.

    Attributes
    ----------
    job : Job
    value : object
        The function's return value (``None`` when it failed).
    seconds : float
        The job's wall-clock seconds, on a machine it shared: not a speed.
    error : str or None
        The last lines of the worker's error output when it failed.
    """

    job: Job
    value: object = None
    seconds: float = 0.0
    error: str | None = None


def default_workers(threads: int = 1, cores: int | None = None) -> int:
    """Worker processes that fill the usable cores: ``cores // threads``, at least 1."""
    cores = usable_cores() if cores is None else cores
    return max(1, cores // threads)


def train_cost(cfg: TrainConfig) -> float:
    """A relative cost estimate of training ``cfg``: optimiser steps x tokens per step x
    the weights that multiply every token (not the embeddings)."""
    params = build_model(cfg.replace(device="cpu")).named_parameters()
    weights = sum(p.numel() for n, p in params if "embed" not in n and p.dim() > 1)
    return cfg.total_steps * cfg.batch_size * (cfg.min_len + cfg.max_len) / 2 * weights


#: True inside a worker of :func:`run_jobs` with other workers beside it.
_SHARED = False


def train_entry(cfg: TrainConfig, directory=None) -> str:
    """The worker's side of :func:`train_job`: train ``cfg`` into the cache (or find it
    there); returns the cache entry's path."""
    train_or_load(cfg, progress=False, directory=directory, shared_clock=_SHARED)
    return str(run_dir(cfg, directory))


def cached_entry(cfg: TrainConfig, directory=None) -> str | None:
    """The ``done`` check of :func:`train_job`: the entry's path when the cache holds
    the finished run, else ``None``."""
    return str(run_dir(cfg, directory)) if is_cached(cfg, directory) else None


def train_job(cfg: TrainConfig, directory=None, label: str | None = None) -> Job:
    """A :class:`~convs2s_edu.training.Job` that trains ``cfg`` into the cache
    (``directory``, default :func:`~convs2s_edu.training.cache_dir`), keyed by its cache
    entry."""
    entry = run_dir(cfg, directory)
    return Job(
        "convs2s_edu.training.schedule:train_entry",
        (cfg, None if directory is None else str(directory)),
        label=label or entry.name,
        cost=train_cost(cfg),
        key=str(entry),
        done="convs2s_edu.training.schedule:cached_entry",
    )


def run_job(job: Job):
    """Run ``job`` in this process (what a worker does); returns its value."""
    return pkgutil.resolve_name(job.function)(*job.args)


def _exit_with(parent: int, every: float = 0.5) -> None:
    """A local worker's watchdog thread (see the module's docstring): end the worker as
    soon as ``parent`` is no longer its parent process."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(1)


#: The parent a local worker of this process watches (0: not started yet).
_WATCHED = 0


def _serve(job: Job, threads: int, parent: int | None) -> tuple:
    """A job in a worker: ``(key, value, seconds, None)``, or
    ``(key, None, seconds, error text)`` when it raised. The first job of a local worker
    starts its watchdog (:func:`_exit_with`); every job sets the worker's PyTorch
    threads."""
    global _SHARED, _WATCHED
    if parent and _WATCHED != parent:
        threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()
        _WATCHED = parent
    import torch

    _SHARED = True  # other workers run beside this one
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    try:
        return job.key, run_job(job), time.perf_counter() - t0, None
    except BaseException as err:  # reported to the parent, the worker goes on
        tail = traceback.format_exc().strip().splitlines()[-3:]
        error = f"{type(err).__name__}: {err} | " + " | ".join(tail)
        return job.key, None, time.perf_counter() - t0, error


def run_jobs(
    jobs: Sequence[Job],
    workers: int | None = None,
    threads: int = 1,
    progress: bool | None = None,
    name: str = "jobs",
    timeout: float | None = None,
    address: str | None = None,
) -> list[JobResult]:
    """Run ``jobs`` in at most ``workers`` concurrent processes of ``threads`` threads
    each, or on the Dask cluster at ``address``.

    Parameters
    ----------
    jobs : sequence of Job
        Jobs with the same ``key`` run once.
    workers : int, optional
        Concurrent local processes (default :func:`default_workers`\\ ``(threads)``).
        With one worker and no ``address`` the jobs run one after another in this
        process (nothing to share). With ``address``: at most this many jobs at once
        (default: one per worker of the cluster).
    threads : int
        PyTorch (OpenMP) threads of every worker.
    progress : bool, optional
        A line per finished job (a bar on a terminal); ``False``: silent.
    name : str
        The progress lines' prefix.
    timeout : float, optional
        Seconds a job may take (local workers); a later one ends the call with an error.
    address : str, optional
        A Dask scheduler's address (e.g. ``"tcp://10.0.0.5:8786"``): the jobs run on its
        workers (``pip install "dask[distributed]"``).

    Returns
    -------
    list of JobResult
        One per distinct job, in the order of ``jobs``.

    Raises
    ------
    RuntimeError
        When a job failed (after the others finished), naming every failed job and its
        last lines of error output; or at once when a worker died or a job ran past
        ``timeout``.
    """
    if workers is None and address is None:
        workers = default_workers(threads)
    unique: dict[str, Job] = {}
    for job in jobs:
        unique.setdefault(job.key, job)
    order = sorted(unique.values(), key=lambda j: -j.cost)  # longest first
    results: dict[str, JobResult] = {}
    with Progress(len(order), name, progress) as bar:

        def done(result: JobResult, how: str) -> None:
            results[result.job.key] = result
            bar.update()
            bar.note(f"[{len(results)}/{len(order)}] {result.job.label}: {how}")

        todo = []
        for job in order:
            value = (
                None if job.done is None else pkgutil.resolve_name(job.done)(*job.args)
            )
            if value is None:
                todo.append(job)
            else:
                done(JobResult(job, value), "done before (cached)")
        if workers == 1 and address is None:
            for job in todo:
                t0 = time.perf_counter()
                value = run_job(job)
                done(JobResult(job, value, time.perf_counter() - t0), "done")
        elif todo:
            if address is None:
                _choose_paths(todo, threads)
            for key, value, seconds, error in _parallel(
                todo, workers, threads, timeout, address
            ):
                how = f"{seconds:.1f} s (shared machine)" if error is None else "FAILED"
                done(JobResult(unique[key], value, seconds, error), how)
    failed = [r for r in results.values() if r.error is not None]
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {len(order)} jobs failed: "
            + "; ".join(f"{r.job.label}: {r.error}" for r in failed)
        )
    return [results[key] for key in unique]


def _choose_paths(todo, threads: int) -> None:
    """Time the path of every configuration the jobs train (``fast=None``:
    :func:`~convs2s_edu.training.calibrate.machine_choice`) here, one after the other, at
    the workers' threads, before the workers share the cores: a timing beside another
    worker's training would mostly measure that worker."""
    from torch.utils.benchmark import set_torch_threads  # torch: only where jobs run

    with set_torch_threads(threads):
        for job in todo:
            for cfg in (a for a in job.args if isinstance(a, TrainConfig)):
                resolve_path(cfg, say=False)


def _parallel(todo, workers, threads, timeout, address):
    """The jobs ``todo`` through joblib, as they finish: loky's processes here, or the
    workers of the Dask scheduler at ``address``."""
    import joblib  # lazily: the GPU image lacks it

    with ExitStack() as stack:
        if address is None:
            # OpenMP's threads set before each worker imports torch (loky's environment)
            config = dict(backend="loky", inner_max_num_threads=threads)
            parent = os.getpid()
        else:
            from distributed import Client

            stack.enter_context(Client(address))  # joblib's dask backend uses it
            config, parent = dict(backend="dask"), None
        stack.enter_context(joblib.parallel_config(**config))
        n_jobs = workers or -1  # on a cluster, by default one job per worker
        # one job a batch: the longest first, as handed out (joblib's "auto" batches
        # quick jobs)
        parallel = joblib.Parallel(
            n_jobs=n_jobs,
            return_as="generator_unordered",
            timeout=timeout,
            batch_size=1,
        )
        try:
            yield from parallel(
                joblib.delayed(_serve)(job, threads, parent) for job in todo
            )
        except Exception as err:  # a worker died (loky names its exit code) or ran late
            raise RuntimeError(
                f"run_jobs stopped: {type(err).__name__}: {' '.join(str(err).split())} "
                "(what finished is kept: "
                "training jobs in the cache; run again to go on)"
            ) from err
