r"""
Training both models
====================

The central experiment of the seed notebook: train ConvS2S and the GRU
baseline on the *same* sorting examples, with the same optimiser, batch size
and number of epochs, and time every epoch. The paper's claim is that the
convolutional model trains faster because it computes all target positions of
a batch at once, while the recurrent decoder has to finish step :math:`t-1`
before it can start step :math:`t`.

This page trains both models (or loads them from the cache, see below), times
them *interleaved* (alternating short windows of training steps of each model,
on the same batches), draws their loss curves against epochs and against
training time, and prints the speed table. Whether the claim holds *here*
depends on the machine this page ran on; the numbers below are the ones it
measured, with their spread, and a warning replaces the comparison when the
machine was too busy for the measurement to mean anything.
"""

# %%
# Train, or load from the cache
# -----------------------------
# :func:`~convs2s_edu.lab.site.site_config` is the configuration every gallery
# page uses: the seed notebook's experiment, or a much smaller one
# when the site is built in quick mode (``CONVS2S_EDU_QUICK=1``).
# :func:`~convs2s_edu.train_or_load` trains a model once and stores the
# checkpoint, with its timing history, in a cache keyed by the configuration,
# so the pages after this one load the same two models instead of training
# them again. If you run this page on its own, it trains the models itself
# (which takes a while on a CPU) or reuses your cache.
#
# The device is chosen automatically: a CUDA GPU when there is one, the CPU
# otherwise. The cache keeps CPU and GPU runs apart, since their timings are
# not comparable.

import textwrap

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
from torch import nn

from convs2s_edu import make_datasets, train_or_load
from convs2s_edu.lab.compare import epoch_tokens, format_speed, format_table, summarise
from convs2s_edu.lab.site import is_quick_mode, site_config
from convs2s_edu.lab.timing import measure_config, speed_verdict, training_flops_per_token
from convs2s_edu.training import resolve_device
from convs2s_edu.training.paths import fastest_path

# sphinx_gallery_thumbnail_number = 1
MODELS = ("convs2s", "gru")
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
COLOURS = {"convs2s": "C0", "gru": "C1"}

configs = {name: site_config(name) for name in MODELS}
results = {name: train_or_load(configs[name]) for name in MODELS}
histories = {name: results[name].history for name in MODELS}

cfg = configs["convs2s"]
print(f"task: sort {cfg.min_len}-{cfg.max_len} integers from 1..{cfg.vocab_size}")
print(f"data: {cfg.n_train:,} training, {cfg.n_valid:,} held-out, {cfg.n_test:,} test examples")
print(f"schedule: {cfg.epochs} epochs, batches of {cfg.batch_size}, Adam with lr {cfg.lr:g},")
print(f"          gradient norm clipped at {cfg.clip_norm}")
print(f"ConvS2S with the paper's normalisation and initialisation: {cfg.paper_normalisation}")
for name in MODELS:
    c = configs[name]
    print(
        f"{LABELS[name]:16s} trained on: {histories[name].device}; execution path: "
        f"{'compiled' if c.compile else 'eager'} {c.precision}"
    )
print(
    "fastest correct path of this device (Speed page): "
    f"{fastest_path(resolve_device(c.device)).name}"
)
if is_quick_mode():
    print(
        "\nNOTE: quick build (CONVS2S_EDU_QUICK=1): small data and few epochs.\n"
        "The numbers on this page show how the pieces fit together, not the\n"
        "full experiment's results."
    )

# sphinx_gallery_start_ignore
for name in MODELS:
    h = histories[name]
    assert len(h.epochs) == configs[name].epochs
    assert configs[name].replace(model="convs2s") == cfg  # only the model differs
    assert all(np.isfinite(h.column("train_loss"))) and all(np.isfinite(h.column("valid_loss")))
    assert np.allclose(np.cumsum(h.column("seconds")), h.column("elapsed"))
# sphinx_gallery_end_ignore

# %%
# How big the two models are
# --------------------------
# Both models use the seed's sizes: embeddings and hidden states of 128.
# ConvS2S is trained with the paper's weight normalisation, initialisation and
# gradient and context scaling when the flag printed above is on (see
# :ref:`the page on the paper's normalisation
# <sphx_glr_auto_examples_plot_10_paper_normalisation.py>` and
# :ref:`departures`); weight normalisation adds a length parameter per output
# unit, which the counts below include. The
# trainable parameters below include the embedding tables; the second column
# leaves those out, since an embedding lookup costs almost nothing and every
# other weight takes part in a multiply-add for every token it processes. That
# column is a rough proxy for the arithmetic each model does per token.


