"""Tests of ``convs2s_edu.training.schedule``: jobs run in at most ``workers`` processes at once
(and concurrently), each with its own thread count, longest first; duplicates run once; a job
done already starts no process; a failed job is named with its error while the others finish;
a dead worker or a late job ends the call; training jobs land in the cache and say whether they
shared the machine; workers never outlive the process that started them; a Dask cluster's
workers run them too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _tiny import SIX_STEPS, tiny_config

import convs2s_edu
from convs2s_edu.training import Job, cache, run_jobs, train_job
from convs2s_edu.training import schedule as schedule_mod

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def helpers_importable(monkeypatch):
    """Workers inherit the environment: let them import this folder's ``_jobs`` helpers."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def _spans(folder: Path) -> list[tuple[float, float]]:
    return [tuple(json.loads(p.read_text())) for p in sorted(folder.glob("span-*.json"))]


def test_jobs_run_concurrently_but_never_more_than_the_workers(tmp_path, helpers_importable):
    jobs = [
        Job("_jobs:sleep_and_record", (str(tmp_path), i, 1.5), label=f"sleep {i}")
        for i in range(5)
    ]
    results = run_jobs(jobs, workers=2, progress=False)
    assert [r.value for r in results] == list(range(5))
    spans = _spans(tmp_path)
    assert len(spans) == 5
    at_once = max(sum(a <= t < b for a, b in spans) for t, _ in spans)
    assert at_once == 2  # two ran together, never three


def test_every_worker_gets_its_thread_count(helpers_importable):
    jobs = [Job("torch:get_num_threads", label=f"threads {i}") for i in range(2)]
    jobs += [Job("os:getenv", ("OMP_NUM_THREADS",), label=f"OpenMP {i}") for i in range(2)]
    values = [r.value for r in run_jobs(jobs, workers=2, threads=2, progress=False)]
    assert values == [2, 2, "2", "2"]  # OpenMP's too, set before the worker imports torch
    jobs = [Job("os:getpid", label=f"pid {i}") for i in range(2)]
    pids = [r.value for r in run_jobs(jobs, workers=2, threads=1, progress=False)]
    assert len(set(pids)) == 2  # separate processes


def test_the_longest_job_starts_first_and_duplicates_run_once(tmp_path, helpers_importable):
    jobs = [
        Job("_jobs:sleep_and_record", (str(tmp_path), i, 0.2), label=f"job {i}", cost=c)
        for i, c in enumerate([1.0, 5.0, 3.0])
    ]
    jobs.append(Job("_jobs:sleep_and_record", (str(tmp_path), 9, 0.2), label="job 1", cost=5.0))
    results = run_jobs(jobs, workers=1, progress=False)  # one at a time: the order shows
    assert [r.job.label for r in results] == ["job 0", "job 1", "job 2"]  # ``jobs``' order
    order = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("order-*.json"))]
    assert [o[1] for o in sorted(order)] == [1, 2, 0]  # by cost, the duplicate not run


def test_a_failed_job_is_named_and_the_others_finish(tmp_path, helpers_importable):
    jobs = [
        Job("_jobs:fail", ("no such thing",), label="the bad one"),
        Job("_jobs:sleep_and_record", (str(tmp_path), 0, 0.1), label="the good one"),
    ]
    with pytest.raises(RuntimeError, match="1 of 2 jobs failed: the bad one: .*no such thing"):
        run_jobs(jobs, workers=2, progress=False)
    assert len(_spans(tmp_path)) == 1


def test_a_dead_worker_or_a_late_job_ends_the_call_and_says_so(tmp_path, helpers_importable):
    """A worker that dies (a segmentation fault, the out-of-memory killer) or a job past the
    timeout ends the call at once with an error that names how (what finished is kept)."""
    jobs = [
        Job("_jobs:crash", (3,), label="the crash", cost=2),
        Job("_jobs:sleep_and_record", (str(tmp_path), 0, 0.1), label="beside", cost=1),
    ]
    with pytest.raises(RuntimeError, match=r"run_jobs stopped: TerminatedWorkerError.*EXIT\(3\)"):
        run_jobs(jobs, workers=2, progress=False)
    late = [Job("_jobs:sleep_and_record", (str(tmp_path), 1, 60.0), label="the late one")]
    late.append(Job("_jobs:sleep_and_record", (str(tmp_path), 2, 0.1), label="quick"))
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="run_jobs stopped: TimeoutError"):
        run_jobs(late, workers=2, progress=False, timeout=3)
    assert time.monotonic() - t0 < 30  # not the late job's minute


