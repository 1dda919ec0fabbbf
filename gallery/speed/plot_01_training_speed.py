r"""
Training speed and convergence speed, timed interleaved
=======================================================

Gehring et al. (2017) argue (abstract, §1) that a convolutional model trains in
parallel, as a convolution does not depend on the previous time step, while a
recurrent network keeps "a hidden state of the entire past that prevents
parallel computation within a sequence". They time generation against a recurrent model
(§5.3, :ref:`the bench page <sphx_glr_auto_examples_speed_plot_04_bench.py>`), and
of training give their own model's speed alone: 3624 target words per second with
attention in all five decoder layers, 3772 with one (§5.5), and days per model (§5.1).

The original notebook asks for time per epoch *and* convergence speed of the two
models of :ref:`the training page <sphx_glr_auto_examples_plot_10_training.py>`.
This page measures both, for both recipes: throughput at every thread count
from one to this machine's cores, timed *interleaved*, with its spread (the
verdict says which hardware each ranking holds for), and the steps, examples
and seconds to sort 50%, 90% and 95% of held-out examples exactly right. A
warning replaces a comparison the machine was too busy for.
"""

# %%
# The runs, and their timing
# --------------------------
# :func:`~convs2s_edu.lab.timing.compare` does for each recipe what
# ``convs2s-edu compare --recipe original`` (or ``fast``) does: loads both models
# from the cache of :ref:`the training page <sphx_glr_auto_examples_plot_10_training.py>`,
# scores them on the test set and times them. On a CPU,
# :func:`~convs2s_edu.lab.timing.measure_threads` runs, after warm-up, every
# round one *window* of a few training steps (:func:`~convs2s_edu.train`'s
# step, batches from :func:`~convs2s_edu.lab.timing.training_batches`) of each
# model at each thread count, the order reversed every other round so that a
# drifting machine favours none. A window gives target tokens per second
# (padding excluded); a model's *spread* is how much its windows varied, a
# *ratio* is taken within each round.

import matplotlib.pyplot as plt
import numpy as np

from convs2s_edu import make_datasets, train_or_load
from convs2s_edu.lab import figures, timing
from convs2s_edu.lab.site import SITE_RECIPES, comparison, is_quick_mode, site_config, trend

MODELS = ("convs2s", "gru")
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
COLOURS = {"convs2s": "C0", "gru": "C1"}
ROUNDS = 3 if is_quick_mode() else 8

LEVELS, hardware_label, epoch_tokens = timing.LEVELS, timing.hardware_label, timing.epoch_tokens
windows = dict(n_rounds=ROUNDS, steps_per_window=3 if is_quick_mode() else 4, warmup_steps=2)
runs = {r: timing.compare(site_config("convs2s", r), **windows) for r in SITE_RECIPES}
original = runs["original"]
for recipe, run in runs.items():
    print(f"{recipe} recipe:")
    print(timing.speed_table(run.threads, LABELS))

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
# The verdict (:func:`~convs2s_edu.lab.timing.speed_verdict`, at every
# thread count, as under the tables above): a warning
# when a model's windows varied by more than 1.5x or the machine was busier
# than the cores a count leaves free; "not resolved" when the models' window
# ranges overlap; otherwise the faster model and the median of the per-round
# ratios (their range is the tables' last column).

original.verdict

# %%
# The original recipe: each model's median throughput, whiskers from its slowest to
# its fastest window (left), and ConvS2S's over the GRU's with the range of the
# per-round ratios (right; above the line ConvS2S trains more tokens per second).

fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.8), layout="constrained")
counts = original.threads.thread_counts
median = {}
for name in MODELS:
    tp = [original.threads.at(t).throughput[name] for t in counts]
    median[name] = med = np.array([s.median for s in tp])
    err = [med - [s.min for s in tp], [s.max for s in tp] - med]
    axes[0].errorbar(counts, med, err, fmt="o-", color=COLOURS[name], label=LABELS[name])
per_round = [original.threads.at(t).ratios["gru"] for t in counts]  # GRU / ConvS2S
ratio = np.array([1 / r.median for r in per_round])  # ConvS2S / GRU
r_err = [ratio - [1 / r.max for r in per_round], [1 / r.min for r in per_round] - ratio]
axes[1].errorbar(counts, ratio, r_err, fmt="s-", color="k")
axes[1].axhline(1.0, color="0.5", lw=0.8, ls="--")
mach = original.threads.measurement.machine
axes[0].set(ylabel="target tokens per second", ylim=(0, None), title=f"Throughput ({mach.cpu})")
axes[1].set(ylabel="ConvS2S / GRU throughput", title="The ratio at each thread count")
axes[0].legend(fontsize=9)
plt.setp(axes, xticks=counts, xlabel="PyTorch threads")
if not original.verdict.ok:
    fig.suptitle("Machine busy or unsteady at some count: see the warning", color="C3")
