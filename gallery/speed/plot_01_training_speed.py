r"""
Training speed and convergence speed, timed interleaved
=======================================================

Gehring et al. (2017) argue (abstract, §1) that a convolutional model trains
in parallel: a convolution does not depend on the previous time step, so all
positions of a sequence are computed at once, while a recurrent network keeps
"a hidden state of the entire past that prevents parallel computation within
a sequence". They time no training run against a recurrent model; the speed
they *measure* is generation (§5.3), discussed on :ref:`the bench page
<sphx_glr_auto_examples_speed_plot_04_bench.py>`.

The seed notebook asks for two measurements of the two models of
:ref:`the training page <sphx_glr_auto_examples_plot_08_training.py>`:
wall-clock time per epoch *and* convergence speed. This page takes both,
for both of that page's recipes:

1. **Speed on more parallel hardware**: training throughput of both models at
   every thread count from one to this machine's cores, timed *interleaved*
   (alternating short windows of training steps of each model and each thread
   count, on the same batches), with the spread of the windows. Parallelism is
   the paper's argument, so the verdict says which hardware each ranking holds
   for, rather than one number from one setting.
2. **Convergence speed**: the optimiser steps, examples and seconds each model
   needs to sort 50%, 90% and 95% of the held-out examples exactly right, the
   seconds from the interleaved windows (never from the training runs' own
   clocks, which shared the machine).

The numbers are this machine's, with their spread, and a warning replaces a
comparison when the machine was too busy for it to mean anything.
"""

# %%
# The runs, and their timing
# --------------------------
# :func:`~convs2s_edu.lab.compare.compare` does for each recipe what
# ``convs2s-edu compare --recipe seed`` (or ``fast``) does on the command line:
# it loads both models from the cache filled by :ref:`the training page
# <sphx_glr_auto_examples_plot_08_training.py>` (run on its own, this page
# trains them first), scores them on the test set, and times them. On a CPU
# the timing is :func:`~convs2s_edu.lab.timing.measure_threads`: a fresh copy
# of each model takes a few untimed warm-up steps at every thread count, then
# every round runs one *window* of a few training steps (forward, loss,
# backward, clipping, Adam: the step of :func:`~convs2s_edu.train`) of every
# model at every thread count, the order reversed every other round so that a
# machine that slowly speeds up or slows down favours none of them. Every
# window gives a throughput in target tokens per second (padding excluded); a
# model's *spread* is how much its windows varied, and a *ratio* is taken
# within each round. The batches are drawn as training draws them
# (:func:`~convs2s_edu.lab.timing.training_batches`).

import matplotlib.pyplot as plt
import numpy as np

from convs2s_edu import make_datasets, train_or_load
from convs2s_edu.lab import figures
from convs2s_edu.lab.compare import compare, epoch_tokens, format_table, format_threads
from convs2s_edu.lab.convergence import LEVELS, format_convergence, hardware_label
from convs2s_edu.lab.site import SITE_RECIPES, comparison, is_quick_mode, site_config

# sphinx_gallery_thumbnail_number = 1
MODELS = ("convs2s", "gru")
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
COLOURS = {"convs2s": "C0", "gru": "C1"}
STEPS_PER_WINDOW = 3 if is_quick_mode() else 4
ROUNDS = 4 if is_quick_mode() else 8

runs = {
    recipe: compare(
        site_config("convs2s", recipe),
        n_rounds=ROUNDS,
        steps_per_window=STEPS_PER_WINDOW,
        warmup_steps=2,
    )
    for recipe in SITE_RECIPES
}
seed = runs["seed"]
for recipe, run in runs.items():
    print(f"{recipe} recipe:")
    print(format_threads(run.threads, LABELS))

# sphinx_gallery_start_ignore
for run in runs.values():
    s = run.threads
    assert s.thread_counts == list(range(1, s.measurement.machine.cores + 1))
    assert all(len(w) == ROUNDS for w in s.measurement.window_seconds.values())
    for t in s.thread_counts:
        m = s.at(t)
        assert m.order[:2] == ["convs2s", "gru"] and m.machine.threads == t
        for n in MODELS:
            assert m.throughput[n].min <= m.throughput[n].median <= m.throughput[n].max
# sphinx_gallery_end_ignore

