r"""Data-parallel training: :class:`~torch.nn.parallel.DistributedDataParallel` under ``torchrun``.

``torchrun --nproc_per_node=N -m convs2s_edu train --model convs2s --out DIR``
starts N processes; :func:`~convs2s_edu.train.train` finds the variables torchrun
sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``)
and trains with :class:`DataParallelContext`:

What is split
    The training examples. Every epoch a
    :class:`~torch.utils.data.DistributedSampler` (seeded with ``cfg.seed``,
    reshuffled with :meth:`~torch.utils.data.DistributedSampler.set_epoch`)
    deals one permutation of the training set out to the ranks, rank ``r``
    taking positions ``r, r + N, r + 2N, ...``; each rank's batch has
    ``batch_size / N`` examples, so the N batches of one step together are the
    ``batch_size`` examples one process would have taken.
What is all-reduced
    1. The number of target tokens of the step (one integer per rank, summed),
       so that every rank divides its *summed* loss by the *global* count;
    2. the gradients (by DDP, during the backward pass, in buckets). DDP
       *averages* them over the ranks, so each rank's loss is multiplied by N
       before the backward pass:

       .. math:: \mathcal{L}_r = N \cdot \frac{1}{\sum_{r'} n_{r'}}
                 \sum_{b,t \in \text{rank } r} -\log p(y_{bt} \mid \dots),
          \qquad \frac{1}{N}\sum_r \nabla \mathcal{L}_r = \nabla \mathcal{L}

       the gradient of the one-process loss of the whole batch. Dividing by the
       local count instead would weight a token of a rank with short sequences
       more than one of a rank with long ones: not the same step.
    3. once per epoch, every step's loss (so all ranks hold the same numbers
       and agree on stopping when one is NaN or infinite: no rank waits forever
       in an all-reduce that the others have left).

Only rank 0 writes the checkpoint, the history, the cache and the progress
output; every rank reads the checkpoint when resuming. The model starts from
the same seed on every rank (DDP also broadcasts rank 0's weights); dropout is
seeded with ``seed + rank`` after the model is built, so that the ranks draw
different masks.

Departure from a one-process run: with dropout, the N processes draw other
masks than one process would, so only with ``dropout=0`` is the result
identical (up to float rounding) to a one-process run with the same sampler.
When the training set does not divide by N, the sampler repeats a few
examples to even the ranks out (:class:`~torch.utils.data.DistributedSampler`'s
rule).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

__all__ = ["DataParallelContext", "is_launched", "setup", "free_port", "spawn_train"]


def is_launched() -> bool:
    """True inside a process started by ``torchrun`` (or with its variables set), or when a
    process group already exists."""
    return (dist.is_available() and dist.is_initialized()) or "WORLD_SIZE" in os.environ


@dataclass
class DataParallelContext:
    """One rank of a data-parallel run (see the module's docstring).

    Attributes
    ----------
    rank, world_size, local_rank : int
    device : torch.device
        ``cuda:<local_rank>`` on GPUs, else the CPU.
    owns_group : bool
        True when :func:`setup` created the process group (then ``close()``
        destroys it).
    """

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    owns_group: bool = False

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes files and prints."""
        return self.rank == 0

    def local_batch_size(self, batch_size: int) -> int:
        if batch_size % self.world_size:
            raise ValueError(
                f"batch_size must be divisible by the number of processes "
                f"({self.world_size}) for data-parallel training, got {batch_size}"
            )
        return batch_size // self.world_size

    def loader(self, dataset, batch_size: int, seed: int) -> tuple[DataLoader, DistributedSampler]:
        """This rank's share of ``dataset``: ``batch_size / world_size`` examples per step."""
        sampler = DistributedSampler(
            dataset,
            num_replicas=self.world_size,
            rank=self.rank,
            shuffle=True,
            seed=seed,
            drop_last=False,
        )
        loader = DataLoader(
            dataset,
            batch_size=self.local_batch_size(batch_size),
            sampler=sampler,
            collate_fn=dataset.collate,
        )
        return loader, sampler

    def wrap(self, model: nn.Module) -> nn.Module:
        """``model`` in :class:`~torch.nn.parallel.DistributedDataParallel`."""
        ids = [self.device.index] if self.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def all_sum(self, x: torch.Tensor) -> torch.Tensor:
        """The sum of ``x`` over the ranks (a new tensor, on ``x``'s device)."""
        x = x.clone()
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return x

    def make_train_step(
        self, ddp_model: nn.Module, optimizer, clip_norm: float | None, precision: str = "fp32"
    ):
        """A training step whose gradient is the one-process gradient of the global batch.

        Returns a function of a batch that returns this rank's share of the
        step's loss, :math:`\\text{(local sum)} / \\text{(global tokens)}`;
        summed over the ranks (:meth:`all_sum`), the shares give the loss of the
        global batch.
        """
        from .fast import autocast
        from .train import sequence_loss

        world = self.world_size

        def step(batch) -> torch.Tensor:
            n_local = torch.tensor(float(batch.n_target_tokens), device=self.device)
            n_global = self.all_sum(n_local)  # all-reduce 1: sum_r n_r
            with autocast(self.device, precision):
                logits = ddp_model(batch.src, batch.tgt_in)  # (B/N, T, V)
            share = sequence_loss(logits.float(), batch.tgt_out, "sum") / n_global
            optimizer.zero_grad(set_to_none=True)
            # DDP averages gradients over the N ranks (all-reduce 2): scale by N so that the
            # average is the gradient of sum_r share_r, the loss of the whole batch
            (share * world).backward()
            if clip_norm is not None:  # on the all-reduced gradient: the same on every rank
                nn.utils.clip_grad_norm_(ddp_model.parameters(), clip_norm)
            optimizer.step()
            return share.detach()

        return step

    def close(self) -> None:
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()


def setup(device: str = "auto") -> DataParallelContext | None:
    """The rank's context when launched by ``torchrun`` (:func:`is_launched`), else ``None``.

    Creates the process group from the environment when none exists: NCCL
    when CUDA is used (``device`` ``"auto"`` on a GPU machine, or ``"cuda"``),
    else gloo.
    """
    if not is_launched():
        return None
    from .train import resolve_device

    want = resolve_device(device)
    owns = False
    if not dist.is_initialized():
        for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            if var not in os.environ:
                raise ValueError(
                    f"data-parallel training needs the environment variable {var} "
                    "(start the processes with torchrun)"
                )
        dist.init_process_group(backend="nccl" if want.type == "cuda" else "gloo")
        owns = True
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local) if want.type == "cuda" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    return DataParallelContext(rank, world, local, dev, owns)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for single-machine runs and tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_main(job_file: str) -> None:
    """Body of one process started by :func:`spawn_train` (``RANK`` etc. are set)."""
    import pickle

    with open(job_file, "rb") as f:
        ports, jobs, threads = pickle.load(f)
    torch.set_num_threads(threads)
    from .train import TrainConfig, train

    for port, (cfg_dict, kwargs) in zip(ports, jobs):
        os.environ["MASTER_PORT"] = str(port)  # a fresh rendezvous for every job
        train(TrainConfig.from_dict(cfg_dict), **kwargs)


