r"""
Position embeddings and longer sequences
========================================

ConvS2S adds a learned position embedding :math:`p_j` to every token
embedding (§3.1), on the source and on the target side. The paper's ablation
(§5.4) removes them from one side or both. On a sorting task the model must
not care *where* a token stands in the source, only *which* tokens there are,
so what do the tables buy? And a learned table has one row per position: rows
past the longest training sequence are never trained. This page scores every
arm on the trained lengths (8-20) and on longer sequences (21-30, 31-40), with
the GRU model, which has no position table, as a reference.
"""

# %%
# Setup
# -----
# ``source_positions`` and ``target_positions`` of
# :class:`~convs2s_edu.ConvS2SConfig` switch the tables off (the model then has
# no position parameters on that side). The position tables have 64 rows, so
# sequences of up to 63 tokens fit; training only ever uses rows 0-20.

import matplotlib.pyplot as plt
import numpy as np

from convs2s_edu import experiments, is_quick_mode, resolve_device

result = experiments.run_experiment("positions")
print(result.budget.describe())
print(
    f"longer test sets: lengths {experiments.LONG_LENGTHS}, {result.budget.n_test} examples each"
)
print(f"device: {resolve_device('auto')}")
if is_quick_mode():
    print(
        "\nNOTE: quick build (CONVS2S_EDU_QUICK=1): one seed, a tiny budget; "
        "no difference can be resolved."
    )

# %%
# Results
# -------
# One group of bars per test length, one bar per arm (whiskers: min–max over
# the seeds; dots: the seeds).

keys = [("token_accuracy", "8-20 (trained)")] + [
    (f"token_accuracy_{lo}_{hi}", f"{lo}-{hi} (longer)") for lo, hi in experiments.LONG_LENGTHS
]
n_arms = len(result.rows)
width = 0.8 / n_arms
fig, ax = plt.subplots(figsize=(10, 4), layout="constrained")
for i, row in enumerate(result.rows):
    xs = np.arange(len(keys)) + (i - (n_arms - 1) / 2) * width
    means = np.array([row[k] for k, _ in keys]) * 100
    lo = means - np.array([row[f"{k}_min"] for k, _ in keys]) * 100
    hi = np.array([row[f"{k}_max"] for k, _ in keys]) * 100 - means
    ax.bar(
        xs,
        means,
        width=width * 0.95,
        yerr=[lo, hi],
        capsize=3,
        label=row["label"],
        color="0.6" if row["arm"] == "gru" else f"C{i}",
        alpha=0.85,
    )
    for x, (k, _) in zip(xs, keys):
        ax.plot([x] * row["n_seeds"], np.array(row[f"{k}_values"]) * 100, "k.", ms=3)
ax.set_xticks(range(len(keys)), [name for _, name in keys])
ax.set_xlabel("test sequence lengths")
ax.set_ylabel("token accuracy (%)")
ax.axvline(0.5, color="k", lw=0.8, ls="--")
ax.text(0.52, ax.get_ylim()[1] * 0.95, "longer than any training sequence →", va="top", fontsize=9)
ax.legend(fontsize=8, ncol=3, loc="upper right", bbox_to_anchor=(1.0, 0.88))
ax.set_title("Position embeddings: trained lengths and longer ones")
plt.show()

print(experiments.format_result(result))

# %%
# Conclusion
# ----------
# Computed from the numbers above, for each test length.

for key, name in keys:
    print(f"{name}: " + experiments.conclusion(result, key, what=f"token accuracy on {name}"))
