r"""Many independent jobs at once: one process per usable core, each with its own threads.

The site trains many models that do not depend on each other (the two main
models of each recipe, every run of the experiments), and sphinx-gallery runs
its pages one after another. :func:`run_jobs` runs such jobs concurrently
*before* the pages run, so that they only load what the cache holds:

* the jobs run in ``workers`` fresh Python processes, each taking the next job
  when it finishes one (not ``multiprocessing``: a script, a notebook or a
  gallery page that calls this is never imported again by the workers; and no
  job pays for importing PyTorch again), with ``OMP_NUM_THREADS`` and
  :func:`torch.set_num_threads` set to ``threads``;
* at most ``workers`` processes run at a time, by default the usable cores
  divided by ``threads`` (:func:`default_workers`), so the machine is full and
  never oversubscribed;
* the longest jobs start first (longest processing time first, from a cost
  estimate the job carries: :func:`train_job` estimates it from the
  configuration), so that no long job starts last and runs alone;
* a training job goes through the cache's lock
  (:func:`~convs2s_edu.training.cache.train_or_load`), so a job that a build,
  a notebook or another worker is training already is waited for, not trained
  twice; a run trained beside others records ``History.shared_clock``;
* workers never outlive the run: an interrupted :func:`run_jobs` (Ctrl-C) kills
  them at once, and a worker whose parent process is gone (killed with no time
  to clean up) ends itself within half a second.

Clocks of jobs that shared the machine measure the sharing: the site takes
its timings from interleaved measurements run alone, after the jobs
(:mod:`convs2s_edu.lab.timing`).

On a GPU host the same scheduler runs several jobs per GPU: pass ``workers``
(every worker uses the device of its configuration).
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

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
    """A relative cost estimate of training ``cfg`` (the scheduler starts the largest first):
    optimiser steps x tokens per step x the weights that multiply every token (not the
    embeddings)."""
    model = build_model(cfg.replace(device="cpu"))
    weights = sum(
        p.numel() for n, p in model.named_parameters() if "embed" not in n and p.dim() > 1
    )
    return cfg.total_steps * cfg.batch_size * (cfg.min_len + cfg.max_len) / 2 * weights


#: True inside a worker of :func:`run_jobs` with other workers beside it.
_SHARED = False


def train_entry(cfg: TrainConfig, directory=None) -> str:
    """The worker's side of :func:`train_job`: train ``cfg`` into the cache (or find it
    there; a run trained beside other workers records ``History.shared_clock``); returns
    the cache entry's path."""
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


def _function(spec: str) -> Callable:
    module, name = spec.split(":")
    return getattr(import_module(module), name)


def _call(job: Job):
    return _function(job.function)(*job.args)


def run_job(job: Job):
    """Run ``job`` in this process (what a worker does); returns its value."""
    return _call(job)


def _exit_with(parent: int, folder: str, every: float = 0.5) -> None:
    """A worker's watchdog thread: end the worker as soon as ``parent`` is no longer its
    parent process, removing ``folder`` (the parent's job folder) first.

    A parent killed before it could stop its workers (``kill -9``, or tox's interrupt
    followed by its kill half a second later) would otherwise leave them training on, up
    to the end of their current job (many minutes for the full site's models), for
    nobody, beside whatever the user runs next; and its job folder, which only the parent
    removes when it ends normally, behind in the temporary directory."""
    while os.getppid() == parent:
        time.sleep(every)
    shutil.rmtree(folder, ignore_errors=True)  # every worker tries; the first one wins
    os._exit(1)


