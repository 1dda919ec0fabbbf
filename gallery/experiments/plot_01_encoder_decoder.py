r"""
Encoder × decoder: which pair sorts best?
=========================================

The seed article (``001``, §1) expects that "an RNN (encoder) - CNN (decoder)
architecture can be expected to achieve better performance" where the target
does not follow the source's order, and (§2) that "A CNN-decoder has an
advantage over an RNN-decoder" for such targets. Sorting re-orders every
source completely. With the common encoder-decoder interface all four pairs
are one call away (:class:`~convs2s_edu.HybridSeq2Seq`): does the GRU encoder
with the convolutional decoder win, and what does each pair cost in training
time per epoch and in greedy decoding time?
"""

# %%
# Setup
# -----
# Four arms, the same data, schedule and seeds for each
# (:func:`~convs2s_edu.experiments.run_experiment`; runs already in the
# training cache are not trained again).

import matplotlib.pyplot as plt

from convs2s_edu import experiments, is_quick_mode, resolve_device

result = experiments.run_experiment("encoder_decoder")
print(result.budget.describe())
print(f"device: {resolve_device('auto')}")
if is_quick_mode():
    print(
        "\nNOTE: quick build (CONVS2S_EDU_QUICK=1): one seed, a tiny budget; "
        "no difference can be resolved."
    )

# %%
# Results
# -------
# Token accuracy is the main score: at this budget few outputs are entirely
# right, so exact match stays low (it is in the table). Times are wall-clock
# seconds on this machine: the training time per epoch (median over epochs)
# and the time to decode the whole test set greedily.

fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), layout="constrained")
experiments.plot_arms(axes[0], result, "token_accuracy", label="token accuracy (%)")
experiments.plot_arms(
    axes[1], result, "sec_per_epoch", label="seconds per epoch", percent=False, color="C1"
)
experiments.plot_arms(
    axes[2],
    result,
    "greedy_seconds",
    label="greedy decoding, s (test set)",
    percent=False,
    color="C2",
)
for ax in axes:
    ax.tick_params(axis="x", labelrotation=20)
fig.suptitle("Encoder × decoder: mean over seeds, whiskers min–max, dots = seeds")
plt.show()

print(experiments.format_result(result))

# %%
# Conclusion
# ----------
# Computed from the numbers above.

print(experiments.conclusion(result, "token_accuracy"))
print(
    experiments.conclusion(
        result,
        "sec_per_epoch",
        what="training time per epoch",
        higher_is_better=False,
        fmt="{:.2f} s",
    )
)
print(
    experiments.conclusion(
        result,
        "greedy_seconds",
        what="greedy decoding time",
        higher_is_better=False,
        fmt="{:.2f} s",
    )
)
