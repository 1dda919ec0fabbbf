r"""
Time per training step against sequence length
==============================================

The :ref:`training speed page <sphx_glr_auto_examples_speed_plot_01_training_speed.py>`
timed both models on the task's short sequences. The argument for
convolutions is about *longer* sequences: the GRU runs one step per position,
one after the other, while ConvS2S runs a fixed number of layers, each over
all positions at once. This page times one training step of each model at
growing sequence lengths, everything else fixed.
"""

# %%
# What is measured
# ----------------
# For every length :math:`T`: one fixed batch of random sorting examples of
# exactly :math:`T` tokens, and a fresh, untrained instance of each model the
# other pages train (:func:`~convs2s_edu.build_model` of
# :func:`~convs2s_edu.lab.site.site_config`; a step's duration does not depend
# on the weights) with a position table long enough for the longest length.
# A training step is :func:`~convs2s_edu.train`'s (forward, loss, backward,
# clipping, Adam) on the path it trains with here (:func:`~convs2s_edu.training.resolve_path`).
#
# Timing is :func:`~convs2s_edu.lab.timing.measure_training`: after a warm-up
# step, the models take turns, one window of steps each (GRU, ConvS2S,
# ConvS2S, GRU, ...), so that the machine's other work slows both alike; short
# lengths get more steps per window, to make every window long enough to time.
# Reported: median seconds per step with the fastest and slowest window, and
# the per-round ratio of the two times with its range. A warning replaces the
# conclusions when any length fails :func:`~convs2s_edu.lab.timing.speed_verdict`'s
# checks of spread and load.

import copy
import textwrap

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import torch

from convs2s_edu import build_model, collate_batch, generate_dataset
from convs2s_edu.fast import use_fast_paths
from convs2s_edu.lab.schematic import critical_path
from convs2s_edu.lab.site import is_quick_mode, site_config
from convs2s_edu.lab.timing import (
    SpeedVerdict,
    measure_training,
    speed_verdict,
    training_flops_per_token,
)
from convs2s_edu.training import resolve_device, resolve_path

QUICK = is_quick_mode()
LENGTHS = (8, 25, 50, 100) if QUICK else (8, 25, 50, 100, 200)
BATCH = 32
ROUNDS = 3 if QUICK else 6
VOCAB = site_config("convs2s").vocab_size
MAX_POSITIONS = 256  # >= the longest decoder input, T + 1 (<sos>)
MODELS = ("gru", "convs2s")  # the GRU first: ratios are GRU time / ConvS2S time
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
COLOURS = {"convs2s": "C0", "gru": "C1"}
FAST = {n: resolve_path(site_config(n)).fast for n in MODELS}  # the path each trains on here


