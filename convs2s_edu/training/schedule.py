r"""Many independent jobs at once: one process per usable core, each with its own threads.

The site trains many models that do not depend on each other (the two main
models of each recipe, every run of the experiments), and sphinx-gallery runs
its pages one after another. :func:`run_jobs` runs such jobs concurrently
*before* the pages run, so that they only load what the cache holds:

* the jobs run in ``workers`` long-lived worker processes of loky (``joblib.externals.loky``: a
  fresh Python started by fork+exec, so nothing is forked after OpenMP has started; unlike
  ``multiprocessing``'s ``spawn``, it never imports ``__main__`` again, so a script, a notebook or
  a gallery page that calls this is not run again by the workers), each taking the next job when it
  finishes one (no job pays for importing PyTorch again), with ``OMP_NUM_THREADS`` (set before the
  worker starts) and :func:`torch.set_num_threads` set to ``threads``;
* at most ``workers`` processes run at a time, by default the usable cores divided by
  ``threads`` (:func:`default_workers`), so the machine is full and never oversubscribed;
* the longest jobs start first (longest processing time first, from a cost
  estimate the job carries: :func:`train_job` estimates it from the
  configuration), so that no long job starts last and runs alone;
* a training job goes through the cache's lock (:func:`~convs2s_edu.training.cache.train_or_load`),
  so a job that a build, a notebook or another worker is training already is waited for, not
  trained twice; a run trained beside others records ``History.shared_clock``;
* every worker is a pool of its own (one process), so a worker that dies or a
  job past its ``timeout`` is killed and replaced alone, the others' jobs going on;
* workers never outlive the run: an interrupted :func:`run_jobs` (Ctrl-C) kills them at once, and a
  worker whose parent process is gone (``kill -9``, or tox's interrupt followed by its kill half a
  second later) ends itself and removes the parent's job folder within half a second (a pool's
  workers would finish their current job, many minutes for the site's models, for nobody).

On a GPU host the same scheduler runs several jobs per GPU: pass ``workers``
(every worker uses the device of its configuration).
"""

from __future__ import annotations

import os
import pkgutil
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass

from .._checks import check_int
from .._machine import usable_cores
from .cache import is_cached, run_dir, train_or_load
from .config import TrainConfig, build_model
from .progress import Progress

__all__ = ["Job", "JobResult", "default_workers", "train_cost", "train_job", "run_job", "run_jobs"]


