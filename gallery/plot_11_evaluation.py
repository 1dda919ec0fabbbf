r"""
Evaluating the trained models
=============================

A loss tells how much probability a model puts on the right tokens when it is fed the
reference prefix (teacher forcing). At test time there is no reference: the model reads
its own previous outputs, and one wrong token can push every later one off. This page
decodes the test set with both trained models, scores the outputs with two measures,
breaks the scores down by sequence length and prints a few outputs side by side.
"""

# %%
# Two measures
# ------------
# The paper scores translations with BLEU. A sorted sequence is either right or wrong,
# so the original notebook uses two simpler measures over :math:`N` test pairs of a
# decoded output :math:`\hat y^{(n)}` and its reference :math:`y^{(n)}` (token lists
# without ``<sos>``/``<eos>``):
#
# .. math::
#
#     \mathrm{EM} = \frac{1}{N}\sum_{n=1}^{N}
#         \mathbb{1}\big[\hat y^{(n)} = y^{(n)}\big],
#     \qquad
#     \mathrm{TokAcc} = \frac{\sum_{n}\sum_{t=1}^{|y^{(n)}|}
#         \mathbb{1}\big[t \le |\hat y^{(n)}| \wedge \hat y^{(n)}_t = y^{(n)}_t\big]}
#         {\sum_{n} |y^{(n)}|}.
#
# *Exact match* (:func:`~convs2s_edu.exact_match`) counts a sequence as right only if
# every token and the length are right. *Token accuracy*
# (:func:`~convs2s_edu.token_accuracy`) gives partial credit: the share of reference
# positions holding the right token, compared position by position (a missing token
# early on shifts, and usually spoils, every later position).
#
# Both models are loaded from the cache that the :ref:`training page
# <sphx_glr_auto_examples_plot_10_training.py>` filled (run on its own, this page
# trains them first), and decode greedily: at every step the most probable next token,
# until ``<eos>`` (:func:`~convs2s_edu.decode_all` decodes the whole test set, in
# batches).

import textwrap
from collections import defaultdict

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np

from convs2s_edu import decode_all, exact_match, make_datasets, token_accuracy, train_or_load
from convs2s_edu.lab.samples import format_samples, predict_samples
from convs2s_edu.lab.site import comparison, is_quick_mode, quick_caveat, site_config, trend
from convs2s_edu.registry import model_entry

# sphinx_gallery_thumbnail_number = 2
MODELS = ("convs2s", "gru")
LABELS = {name: model_entry(name).label for name in MODELS}
COLOURS = {"convs2s": "C0", "gru": "C1"}

results = {name: train_or_load(site_config(name)) for name in MODELS}
models = {name: r.model for name, r in results.items()}
cfg = results["convs2s"].config
test_set = make_datasets(cfg)[2]
span = f"{cfg.min_len}-{cfg.max_len}"
print(f"test set: {len(test_set):,} examples of length {span}, never seen in training")
for name in MODELS:
    h = results[name].history
    print(f"{LABELS[name]:16s} trained for {len(h.epochs)} epochs on {h.device}")

examples = list(test_set)
references = [y for _, y in examples]
predictions = {name: decode_all(models[name], [x for x, _ in examples]) for name in MODELS}
scores = {
    n: {"exact match": exact_match(p, references), "token accuracy": token_accuracy(p, references)}
    for n, p in predictions.items()
}

print(f"\n{'model':16s} {'exact match':>12s} {'token accuracy':>15s}")
for name in MODELS:
    s = scores[name]
    print(f"{LABELS[name]:16s} {s['exact match']:>12.1%} {s['token accuracy']:>15.1%}")

# sphinx_gallery_start_ignore
from convs2s_edu import evaluate

for name in MODELS:  # the same numbers as the library's one-call evaluation (on a slice)
    ev, p, y = evaluate(models[name], examples[:64]), predictions[name][:64], references[:64]
    assert abs(ev["exact_match"] - exact_match(p, y)) < 1e-12
    assert abs(ev["token_accuracy"] - token_accuracy(p, y)) < 1e-12
# sphinx_gallery_end_ignore

# %%
# The two scores side by side. A sequence with one wrong token fails
# :term:`exact match` but still earns :term:`token accuracy` credit for the others; the
# sentences under the chart say
# how the two scores came out for each model.