def steps_per_window(T):
    """More steps per window for short sequences, whose steps are short."""
    return max(1, 100 // T)


device = resolve_device("auto")
gpu = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
print(f"device: {device}{gpu}")
windows = ", ".join(f"{steps_per_window(T)} at T={T}" for T in LENGTHS)
setup = f"lengths: {LENGTHS}, batch of {BATCH}, {ROUNDS} interleaved windows per model and "
print(textwrap.fill(setup + f"length ({windows} steps per window), after 1 warm-up step", 68))


def make_model(name):
    """A fresh model of the trained pages' architecture, with a longer position table."""
    torch.manual_seed(0)
    cfg = site_config(name, model_options={"max_positions": MAX_POSITIONS})
    return build_model(cfg).to(device).train()


measurements, verdicts, flops = [], [], {name: [] for name in MODELS}
for T in LENGTHS:
    examples = generate_dataset(BATCH, T, T, VOCAB, seed=T)
    batch = collate_batch(examples, VOCAB).to(device)
    models = {name: make_model(name) for name in MODELS}
    # per target token, two sequences of length T count what all of them do (and run faster)
    pair = collate_batch(examples[:2], VOCAB).to(device)
    for name in MODELS:
        flops[name].append(training_flops_per_token(models[name], pair))
    # timed on the path the site trains with (copies: the models stay as the files write them)
    timed = {n: use_fast_paths(copy.deepcopy(models[n]), FAST[n]) for n in MODELS}
    w = steps_per_window(T)
    m = measure_training(timed, [batch], steps_per_window=w, n_rounds=ROUNDS, warmup_steps=1)
    measurements.append(m)
    verdicts.append(speed_verdict(m, labels=LABELS))

step = {name: [m.seconds_per_step(name) for m in measurements] for name in MODELS}
# ratio GRU time / ConvS2S time = ConvS2S throughput / GRU throughput, per round
ratios = [m.ratios["convs2s"] for m in measurements]
ratio = np.array([r.median for r in ratios])


def cell(stats, scale=1.0, fmt="{:.1f}"):
    """``median (min-max)`` of a WindowStats."""
    a, b, c = (fmt.format(scale * x) for x in (stats.median, stats.min, stats.max))
    return f"{a} ({b}-{c})"


print("\nmilliseconds per training step: median (fastest-slowest window);")
print("GRU/ConvS2S time: median (range) of the per-round ratios\n")
print(f"{'T':>4s}  {'ConvS2S':21s}  {'GRU':21s}  {'GRU/ConvS2S':16s}")
for i, T in enumerate(LENGTHS):
    conv, gru = (cell(step[n][i], 1e3, "{:.0f}") for n in ("convs2s", "gru"))
    print(f"{T:>4d}  {conv:21s}  {gru:21s}  {cell(ratios[i], fmt='{:.2f}'):16s}")
print("\n" + textwrap.fill(f"machine: {measurements[0].machine.describe()}", width=68))
busy = [T for T, v in zip(LENGTHS, verdicts) if not v.ok]
if busy:
    print("\n" + "!" * 68 + "\nWARNING: these timings are not reliable; no conclusion is drawn")
    for T, v in zip(LENGTHS, verdicts):
        if not v.ok:
            print(textwrap.fill(f"T = {T}: " + "; ".join(v.reasons) + ".", width=68))
    print("!" * 68)

# sphinx_gallery_start_ignore
assert all(s.median > 0 for name in MODELS for s in step[name])
assert max(LENGTHS) + 1 <= MAX_POSITIONS
assert all(m.order[:2] == ["gru", "convs2s"] for m in measurements)
# sphinx_gallery_end_ignore

# %%
# Dependent operations per training step
# ---------------------------------------
# Operations that must wait for the previous one are what parallel hardware
# cannot hide. In the GRU decoder :math:`s_t` needs :math:`s_{t-1}`: one step
# per decoder input, :math:`T + 1` here (``<sos>`` and the tokens), walked
# forward and again backward; the bidirectional encoder adds :math:`S = T`
# steps, its two directions side by side. ConvS2S computes each layer for all
# positions at once: :math:`L_{enc} + L_{dec}` layers, whatever the lengths
# (:func:`~convs2s_edu.lab.schematic.critical_path` counts both). Also counted:
# floating-point operations of the matrix products and convolutions of a
# forward and backward pass per target token
# (:func:`~convs2s_edu.lab.timing.training_flops_per_token`), on two of the
# batch's sequences (per token, the batch size does not matter). Both are
# facts about the models, the same on every machine.

chain = {n: [critical_path(models[n], T, T + 1)["training"] for T in LENGTHS] for n in MODELS}
print(f"{'T':>4s} {'dependent operations':^30s}   {'MFLOP per target token':^25s}")
print(f"{'':4s} {'GRU':>17s} {'ConvS2S':>12s}   {'GRU':>10s} {'ConvS2S':>14s}")
columns = zip(chain["gru"], chain["convs2s"], flops["gru"], flops["convs2s"])
for T, (g, c, fg, fc) in zip(LENGTHS, columns):
    print(f"{T:>4d} {g['worked']:>17s} {c['worked']:>12s}   {fg / 1e6:>10.2f} {fc / 1e6:>14.2f}")

# %%
# Time per step against length
# ----------------------------
# Left: seconds per training step on log-log axes (median, bars from the fastest
# to the slowest window); time proportional to :math:`T` is a line of slope 1
# (dotted). Right: how many times longer a GRU step takes than a ConvS2S step
# (median of the rounds, bars over all rounds); above 1, ConvS2S is faster.

T_arr = np.array(LENGTHS, dtype=float)
fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.9), layout="constrained")
ax = axes[0]
for name in MODELS:
    med = np.array([x.median for x in step[name]])
    err = [med - [x.min for x in step[name]], [x.max for x in step[name]] - med]
    ax.errorbar(T_arr, med, yerr=err, fmt="o-", color=COLOURS[name], capsize=3, label=LABELS[name])
ref = step["gru"][0].median
ax.loglog(T_arr, ref * T_arr / T_arr[0], ":", color="grey", lw=1, label=r"$\propto T$")
ax.set(xlabel="sequence length T (source and target)", ylabel="seconds per training step")
ax.yaxis.set_major_locator(mticker.LogLocator(subs=(1, 2, 5)))
ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
ax.set_title(f"One training step, batch of {BATCH}")
ax.legend()
ax.grid(alpha=0.3, which="both")
ax = axes[1]
r_err = [ratio - [r.min for r in ratios], [r.max for r in ratios] - ratio]
ax.errorbar(T_arr, ratio, yerr=r_err, fmt="o-", color="k", capsize=3)
for x, r in zip(T_arr, ratio):
    ax.annotate(f"{r:.1f}x", (x, r), xytext=(6, 4), textcoords="offset points", fontsize=9)
