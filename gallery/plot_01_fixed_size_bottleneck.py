r"""
Why attention: the recurrent encoder-decoder's fixed-size summary
=================================================================

Before attention, a recurrent encoder-decoder read the whole source into one
vector :math:`c` and generated every output token from it (Cho et al., 2014,
§2.2):

.. math::

    s_t = f(s_{t-1}, y_{t-1}, c).

Bahdanau et al. (2014, §1) name the weakness: "A potential issue with this
encoder–decoder approach is that a neural network needs to be able to compress
all the necessary information of a source sentence into a fixed-length vector."
Their Figure 2 plots the BLEU score of this model (they call it RNNencdec)
against sentence length, beside theirs with attention (RNNsearch).

This page trains the same GRU encoder-decoder with one fixed :math:`c` and
with Bahdanau's attention, on two tasks: sorting, this site's task, and
reversing the source. It asks the same question of all four runs: does exact
match fall as the source gets longer?
"""

# %%
# One switch: a fixed context or an attended one
# ----------------------------------------------
# :class:`~convs2s_edu.RNNSeq2Seq` takes ``attention=False`` (through the
# training configuration's ``model_options``). Its decoder is then the same
# :class:`~convs2s_edu.GRUDecoder`, but the context comes from
# :class:`~convs2s_edu.FixedContext`: the forward GRU's state at the last
# source token and the backward GRU's at the first,
# :math:`c = [\overrightarrow{h}_S; \overleftarrow{h}_1]`, the same vector at
# every step. With attention, :class:`~convs2s_edu.BahdanauAttention` computes a
# new :math:`c_t = \sum_j a_{tj} h_j` at every step (the next page).
# Everything else — sizes, data, optimiser, schedule, seed — is the same for
# all four runs: the Experiments section's budget
# (:meth:`Budget.config <convs2s_edu.lab.experiments.Budget.config>`, its first seed),
# so the two runs with attention are that section's GRU arms on sorting and
# reversing.
#
# The two tasks ask different things of :math:`c`. A sorted output depends
# only on how many times each value occurs in the source, not on where; a
# reversed one needs every token and its place.

from collections import defaultdict

import matplotlib.pyplot as plt
import numpy as np

from convs2s_edu import decode_all, exact_match, make_datasets, train_or_load
from convs2s_edu.lab.experiments import budget
from convs2s_edu.lab.site import comparison, quick_caveat

TASKS = ("sort", "reverse")
MODELS = ("fixed", "attention")
LABELS = {"fixed": "fixed context (RNNencdec)", "attention": "attention (RNNsearch)"}
COLOURS = {"fixed": "C0", "attention": "C1"}  # blue and orange: told apart by colour-blind
STYLES = {"fixed": ("s--", 3), "attention": ("o-", 2)}  # eyes too; the fixed line on top
OPTIONS = {"fixed": {"attention": False}, "attention": {}}

b = budget()  # the Experiments section's: steps, width, data sizes
results = {
    (task, name): train_or_load(b.config("gru", task, **OPTIONS[name]))
    for task in TASKS
    for name in MODELS
}
for (task, name), r in results.items():
    n_params = sum(p.numel() for p in r.model.parameters())
    print(
        f"{task:8s} {LABELS[name]:26s} {n_params:>8,} parameters, "
        f"seed {r.config.seed}, {r.config.total_steps:,} steps"
    )

# %%
# The model without attention is smaller by exactly the attention's
# :math:`W_a, U_a, b_a, v_a`: the fixed context has no parameters of its own.
#
# Exact match by source length
# ----------------------------
# Each model decodes its task's test set greedily. An output is right or
# wrong, so exact match is the measure (the
# :ref:`evaluation page <sphx_glr_auto_examples_plot_11_evaluation.py>` adds
# token accuracy); it is split by the length of the source, as Bahdanau et al.
# split BLEU by sentence length. The band is one standard error of a share,
# :math:`\sqrt{p(1-p)/n}`.