# %%
# The verdict, computed from the spread at each thread count (a warning box
# when the measurement at some count cannot be trusted):
# :func:`~convs2s_edu.lab.timing.thread_verdict` applies
# :func:`~convs2s_edu.lab.timing.speed_verdict` to every count. A count's
# comparison is replaced by a warning when a model's windows varied by more
# than a factor of 1.5 or the machine was busier than the cores that count
# leaves free; it is "not resolved" when the two models' ranges of window
# throughputs overlap; otherwise it states the ratio with its range.

seed.verdict

# %%
# The figure shows the seed recipe's measurement: each model's median
# throughput with whiskers from its slowest to its fastest window (left), and
# the ratio of the two, ConvS2S over the GRU, with the range of the per-round
# ratios (right; above the line ConvS2S trains more tokens per second).

fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.8), layout="constrained")
counts = seed.threads.thread_counts
for name in MODELS:
    med = np.array([seed.threads.at(t).throughput[name].median for t in counts])
    lo = med - [seed.threads.at(t).throughput[name].min for t in counts]
    hi = [seed.threads.at(t).throughput[name].max for t in counts] - med
    axes[0].errorbar(
        counts, med, yerr=[lo, hi], fmt="o-", capsize=5, color=COLOURS[name], label=LABELS[name]
    )
ratio = [1 / seed.threads.at(t).ratios["gru"].median for t in counts]  # convs2s / gru
r_lo = [1 / seed.threads.at(t).ratios["gru"].max for t in counts]
r_hi = [1 / seed.threads.at(t).ratios["gru"].min for t in counts]
axes[1].errorbar(
    counts,
    ratio,
    yerr=[np.subtract(ratio, r_lo), np.subtract(r_hi, ratio)],
    fmt="s-",
    capsize=5,
    color="k",
)
axes[1].axhline(1.0, color="0.5", lw=0.8, ls="--")
axes[0].set_ylabel("target tokens per second")
axes[0].set_ylim(bottom=0)
axes[0].legend(fontsize=9)
axes[1].set_ylabel("ConvS2S / GRU throughput")
for ax in axes:
    ax.set_xticks(counts)
    ax.set_xlabel("PyTorch threads")
    ax.grid(alpha=0.3)
mach = seed.threads.measurement.machine
axes[0].set_title(f"Throughput by thread count ({mach.cpu})", fontsize=10)
axes[1].set_title("The ratio at each thread count", fontsize=10)
if not seed.verdict.ok:
    fig.suptitle("Machine busy or unsteady at some count: see the warning", color="C3")
plt.show()

# %%
# Why the curves bend
# -------------------
# How the ratio moves as threads are added, read off the measurement:

from convs2s_edu.lab.site import trend

if len(counts) > 1:
    print(
        trend(
            "the ConvS2S / GRU throughput ratio",
            counts,
            ratio,
            along="thread count",
            fmt="{:.2f}",
            tie=0.02,  # "about the same": within two hundredths
        )
    )
for name in MODELS:
    gain = [seed.threads.at(t).throughput[name].median for t in counts]
    if len(counts) > 1:
        print(
            trend(
                f"{LABELS[name]}'s tokens/s",
                counts,
                gain,
                along="thread count",
                fmt="{:,.0f}",
                tie=0.02 * gain[0],  # within 2% of one thread's
            )
        )

# %%
# What a second thread buys depends on how the arithmetic of a step is cut
# up, not only on how much of it there is. PyTorch gives each thread a share
# of *one* operation at a time. A training step of ConvS2S is a few large
# operations: every layer's convolution and attention over all positions of
# all 128 sequences at once. A step of the GRU is, in its decoder, one small
# operation after another, one per target position, each waiting for the
# previous one (:math:`s_t` needs :math:`s_{t-1}`). A thread can only speed up
# an operation with enough work to split, so the two models can gain
# differently from more threads, and with a single thread only the total cost
# of the operations is left to compare. :ref:`The next page
# <sphx_glr_auto_examples_speed_plot_02_what_makes_one_faster.py>` counts the
# arithmetic per token (with :class:`torch.utils.flop_counter.FlopCounterMode`),
# the chain of dependent operations and the operations per step that the
# profiler sees, at one thread and at every thread of this machine.