ax.axhline(1, color="grey", lw=1, ls="--")
ax.set_xscale("log")
ax.margins(x=0.08)
ax.set_ylim(0, 1.2 * max(max(r.max for r in ratios), 1.0))
ax.set(xlabel="sequence length T", ylabel="GRU time / ConvS2S time", title="Per-round ratio")
for ax in axes:
    ax.set_xticks(T_arr, [str(T) for T in LENGTHS])
    ax.minorticks_off()
where = f"Measured on {device.type.upper()}" + (" (quick build)" if QUICK else "")
unreliable = f": UNRELIABLE at T = {', '.join(map(str, busy))}, machine busy" if busy else ""
fig.suptitle(where + unreliable, fontsize=11, color="C3" if busy else "black")
plt.show()

# %%
# Reading the curves
# ------------------
# Both models do arithmetic that grows with :math:`T`: the layers and the
# recurrence linearly, attention (every target position against every source
# position) like :math:`T^2`. What differs is how it is split into operations.
# The GRU issues a handful of small operations per position (a few hundred for
# a long sequence, forward alone), each on one vector per example, each with a
# fixed cost (a kernel launch on a GPU, dispatch and thread synchronisation on
# a CPU) that does not shrink with the work. ConvS2S issues the same handful of
# large operations whatever :math:`T`; :math:`T` only makes them bigger.
#
# Two predictions, stated before looking. On a GPU, with far more arithmetic
# units than a small batch can occupy, ConvS2S's large operations should take
# nearly the same time at every length while the GRU pays for every step: the
# ratio should climb with :math:`T`. On a CPU with a couple of cores, large
# operations take time in proportion to their arithmetic, so ConvS2S's time
# grows with :math:`T` too, and at short lengths the GRU may come out ahead;
# what can still separate the curves is the GRU's cost per step: a fixed
# overhead per small operation, and an additive attention computed in
# :math:`T` separate pieces, forward and backward.
#
# The sentence below, from the measured ratios, reports a trend only when the
# ratio's ranges at the two ends do not overlap, and nothing when a
# measurement failed the spread or load check.

first, last = ratios[0], ratios[-1]
ends = (
    f"from {first.median:.2f} ({first.min:.2f}-{first.max:.2f}) at T = {LENGTHS[0]} "
    f"to {last.median:.2f} ({last.min:.2f}-{last.max:.2f}) at T = {LENGTHS[-1]}"
)
if busy:
    summary = (
        f"WARNING: the measurement at T = {', '.join(map(str, busy))} was not reliable (the "
        f"machine was busy or unsteady), so no conclusion is drawn about how the gap changes "
        f"with length. Build the page again on an idle machine."
    )
elif first.overlaps(last):
    summary = (
        f"On this {device.type.upper()}, the GRU/ConvS2S time ratio went {ends}: the ranges "
        f"overlap, so no change of the ratio with length is resolved."
    )
else:
    direction = "grew" if last.median > first.median else "shrank"
    faster = "ConvS2S" if last.min > 1 else "the GRU" if last.max < 1 else None
    summary = (
        f"On this {device.type.upper()}, the GRU/ConvS2S time ratio {direction} {ends}; at "
        f"T = {LENGTHS[-1]} "
        + (f"{faster} was faster in every round." if faster else "the rounds disagree.")
    )
SpeedVerdict(ok=not busy, resolved=not busy and not first.overlaps(last), text=summary)

# %%
# What you saw
# ------------
# * One training step of each model was timed at growing lengths, everything
#   else fixed; the sentence above says what changed, on this machine.
# * In training, the GRU's chain of dependent operations grows with the
#   lengths and ConvS2S's does not. How much that matters depends on how many
#   positions the hardware can compute at the same time.
#
# Try it
# ------
# **1. Steps that must wait.** At :math:`T = 100` (source and target), how
# many operations of a forward pass must wait for the previous one in each
# model?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The GRU: one step per source token and one per decoder input (``<sos>`` and
# the tokens), each waiting for the one before. ConvS2S: its encoder and
# decoder layers, whatever :math:`T`.

for name in MODELS:
    print(f"{LABELS[name]}: {critical_path(models[name], 100, 101)['training']['worked']}")

# %%
# .. raw:: html
#
#    </details>
#
# **2. An ideal parallel machine.** If every ConvS2S layer and every GRU step
# took the same time at any length, by what factor would the ratio GRU /
# ConvS2S grow from the shortest length above to :math:`T = 100`?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# By the factor the GRU's chain grows, since ConvS2S's does not. Where the
# measured growth falls short of it, the layers of ConvS2S took longer as
# :math:`T` grew: the hardware ran out of parallel units.

short, long = (critical_path(models["gru"], T, T + 1)["training"] for T in (LENGTHS[0], 100))
print(f"{long['count']} / {short['count']} = {long['count'] / short['count']:.1f}")
print(f"measured: {ratios[LENGTHS.index(100)].median / ratios[0].median:.1f}")

# %%
# .. raw:: html
#
#    </details>