def _serve(threads: int, parent: int, folder: str) -> None:
    """Body of one worker process of :func:`run_jobs`: run jobs until stdin closes, or
    until the process ``parent`` (the one that started the worker) is gone (then it
    removes ``folder``, the parent's job folder, and ends).

    Each line on stdin names a job file and a result file (tab-separated); the worker
    writes ``("ok", value)`` or ``("error", text)`` to the result file, then one line on
    its protocol pipe (the original stdout; what the jobs print goes to stderr)."""
    threading.Thread(target=_exit_with, args=(parent, folder), daemon=True).start()
    import torch

    global _SHARED
    _SHARED = True  # other workers run beside this one
    torch.set_num_threads(threads)
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a job's prints go to stderr, never into the protocol
    sys.stdout = sys.stderr
    for line in sys.stdin:
        job_file, out_file = line.rstrip("\n").split("\t")
        try:
            with open(job_file, "rb") as f:
                outcome = ("ok", _call(pickle.load(f)))
        except BaseException as err:  # reported to the parent, the worker goes on
            tail = traceback.format_exc().strip().splitlines()[-3:]
            outcome = ("error", f"{type(err).__name__}: {err} | " + " | ".join(tail))
        with open(out_file, "wb") as f:
            pickle.dump(outcome, f)
        protocol.write("done\n")
        protocol.flush()


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
            value = None if job.done is None else _function(job.done)(*job.args)
            if value is None:
                todo.append(job)
            else:
                done(JobResult(job, value), "done before (cached)")
        if workers == 1:
            for job in todo:
                t0 = time.perf_counter()
                value = _call(job)
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
    """One long-lived worker process (:func:`_serve`): a job at a time, no import per job."""

    def __init__(self, env: dict, threads: int, tmp: Path, n: int):
        self.err = open(tmp / f"worker-{n}.err", "w+b")  # noqa: SIM115
        parent = os.getpid()  # the worker ends when this process is gone (_exit_with)
        code = (
            "from convs2s_edu.training.schedule import _serve; "
            f"_serve({threads}, {parent}, {str(tmp)!r})"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )
        self.job, self.out_file, self.started = None, None, 0.0

    def start(self, job: Job, job_file: Path, out_file: Path) -> None:
        self.job, self.out_file, self.started = job, out_file, time.perf_counter()
        self.process.stdin.write(f"{job_file}\t{out_file}\n")
        self.process.stdin.flush()

    def tail(self) -> str:
        self.err.seek(0)
        return " | ".join(self.err.read().decode(errors="replace").strip().splitlines()[-4:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.err.close()


def _run_parallel(order, workers, threads, timeout, done) -> None:
    """Run ``order`` on ``workers`` long-lived processes, the next job to the first free one."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    pending = list(enumerate(order))
    with tempfile.TemporaryDirectory(prefix="convs2s-jobs-") as tmp:
        tmp = Path(tmp)
        pool = [_Worker(env, threads, tmp, n) for n in range(min(workers, len(order)))]
        spawned = len(pool)
        try:
            while pending or any(w.job for w in pool):
                for w in pool:
                    if w.job is None and pending:
                        index, job = pending.pop(0)
                        job_file, out_file = tmp / f"job-{index}.pkl", tmp / f"out-{index}.pkl"
                        with open(job_file, "wb") as f:
                            pickle.dump(job, f)
                        w.start(job, job_file, out_file)
                busy = [w for w in pool if w.job is not None]
                ready, _, _ = select.select([w.process.stdout for w in busy], [], [], 0.5)
                for w in list(busy):
                    seconds = time.perf_counter() - w.started
                    late = timeout is not None and seconds > timeout
                    if w.process.stdout not in ready and not late:
                        continue
                    line = "" if late else w.process.stdout.readline()
                    if line.strip() == "done" and w.out_file.is_file():
                        with open(w.out_file, "rb") as f:
                            status, value = pickle.load(f)
                        if status == "ok":
                            done(
                                JobResult(w.job, value, seconds),
                                f"{seconds:.1f} s (shared machine)",
                            )
                        else:
                            done(JobResult(w.job, None, seconds, value), "FAILED")
                        w.job = None
                        continue
                    # the worker died (or ran past the timeout): report, replace it
                    why = (
                        f"killed after {timeout:g} s"
                        if late
                        else f"exit status {w.process.poll()}"
                    )
                    w.process.kill()
                    done(JobResult(w.job, None, seconds, f"{why}: {w.tail()}"), "FAILED")
                    w.stop()
                    pool[pool.index(w)] = _Worker(env, threads, tmp, spawned)
                    spawned += 1
        except BaseException:
            # interrupted (Ctrl-C; tox's interrupt, followed by its kill within a second):
            # the jobs running now are abandoned, so their workers end at once
            for w in pool:
                w.process.kill()
            raise
        finally:
            for w in pool:
                w.stop()
