r"""
How the gap grows with sequence length
======================================

The :ref:`training page <sphx_glr_auto_examples_plot_05_training.py>` timed
both models on the task's sequences of 8 to 20 tokens. The argument for
convolutions is really about *longer* sequences: the GRU decoder runs one step
per target position, one after the other, while the ConvS2S decoder runs a
fixed number of layers, each over all positions at once. This page times one
training step of each model at growing sequence lengths, with everything else
fixed.
"""

# %%
# What is measured
# ----------------
# For every length :math:`T`, a batch of 32 random sorting examples of exactly
# :math:`T` tokens, and for each model a fresh, untrained instance with a
# position table long enough for the longest length. One training step is what
# :func:`~convs2s_edu.train` does per batch: forward pass, loss, backward
# pass, gradient clipping and an Adam update. Each model first takes one
# untimed warm-up step at that length (memory allocation, library
# initialisation); then a few steps are timed with
# :func:`time.perf_counter` one by one (after :func:`torch.cuda.synchronize`
# when on a GPU, so that no queued work is left out), and the median is
# reported: a step slowed down by another program on the machine does not
# move it. Training the models is not needed:
# how long a step takes does not depend on the values of the weights.

import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from convs2s_edu import ConvS2S, ConvS2SConfig, RNNSeq2Seq, RNNSeq2SeqConfig, generate_dataset
from convs2s_edu.data import collate_batch
from convs2s_edu.train import is_quick_mode, resolve_device, sequence_loss

QUICK = is_quick_mode()
LENGTHS = (8, 25, 50, 100) if QUICK else (8, 25, 50, 100, 200)
BATCH = 32
TIMED_STEPS = 3 if QUICK else 5
VOCAB = 50
MAX_POSITIONS = 256  # >= the longest decoder input, T + 1 (<sos>)
MODELS = ("convs2s", "gru")
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
COLOURS = {"convs2s": "C0", "gru": "C1"}

device = resolve_device("auto")
print(f"device: {device}" + (f" ({torch.cuda.get_device_name(device)})"
                             if device.type == "cuda" else ""))
print(f"lengths: {LENGTHS}, batch of {BATCH}, median of {TIMED_STEPS} timed steps after 1 warm-up")
if QUICK:
    print("\nNOTE: quick build (CONVS2S_EDU_QUICK=1): fewer and shorter lengths and fewer\n"
          "timed steps than the full build.")