plt.show()

# %%
# Why the curves bend
# -------------------
# PyTorch gives each thread a share of *one* operation at a time, so only an
# operation with enough work to split gains from a thread. A ConvS2S training
# step is a few large operations, each layer over all positions of all 128
# sequences at once; the GRU's decoder is one small operation per target
# position, each waiting for the previous one (:math:`s_t` needs
# :math:`s_{t-1}`). So the models can gain differently from threads; with one,
# only the total cost of the operations is compared. :ref:`The next page
# <sphx_glr_auto_examples_speed_plot_02_what_makes_one_faster.py>` counts the
# arithmetic per token (:class:`torch.utils.flop_counter.FlopCounterMode`),
# the chain of dependent operations and the profiler's operations per step.
# Below, how the ratio and each model's throughput move with threads ("about
# the same": within 0.02 of the ratio, within 2% of one thread's tokens/s):

if len(counts) > 1:
    series = {"the ConvS2S / GRU throughput ratio": (ratio, "{:.2f}", 0.02)}
    for name in MODELS:
        series[f"{LABELS[name]}'s tokens/s"] = (median[name], "{:,.0f}", 0.02 * median[name][0])
    for what, (ys, fmt, tie) in series.items():
        print(trend(what, counts, ys, along="thread count", fmt=fmt, tie=tie))

# %%
# Convergence speed
# -----------------
# Optimiser steps, training examples and seconds each model needed before its
# held-out exact match first reached 50%, 90% and 95%
# (:func:`~convs2s_edu.lab.timing.convergence`; evaluated every few steps,
# so a level was reached at most that many steps before the step printed), the
# seconds as steps times the windows' median s/step, free of the machine's other work.

for recipe, run in runs.items():
    print(f"{recipe} recipe ({site_config('convs2s', recipe).total_steps:,} steps):")
    print(timing.format_convergence(run.convergence, LABELS), end="\n\n")

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
# The same on the clock: held-out exact match against seconds of training,
# steps converted at each model's speed in its windows with one thread (solid)
# and with all threads (dotted). A curve further left got there sooner.

fig, axes = plt.subplots(1, len(runs), figsize=(11, 3.9), layout="constrained", sharey=True)
for ax, (recipe, run) in zip(axes, runs.items()):
    for name in MODELS:
        ev = run.results[name].history.evals
        steps, em = np.array([(e["step"], 100 * e["exact_match"]) for e in ev]).T
        for t in sorted({1, counts[-1]}):
            per_step = run.threads.at(t).seconds_per_step(name).median
            label = f"{LABELS[name]}, {hardware_label(t)}"
            ax.plot(steps * per_step, em, "-" if t == 1 else ":", color=COLOURS[name], label=label)
    for level in LEVELS:
        ax.axhline(100 * level, color="0.6", lw=0.8, ls=":")
    ax.set(title=f"{recipe} recipe", xlabel="training time (s): steps x median s/step of windows")
axes[0].set_ylabel("held-out exact match (%)")
axes[-1].legend(fontsize=8, loc="lower right")
plt.show()

# %%
# What the recipe is worth: each model's steps to 90% held-out exact match
# with the original notebook's recipe and the fast one (from the rows above).

for name in MODELS:
    got = {}
    for recipe, run in runs.items():
        hit = next(r for r in run.convergence if r["model"] == name)["levels"]["0.9"]
        if hit is not None:
            got[f"the {recipe} recipe"] = hit["step"]
    said = f"reached 90% with {' '.join(got)} only"
    if not got:
        said = "did not reach 90% with either recipe"
    elif len(got) == 2:
        said = comparison("number of steps to 90%", got, fmt="{:,}", higher="more", lower="fewer")
    print(f"{LABELS[name]}: {said}")

# %%
# Loss against the clock
# ----------------------
# The original recipe's loss curves of :ref:`the training page
# <sphx_glr_auto_examples_plot_10_training.py>` (training loss, a running mean
# over a quarter epoch, thin; held-out loss per epoch, dots), epoch :math:`k`
# at :math:`k` times the model's seconds per epoch *from the windows*, not the
# run's own clock, which measured the machine as much as the model. A model that
# learns as much per epoch but runs its epochs faster is squeezed to the left.