def _gone(pid: int) -> bool:
    """The process ``pid`` has exited (a zombie nobody reaped yet counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _parent_with_two_busy_workers(folder: Path) -> tuple[subprocess.Popen, list[int]]:
    """A process running ``run_jobs`` with two workers, each in a job of a minute; returns
    it and the workers' process ids once both jobs have started."""
    code = (
        # Ctrl-C raises KeyboardInterrupt, as in a terminal: pytest-xdist's workers start
        # their children with SIGINT ignored, and Python then installs no handler
        "import signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from convs2s_edu.training import Job, run_jobs\n"
        f"jobs = [Job('_jobs:record_pid_and_sleep', ({str(folder)!r}, i, 60.0), label=str(i))"
        " for i in range(2)]\n"
        "run_jobs(jobs, workers=2, progress=False)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    pid_files = [folder / f"pid-{i}" for i in range(2)]
    started = _wait_until(lambda: all(f.is_file() and f.read_text() for f in pid_files), 60)
    if not started:
        parent.kill()
        pytest.fail("the two jobs did not start within 60 s")
    return parent, [int(f.read_text()) for f in pid_files]


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_workers_end_when_their_parent_is_killed_or_interrupted(tmp_path, helpers_importable, how):
    """``kill -9`` of the parent (no clean-up runs): the workers' watchdogs end them; an
    interrupt (Ctrl-C, or tox's, which tox follows with a kill within a second): the parent
    stops its workers and exits at once instead of waiting for their jobs."""
    parent, workers = _parent_with_two_busy_workers(tmp_path)
    try:
        parent.send_signal(getattr(signal, how))
        parent.wait(timeout=10)
        assert _wait_until(lambda: all(_gone(pid) for pid in workers), 10), (
            f"after {how} to their parent, workers {workers} were still running 10 s later"
        )
    finally:
        parent.kill()
        for pid in workers:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_script_that_calls_run_jobs_is_not_run_again_by_the_workers(tmp_path):
    """A gallery page downloaded as a script, or any script without a ``__main__`` guard:
    ``multiprocessing``'s spawn would import it again in every worker, which would run it
    (and its ``run_jobs``) again."""
    script = tmp_path / "page.py"
    script.write_text(
        "import os\n"
        f"with open({str(tmp_path / 'ran')!r}, 'a') as f:\n"
        "    f.write(f'{os.getpid()}\\n')\n"
        "from convs2s_edu.training import Job, run_jobs\n"
        "jobs = [Job('os:getpid', label=str(i)) for i in range(3)]\n"
        "print(len({r.value for r in run_jobs(jobs, workers=2, progress=False)}))\n"
    )
    # the package as this test imported it (installed, or a source tree such as mutmut's)
    where = str(Path(convs2s_edu.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([where, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() in ("1", "2")  # the jobs ran in the workers
    assert len((tmp_path / "ran").read_text().split()) == 1  # the script ran once


def test_default_workers_fill_the_cores():
    assert schedule_mod.default_workers(1, cores=2) == 2
    assert schedule_mod.default_workers(2, cores=2) == 1
    assert schedule_mod.default_workers(4, cores=2) == 1


def test_training_jobs_fill_the_cache_and_record_the_shared_clock(tmp_path, helpers_importable):
    cfgs = [tiny_config(**SIX_STEPS, seed=s) for s in (0, 1)]
    results = run_jobs([train_job(c, tmp_path) for c in cfgs], workers=2, progress=False)
    for cfg, r in zip(cfgs, results):
        assert r.value == str(cache.run_dir(cfg, tmp_path))
        loaded = cache.train_or_load(cfg, progress=False, directory=tmp_path)
        assert loaded.history.shared_clock  # trained beside another worker
    # done before: no process is started (a job that would fail shows it)
    again = run_jobs([train_job(c, tmp_path) for c in cfgs], workers=2, progress=False)
    assert [r.seconds for r in again] == [0.0, 0.0]
    alone = tiny_config(**SIX_STEPS, seed=2)
    run_jobs([train_job(alone, tmp_path)], workers=1, progress=False)  # in this process
    loaded = cache.train_or_load(alone, progress=False, directory=tmp_path)
    assert not loaded.history.shared_clock


def test_the_cost_estimate_orders_bigger_runs_first():
    small = tiny_config(**SIX_STEPS)
    assert train_job(small.replace(epochs=4)).cost > train_job(small).cost
    assert train_job(small.replace(max_len=12)).cost > train_job(small).cost


def test_each_path_is_timed_alone_before_the_workers_share_the_cores(monkeypatch, tmp_path):
    import torch

    timed = []

    def resolve(cfg, say):
        timed.append((cfg.seed, torch.get_num_threads()))
        return cfg

    def workers(todo, *args):
        assert len(timed) == 2  # every choice made before a worker started
        return [(job.key, None, 0.0, None) for job in todo]

    monkeypatch.setattr(schedule_mod, "resolve_path", resolve)
    monkeypatch.setattr(schedule_mod, "_parallel", workers)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        jobs = [train_job(tiny_config(fast=None, seed=s), tmp_path) for s in (0, 1)]
        run_jobs(jobs, workers=2, threads=1, progress=False)
    finally:
        torch.set_num_threads(before)
    assert sorted(timed) == [(0, 1), (1, 1)]  # at the workers' threads