def n_weights(model, skip_embeddings=False):
    return sum(
        p.numel()
        for m in model.modules()
        for p in m.parameters(recurse=False)
        if p.requires_grad and not (skip_embeddings and isinstance(m, nn.Embedding))
    )


print(f"{'model':16s} {'parameters':>12s} {'without embeddings':>20s}")
for name in MODELS:
    model = results[name].model
    print(f"{LABELS[name]:16s} {n_weights(model):>12,} {n_weights(model, True):>20,}")
ratio_params = histories["convs2s"].n_parameters / histories["gru"].n_parameters
print(f"ConvS2S has {ratio_params:.1f}x the parameters of the GRU model")

# sphinx_gallery_start_ignore
for name in MODELS:
    assert n_weights(results[name].model) == histories[name].n_parameters
# the prose below relies on this
assert n_weights(results["convs2s"].model, True) > n_weights(results["gru"].model, True)
# sphinx_gallery_end_ignore

# %%
# Timing the two models, interleaved
# ----------------------------------
# How long the training runs above took is a poor measure of the models: the
# two runs happened at different times (or were loaded from the cache, timed on
# another day), and anything else the machine did meanwhile, another program,
# a CPU slowing down as it heats up, slowed one run and not the other. So the
# speed figures on this page come from a separate measurement,
# :func:`~convs2s_edu.lab.timing.measure_config`: a fresh copy of each model takes a
# few untimed warm-up steps, then the two models take turns, one *window* of a
# few training steps each (forward, loss, backward, clipping, Adam: the step of
# :func:`~convs2s_edu.train`), on the same batches of the training set,
# in the order ConvS2S, GRU, GRU, ConvS2S, ConvS2S, ... so that a machine that
# slowly speeds up or slows down favours neither. Every window gives a
# throughput in target tokens per second (padding excluded); each model's
# *spread* is how much its windows varied, and the *ratio* is taken within each
# round, between two windows that ran seconds apart.
#
# :func:`~convs2s_edu.lab.timing.speed_verdict` reads the result: when a model's
# windows varied by more than a factor of 1.5, or the machine was busier than
# its cores (load average, or threads waiting to run), it prints a warning and
# draws no conclusion; when the two models' ranges of window throughputs
# overlap, it says the difference is not resolved; otherwise it states the
# ratio with its range. The machine, its load and the thread settings are
# printed with the numbers.

STEPS_PER_WINDOW = 3 if is_quick_mode() else 4
ROUNDS = 6 if is_quick_mode() else 8
speed = measure_config(
    cfg, MODELS, steps_per_window=STEPS_PER_WINDOW, n_rounds=ROUNDS, warmup_steps=2
)
verdict = speed_verdict(speed, max_spread=1.5, labels=LABELS)
print(format_speed(speed, labels=LABELS, width=68))
# seconds per epoch from the windows: the epoch's target tokens / median tokens per second
n_epoch_tokens = epoch_tokens(cfg)
sec_per_epoch = {n: n_epoch_tokens / speed.throughput[n].median for n in MODELS}
sec_range = {
    n: (n_epoch_tokens / speed.throughput[n].max, n_epoch_tokens / speed.throughput[n].min)
    for n in MODELS
}
print(f"\none epoch = {n_epoch_tokens:,} target tokens; at the windows' median speed:")
for n in MODELS:
    print(
        f"  {LABELS[n]:16s} {sec_per_epoch[n]:7.2f} s per epoch "
        f"(windows: {sec_range[n][0]:.2f}-{sec_range[n][1]:.2f} s)"
    )

# sphinx_gallery_start_ignore
# The site's build (docs/conf.py) sets CONVS2S_EDU_SITE_DATA: the landing page
# states this measurement and its verdict, not the training runs' own clocks.
from convs2s_edu.lab.site import record

