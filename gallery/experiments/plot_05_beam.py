r"""
Beam width: better outputs, at what cost?
=========================================

The seed article (§2) says a beam search decoder "selects the translation
that is most likely to be correct"; the paper (§5.3) reports generation speed
with greedy search and with beams. Here both models, ConvS2S and the GRU
model, are decoded with beam sizes 1-10. The models are the runs of the
encoder × decoder experiment, taken from the cache: nothing is trained for
this page.
"""

# %%
# Setup
# -----
# Beam size 1 is greedy decoding (:func:`~convs2s_edu.greedy_decode`); larger
# beams use :func:`~convs2s_edu.beam_search` with the length penalty 1. Each
# time covers decoding the beam test examples (printed below), after a small
# warm-up.

import matplotlib.pyplot as plt
import numpy as np

from convs2s_edu import experiments, is_quick_mode, resolve_device

result = experiments.run_experiment("beam")
beams = result.budget.beam_sizes
print(result.budget.describe())
n_beam = min(experiments.BEAM_EXAMPLES, result.budget.n_test)
print(
    f"beam sizes: {beams}, each on the first {n_beam} test examples; "
    f"device: {resolve_device('auto')}"
)
if is_quick_mode():
    print(
        "\nNOTE: quick build (CONVS2S_EDU_QUICK=1): one seed, a tiny budget, four beam "
        "sizes; no difference can be resolved."
    )

# %%
# Results
# -------
# Curves: the mean over seeds; bands: minimum to maximum.

fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), layout="constrained")
panels = [
    ("token_accuracy_beam{}", "token accuracy (%)", 100),
    ("exact_match_beam{}", "exact match (%)", 100),
    ("seconds_beam{}", "decoding time, s", 1),
]
for ax, (pattern, ylabel, scale) in zip(axes, panels):
    for i, row in enumerate(result.rows):
        mean = np.array([row[pattern.format(k)] for k in beams]) * scale
        lo = np.array([row[pattern.format(k) + "_min"] for k in beams]) * scale
        hi = np.array([row[pattern.format(k) + "_max"] for k in beams]) * scale
        ax.plot(beams, mean, "o-", color=f"C{i}", label=row["label"], ms=4)
        ax.fill_between(beams, lo, hi, color=f"C{i}", alpha=0.25)
    ax.set_xlabel("beam size")
    ax.set_ylabel(ylabel)
axes[0].legend(fontsize=8)
fig.suptitle("Beam width: mean over seeds, bands min–max")
plt.show()

print(experiments.format_beam(result))

# %%
# Conclusion
# ----------
# Per model, the best beam by mean token accuracy against greedy decoding, and
# the time of the widest beam against greedy. Both sides come from the same
# trained runs, so the comparison is made seed by seed
# (:func:`~convs2s_edu.experiments.verdict` with ``paired=True``).

for row in result.rows:
    acc = {k: row[f"token_accuracy_beam{k}_values"] for k in beams}
    best = max(beams, key=lambda k: row[f"token_accuracy_beam{k}"])
    v = (
        experiments.verdict(acc[best], acc[1], paired=True)
        if best != 1
        else "no wider beam is better"
    )
    widest = beams[-1]
    t = experiments.verdict(
        row[f"seconds_beam{widest}_values"], row["seconds_beam1_values"], paired=True
    )
    print(
        f"{row['arm']}: best mean token accuracy at beam {best} "
        f"({row[f'token_accuracy_beam{best}']:.1%} against {row['token_accuracy_beam1']:.1%} "
        f"greedy): better than greedy: {v}. Beam {widest} takes "
        f"{row[f'seconds_beam{widest}'] / row['seconds_beam1']:.1f}× the greedy time: "
        f"slower than greedy: {t}."
    )
