"""Data-parallel training from Python: what ``torchrun`` does, for tests and the
gallery.

:func:`spawn_train` starts one fresh Python process per rank, each of which runs
:func:`~convs2s_edu.train` with the variables ``torchrun`` would set.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile

import torch

from .config import TrainConfig
from .loop import train
from .parallel import free_port

__all__ = ["spawn_train"]


def _write_jobs(path: str, ports: list, jobs: list, threads: int) -> None:
    """The job file of :func:`spawn_train` (pickle: every value arrives exactly as
    given, tuples and NumPy numbers included)."""
    with open(path, "wb") as f:
        pickle.dump((ports, jobs, threads), f)


def _read_jobs(path: str) -> tuple[list, list, int]:
    """What :func:`_write_jobs` wrote (a file of spawn_train's own temporary folder)."""
    with open(path, "rb") as f:
        return pickle.load(f)


def _worker_main(job_file: str) -> None:
    """Body of one process started by :func:`spawn_train` (``RANK`` etc. are set)."""
    ports, jobs, threads = _read_jobs(job_file)
    torch.set_num_threads(threads)
    for port, (cfg_dict, kwargs) in zip(ports, jobs):
        os.environ["MASTER_PORT"] = str(port)  # a fresh rendezvous for every job
        train(TrainConfig.from_dict(cfg_dict), **kwargs)


def spawn_train(jobs, nprocs: int, threads: int = 1, timeout: float = 600) -> None:
    """Run :func:`~convs2s_edu.train` in ``nprocs`` local processes (gloo, 127.0.0.1).

    Fresh Python processes, as ``torchrun --nproc_per_node=nprocs`` starts (not
    ``multiprocessing``, so a script or notebook calling this is not imported again by
    its children). ``jobs`` is a list of ``(TrainConfig, kwargs)``, run in order by
    every rank (e.g. a run stopped after one epoch, then its resumption). Raises
    ``RuntimeError`` with the failing rank's last lines of stderr when a rank fails.
    """
    jobs = [(cfg.to_dict(), dict(kwargs)) for cfg, kwargs in jobs]
    ports = [free_port() for _ in jobs]
    with tempfile.TemporaryDirectory() as tmp:
        job_file = os.path.join(tmp, "jobs.pkl")
        _write_jobs(job_file, ports, jobs, threads)
        code = f"from convs2s_edu.training.launch import _worker_main; _worker_main({job_file!r})"
        procs = []
        for rank in range(nprocs):
            env = {
                **os.environ,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(nprocs),
                "LOCAL_WORLD_SIZE": str(nprocs),
                "MASTER_ADDR": "127.0.0.1",
                "OMP_NUM_THREADS": str(threads),
            }
            err = subprocess.PIPE if rank > 0 else None  # rank 0's progress shows
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", code], env=env, stderr=err, stdout=err
                )
            )
        failed = []
        for rank, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise RuntimeError(
                    f"data-parallel run: rank {rank} did not finish within {timeout} s (killed)"
                ) from None
            if p.returncode != 0:
                tail = (out or b"").decode(errors="replace").strip().splitlines()[-5:]
                failed.append(
                    f"rank {rank} exited with {p.returncode}: " + " | ".join(tail)
                )
        if failed:
            raise RuntimeError("data-parallel run failed: " + "; ".join(failed))