@dataclass
class Job:
    """One unit of work for :func:`run_jobs`: ``function(*args)`` in a worker process.

    Attributes
    ----------
    function : str
        ``"package.module:function"``, imported in the worker (any function of the package, or of a
        module the worker can import); its arguments and its return value are pickled.
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
        if not isinstance(self.function, str) or ":" not in self.function:
            raise ValueError(f"Job.function must be 'module:function', got {self.function!r}")
        self.label = self.label or self.function
        self.key = self.key or self.label
        if self.done is not None and (not isinstance(self.done, str) or ":" not in self.done):
            raise ValueError(f"Job.done must be None or 'module:function', got {self.done!r}")


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
    cores = usable_cores() if cores is None else check_int("cores", cores)
    return max(1, cores // check_int("threads", threads))


def train_cost(cfg: TrainConfig) -> float:
    """A relative cost estimate of training ``cfg``: optimiser steps x tokens per step x the
    weights that multiply every token (not the embeddings)."""
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
    """The ``done`` check of :func:`train_job`: the entry's path when the cache holds the
    finished run, else ``None``."""
    return str(run_dir(cfg, directory)) if is_cached(cfg, directory) else None


def train_job(cfg: TrainConfig, directory=None, label: str | None = None) -> Job:
    """A :class:`~convs2s_edu.training.Job` that trains ``cfg`` into the cache (``directory``,
    default :func:`~convs2s_edu.training.cache_dir`), keyed by its cache entry."""
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


def _exit_with(parent: int, folder: str, every: float = 0.5) -> None:
    """A worker's watchdog thread (see the module's docstring): end the worker as soon as
    ``parent`` is no longer its parent process, removing ``folder`` (the job folder) first."""
    while os.getppid() == parent:
        time.sleep(every)
    shutil.rmtree(folder, ignore_errors=True)  # every worker tries; the first one wins
    os._exit(1)


def _start_worker(threads: int, parent: int, folder: str, err_file: str) -> None:
    """The initializer of a worker of :func:`run_jobs`: the watchdog (:func:`_exit_with`),
    the error output into ``err_file`` (its tail names a worker's death), the threads."""
    threading.Thread(target=_exit_with, args=(parent, folder), daemon=True).start()
    err = os.open(err_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for fd in (1, 2):  # what the jobs print, and what a crash prints (loky's faulthandler)
        os.dup2(err, fd)
    import torch

    global _SHARED
    _SHARED = True  # other workers run beside this one
    torch.set_num_threads(threads)


def _serve(job: Job) -> tuple[object, str | None]:
    """A job in a worker: ``(value, None)``, or ``(None, error text)`` when it raised."""
    try:
        return run_job(job), None
    except BaseException as err:  # reported to the parent, the worker goes on
        tail = traceback.format_exc().strip().splitlines()[-3:]
        return None, f"{type(err).__name__}: {err} | " + " | ".join(tail)


def run_jobs(
    jobs: Sequence[Job],
    workers: int | None = None,
    threads: int = 1,
    progress: bool | None = None,
    name: str = "jobs",
    timeout: float | None = None,
) -> list[JobResult]:
    """Run ``jobs`` in at most ``workers`` concurrent processes of ``threads`` threads each.

    Parameters
    ----------
    jobs : sequence of Job
        Jobs with the same ``key`` run once.
    workers : int, optional
        Concurrent processes (default :func:`default_workers`\\ ``(threads)``). With
        one worker the jobs run one after another in this process (nothing to share).
    threads : int
        PyTorch (OpenMP) threads of every worker.
    progress : bool, optional
        A line per finished job (a bar on a terminal); ``False``: silent.
    name : str
        The progress lines' prefix.
    timeout : float, optional
        Seconds a job may take before it is killed (reported as failed).

    Returns
    -------
    list of JobResult
        One per distinct job, in the order of ``jobs``.

    Raises
    ------
    RuntimeError
        When a job failed (after the others finished); the message names every
        failed job and its last lines of error output.
    """
    threads = check_int("threads", threads)
    workers = default_workers(threads) if workers is None else check_int("workers", workers)
    unique: dict[str, Job] = {}
    for job in jobs:
        if not isinstance(job, Job):
            raise TypeError(f"run_jobs needs Job objects, got {type(job).__name__}")
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
            value = None if job.done is None else pkgutil.resolve_name(job.done)(*job.args)
            if value is None:
                todo.append(job)
            else:
                done(JobResult(job, value), "done before (cached)")
        if workers == 1:
            for job in todo:
                t0 = time.perf_counter()
                value = run_job(job)
                done(JobResult(job, value, time.perf_counter() - t0), "done")
        else:
            _run_parallel(todo, workers, threads, timeout, done)
    failed = [r for r in results.values() if r.error is not None]
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {len(order)} jobs failed: "
            + "; ".join(f"{r.job.label}: {r.error}" for r in failed)
        )
    return [results[key] for key in unique]


class _Worker:
    """One worker process (:func:`_start_worker`): a loky pool of one, a job at a time."""

    def __init__(self, threads: int, tmp: str, n: int):
        from joblib.externals.loky import ProcessPoolExecutor  # lazily: the GPU image lacks it

        self.err_file = os.path.join(tmp, f"worker-{n}.err")
        env = {"OMP_NUM_THREADS": str(threads)}  # set before the worker's Python starts
        env["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", "PASSIVE")
        args = (threads, os.getpid(), tmp, self.err_file)
        self.pool = ProcessPoolExecutor(1, initializer=_start_worker, initargs=args, env=env)
        self.job, self.future, self.started = None, None, 0.0

    def start(self, job: Job) -> None:
        self.job, self.started = job, time.perf_counter()
        self.future = self.pool.submit(_serve, job)

    def tail(self) -> str:
        with open(self.err_file, "rb") as f:
            return " | ".join(f.read().decode(errors="replace").strip().splitlines()[-4:])


def _run_parallel(order, workers, threads, timeout, done) -> None:
    """Run ``order`` on ``workers`` long-lived processes, the next job to the first free one."""
    pending = list(order)
    with tempfile.TemporaryDirectory(prefix="convs2s-jobs-") as tmp:
        pool = [_Worker(threads, tmp, n) for n in range(min(workers, len(order)))]
        spawned = len(pool)
        try:
            while pending or any(w.job for w in pool):
                for w in pool:
                    if w.job is None and pending:
                        w.start(pending.pop(0))
                busy = [w for w in pool if w.job is not None]
                wait([w.future for w in busy], timeout=0.5, return_when=FIRST_COMPLETED)
                for w in busy:
                    seconds = time.perf_counter() - w.started
                    late = timeout is not None and seconds > timeout
                    if w.future.done() and w.future.exception() is None:
                        value, error = w.future.result()
                        how = f"{seconds:.1f} s (shared machine)" if error is None else "FAILED"
                        done(JobResult(w.job, value, seconds, error), how)
                        w.job = None
                    elif w.future.done() or late:
                        # the worker died (loky names its exit code) or is late: kill, replace it
                        lines = [] if late else str(w.future.exception()).splitlines()
                        why = next((ln for ln in lines if "exit code" in ln), " ".join(lines))
                        why = f"killed after {timeout:g} s" if late else why
                        w.pool.shutdown(kill_workers=True)
                        done(JobResult(w.job, None, seconds, f"{why}: {w.tail()}"), "FAILED")
                        pool[pool.index(w)] = _Worker(threads, tmp, spawned)
                        spawned += 1
        finally:
            # jobs still running here were interrupted (Ctrl-C): their workers end at once
            abandoned = any(w.job for w in pool)
            for w in pool:
                w.pool.shutdown(kill_workers=abandoned)
