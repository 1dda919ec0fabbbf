r"""
Beam width, and generation speed as Table 3 measures it
=======================================================

Shi's article (§2) says a beam search decoder "selects the translation
that is most likely to be correct". The paper (§5.3, Table 3) measures how
fast ConvS2S *generates*: the 6,003 sentences of a development set, in
batches of up to 128 sentences of equal length, greedily and with a beam of
5, on GPUs and on a 48-core CPU, against GNMT, an 8-layer LSTM. This page
decodes the experiments' ConvS2S and GRU with beams of 1-10, then times
generation the way Table 3 does on the machine that builds the site: the same
sources for every model, equal-length batches, greedy and beam 5, the models
timed in alternating windows, against the site's 1-layer GRU and a GRU of
ConvS2S's parameter count. The models are the runs of the other experiments,
taken from the cache: nothing is trained here.
"""

# %%
# Accuracy by beam size
# ---------------------
# Beam size 1 is greedy decoding (:func:`~convs2s_edu.greedy_decode`); larger
# beams use :func:`~convs2s_edu.beam_search` with the length penalty 1, on the
# first test examples (printed below) of every seed's test set.

import matplotlib.pyplot as plt
import numpy as np

from convs2s_edu.lab import experiments

result = experiments.experiment_result("beam")
beams = result.budget.beam_sizes
print(result.budget.describe())
print(f"beam sizes: {beams}, each on the first {result.budget.beam_examples} test examples")

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
for ax, (pattern, ylabel) in zip(
    axes, (("exact_match_beam{}", "exact match (%)"), ("token_accuracy_beam{}", "token acc. (%)"))
):
    for i, row in enumerate(result.rows):
        mean = np.array([row[pattern.format(k)] for k in beams]) * 100
        lo = np.array([row[pattern.format(k) + "_min"] for k in beams]) * 100
        hi = np.array([row[pattern.format(k) + "_max"] for k in beams]) * 100
        ax.plot(beams, mean, "o-", color=f"C{i}", label=row["label"], ms=4)
        ax.fill_between(beams, lo, hi, color=f"C{i}", alpha=0.25)
    ax.set_xlabel("beam size")
    ax.set_ylabel(ylabel)
axes[0].legend(fontsize=8)
fig.suptitle("Beam width: mean over seeds, bands min–max")
plt.show()

print(experiments.format_beam(result))

# %%
# Generation speed
# ----------------
# :func:`~convs2s_edu.lab.experiments.timings.generation_speed` decodes every
# seed's test set with the models of the ``generation`` experiment, in
# batches of up to 128 sources of one length (:func:`~convs2s_edu.decode_all`),
# every model in turn within each round (:func:`~convs2s_edu.lab.timing.measure_generation`),
# greedily and with a beam of 5. Each model keeps its incremental decoder state
# (ConvS2S shifts its convolution windows rather than recomputing them, as in
# the paper). The numbers are sentences per second on this machine, with the
# thread count in the machine line; a measurement whose windows varied too much
# says so.

gen = experiments.generation_speed()
print(f"machine: {gen['machine']}")
arms = list(gen["beam1"])
for beam in ("beam1", "beam5"):
    print(
        f"{beam}: "
        + "; ".join(
            f"{a} {np.mean(gen[beam][a]):,.0f} sentences/s (seeds "
            f"{min(gen[beam][a]):,.0f}-{max(gen[beam][a]):,.0f})"
            for a in arms
        )
    )
if not gen["ok"]:
    print("WARNING: some windows varied too much or the machine was busy:")
    for beam, texts in gen["verdicts"].items():
        for text in texts:
            if text.startswith("WARNING"):
                print(f"  {beam}: {text}")

fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
for i, beam in enumerate(("beam1", "beam5")):
    means = [np.mean(gen[beam][a]) for a in arms]
    ax.bar(
        np.arange(len(arms)) + (i - 0.5) * 0.38, means, width=0.36, label=beam, color=f"C{i + 2}"
    )
    for j, a in enumerate(arms):
        ax.plot([j + (i - 0.5) * 0.38] * len(gen[beam][a]), gen[beam][a], "k.", ms=4)
ax.set_xticks(range(len(arms)), arms)
ax.set_ylabel("sentences per second")
ax.legend()
ax.set_title("Generation, batches of equal length (dots: seeds)")
plt.show()

from convs2s_edu.lab.site import comparison

for other in arms[1:]:
    fast = {"ConvS2S": np.mean(gen["beam1"]["convs2s"]), other: np.mean(gen["beam1"][other])}
    print(
        comparison(
            "greedy sentences per second", fast, fmt="{:,.0f}", higher="higher", lower="lower"
        )
    )

# %%
# What you saw
# ------------
# * The same trained models decoded with growing beams: accuracy against the
#   beam size, with the spread over the seeds.
# * Generation timed as Table 3 does it, on this machine: equal-length batches,
#   the same sources, greedy and beam 5. The paper's comparison is against a
#   deep LSTM on GPUs and many cores; on a small CPU the ranking can differ, and
#   :ref:`the claims page <sphx_glr_auto_examples_experiments_plot_06_claims.py>`
#   says what the measurement supports, with the device and thread count.
#
# Try it
# ------
# Predict first, then unfold the solution; code solutions run when the site
# is built.
#
# **1. A beam of one.** Does :func:`~convs2s_edu.beam_search` with
# ``beam_size=1`` give the same outputs as :func:`~convs2s_edu.greedy_decode`?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Yes: with one hypothesis per source the beam keeps the single most probable
# extension at every step, which is exactly greedy decoding (the length
# normalisation only ranks finished hypotheses, and there is one). The cell
# decodes test examples both ways with the first trained ConvS2S of this
# page, loaded from the cache.

from convs2s_edu import beam_search, greedy_decode, make_datasets, train_or_load

run_cfg = result.budget.train_config(result.experiment.arms[0], result.budget.first_seed)
trained = train_or_load(run_cfg, progress=False).model
test_set = make_datasets(run_cfg)[2]
sources = [test_set[i][0] for i in range(min(50, len(test_set)))]
greedy_out = greedy_decode(trained, sources)
beam1_out = beam_search(trained, sources, beam_size=1)
n_same = sum(g == b for g, b in zip(greedy_out, beam1_out))
print(f"{run_cfg.model}: {n_same} of {len(sources)} outputs identical")

# sphinx_gallery_start_ignore
assert n_same == len(sources)
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
#
# **3. Why seed by seed.** Five seeds give greedy exact matches of 58%, 70%,
# 79%, 65% and 74%, and beam 5 on the same five models 60%, 72%, 81%, 66% and
# 76%. Is the beam better? What would a comparison that ignored the pairing
# see?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The seeds differ a lot from each other (each has its own data and
# initialisation), but on every one of them the beam is 1-2 points ahead. The
# paired differences have a small spread, so their interval is narrow; the two
# sets of numbers taken apart have the seeds' large spread, and their ranges
# overlap almost entirely. Pairing removes the variation between seeds, which
# both sides share.

greedy_acc = [0.58, 0.70, 0.79, 0.65, 0.74]
beam5_acc = [0.60, 0.72, 0.81, 0.66, 0.76]
t = experiments.paired_test(beam5_acc, greedy_acc, min_effect=0.005)
lo, hi = t.interval(0.90)
print(f"paired: mean difference {t.mean:+.1%}, 90% interval {lo:+.1%} to {hi:+.1%}")
print(
    f"unpaired ranges: greedy {min(greedy_acc):.0%}-{max(greedy_acc):.0%}, "
    f"beam 5 {min(beam5_acc):.0%}-{max(beam5_acc):.0%}"
)

# %%
# .. raw:: html
#
#    </details>
