r"""One training step, and where it runs: this process, or one rank of a data-parallel
run.

Every training step of the package is :func:`make_train_step`'s: the training
loop's, data parallelism's and the lab's timings' (:mod:`convs2s_edu.lab.timing`).
What differs between one process and a data-parallel run is in a :class:`RunContext`.

The step
--------
Forward (under :func:`~convs2s_edu.fast.paths.autocast` for bf16), the loss,
backward, gradient clipping, the optimiser's step:

.. math:: \mathcal{L} = \frac{1}{N}\sum_{b,t:\ y_{bt} \neq \text{PAD}}
          -\log p(y_{bt} \mid y_{b,<t}, x_b)

where :math:`N` counts the real target tokens of the *whole* batch: in one
process the batch's own; in a data-parallel run the sum over the ranks (see
:class:`~convs2s_edu.training.parallel.DataParallelContext`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader

from ..data import length_batches
from ..fast.paths import autocast
from ..loss import sequence_loss

__all__ = ["RunContext", "make_train_step"]


@dataclass
class RunContext:
    """Where a training run executes: here, one process, in which summing over the ranks
    is the identity. :class:`~convs2s_edu.training.parallel.DataParallelContext` is the
    same interface for one rank of a data-parallel run; the training loop calls only
    these methods, so it has no branch of its own for data parallelism.

    Attributes
    ----------
    device : torch.device
    rank, world_size : int
        0 and 1 in a single process.
    """

    device: torch.device
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        """The process that writes checkpoints and prints progress (rank 0)."""
        return self.rank == 0

    def all_sum(self, x: torch.Tensor) -> torch.Tensor:
        """The sum of ``x`` over the ranks: ``x`` itself in one process."""
        return x

    def wrap(self, model: nn.Module) -> nn.Module:
        """The module the step calls: ``model`` itself in one process."""
        return model

    def loader(
        self,
        dataset,
        batch_size: int,
        generator: torch.Generator,
        batching: str = "random",
    ) -> DataLoader:
        """Shuffled batches of ``dataset``, drawn with ``generator`` (its state is saved
        in checkpoints, so a resumed run draws the same batches as an uninterrupted
        one): random batches, or batches of (nearly) equal length with
        ``batching="bucket"`` or ``"pooled"``
        (:func:`~convs2s_edu.data.length_batches`); this process's share of them
        (:meth:`local_batch_size`, :meth:`share`, :meth:`order`)."""
        local = self.local_batch_size(batch_size)
        batches = length_batches(dataset.lengths, batch_size, batching, generator)
        if batches is not None:
            return DataLoader(
                dataset, batch_sampler=self.share(batches), collate_fn=dataset.collate
            )
        order = self.order(dataset, generator)
        return DataLoader(dataset, local, collate_fn=dataset.collate, **order)

    def local_batch_size(self, batch_size: int) -> int:
        """The examples of a random batch this process takes: all of them."""
        return batch_size

    def share(self, batches):
        """This process's share of the equal-length ``batches``: all of them."""
        return batches

    def order(self, dataset, generator: torch.Generator) -> dict:
        """The ``DataLoader`` arguments that order the random batches: shuffled with
        ``generator`` (the loader draws its base seed from it too)."""
        return {"shuffle": True, "generator": generator}

    def start_epoch(self, loader: DataLoader, epoch: int) -> None:
        """Called before every epoch (nothing to do in one process)."""

    def seed_ranks(self, seed: int, resumed_epoch: int = 0) -> None:
        """Dropout masks per rank (nothing to do in one process)."""

    def close(self) -> None:
        """Release what the context holds (nothing in one process)."""


def make_train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    clip_norm: float | None = 1.0,
    precision: str = "fp32",
    context: RunContext | None = None,
) -> Callable[[object], torch.Tensor]:
    """The training step of the package, on a batch already on the model's device.

    Parameters
    ----------
    model : nn.Module
        An :class:`~convs2s_edu.EncoderDecoder` (wrapped by ``context.wrap`` for
        data parallelism).
    optimizer : torch.optim.Optimizer
    clip_norm : float or None
        Clip the gradient's global norm (after the all-reduce: the same on every rank).
    precision : {"fp32", "bf16"}
        bf16: the forward pass under autocast; the loss, weights, gradients and
        optimiser in float32.
    context : RunContext, optional
        Default: one process on the model's device.

    Returns
    -------
    callable
        ``step(batch) -> loss``: this process's share of the step's loss (the
        whole loss in one process; summed over the ranks in a data-parallel run),
        detached, on the device (no synchronisation).
    """
    if context is None:
        context = RunContext(next(model.parameters()).device)

    def step(batch) -> torch.Tensor:
        # N: the real target tokens of the whole batch (summed over the ranks)
        n_tokens = context.all_sum((~batch.tgt_padding_mask).sum().to(torch.float32))
        with autocast(context.device, precision):
            # the loader's batches were checked when the data set was built: no checks
            # again
            logits = model(batch.src, batch.tgt_in, check=False)  # (B, T, V)
        # L = (1/N) Σ -log p(y_bt | y_<t, x), this process's part of the sum
        share = sequence_loss(logits.float(), batch.tgt_out, "sum") / n_tokens
        optimizer.zero_grad(set_to_none=True)
        # DDP averages the gradients over the ranks: times world_size, the average is
        # the gradient of Σ_r share_r, the loss of the whole batch (training.parallel)
        (share * context.world_size).backward()
        if clip_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        return share.detach()

    return step