fig, ax = plt.subplots(figsize=(6.5, 3.6), layout="constrained")
metrics = ("exact match", "token accuracy")
width = 0.38
for i, name in enumerate(MODELS):
    vals = [100 * scores[name][m] for m in metrics]
    x = np.arange(len(metrics)) + (i - 0.5) * width
    bars = ax.bar(x, vals, width, color=COLOURS[name], label=LABELS[name])
    ax.bar_label(bars, fmt="%.1f%%", fontsize=9, padding=2)
ax.set_xticks(np.arange(len(metrics)), metrics)
ax.set(ylabel="% of the test set", ylim=(0, 108), title="Greedy decoding on the test set")
fig.legend(loc="outside right center", fontsize=9, frameon=False)
plt.show()
quick_caveat("the scores above")

for name in MODELS:
    both = {m: scores[name][m] for m in ("token accuracy", "exact match")}
    print(comparison(f"{LABELS[name]} score", both))

# %%
# Accuracy by sequence length
# ---------------------------
# A longer sequence has more tokens to get right, and each output position must find
# its token among more candidates: does that show in the scores? The test set holds
# every length of the training range, so it can be split by length: exact match per
# length on the left, token accuracy on the right; the shaded band is one standard
# error of the share, :math:`\sqrt{p(1-p)/n}`, with :math:`n` the number of test
# examples of that length (printed below).
#
# The grey area extends the test beyond the training range with freshly drawn, longer
# sequences. Both models accept them (the position table of ConvS2S has room for
# them), but neither has ever seen such a length: ConvS2S's learned position embeddings
# for those positions were never trained, and the GRU has never run that many steps.

from convs2s_edu import generate_dataset

EXTRA_LENGTHS = range(cfg.max_len + 1, cfg.max_len + (5 if is_quick_mode() else 9))
N_PER_EXTRA = 20 if is_quick_mode() else 50
lo, hi, n_extra = EXTRA_LENGTHS[0], EXTRA_LENGTHS[-1], N_PER_EXTRA * len(EXTRA_LENGTHS)
extra = generate_dataset(n_extra, lo, hi, cfg.vocab_size, seed=cfg.seed + 100)
extra_predictions = {name: decode_all(models[name], [x for x, _ in extra]) for name in MODELS}


def by_length(pairs, preds):
    """{length: (exact match, token accuracy, n)} over (source, reference) pairs."""
    groups = defaultdict(list)
    for (x, y), p in zip(pairs, preds):
        groups[len(x)].append((p, y))
    return {
        n: (exact_match(*zip(*g)), token_accuracy(*zip(*g)), len(g))
        for n, g in sorted(groups.items())
    }


def se(p, n):
    """One standard error of a share p over n examples (the figure's band)."""
    return np.sqrt(p * (1 - p) / n)


per_length = {
    name: {**by_length(examples, predictions[name]), **by_length(extra, extra_predictions[name])}
    for name in MODELS
}

fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True, layout="constrained")
for name in MODELS:
    lengths = np.array(list(per_length[name]))
    em, tok, n = (np.array(v, dtype=float) for v in zip(*per_length[name].values()))
    for ax, p in zip(axes, (em, tok)):
        band = 100 * (p - se(p, n)), 100 * (p + se(p, n))
        ax.plot(lengths, 100 * p, "o-", ms=3.5, color=COLOURS[name], label=LABELS[name])
        ax.fill_between(lengths, *band, color=COLOURS[name], alpha=0.2)
for ax, title in zip(axes, ("Exact match", "Token accuracy")):
    ax.axvspan(cfg.max_len + 0.5, EXTRA_LENGTHS[-1] + 0.5, color="0.85", zorder=0)
    ax.set(xlabel="sequence length", title=title, ylim=(-3, 105))
    ax.set_ylabel("% of examples" if title == "Exact match" else "% of tokens")
    ax.set_xlim(cfg.min_len - 0.5, EXTRA_LENGTHS[-1] + 0.5)
    ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
handles, labels = axes[0].get_legend_handles_labels()
handles.append(plt.Rectangle((0, 0), 1, 1, color="0.85"))
labels.append("longer than any training example")
fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9, frameon=False)
plt.show()