record(
    "speed",
    {
        "ok": verdict.ok,
        "resolved": verdict.resolved,
        "text": verdict.text,
        "faster": verdict.faster,
        "cpu": speed.machine.cpu,
        "tokens_per_second": {n: speed.throughput[n].median for n in MODELS},
        "tokens_per_second_range": {
            n: [speed.throughput[n].min, speed.throughput[n].max] for n in MODELS
        },
        "sec_per_epoch": sec_per_epoch,
    },
)
assert speed.order[:4] == ["convs2s", "gru", "gru", "convs2s"]
assert all(len(speed.window_seconds[n]) == ROUNDS for n in MODELS)
assert all(
    speed.throughput[n].min <= speed.throughput[n].median <= speed.throughput[n].max
    for n in MODELS
)
# sphinx_gallery_end_ignore

# %%
# The verdict, computed from the spread (a warning box when the measurement
# cannot be trusted):

verdict

# %%
# Loss against epochs and against training time
# ---------------------------------------------
# Each panel shows the training loss of the optimiser steps (a running mean
# over a quarter of an epoch, thin lines) and the loss on the held-out
# examples after every epoch (dots). The loss is the cross-entropy per target
# token, padding excluded, on a log scale. The training loss is measured with
# dropout on and the held-out loss with dropout off, so the first can sit
# above the second without any overfitting being involved.
#
# The left panel asks *how much* each model learns per pass over the data;
# the right panel puts the same curves on a clock: epoch :math:`k` ends at
# :math:`k` times the model's seconds per epoch *from the interleaved
# windows* above (not the training run's own clock, which measured the
# machine as much as the model). A model that learns as much per epoch but
# runs its epochs faster has its curve squeezed to the left. Only training
# steps count; computing the held-out loss does not.

fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True, layout="constrained")
for name in MODELS:
    h = histories[name]
    steps = np.asarray(h.step_losses)
    n_epochs = len(h.epochs)
    per_epoch = len(steps) // n_epochs
    frac = (np.arange(per_epoch) + 1) / per_epoch  # position of each step within its epoch
    step_epoch = (np.arange(n_epochs)[:, None] + frac[None, :]).ravel()
    step_time = step_epoch * sec_per_epoch[name]  # the interleaved windows' clock
    epoch_end_time = np.asarray(h.column("epoch")) * sec_per_epoch[name]
    window = max(1, per_epoch // 4)
    smooth = np.convolve(steps, np.ones(window) / window, mode="valid")  # running mean
    c = COLOURS[name]
    for ax, x_steps, x_epochs in (
        (axes[0], step_epoch, h.column("epoch")),
        (axes[1], step_time, epoch_end_time),
    ):
        ax.plot(x_steps[window - 1 :], smooth, color=c, lw=0.9, alpha=0.6)
        ax.plot(
            x_epochs,
            h.column("valid_loss"),
            "o-",
            color=c,
            ms=3.5,
            lw=1.2,
            label=f"{LABELS[name]}",
        )
axes[0].set_xlabel("epoch")
axes[1].set_xlabel("training time (s): epochs x median s/epoch of the interleaved windows")
axes[0].set_ylabel("cross-entropy per token")
axes[0].set_yscale("log")
axes[0].yaxis.set_major_locator(mticker.LogLocator(subs=(1, 2, 5)))
axes[0].yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
axes[0].yaxis.set_minor_formatter(mticker.NullFormatter())
axes[0].set_title("Loss per epoch")
if verdict.ok:
    axes[1].set_title("Loss against the clock")
else:
    axes[1].set_title("Loss against the clock: UNRELIABLE, machine busy", color="C3")
for ax in axes:
    ax.grid(alpha=0.3, which="both")
handles = [
    plt.Line2D([], [], color="grey", lw=0.9, alpha=0.7),
    plt.Line2D([], [], color="grey", marker="o", ms=3.5, lw=1.2),
]
legend1 = axes[1].legend(
    handles, ["training (running mean)", "held-out, end of epoch"], loc="upper right", fontsize=9
)
axes[1].add_artist(legend1)
axes[0].legend(loc="upper right", fontsize=9)
fig.suptitle(
    f"Training on {histories['convs2s'].device}" + (" (quick build)" if is_quick_mode() else ""),
    fontsize=11,
)
plt.show()

# %%
# The clock, read off differently: for the held-out loss that *both* models
# reach (the higher of their two final held-out losses), after how many
# epochs each model first got there, and how long that many epochs take at
# the speed of its interleaved windows (median, and the range from its fastest
# to its slowest window).

target = max(h.epochs[-1]["valid_loss"] for h in histories.values())
print(f"held-out loss reached by both models: {target:.4f}")
for name in MODELS:
    h = histories[name]
    first = next(e for e in h.epochs if e["valid_loss"] <= target)
    k = first["epoch"]
    print(
        f"{LABELS[name]:16s} epoch {k:>2d}: {k * sec_per_epoch[name]:7.1f} s of training "
        f"({k * sec_range[name][0]:.1f}-{k * sec_range[name][1]:.1f})"
    )

# %%
# The timing windows
# ------------------
# Left: the throughput of every timed window, in the order the windows ran
# (the two models alternate). A machine that is quiet gives flat lines; a
# program starting or stopping shows as a step in both lines at once, which
# the paired ratio cancels. Right: each model's median with whiskers from its
# slowest to its fastest window. The training runs' own per-epoch clock is
# kept in their history (``History.column("seconds")``) but not used for
# speed here.

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), width_ratios=[2.2, 1], layout="constrained")
position = {n: [i for i, m in enumerate(speed.order) if m == n] for n in MODELS}
for i, name in enumerate(MODELS):
    tput = np.asarray(speed.window_throughputs(name))
    axes[0].plot(
        np.asarray(position[name]) + 1, tput, "o-", ms=4, color=COLOURS[name], label=LABELS[name]
    )
    t = speed.throughput[name]
    axes[1].bar(
        i,
        t.median,
        color=COLOURS[name],
        width=0.6,
        yerr=[[t.median - t.min], [t.max - t.median]],
        capsize=6,
    )