# %%
# Convergence speed
# -----------------
# How many optimiser steps, training examples and seconds each model needed
# before its held-out exact match first reached 50%, 90% and 95%
# (:func:`~convs2s_edu.lab.convergence.convergence`). The steps and examples
# come from the learning curves of the training runs (an evaluation every few
# steps, so a level was reached at most that many steps before the step
# printed); the seconds are those steps times the median seconds per step of
# the interleaved windows above, at each thread count, so that the machine's
# other work during training stays out of them. A level a run never reached
# within its budget says so.

for recipe, run in runs.items():
    print(f"{recipe} recipe ({site_config('convs2s', recipe).total_steps:,} steps):")
    print(format_convergence(run.convergence, LABELS))
    print()

# sphinx_gallery_start_ignore
for recipe, run in runs.items():
    per_step = {n: run.threads.at(1).seconds_per_step(n).median for n in MODELS}
    for row in run.convergence:
        assert set(row["levels"]) == {str(x) for x in LEVELS}
        for v in row["levels"].values():
            if v is not None:
                assert np.isclose(v["seconds"]["1 thread"], v["step"] * per_step[row["model"]])
                assert v["examples"] == v["step"] * site_config("convs2s", recipe).batch_size
# sphinx_gallery_end_ignore

# %%
# The same on the clock: held-out exact match against the seconds of training,
# each model's steps converted at the speed of its windows with one thread
# (solid) and with all threads (dotted), for both recipes. A curve further to
# the left reached the same exact match sooner.

top = counts[-1]
fig, axes = plt.subplots(1, len(runs), figsize=(11, 3.9), layout="constrained", sharey=True)
for ax, (recipe, run) in zip(np.atleast_1d(axes), runs.items()):
    for name in MODELS:
        ev = run.results[name].history.evals
        steps = np.array([e["step"] for e in ev])
        em = [100 * e["exact_match"] for e in ev]
        for t, style in ((1, "-"), (top, ":")):
            per_step = run.threads.at(t).seconds_per_step(name).median
            label = f"{LABELS[name]}, {hardware_label(t)}"
            ax.plot(steps * per_step, em, style, color=COLOURS[name], label=label)
            if top == 1:
                break
    for level in LEVELS:
        ax.axhline(100 * level, color="0.6", lw=0.8, ls=":")
    ax.set_title(f"{recipe} recipe", fontsize=10)
    ax.set_xlabel("training time (s): steps x median s/step of the windows")
    ax.grid(alpha=0.3)
np.atleast_1d(axes)[0].set_ylabel("held-out exact match (%)")
np.atleast_1d(axes)[-1].legend(fontsize=8, loc="lower right")
plt.show()

# %%
# What the recipe is worth, for each model: the steps to 90% held-out exact
# match with the seed's recipe and with the fast one (computed from the rows
# above; a recipe that never got there is left out of the sentence).

for name in MODELS:
    got = {}
    for recipe, run in runs.items():
        row = next(r for r in run.convergence if r["model"] == name)
        if row["levels"]["0.9"] is not None:
            got[f"the {recipe} recipe"] = row["levels"]["0.9"]["step"]
    if len(got) == 2:
        print(
            f"{LABELS[name]}: "
            + comparison("number of steps to 90%", got, fmt="{:,}", higher="more", lower="fewer")
        )
    else:
        print(
            f"{LABELS[name]}: reached 90% with {' '.join(got)} only"
            if got
            else f"{LABELS[name]}: did not reach 90% with either recipe"
        )

# %%
# Loss against the clock
# ----------------------
# The seed recipe's loss curves of :ref:`the training page
# <sphx_glr_auto_examples_plot_08_training.py>` (the training loss of the
# optimiser steps, a running mean over a quarter of an epoch, thin lines; the
# held-out loss after every epoch, dots), put on a clock: epoch :math:`k` ends
# at :math:`k` times the model's seconds per epoch *from the interleaved
# windows* at this process's thread count (not the training run's own clock,
# which measured the machine as much as the model). A model that learns as
# much per epoch but runs its epochs faster has its curve squeezed to the
# left. Only training steps count; evaluating does not.

