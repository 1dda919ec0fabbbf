r"""
Encoder × decoder, and how much the target re-orders the source
===============================================================

Shi's article (``001``, §1) expects that "an RNN (encoder) - CNN (decoder)
architecture can be expected to achieve better performance" where the target
does not follow the source's order, and (§2) that "A CNN-decoder has an
advantage over an RNN-decoder" for such targets. With the common
encoder-decoder interface all four pairs are one call away
(:class:`~convs2s_edu.HybridSeq2Seq`). This page trains the four pairs on
sorting, then ConvS2S and the GRU on two tasks of the same vocabulary and
lengths that re-order less: copying and reversing.
"""

# %%
# What each task predicts
# -----------------------
# The three tasks differ only in the target (:func:`~convs2s_edu.data.task_target`):
#
# * **copy**: the target is the source. Nothing is re-ordered: output position
#   :math:`i` needs source position :math:`i`, which a decoder can find by
#   position alone. If re-ordering is what makes a decoder's choice matter,
#   the models should do about equally well here.
# * **reverse**: a fixed re-ordering, :math:`j = n + 1 - i`. Output :math:`i`
#   still needs exactly one source position, but a far one, and the model must
#   know the source's length to find it: ConvS2S from its position
#   embeddings, the GRU from its backward pass over the source.
# * **sort**: a re-ordering that depends on the data. No position helps: output
#   :math:`i` needs the :math:`i`-th smallest token, wherever it is; the model
#   must compare values. This is the article's case of "target language texts"
#   that do not follow the source.
#
# The runs
# --------
# Every arm trains with the fast recipe for the same number of steps, with the
# same seeds (so the same data and test sets), at the width the budget prints
# (:func:`~convs2s_edu.lab.experiments.run_experiment`). The runs were trained
# once, two at a time, and kept in the experiment record that this page reads
# (:mod:`~convs2s_edu.lab.experiments.record`: the first line below says where
# and when, and whether the record was made by the code of this site).

import matplotlib.pyplot as plt

from convs2s_edu.lab import experiments

result = experiments.experiment_result("encoder_decoder")
print(result.budget.describe())

# %%
# Learning curves on sorting
# --------------------------
# Held-out exact match against the optimiser step for the four pairs (thick:
# the mean over seeds; thin: every seed). How fast each pair learns in
# *steps* is a property of the architecture and the recipe; how fast in
# *seconds* also depends on the hardware (:ref:`the claims page
# <sphx_glr_auto_examples_experiments_plot_06_claims.py>` times it).

pairs = ["convs2s", "gru", "gru+conv", "conv+gru"]
fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
experiments.plot_curves(ax, result, pairs)
ax.set_title("Sorting: held-out exact match while training")
plt.show()

# %%
# The four pairs at the end of the budget
# ---------------------------------------
# Test-set exact match (every token right) and the held-out loss, mean over the
# seeds, whiskers from the worst to the best seed, a dot per seed.

fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
experiments.plot_arms(axes[0], result, "exact_match", label="test exact match (%)", arms=pairs)
experiments.plot_arms(
    axes[1], result, "valid_loss", label="held-out loss", percent=False, color="C1", arms=pairs
)
for ax in axes:
    ax.tick_params(axis="x", labelrotation=20)
fig.suptitle("Sorting: mean over seeds, whiskers min–max, dots = seeds")
plt.show()

print(experiments.format_result(result))

# %%
# Where each pair stands, computed from the numbers above (the first two by mean
# test exact match, and how precisely the seeds pin their difference down):

sorting = experiments.ExperimentResult(
    result.experiment, result.budget, [], [result.row(a) for a in pairs]
)
print(experiments.conclusion(sorting, "exact_match", what="test exact match"))

# %%
# Copy, reverse, sort
# -------------------
# ConvS2S and the GRU on the three tasks: what the re-ordering costs each
# model, in exact match at the end and in steps to 90% held-out exact match.

tasks = {
    "copy": ("copy/convs2s", "copy/gru"),
    "reverse": ("reverse/convs2s", "reverse/gru"),
    "sort": ("convs2s", "gru"),
}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
for i, label in enumerate(("ConvS2S", "GRU")):
    arms = [arm[i] for arm in tasks.values()]
    experiments.plot_arms(
        axes[0],
        result,
        "exact_match",
        label="test exact match (%)",
        arms=arms,
        offset=(i - 0.5) * 0.38,
        width=0.36,
        color=f"C{i}",
        legend=label,
    )
    experiments.plot_arms(
        axes[1],
        result,
        "steps_to_0.9",
        label="steps to 90% held-out exact match",
        percent=False,
        arms=arms,
        offset=(i - 0.5) * 0.38,
        width=0.36,
        color=f"C{i}",
        legend=label,
    )
for ax in axes:
    ax.set_xticks(range(len(tasks)), list(tasks))
    ax.legend(fontsize=9)
fig.suptitle("What the re-ordering costs (a missing bar: no seed reached 90%)")
plt.show()

from convs2s_edu.lab.site import comparison

for task, (conv, gru) in tasks.items():
    em = {"ConvS2S": result.row(conv)["exact_match"], "the GRU": result.row(gru)["exact_match"]}
    print(f"{task:>7}: " + comparison("test exact match", em))

# %%
# What you saw
# ------------
# * The four encoder-decoder pairs trained on the same data with the same
#   recipe and seeds; only the encoder and the decoder changed. The claims
#   about them are judged, with the rule that decides every verdict of the
#   site, on :ref:`the claims page
#   <sphx_glr_auto_examples_experiments_plot_06_claims.py>`.
# * The same two models on three tasks separate what re-ordering costs from
#   what the task costs at all.
#
# Try it
# ------
# **1. Counting runs.** How many training runs does this page need in the full
# build, and in the quick build? How many of the other experiments' runs are
# the same runs as one of these?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Arms × seeds, in each build. An arm of another experiment with the same
# configuration (same model, options, task, budget and seed) is the same cache
# entry: ConvS2S on sorting appears in four experiments and trains once.

exp = result.experiment
for b in (experiments.budget(quick=False), experiments.budget(quick=True)):
    kind = "quick" if b.quick else "full"
    seeds = [len(b.seeds_of(exp.name, a.name)) for a in exp.arms]
    print(f"{kind} build: {len(exp.arms)} arms, seeds per arm {seeds}: {sum(seeds)} runs")
from convs2s_edu.training import cache_key

b = result.budget
mine = {cache_key(b.train_config(a, b.first_seed)) for a in exp.arms}
for other in experiments.EXPERIMENTS.values():
    if other is not exp:
        first = {a.name: cache_key(b.train_config(a, b.first_seed)) for a in other.arms}
        shared = [name for name, key in first.items() if key in mine]
        print(f"{other.name}: shares {shared or 'no arm'}")

# %%
# .. raw:: html
#
#    </details>