axes[0].set_xlabel("window, in the order they ran")
axes[0].set_ylabel("target tokens per second")
axes[0].set_ylim(bottom=0)
axes[0].set_title(f"Throughput of each window ({STEPS_PER_WINDOW} training steps)")
axes[0].legend(fontsize=9)
axes[1].set_xticks(
    range(len(MODELS)), [f"{LABELS[n]}\nmedian {speed.throughput[n].median:,.0f}" for n in MODELS]
)
axes[1].set_ylabel("target tokens per second")
axes[1].set_title("Median (slowest-fastest window)")
for ax in axes:
    ax.grid(alpha=0.3, axis="y")
if not verdict.ok:
    fig.suptitle("Machine busy or unsteady: see the warning above", color="C3", fontsize=11)
plt.show()

# %%
# The speed table
# ---------------
# One row per model, as in the seed notebook: the median throughput of the
# interleaved windows in target tokens per second (``<eos>`` included, padding
# excluded) with the range of the windows, the seconds per epoch at that
# median, the final training and held-out losses, and the two test-set scores
# of greedy decoding (defined on the next page). The rows come from
# :func:`~convs2s_edu.lab.compare.summarise`, the layout from
# :func:`~convs2s_edu.lab.compare.format_table`; ``convs2s-edu compare`` prints the
# same table, followed by the measurement of
# :func:`~convs2s_edu.lab.compare.format_speed` shown above.

test_set = make_datasets(cfg)[2]
rows = [summarise(results[name], test_set, measurement=speed) for name in MODELS]
print(format_table(rows))

# %%
# What could make one model faster
# --------------------------------
# Two properties of the models bear on their speed. Both are facts about the
# architectures, computed below from the models themselves; they hold
# whichever model the measurement above found faster, and this page does not
# pick one of them to explain the result.
#
# * **Arithmetic per token.** A training step multiplies every token's
#   activations by the weights of every layer, forward and backward. The
#   count below is of the floating-point operations of matrix products and
#   convolutions in one forward and backward pass over a batch of the training
#   set (:func:`~convs2s_edu.lab.timing.training_flops_per_token`, through
#   :class:`torch.utils.flop_counter.FlopCounterMode`), divided by its target
#   tokens. When the hardware is busy doing arithmetic, as a CPU with a couple
#   of cores usually is, time tends to follow this count.
# * **Sequential steps.** The GRU decoder computes
#   :math:`s_t = \mathrm{GRU}(s_{t-1}, [E y_{t-1}; c_t])`: step :math:`t` needs
#   step :math:`t-1`, so a batch of target length :math:`T` is :math:`T` small
#   operations in a row, each with its own attention, forward and again
#   backward; the bidirectional encoder adds :math:`T` in each direction.
#   ConvS2S computes each layer for all :math:`T` positions at once, so its
#   chain is as long as its number of layers, whatever :math:`T` is. When the
#   hardware has far more parallel units than one small operation can use, as
#   a GPU has, time tends to follow this count, not the arithmetic.