cfg = site_config("convs2s")
n_epoch_tokens = epoch_tokens(cfg)
sec_per_epoch = {n: n_epoch_tokens / seed.speed.throughput[n].median for n in MODELS}
histories = {n: seed.results[n].history for n in MODELS}
fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
figures.loss_curves(
    ax,
    {LABELS[n]: histories[n] for n in MODELS},
    {LABELS[n]: COLOURS[n] for n in MODELS},
    seconds_per_epoch={LABELS[n]: sec_per_epoch[n] for n in MODELS},  # the windows' clock
)
where = hardware_label(seed.speed.machine.threads)
ax.set_xlabel(f"training time (s): epochs x median s/epoch of the windows ({where})")
busy_note = "" if seed.verdict.ok else ": UNRELIABLE, machine busy"
ax.set_title("Loss against the clock" + busy_note, color="k" if seed.verdict.ok else "C3")
plt.show()

# %%
# The speed table
# ---------------
# One row per model, as in the seed notebook: the median throughput of the
# interleaved windows at this process's thread count (printed in the last
# column) in target tokens per second (``<eos>`` included, padding excluded)
# with the range of the windows, the seconds per epoch at that median, the
# final training and held-out losses, and the two test-set scores of greedy
# decoding (defined on :ref:`the evaluation page
# <sphx_glr_auto_examples_plot_09_evaluation.py>`). The rows come from
# :func:`~convs2s_edu.lab.compare.summarise`, the layout from
# :func:`~convs2s_edu.lab.compare.format_table`; ``convs2s-edu compare`` prints the
# same tables.

for recipe, run in runs.items():
    print(f"{recipe} recipe, timed with {run.rows[0]['timed_on']}:")
    print(format_table(run.rows))

# sphinx_gallery_start_ignore
# The site's build (docs/conf.py) sets CONVS2S_EDU_SITE_DATA: the landing page
# states these measurements and their verdict, not the training runs' own clocks.
from convs2s_edu.lab.site import record

_ = record(  # the path it wrote: not shown
    "speed",
    {
        "ok": seed.verdict.ok,
        "resolved": seed.verdict.resolved,
        "text": seed.verdict.text,
        "cpu": mach.cpu,
        "cores": mach.cores,
        "recipes": {
            recipe: {
                "sec_per_epoch": {
                    n: {
                        hardware_label(t): epoch_tokens(run.results[n].config)
                        / run.threads.at(t).throughput[n].median
                        for t in run.threads.thread_counts
                    }
                    for n in MODELS
                },
                "convergence": run.convergence,
                "verdict": run.verdict.text,
                "ok": run.verdict.ok,
            }
            for recipe, run in runs.items()
        },
    },
)
# sphinx_gallery_end_ignore

# %%
# What you saw
# ------------
# * Seconds per epoch and tokens per second are measured on the machine that
#   built this page, at every thread count it has, and the verdict above is
#   chosen from those numbers; on other hardware the same two models can rank
#   the other way, which is the point of measuring more than one setting.
# * Convergence speed has three units: steps and examples belong to the model
#   and the recipe, seconds also to the hardware (they are the steps times the
#   interleaved seconds per step).
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
# **2. Seconds from steps.** The seed recipe's ConvS2S reached 90% held-out
# exact match at some step (in the table above). With the median seconds per
# step of its windows with one thread, how long did that take, and where does
# the training run's own clock disagree?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Multiply; the run's own clock (``History.epochs``) is printed beside it. When
# the site was built, the runs trained two at a time, one per core, so their
# clocks also measured the other run (``History.shared_clock`` says so), which
# is why the site never uses them for speed.

row = next(r for r in seed.convergence if r["model"] == "convs2s")
hit = row["levels"]["0.9"]
h = seed.results["convs2s"].history
if hit is None:
    print("ConvS2S did not reach 90% in this build")
else:
    per_step = seed.threads.at(1).seconds_per_step("convs2s").median
    own = sum(e["seconds"] for e in h.epochs) * hit["step"] / h.steps
    print(f"{hit['step']:,} steps x {per_step:.3f} s = {hit['step'] * per_step:.0f} s")
    print(f"the run's own clock, pro rata: {own:.0f} s (shared with other runs: {h.shared_clock})")

# %%
# .. raw:: html
#
#    </details>