def exact_match_by_length(result):
    """{source length: (exact match, number of test examples)} on the run's test set."""
    examples = list(make_datasets(result.config)[2])
    predictions = decode_all(result.model, [x for x, _ in examples])
    groups = defaultdict(list)
    for (x, y), p in zip(examples, predictions):
        groups[len(x)].append((p, y))
    return {n: (exact_match(*zip(*g)), len(g)) for n, g in sorted(groups.items())}


per_length = {key: exact_match_by_length(r) for key, r in results.items()}

fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True, layout="constrained")
for ax, task in zip(axes, TASKS):
    for name in MODELS:
        lengths = np.array(list(per_length[task, name]))
        em, n = (np.array(v, dtype=float) for v in zip(*per_length[task, name].values()))
        half = np.sqrt(em * (1 - em) / n)
        style, z = STYLES[name]
        ax.plot(
            lengths, 100 * em, style, ms=3.5, color=COLOURS[name], label=LABELS[name], zorder=z
        )
        band = 100 * (em - half), 100 * (em + half)
        ax.fill_between(lengths, *band, color=COLOURS[name], alpha=0.2)
    ax.set_title(f"task: {task}")
    ax.set_xlabel("source length")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("exact match (% of test examples)")
axes[0].set_ylim(-3, 105)
axes[0].legend(fontsize=9)
plt.show()
quick_caveat("the figure above")

# %%
# The shortest and the longest sources
# ------------------------------------
# The figure's two ends, pooled over a third of the length range each so that
# every share rests on a few hundred examples, and the whole test set. Two
# shares count as "about the same" when they differ by less than two standard
# errors of their difference, :math:`2\sqrt{p_1(1-p_1)/n_1 + p_2(1-p_2)/n_2}`.


def pooled(table, span):
    """Exact match and the number of examples over the lengths ``span``."""
    n = sum(table[length][1] for length in span)
    return sum(table[length][0] * table[length][1] for length in span) / n, n


def two_se(a, b):
    """Two standard errors of the difference of two shares (share, n)."""
    return 2 * np.sqrt(a[0] * (1 - a[0]) / a[1] + b[0] * (1 - b[0]) / b[1])


for task in TASKS:
    lengths = list(per_length[task, "attention"])
    third = len(lengths) // 3
    spans = {f"lengths {s[0]}-{s[-1]}": s for s in (lengths[:third], lengths[-third:])}
    overall = {}
    for name in MODELS:
        table = per_length[task, name]
        ends = {label: pooled(table, span) for label, span in spans.items()}
        overall[name] = pooled(table, lengths)
        shares = {label: share for label, (share, _) in ends.items()}
        sentence = comparison("exact match", shares, tie=two_se(*ends.values()))
        print(f"{task}, {LABELS[name]}: {sentence}")
    shares = {LABELS[name]: share for name, (share, _) in overall.items()}
    print(
        f"{task}, all lengths:", comparison("exact match", shares, tie=two_se(*overall.values()))
    )
    print()

# %%
# What you saw
# ------------
# * Both models read the source with the same bidirectional GRU. Without
#   attention, the decoder gets the source only through :math:`c`, :math:`2n`
#   numbers whatever the length; with attention it reads every annotation
#   :math:`h_j` again at every step, through weights :math:`a_{tj}` it computes
#   from its own state.
# * The printed sentences compare, for each task, the shortest sources with the
#   longest and the two models with each other, on this build. What :math:`c`
#   must carry differs: the counts of the values for a sort, every token in its
#   place for a reversal.
# * Attention costs a score for every source position at every output step,
#   computed one step after another because :math:`s_t` needs :math:`s_{t-1}`:
#   the chain the next pages follow, and the one ConvS2S breaks.
#
# Try it
# ------
# * Make the fixed context bigger: ``b.config("gru", "reverse",
#   attention=False, hidden_dim=128)`` doubles :math:`n`. Does the reversal's drop with length
#   shrink?
# * Train on shorter sources only (``max_len=12``) and test on the full range:
#   which model extrapolates?
# * Replace :math:`c` by the mean of the annotations (edit
#   :meth:`FixedContext.forward <convs2s_edu.FixedContext>`): a summary that
#   sees every position, but still one vector.