def make_model(name):
    torch.manual_seed(0)
    if name == "convs2s":
        model = ConvS2S(ConvS2SConfig(vocab_size=VOCAB, max_positions=MAX_POSITIONS))
    else:
        model = RNNSeq2Seq(RNNSeq2SeqConfig(vocab_size=VOCAB, max_positions=MAX_POSITIONS))
    return model.to(device).train()


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_step(model, batch, n_steps):
    """Median wall-clock seconds of one training step, after one warm-up step."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    step()  # warm-up
    times = []
    for _ in range(n_steps):
        sync()
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


models = {name: make_model(name) for name in MODELS}
seconds = {name: [] for name in MODELS}
for T in LENGTHS:
    examples = generate_dataset(BATCH, T, T, VOCAB, seed=T)
    batch = collate_batch(examples, VOCAB).to(device)
    for name in MODELS:
        seconds[name].append(seconds_per_step(models[name], batch, TIMED_STEPS))

tokens = np.array([BATCH * (T + 1) for T in LENGTHS])  # target tokens per step, <eos> included
ratio = np.array(seconds["gru"]) / np.array(seconds["convs2s"])
print(f"\n{'T':>4s} {'ConvS2S s/step':>15s} {'GRU s/step':>11s} {'GRU / ConvS2S':>14s}   "
      f"{'ms per 1,000 target tokens (ConvS2S, GRU)'}")
for i, T in enumerate(LENGTHS):
    c, g = seconds["convs2s"][i], seconds["gru"][i]
    print(f"{T:>4d} {c:>15.4f} {g:>11.4f} {ratio[i]:>13.2f}x   "
          f"{1e6 * c / tokens[i]:>8.1f} {1e6 * g / tokens[i]:>8.1f}")

# sphinx_gallery_start_ignore
assert all(s > 0 for name in MODELS for s in seconds[name])
assert max(LENGTHS) + 1 <= MAX_POSITIONS
# sphinx_gallery_end_ignore

# %%
# Sequential steps per training step
# ----------------------------------
# The number of operations that must wait for the previous one is what
# parallel hardware cannot hide. In the GRU decoder, :math:`s_t` needs
# :math:`s_{t-1}`, so the forward pass is :math:`T+1` dependent steps (one per
# target token, ``<eos>`` included), and the backward pass walks them back in
# reverse order; the bidirectional encoder adds :math:`T` more in each
# direction. In the ConvS2S decoder, every layer is computed for all positions
# at once from the layer below, so the chain is as long as the number of
# layers, whatever :math:`T` is.

n_conv_layers = models["convs2s"].cfg.n_decoder_layers
for T in LENGTHS:
    print(f"T = {T:>3d}:  GRU decoder {T + 1:>4d} dependent steps,  "
          f"ConvS2S decoder {n_conv_layers} layers")

# %%
# Time per step against length
# ----------------------------
# Left: seconds per training step on log-log axes, where time proportional to
# :math:`T` is a line of slope 1 (the dotted guide). Right: how many times
# longer a GRU step takes than a ConvS2S step; above the line at 1, ConvS2S is
# faster.

T_arr = np.array(LENGTHS, dtype=float)
fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.9), layout="constrained")
ax = axes[0]
for name in MODELS:
    ax.loglog(T_arr, seconds[name], "o-", color=COLOURS[name], label=LABELS[name])
ref = seconds["gru"][0]
ax.loglog(T_arr, ref * T_arr / T_arr[0], ":", color="grey", lw=1, label=r"$\propto T$")
ax.set_xticks(T_arr, [str(T) for T in LENGTHS])
ax.minorticks_off()
ax.set_xlabel("sequence length T (source and target)")
ax.set_ylabel("seconds per training step")
ax.set_title(f"One training step, batch of {BATCH}")
ax.legend(fontsize=9)
ax.grid(alpha=0.3, which="both")
ax = axes[1]
ax.plot(T_arr, ratio, "o-", color="k")
for x, r in zip(T_arr, ratio):
    ax.annotate(f"{r:.1f}x", (x, r), xytext=(0, 6), textcoords="offset points", ha="center",
                fontsize=9)
ax.axhline(1, color="grey", lw=1, ls="--")
ax.set_xscale("log")
ax.set_xticks(T_arr, [str(T) for T in LENGTHS])
ax.minorticks_off()
ax.set_ylim(0, 1.2 * max(ratio.max(), 1.0))
ax.set_xlabel("sequence length T")
ax.set_ylabel("GRU time / ConvS2S time")
ax.set_title("How many times slower the GRU is")
ax.grid(alpha=0.3)
fig.suptitle(f"Measured on {device.type.upper()}"
             + (" (quick build)" if QUICK else ""), fontsize=11)
plt.show()

# %%
# Reading the curves
# ------------------
# Both models do an amount of arithmetic that grows with :math:`T`: the
# layers and the recurrence are linear in :math:`T`, and attention, every
# target position against every source position, grows like :math:`T^2`. What
# differs is how that arithmetic is split into operations.
#
# * The GRU issues a handful of small operations per target position, a few
#   hundred for a long sequence in the forward pass alone, each on a batch of
#   32 vectors. Each has a fixed cost (a kernel launch on a GPU, dispatch and
#   thread synchronisation on a CPU) that does not shrink with the work done.
# * ConvS2S issues the same handful of large operations whatever :math:`T` is;
#   :math:`T` only makes them bigger.
#
# On a GPU, which has far more arithmetic units than a batch of 32 short
# sequences can occupy, the large operations of ConvS2S take almost the same
# time at :math:`T = 8` as at :math:`T = 200`, while the GRU pays for every
# sequential step: the ratio should climb steadily with :math:`T`. On a CPU
# with a couple of cores, the arithmetic itself is the bottleneck once
# operations are large enough, both times grow about linearly, and the ratio
# settles near the ratio of arithmetic plus overheads; the sentence below, chosen
# by the code from the measured ratios, says which picture this run shows.

trend = ratio[-1] / ratio[0]
if trend > 1.5:
    shape = (f"the ratio grew {trend:.1f}x from T = {LENGTHS[0]} to T = {LENGTHS[-1]}: "
             f"the longer the sequence, the larger ConvS2S's advantage")
elif trend < 1 / 1.5:
    shape = (f"the ratio shrank {1 / trend:.1f}x from T = {LENGTHS[0]} to T = {LENGTHS[-1]}: "
             f"here the GRU catches up on longer sequences")
else:
    shape = (f"the ratio stayed within a factor of 1.5 from T = {LENGTHS[0]} to "
             f"T = {LENGTHS[-1]}: both models' times grow at about the same rate")
faster = "ConvS2S" if ratio[-1] > 1 else "the GRU"
print(f"On this {device.type.upper()}, {shape}; at T = {LENGTHS[-1]} {faster} was faster "
      f"({max(ratio[-1], 1 / ratio[-1]):.1f}x).")