cfg = site_config("convs2s")
s_per_epoch = {LABELS[n]: epoch_tokens(cfg) / original.speed.throughput[n].median for n in MODELS}
histories = {LABELS[n]: original.results[n].history for n in MODELS}
fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
colours = {LABELS[n]: COLOURS[n] for n in MODELS}
figures.loss_curves(ax, histories, colours, seconds_per_epoch=s_per_epoch)  # windows' clock
where = hardware_label(original.speed.machine.threads)
ax.set_xlabel(f"training time (s): epochs x median s/epoch of the windows ({where})")
busy_note = "" if original.verdict.ok else ": UNRELIABLE, machine busy"
ax.set_title("Loss against the clock" + busy_note, color="k" if original.verdict.ok else "C3")
plt.show()

# %%
# The speed table
# ---------------
# One row per model, as in the original notebook and ``convs2s-edu compare``
# (:func:`~convs2s_edu.lab.timing.summarise`, :func:`~convs2s_edu.lab.timing.format_table`):
# the windows' median tokens/s at this process's thread count (``<eos>``
# included) with their range, seconds per epoch at that median, final training
# and held-out losses, and the two test-set scores of greedy decoding
# (:ref:`the evaluation page <sphx_glr_auto_examples_plot_11_evaluation.py>`).

for recipe, run in runs.items():
    print(f"{recipe} recipe, timed with {run.rows[0]['timed_on']}:")
    print(timing.format_table(run.rows))

# sphinx_gallery_start_ignore
# The site's build (docs/conf.py) sets CONVS2S_EDU_SITE_DATA: the landing page
# states these measurements and their verdict, not the training runs' own clocks.
from convs2s_edu.lab.site import record

v = original.verdict
numbers = dict(ok=v.ok, resolved=v.resolved, text=v.text, cpu=mach.cpu, cores=mach.cores)
recipes = numbers["recipes"] = {}
for recipe, run in runs.items():
    s, v, spe = run.threads, run.verdict, {}
    for n in MODELS:
        n_tok = epoch_tokens(run.results[n].config)
        spe[n] = {hardware_label(t): n_tok / s.at(t).throughput[n].median for t in s.thread_counts}
    recipes[recipe] = dict(sec_per_epoch=spe, convergence=run.convergence, verdict=v.text, ok=v.ok)
_ = record("speed", numbers)  # the path it wrote: not shown
# sphinx_gallery_end_ignore

# %%
# What you saw
# ------------
# * Tokens/s and seconds per epoch belong to this machine, at each of its
#   thread counts, and so does the verdict; other hardware can rank the two
#   models the other way. Steps and examples belong to the model and recipe.
# * The paper's parallelism argument (§1) is about training, timed here; its one
#   timing against a recurrent model is of generation (§5.3, the bench page).
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

tokens = sum(len(y) + 1 for _, y in make_datasets(cfg)[0].examples)
last = train_or_load(cfg).history.epochs[-1]
print(f"from the data: {tokens:,} target tokens")
print(f"from the log:  {last['tokens_per_second'] * last['seconds']:,.0f}")

# %%
# .. raw:: html
#
#    </details>
#
# **2. Seconds from steps.** The original recipe's ConvS2S reached 90% held-out
# exact match at some step (table above). How long did that take at the median
# s/step of its one-thread windows, and where does the run's own clock disagree?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Multiply; the run's own clock (``History.epochs``) is printed beside it. The
# site's runs trained two at a time, one per core, so their clocks also timed
# the other run (``History.shared_clock``); the site never uses them for speed.

hit = next(r for r in original.convergence if r["model"] == "convs2s")["levels"]["0.9"]
h = original.results["convs2s"].history
if hit is None:
    print("ConvS2S did not reach 90% in this build")
else:
    per_step = original.threads.at(1).seconds_per_step("convs2s").median
    own = sum(e["seconds"] for e in h.epochs) * hit["step"] / h.steps
    print(f"{hit['step']:,} steps x {per_step:.3f} s = {hit['step'] * per_step:.0f} s")
    print(f"the run's own clock, pro rata: {own:.0f} s (shared with other runs: {h.shared_clock})")

# %%
# .. raw:: html
#
#    </details>
