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
# For every length :math:`T`: one fixed batch of random sorting examples of
# exactly :math:`T` tokens (the batch size is printed below), and for each
# model a fresh, untrained instance of the architecture the other pages train
# (:func:`~convs2s_edu.build_model` of
# :func:`~convs2s_edu.train.site_config`), with a position table long enough
# for the longest length. Training the models is not needed: how long a step takes
# does not depend on the values of the weights. One training step is what
# :func:`~convs2s_edu.train.train` does per batch: forward pass, loss,
# backward pass, gradient clipping and an Adam update. Each model first takes
# one untimed warm-up step at that length (memory allocation, library
# initialisation); then a few steps are timed one by one with
# ``time.perf_counter()`` (after :func:`torch.cuda.synchronize` when on a GPU,
# so that no queued work is left out), and the median is reported: a step
# slowed down by another program on the machine does not move it.

import textwrap
import time

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import torch
from torch import nn

from convs2s_edu import build_model, collate_batch, generate_dataset
from convs2s_edu.train import is_quick_mode, resolve_device, sequence_loss, site_config

QUICK = is_quick_mode()
LENGTHS = (8, 25, 50, 100) if QUICK else (8, 25, 50, 100, 200)
BATCH = 32
TIMED_STEPS = 3 if QUICK else 5
VOCAB = site_config("convs2s").vocab_size
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
    """A fresh model of the trained pages' architecture, with a longer position table."""
    torch.manual_seed(0)
    cfg = site_config(name, model_options={"max_positions": MAX_POSITIONS})
    return build_model(cfg).to(device).train()


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
print(f"\n{'':4s} {'seconds per step':^30s}   {'ms per 1,000 target tokens':^26s}")
print(f"{'T':>4s} {'ConvS2S':>10s} {'GRU':>10s} {'GRU/Conv':>9s}   {'ConvS2S':>12s} {'GRU':>12s}")
for i, T in enumerate(LENGTHS):
    c, g = seconds["convs2s"][i], seconds["gru"][i]
    print(f"{T:>4d} {c:>10.4f} {g:>10.4f} {ratio[i]:>8.2f}x   "
          f"{1e6 * c / tokens[i]:>12.1f} {1e6 * g / tokens[i]:>12.1f}")

# sphinx_gallery_start_ignore
assert all(s > 0 for name in MODELS for s in seconds[name])
assert max(LENGTHS) + 1 <= MAX_POSITIONS
assert all(m.cfg.max_positions == MAX_POSITIONS for m in models.values())
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
ax.yaxis.set_major_locator(mticker.LogLocator(subs=(1, 2, 5)))
ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
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
ax.margins(x=0.08)
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
#   hundred for a long sequence in the forward pass alone, each on one
#   vector per example of the batch. Each has a fixed cost (a kernel launch on a GPU, dispatch and
#   thread synchronisation on a CPU) that does not shrink with the work done.
# * ConvS2S issues the same handful of large operations whatever :math:`T` is;
#   :math:`T` only makes them bigger.
#
# On a GPU, which has far more arithmetic units than a small batch of short
# sequences can occupy, the large operations of ConvS2S take almost the same
# time at the shortest length as at the longest, while the GRU pays for every
# sequential step: the ratio should climb steadily with :math:`T`.
#
# On a CPU with a couple of cores the large operations are not free: they
# take time in proportion to their arithmetic, so ConvS2S's time grows with
# :math:`T` too, and at short lengths, where the GRU has few steps to run and
# ConvS2S still has all its layers, the GRU can be the faster of the two.
# What can still separate them as :math:`T` grows is the GRU's cost per step:
# a fixed overhead for every small operation, and an additive attention that,
# step after step, scores every source position through a small network
# (:math:`T \times T` scores in all, computed in :math:`T` separate pieces),
# in the forward and again in the backward pass. The sentence below, chosen
# by the code from the measured ratios, says what this run shows.

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
print(textwrap.fill(f"On this {device.type.upper()}, {shape}; at T = {LENGTHS[-1]} {faster} was "
                    f"faster ({max(ratio[-1], 1 / ratio[-1]):.1f}x).", width=78))


# %%
# What you saw
# ------------
# * One training step of each model was timed at growing lengths, everything
#   else fixed.
# * The GRU decoder runs one step per target position, one after the other;
#   the ConvS2S decoder runs a fixed number of layers, each over all positions
#   at once. How much that matters depends on how many positions the hardware
#   can compute at the same time.
#
# Try it
# ------
# **1. Steps that must wait.** At :math:`T = 100`, how many operations of a
# forward pass must wait for the previous one in each decoder?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The GRU decoder: :math:`T + 1 = 101` steps (``<eos>`` included), each
# waiting for the state of the one before. ConvS2S: its 4 decoder layers,
# whatever :math:`T`.

from convs2s_edu import ConvS2SConfig

T = 100
print("GRU decoder steps:", T + 1)
print("ConvS2S decoder layers:", ConvS2SConfig().n_decoder_layers)

# %%
# .. raw:: html
#
#    </details>
#
# **2. An ideal parallel machine.** If every layer of ConvS2S took the same
# time at any length, and every GRU step took the same time, how would the
# ratio GRU / ConvS2S grow from :math:`T = 8` to :math:`T = 100`?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# In proportion to the number of GRU steps, :math:`101 / 9 \approx 11`
# times. Where the growth measured above is smaller, the layers of ConvS2S
# took longer as :math:`T` grew: the hardware ran out of parallel units.

print(f"{(100 + 1) / (8 + 1):.1f}")

# %%
# .. raw:: html
#
#    </details>