counts = ", ".join(f"{n}: {v[2]}" for n, v in per_length["convs2s"].items())
print(textwrap.fill(f"examples per length: {counts}", width=78))

# %%
# What the figure shows, computed from its points: for each model and score, from the
# shortest to the longest training length, and from the longest training length to the
# longest test length beyond it. A change within one standard error of the difference
# (the two ends' errors combined) reads "about the same".

for name in MODELS:
    print(f"{LABELS[name]}:")
    pts = per_length[name]
    for col, score in enumerate(("exact match", "token accuracy")):
        for a, b in ((cfg.min_len, cfg.max_len), (cfg.max_len, EXTRA_LENGTHS[-1])):
            (pa, na), (pb, nb) = ((pts[x][col], pts[x][2]) for x in (a, b))
            tie = float(np.hypot(se(pa, na), se(pb, nb)))
            sentence = trend(score, [a, b], [pa, pb], tie=tie)
            print(textwrap.fill(sentence, 76, initial_indent="  ", subsequent_indent="    "))

# sphinx_gallery_start_ignore
for name in MODELS:
    in_range = [v for n, v in per_length[name].items() if n <= cfg.max_len]
    assert sum(v[2] for v in in_range) == len(test_set)
    # the overall exact match is the length buckets' weighted mean
    em = sum(v[0] * v[2] for v in in_range) / len(test_set)
    assert abs(em - scores[name]["exact match"]) < 1e-9
# sphinx_gallery_end_ignore

# %%
# Sample outputs
# --------------
# :func:`~convs2s_edu.lab.samples.predict_samples` decodes the same sources with every
# model, greedily and with a beam of five hypotheses (beam search is the subject of the
# :ref:`decoding page <sphx_glr_auto_examples_plot_15_decoding.py>`), and
# :func:`~convs2s_edu.lab.samples.format_samples` prints them one block per example; a
# ``*`` marks an output that differs from the reference. The examples are the first
# test example of the shortest length, of a middle one and of the longest one, whatever
# the models make of them.

first_of_length = {}
for x, y in examples:
    first_of_length.setdefault(len(x), (x, y))
lengths = sorted(first_of_length)
picked = [first_of_length[n] for n in (lengths[0], lengths[len(lengths) // 2], lengths[-1])]
rows = predict_samples(models, picked, beam_size=5)
print(format_samples(rows, layout="blocks"))

# sphinx_gallery_start_ignore
assert [(row["source"], row["reference"]) for row in rows] == picked
# sphinx_gallery_end_ignore

# %%
# What you saw
# ------------
# * Exact match counts whole sequences; token accuracy counts positions. One
#   wrong token fails exact match but costs little token accuracy.
# * How the scores move with length, within the training lengths and beyond
#   them, is in the sentences printed under the figure, computed from it.
# * Sample outputs show *where* the models go wrong (marked ``*``).
#
# Try it
# ------
# **1. One wrong token.** A 20-token output with one wrong token: what are its
# exact match and its token accuracy?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# 0 and :math:`19/20 = 95\%`:

reference = list(range(1, 21))
output = reference[:7] + [99] + reference[8:]
print(exact_match([output], [reference]))
print(token_accuracy([output], [reference]))

# %%
# .. raw:: html
#
#    </details>
#
# **2. One token too short.** The output stops one token early but every token
# it wrote is right. Token accuracy?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`19/20`: the missing position counts as wrong (the measure runs over the
# *reference* length). Tokens beyond the reference would be ignored by token accuracy
# but fail exact match.

print(token_accuracy([reference[:-1]], [reference]))
print(token_accuracy([reference + [5]], [reference]), exact_match([reference + [5]], [reference]))

# %%
# .. raw:: html
#
#    </details>
#
# **3. Short against long.** Is ConvS2S's exact match on the shortest test
# sequences higher or lower than on the longest ones, and by how much?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Every extra token is one more chance to go wrong, and a wrong token changes every
# later decoder input, which predicts the short ones doing better. ConvS2S's answer,
# from the length buckets above:

short_long = {f"length {n}": per_length["convs2s"][n] for n in (cfg.min_len, cfg.max_len)}
print(comparison("exact match", {k: v[0] for k, v in short_long.items()}, fmt="{:.0%}"))
print("examples:", {k: v[2] for k, v in short_long.items()})

# %%
# .. raw:: html
#
#    </details>