train_set = make_datasets(cfg)[0]
flop_batch = train_set.collate(train_set.examples[: cfg.batch_size])  # the first batch, unshuffled
flops = {n: training_flops_per_token(results[n].model, flop_batch) for n in MODELS}
T = flop_batch.tgt_out.shape[1]  # the batch's longest target, <eos> included
sequential = {"convs2s": results["convs2s"].model.cfg.n_decoder_layers, "gru": T}
print(f"one batch of {cfg.batch_size} training examples, longest target T = {T}")
print(f"{'model':16s} {'MFLOP per target token':>23s} {'dependent steps':>16s}")
for n in MODELS:
    print(f"{LABELS[n]:16s} {flops[n] / 1e6:>23.2f} {sequential[n]:>16d}")
print(
    textwrap.fill(
        f"ConvS2S does {flops['convs2s'] / flops['gru']:.2f}x the GRU's arithmetic "
        f"per token; the GRU decoder runs {T / sequential['convs2s']:.1f}x as many "
        f"dependent steps as ConvS2S's.",
        width=68,
    )
)

# sphinx_gallery_start_ignore
assert all(f > 0 for f in flops.values())
# sphinx_gallery_end_ignore

# %%
# Which of the two dominates is a property of the hardware, so the result on
# this machine is not a verdict on the architectures in general: the paper
# measured its speed-ups on translation-sized models, mostly on GPUs. What this
# run measured:

verdict

# %%
# Speed is not the whole story: the loss curves above show how much each
# model learned *per epoch*, and the test scores in the table show how well it
# sorts after the same number of epochs. The next pages look at those scores
# in detail: :ref:`evaluation <sphx_glr_auto_examples_plot_06_evaluation.py>`,
# :ref:`attention <sphx_glr_auto_examples_plot_07_attention_heatmaps.py>` and
# :ref:`decoding <sphx_glr_auto_examples_plot_08_decoding.py>`.


# %%
# What you saw
# ------------
# * Both models trained on the same examples with the same optimiser, batch
#   size and number of epochs; the loss curves compare what each learns per
#   epoch and per second.
# * Seconds per epoch and tokens per second are measured on the machine that
#   built this page, and the verdict above is chosen from those numbers:
#   which model is faster depends on the hardware, not only on the model.
#
# Try it
# ------
# **1. Twice the batch size.** How many optimiser steps does an epoch take
# with batches of 256 instead of 128?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Half as many (rounded up): every step reads twice the examples. The
# arithmetic per epoch stays the same, so an epoch gets faster only where the
# hardware has idle parallel units for the larger batch (usually a GPU, rarely
# a two-core CPU).

import math

from convs2s_edu import make_datasets, train_or_load
from convs2s_edu.lab.site import site_config

cfg_05 = site_config("convs2s")
for size in (cfg_05.batch_size, 2 * cfg_05.batch_size):
    print(f"batch {size}: {math.ceil(cfg_05.n_train / size)} steps per epoch")

# %%
# .. raw:: html
#
#    </details>
#
# **2. Tokens per second, checked.** An epoch's tokens per second times its
# seconds should give the number of target tokens in the training set
# (``<eos>`` included). Predict that number from the data alone.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Every example contributes its length plus one ``<eos>``:

train_set = make_datasets(cfg_05)[0]
tokens = sum(len(y) + 1 for _, y in train_set.examples)
last = train_or_load(cfg_05).history.epochs[-1]
print(f"from the data: {tokens:,} target tokens")
print(f"from the log:  {last['tokens_per_second'] * last['seconds']:,.0f}")

# %%
# .. raw:: html
#
#    </details>
#
# **3. The first epoch.** Is the first epoch slower or faster than the median
# one?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# It depends, which is the point. The first steps allocate memory and, on a
# GPU, pick and compile kernels, which can make the first epoch slower; on a
# shared CPU, other programs can slow any epoch. The speed table reports the
# median epoch so that one odd epoch does not move it.

for name in ("convs2s", "gru"):
    seconds = train_or_load(site_config(name)).history.column("seconds")
    median = sorted(seconds)[len(seconds) // 2]
    print(f"{name}: first {seconds[0]:.2f} s, median {median:.2f} s")

# %%
# .. raw:: html
#
#    </details>
