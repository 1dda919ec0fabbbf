r"""
Data parallelism: several processes, one model
==============================================

When one device is not enough, the simplest way to use several is *data
parallelism*: every process holds a full copy of the model, takes a different
share of every batch, and the processes add up their gradients before each
update, so that all copies take the same step. This is how the paper trained
its largest model: Gehring et al. (2017, §5.1) write that for WMT'14
English-French they "use a multi-GPU setup on a single machine", training "on
up to eight GPUs synchronously by maintaining copies of the model on each card
and split the batch so that each worker computes 1/8-th of the gradients; at
the end we sum the gradients via Nvidia NCCL."

``convs2s_edu`` does the same with PyTorch's
:class:`~torch.nn.parallel.DistributedDataParallel` (DDP), started by
``torchrun``; :mod:`convs2s_edu.distributed` holds the details.

What is split, what is all-reduced
----------------------------------
* **Split**: the examples. A :class:`~torch.utils.data.DistributedSampler`
  seeded with the run's seed deals one permutation per epoch (``set_epoch``)
  to the N processes; each takes ``batch_size / N`` examples per step.
* **All-reduced, every step**: the number of target tokens of the step (so
  that every process divides its *summed* loss by the *global* count), and the
  gradients (DDP, during the backward pass). DDP *averages* gradients, so each
  process multiplies its loss by N: the average is then exactly the gradient of
  the one-process loss of the whole batch,

  .. math:: \frac{1}{N}\sum_{r=1}^{N} \nabla\Big(N\,\frac{\sum_{t \in r} \ell_t}
            {\sum_{r'} n_{r'}}\Big) = \nabla \frac{\sum_{t} \ell_t}{\sum_{r'} n_{r'}}.

  Dividing by each process's own token count instead would weigh the tokens of
  a process with short sentences more: another step. The test suite checks
  that 2 processes end with the weights of 1 process (to :math:`10^{-5}`).
* **All-reduced, once per epoch**: every step's loss, so every process holds
  the same history and all stop together when a loss is not finite.

Only process 0 writes the checkpoint, the history and the progress lines.

Where this departs from the paper: the paper *sums* the gradients of 1/8-th
batches; we average gradients of losses scaled by N, which is the same sum.
It used Nesterov's accelerated gradient; the package trains with Adam.

Command lines
-------------
One machine with 4 GPUs (NCCL)::

    torchrun --standalone --nproc_per_node=4 -m convs2s_edu train --model convs2s --out run

Two machines with 8 GPUs each; run on both, ``HOST`` being the first machine::

    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d \
        --rdzv-endpoint=HOST:29500 --rdzv-id=convs2s-1 \
        -m convs2s_edu train --model convs2s --out /shared/run

The CPU (gloo), e.g. to try it: ``--device cpu`` with ``--nproc_per_node=2``.
``--batch-size`` is the *global* batch and must divide by the number of
processes. ``--resume`` works as in one process (every process reads the
checkpoint; the output directory must be shared between machines).
"""

# %%
# One process against two, on this machine's CPU
# ----------------------------------------------
# :func:`~convs2s_edu.spawn_train` starts local processes the way ``torchrun``
# would (gloo, on 127.0.0.1) and each runs :func:`~convs2s_edu.train.train`.
# One epoch of ConvS2S, once with 1 process and once with 2, each process
# with one thread. On a 2-core CPU that is shared with other work, **no
# speed-up is expected**: two processes need two free cores, and they spend
# part of every step exchanging gradients. The point of the measurement is the
# mechanism and its cost, not a gain.

import os
import tempfile
from pathlib import Path

from convs2s_edu import is_quick_mode, load_checkpoint, site_config, spawn_train
from convs2s_edu.speed import machine_info

# dropout off, so that the two runs must end with the same weights (with dropout on, the
# two processes draw other masks than one process)
cfg = site_config(
    "convs2s",
    device="cpu",
    epochs=1,
    model_options={"dropout": 0.0},
    n_train=1024 if is_quick_mode() else 4096,
)
info = machine_info("cpu")
info.load_before = os.getloadavg()[0]
print(info.describe())
print(f"ConvS2S, {cfg.n_train} training examples, global batch {cfg.batch_size}, 1 epoch")
with tempfile.TemporaryDirectory() as tmp:
    for n in (1, 2):
        out = Path(tmp) / f"n{n}"
        spawn_train([(cfg, {"out_dir": out, "progress": False})], nprocs=n, threads=1)
        h = load_checkpoint(out).history.epochs[-1]
        print(
            f"{n} process(es): {h['seconds']:.1f} s, {h['tokens_per_second']:,.0f} tokens/s, "
            f"train loss {h['train_loss']:.4f}"
        )

# %%
# What you saw
# ------------
# * The two runs end with the same training loss (to the last digits printed):
#   two processes with half a batch each take the one-process step.
# * Their speeds tell you about this machine: with two cores shared by other
#   jobs, two processes rarely beat one. On a machine with one GPU per process,
#   each step's compute is divided by N and the gradient all-reduce (NCCL) is
#   the added cost.
