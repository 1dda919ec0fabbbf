r"""
Data parallelism: several processes, one model
==============================================

When one device is not enough, the simplest way to use several is *data
parallelism*: every process holds a full copy of the model, takes a different
share of every batch, and the processes add up their gradients before each
update, so that all copies take the same step. This is how the paper trained
its largest model: Gehring et al. (2017, §4.2) write that for WMT'14
English-French they "use a multi-GPU setup on a single machine", training "on
up to eight GPUs synchronously by maintaining copies of the model on each card
and split the batch so that each worker computes 1/8-th of the gradients; at
the end we sum the gradients via Nvidia NCCL."

``convs2s_edu`` does the same with PyTorch's
:class:`~torch.nn.parallel.DistributedDataParallel` (DDP), started by
``torchrun``; :mod:`convs2s_edu.training.parallel` holds the details.

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
# :func:`~convs2s_edu.training.launch.spawn_train` starts local processes the way ``torchrun``
# would (gloo, on 127.0.0.1) and each runs :func:`~convs2s_edu.train`.
# One epoch of ConvS2S, once with 1 process and once with 2, each process
# with one thread. On a 2-core CPU that is shared with other work, **no
# speed-up is expected**: two processes need two free cores, and they spend
# part of every step exchanging gradients. The point of the measurement is the
# mechanism and its cost, not a gain.

import os
import tempfile
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt

from convs2s_edu import load_checkpoint
from convs2s_edu.lab.site import comparison, is_quick_mode, site_config
from convs2s_edu.lab.timing import machine_info
from convs2s_edu.training import spawn_train

# dropout off, so that the two runs must end with the same weights (with dropout on, the
# two processes draw other masks than one process)
cfg = site_config(
    "convs2s",
    device="cpu",
    epochs=1,
    model_options={"dropout": 0.0},
    n_train=512 if is_quick_mode() else 4096,
)
info = machine_info("cpu")
info.load_before = os.getloadavg()[0]
print(info.describe())
print(f"ConvS2S, {cfg.n_train} training examples, global batch {cfg.batch_size}, 1 epoch")
runs, curves = {}, {}
with tempfile.TemporaryDirectory() as tmp:
    for n in (1, 2):
        out = Path(tmp) / f"n{n}"
        spawn_train([(cfg, {"out_dir": out, "progress": False})], nprocs=n, threads=1)
        history, label = load_checkpoint(out).history, f"{n} process" + "es" * (n > 1)
        h = runs[label] = history.epochs[-1]
        curves[label] = history.step_losses
        print(
            f"{n} process(es): {h['seconds']:.1f} s, {h['tokens_per_second']:,.0f} tokens/s, "
            f"train loss {h['train_loss']:.6f}"
        )
for key, what, fmt, tie in (
    ("train_loss", "training loss", "{:.6f}", 1e-5),
    ("tokens_per_second", "throughput (tokens/s)", "{:,.0f}", 0),
):
    values = {label: h[key] for label, h in runs.items()}
    print(textwrap.fill(comparison(what, values, fmt=fmt, tie=tie), 68))

# %%
# Every step's training loss of the two runs (left), and how far apart they are
# (right): the same steps, the same batches, gradients averaged over the processes.

(one, two), steps = curves.values(), range(1, len(curves["1 process"]) + 1)
fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2), layout="constrained")
for (label, losses), style in zip(curves.items(), ("-", "--")):
    left.plot(steps, losses, style, label=label)
left.set(xlabel="step", ylabel="training loss", title="loss per step")
left.legend()
right.semilogy(steps, [abs(a - b) + 1e-12 for a, b in zip(one, two)], color="C3")
right.set(xlabel="step", ylabel="|difference| (+1e-12)", title="1 process against 2")
plt.show()

# %%
# What you saw
# ------------
# * Two processes with half a batch each take the one-process step, so the
#   two training losses should agree to rounding; the first sentence above
#   checks it on this run.
# * Their speeds tell you about this machine: two processes need two free
#   cores, and this one's two are shared with other jobs. On a machine with one
#   GPU per process, each step's compute is divided by N and the gradient
#   all-reduce (NCCL) is the added cost.
#
# Try it
# ------
# **1. Who sees what.** With a global batch of 128, how many examples does each
# of :math:`N = 1, 2, 4, 8` processes compute per step, and how many optimiser
# steps does an epoch of the original notebook's 10,000 examples take?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The batch is split, the number of steps is not: every process takes every
# step, on its share.

import math  # noqa: E402

for n in (1, 2, 4, 8):
    print(f"N={n}: {128 // n} examples per process per step, {math.ceil(10_000 / 128)} steps")

# %%
# .. raw:: html
#
#    </details>
#
# **2. Why the global token count.** Two processes hold 30 and 10 target
# tokens in a step, with mean losses 1.0 and 3.0 per token. What loss does one
# process with all 40 tokens compute, and what would the mean of the two
# processes' own means give?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The one-process loss weighs every token alike; the mean of per-process means
# weighs the 10 tokens as much as the 30. Dividing each process's *summed* loss
# by the global count (all-reduced) gives the one-process value exactly.

tokens, means = (30, 10), (1.0, 3.0)
global_mean = sum(t * m for t, m in zip(tokens, means)) / sum(tokens)
print(f"one process: {global_mean:.2f}; mean of the means: {sum(means) / len(means):.2f}")

# %%
# .. raw:: html
#
#    </details>
#
# **3. What crosses the wire.** How many numbers does DDP all-reduce per step
# for ConvS2S, and does that depend on the batch size?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# One gradient per trainable parameter, whatever the batch size.

from convs2s_edu import build_model  # noqa: E402

n_params = sum(p.numel() for p in build_model(cfg).parameters() if p.requires_grad)
print(f"{n_params:,} gradients per step, for any batch size")

# %%
# .. raw:: html
#
#    </details>