def spawn_train(jobs, nprocs: int, threads: int = 1, timeout: float = 600) -> None:
    """Run :func:`~convs2s_edu.train.train` in ``nprocs`` local processes (gloo, 127.0.0.1).

    What ``torchrun --nproc_per_node=nprocs`` does, from Python (tests, the
    data-parallel page): fresh Python processes (not ``multiprocessing``, so
    a script or notebook calling this is not imported again by its children).
    ``jobs`` is a list of ``(TrainConfig, kwargs)``, run in order by every rank
    (e.g. a run stopped after one epoch, then its resumption). Raises
    ``RuntimeError`` with the failing rank's last lines of stderr when a rank fails.
    """
    import pickle
    import subprocess
    import sys
    import tempfile

    jobs = [(cfg.to_dict(), dict(kwargs)) for cfg, kwargs in jobs]
    ports = [free_port() for _ in jobs]
    with tempfile.TemporaryDirectory() as tmp:
        job_file = os.path.join(tmp, "jobs.pkl")
        with open(job_file, "wb") as f:
            pickle.dump((ports, jobs, threads), f)
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
            code = f"from convs2s_edu.distributed import _worker_main; _worker_main({job_file!r})"
            err = subprocess.PIPE if rank > 0 else None  # rank 0's progress shows
            procs.append(
                subprocess.Popen([sys.executable, "-c", code], env=env, stderr=err, stdout=err)
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
                failed.append(f"rank {rank} exited with {p.returncode}: " + " | ".join(tail))
        if failed:
            raise RuntimeError("data-parallel run failed: " + "; ".join(failed))
