r"""Data-parallel training: :class:`~torch.nn.parallel.DistributedDataParallel` under
``torchrun``.

``torchrun --nproc_per_node=N -m convs2s_edu train --model convs2s --out DIR`` starts N
processes; :func:`~convs2s_edu.train` finds the variables torchrun sets (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``: :func:`setup`) and
trains with a :class:`DataParallelContext`, the data-parallel
:class:`~convs2s_edu.training.step.RunContext`, and the step of
:func:`~convs2s_edu.training.step.make_train_step`:

What is split
    The training examples. Every epoch a :class:`~torch.utils.data.DistributedSampler`
    (seeded with ``cfg.seed``, reshuffled with
    :meth:`~torch.utils.data.DistributedSampler.set_epoch`) deals one permutation of the
    training set out to the ranks, rank ``r`` taking positions
    ``r, r + N, r + 2N, ...``; each rank's batch has ``batch_size / N`` examples, so the
    N batches of one step together are the ``batch_size`` examples one process would
    have taken.
What is all-reduced
    1. The number of target tokens of the step (one integer per rank, summed), so that every
       rank divides its *summed* loss by the *global* count;
    2. the gradients (by DDP, during the backward pass, in buckets). DDP *averages* them over
       the ranks, so each rank's loss is multiplied by N before the backward pass:

       .. math:: \mathcal{L}_r = N \cdot \frac{1}{\sum_{r'} n_{r'}}
                 \sum_{b,t \in \text{rank } r} -\log p(y_{bt} \mid \dots),
          \qquad \frac{1}{N}\sum_r \nabla \mathcal{L}_r = \nabla \mathcal{L}

       the gradient of the one-process loss of the whole batch. Dividing by the local
       count instead would weight a token of a rank with short sequences more than one
       of a rank with long ones: not the same step.
    3. once per epoch, every step's loss (so all ranks hold the same numbers and agree on
       stopping when one is NaN or infinite: no rank waits forever in an all-reduce that
       the others have left).

Only rank 0 writes the checkpoint, the history, the cache and the progress output; every
rank reads the checkpoint when resuming. The model starts from the same seed on every
rank (DDP also broadcasts rank 0's weights); dropout is seeded with ``seed + rank``
after the model is built, so that the ranks draw different masks.

Departure from a one-process run: with dropout, the N processes draw other masks than
one process would, so only with ``dropout=0`` is the result identical (up to float
rounding) to a one-process run with the same sampler. When the training set does not
divide by N, the sampler repeats a few examples to even the ranks out
(:class:`~torch.utils.data.DistributedSampler`'s rule).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from .device import resolve_device
from .step import RunContext

__all__ = ["DataParallelContext", "ShardedBatches", "is_launched", "setup", "free_port"]


class ShardedBatches:
    """One rank's share of every batch of a batch sampler: examples
    ``rank, rank + N, ...``.

    A batch of fewer than ``world_size`` examples is repeated so that every rank gets at
    least one (as :class:`~torch.utils.data.DistributedSampler` evens the ranks out).

    Parameters
    ----------
    batches : iterable of list of int
        The global batches (every rank must draw the same ones).
    rank, world_size : int
    """

    def __init__(self, batches, rank: int, world_size: int):
        self.batches, self.rank, self.world_size = batches, rank, world_size

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for batch in self.batches:
            if len(batch) < self.world_size:
                batch = [batch[i % len(batch)] for i in range(self.world_size)]
            yield batch[self.rank :: self.world_size]


def is_launched() -> bool:
    """True inside a process started by ``torchrun`` (or with its variables set), or
    when a process group already exists."""
    return (dist.is_available() and dist.is_initialized()) or "WORLD_SIZE" in os.environ


@dataclass
class DataParallelContext(RunContext):
    """One rank of a data-parallel run (see the module's docstring).

    Attributes
    ----------
    device : torch.device
        ``cuda:<local_rank>`` on GPUs, else the CPU.
    rank, world_size, local_rank : int
    owns_group : bool
        True when :func:`setup` created the process group (then ``close()`` destroys
        it).
    """

    local_rank: int = 0
    owns_group: bool = False

    def local_batch_size(self, batch_size: int) -> int:
        """``batch_size / world_size``: this rank's share of every random batch."""
        if batch_size % self.world_size:
            raise ValueError(
                f"batch_size must be divisible by the number of processes "
                f"({self.world_size}) for data-parallel training, got {batch_size}"
            )
        return batch_size // self.world_size

    def all_sum(self, x: torch.Tensor) -> torch.Tensor:
        """The sum of ``x`` over the ranks (a new tensor, on ``x``'s device)."""
        x = x.clone()
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return x

    def wrap(self, model: nn.Module) -> nn.Module:
        """``model`` in :class:`~torch.nn.parallel.DistributedDataParallel`."""
        ids = [self.device.index] if self.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def share(self, batches) -> ShardedBatches:
        """This rank's share of the equal-length ``batches`` (:class:`ShardedBatches`)."""
        return ShardedBatches(batches, self.rank, self.world_size)

    def order(self, dataset, generator: torch.Generator) -> dict:
        """The random batches' order: a :class:`~torch.utils.data.DistributedSampler`
        seeded from ``generator``, shuffled, every example used (``drop_last=False``)."""
        sampler = DistributedSampler(
            dataset,
            num_replicas=self.world_size,
            rank=self.rank,
            seed=generator.initial_seed(),
        )
        return {"sampler": sampler}

    def start_epoch(self, loader: DataLoader, epoch: int) -> None:
        """A new permutation every epoch, the same on every rank (equal-length batches
        draw theirs from the generator, the same on every rank)."""
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(epoch)

    def seed_ranks(self, seed: int, resumed_epoch: int = 0) -> None:
        """Other dropout masks on every rank: ``seed + rank``; on resuming, rank 0 has
        the checkpoint's generator and the others a seed of their own for that epoch."""
        if resumed_epoch == 0:
            torch.manual_seed(seed + self.rank)
        elif self.rank > 0:
            torch.manual_seed(seed + self.rank + 7919 * resumed_epoch)

    def close(self) -> None:
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()


def setup(device: str = "auto") -> RunContext:
    """Where a run executes: a :class:`DataParallelContext` when launched by
    ``torchrun`` (:func:`is_launched`), else one process on ``device``. Creates the
    process group from the environment when none exists (NCCL when ``device`` resolves
    to CUDA, else gloo)."""
    want = resolve_device(device)
    if not is_launched():
        return RunContext(want)
    owns = False
    if not dist.is_initialized():
        # torch's env:// rendezvous names a variable torchrun sets that is missing
        dist.init_process_group(backend="nccl" if want.type == "cuda" else "gloo")
        owns = True
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local) if want.type == "cuda" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    return DataParallelContext(dev, rank, world, local_rank=local, owns_group=owns)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for single-machine runs and tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
