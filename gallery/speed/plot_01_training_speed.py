r"""
Training speed, timed interleaved
=================================

Gehring et al. (2017) argue (abstract, §1) that a convolutional model trains
in parallel: a convolution does not depend on the previous time step, so all
positions of a sequence are computed at once, while a recurrent network keeps
"a hidden state of the entire past that prevents parallel computation within
a sequence". They time no training run against a recurrent model; the speed
they *measure* is generation (§5.3), discussed on :ref:`the bench page
<sphx_glr_auto_examples_speed_plot_04_bench.py>`.

This page measures what the training argument implies here: it times the two
models of :ref:`the training page <sphx_glr_auto_examples_plot_13_training.py>`
*interleaved* (alternating short windows of training steps of each model, on
the same batches), puts their loss curves on a clock and prints the speed
table. The numbers are this machine's, with their spread, and a warning
replaces the comparison when it was too busy for them to mean anything.
"""

# %%
# The two models
# --------------
# Both models come from the cache filled by the
# :ref:`training page <sphx_glr_auto_examples_plot_13_training.py>` (run on its
# own, this page trains them first), with the configuration every gallery page uses
# (:func:`~convs2s_edu.lab.site.site_config`).

import matplotlib.pyplot as plt
import numpy as np

from convs2s_edu import make_datasets, train_or_load
from convs2s_edu.lab import figures
from convs2s_edu.lab.compare import epoch_tokens, format_speed, format_table, summarise
from convs2s_edu.lab.site import comparison, is_quick_mode, site_config
from convs2s_edu.lab.timing import measure_config, speed_verdict

# sphinx_gallery_thumbnail_number = 1
MODELS = ("convs2s", "gru")
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
COLOURS = {"convs2s": "C0", "gru": "C1"}

configs = {name: site_config(name) for name in MODELS}
results = {name: train_or_load(configs[name]) for name in MODELS}
histories = {name: results[name].history for name in MODELS}
cfg = configs["convs2s"]
for name in MODELS:
    print(f"{LABELS[name]:16s} trained on: {histories[name].device}")

# %%
# Timing the two models, interleaved
# ----------------------------------
# The training runs' own clocks are a poor measure: the two runs happened at
# different times (or were loaded from the cache), and anything else the
# machine did meanwhile slowed one and not the other. So the speed figures
# here come from :func:`~convs2s_edu.lab.timing.measure_config`: a fresh copy
# of each model takes a few untimed warm-up steps, then the two take turns, one
# *window* of a few training steps each (forward, loss, backward, clipping,
# Adam: the step of :func:`~convs2s_edu.train`) on the same batches, in the
# order ConvS2S, GRU, GRU, ConvS2S, ... so that a machine that slowly speeds up
# or slows down favours neither. Every window gives a throughput in target
# tokens per second (padding excluded); a model's *spread* is how much its
# windows varied, and the *ratio* is taken within each round.
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
# Loss against the clock
# ----------------------
# The loss curves of :ref:`the training page
# <sphx_glr_auto_examples_plot_13_training.py>` (the training loss of the
# optimiser steps, a running mean over a quarter of an epoch, thin lines; the
# held-out loss after every epoch, dots), put on a clock: epoch :math:`k` ends
# at :math:`k` times the model's seconds per epoch *from the interleaved
# windows* above (not the training run's own clock, which measured the
# machine as much as the model). A model that learns as much per epoch but
# runs its epochs faster has its curve squeezed to the left. Only training
# steps count; computing the held-out loss does not.

fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
figures.loss_curves(
    ax,
    {LABELS[n]: histories[n] for n in MODELS},
    {LABELS[n]: COLOURS[n] for n in MODELS},
    seconds_per_epoch={LABELS[n]: sec_per_epoch[n] for n in MODELS},  # the windows' clock
)
ax.set_xlabel("training time (s): epochs x median s/epoch of the interleaved windows")
busy_note = "" if verdict.ok else ": UNRELIABLE, machine busy"
ax.set_title("Loss against the clock" + busy_note, color="k" if verdict.ok else "C3")
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
# of greedy decoding (defined on :ref:`the evaluation page
# <sphx_glr_auto_examples_plot_14_evaluation.py>`). The rows come from
# :func:`~convs2s_edu.lab.compare.summarise`, the layout from
# :func:`~convs2s_edu.lab.compare.format_table`; ``convs2s-edu compare`` prints the
# same table, followed by the measurement of
# :func:`~convs2s_edu.lab.compare.format_speed` shown above.

test_set = make_datasets(cfg)[2]
rows = [summarise(results[name], test_set, measurement=speed) for name in MODELS]
print(format_table(rows))


# %%
# What you saw
# ------------
# * Seconds per epoch and tokens per second are measured on the machine that
#   built this page, and the verdict above is chosen from those numbers; on
#   other hardware the same two models can rank the other way.
# * What was timed is training, the setting of the paper's parallelism
#   argument (§1); the paper's own speed measurement is of generation (§5.3),
#   for which see :ref:`the bench page
#   <sphx_glr_auto_examples_speed_plot_04_bench.py>`.
#
# Try it
# ------
# **1. Tokens per second, checked.** An epoch's tokens per second times its
# seconds should give the number of target tokens in the training set
# (``<eos>`` included). Predict that number from the data alone.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Every example contributes its length plus one ``<eos>``:

train_set = make_datasets(cfg)[0]
tokens = sum(len(y) + 1 for _, y in train_set.examples)
last = train_or_load(cfg).history.epochs[-1]
print(f"from the data: {tokens:,} target tokens")
print(f"from the log:  {last['tokens_per_second'] * last['seconds']:,.0f}")

# %%
# .. raw:: html
#
#    </details>
#
# **2. The first epoch.** Is the first epoch slower or faster than the median
# one?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# It depends, which is the point. The first steps allocate memory and, on a
# GPU, pick and compile kernels, which can lengthen the first epoch; on a
# shared CPU, other programs can slow any epoch. That is why the speed table
# does not use the training run's epochs at all: its seconds per epoch are the
# epoch's target tokens divided by the *median throughput of the interleaved
# windows*, so that one odd window does not move them.

for name in MODELS:
    seconds = train_or_load(site_config(name)).history.column("seconds")
    median = sorted(seconds)[len(seconds) // 2]
    times = {"the first epoch": seconds[0], "the median epoch": median}
    print(
        f"{LABELS[name]}: "
        + comparison("time", times, fmt="{:.2f} s", higher="longer", lower="shorter")
    )

# %%
# .. raw:: html
#
#    </details>
