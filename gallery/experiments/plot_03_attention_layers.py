r"""
Attention in which decoder layers?
==================================

Every decoder layer of ConvS2S has its own attention (multi-step attention,
§3.3): layer :math:`l+1` attends knowing what layers :math:`1..l` attended
to. The paper's ablation (§5.5) keeps attention in some layers only. Is one
attention enough to sort, and does it matter whether it sits low or high?
"""

# %%
# Setup
# -----
# ``attention_layers`` of :class:`~convs2s_edu.ConvS2SConfig` lists the decoder
# layers (1-4, bottom to top) that attend; the others pass their convolution's
# output on unchanged and have no attention parameters.

import matplotlib.pyplot as plt

from convs2s_edu import experiments, is_quick_mode, resolve_device

result = experiments.run_experiment("attention_layers")
print(result.budget.describe())
print(f"device: {resolve_device('auto')}")
for arm in result.experiment.arms:
    print(f"  {arm.name:>10}: {arm.label}")
if is_quick_mode():
    print(
        "\nNOTE: quick build (CONVS2S_EDU_QUICK=1): one seed, a tiny budget; "
        "no difference can be resolved."
    )

# %%
# Results
# -------

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
experiments.plot_arms(axes[0], result, "token_accuracy", label="token accuracy (%)")
experiments.plot_arms(
    axes[1], result, "valid_loss", label="held-out loss", percent=False, color="C3"
)
fig.suptitle("Attention in which decoder layers: mean over seeds, whiskers min–max")
plt.show()

print(experiments.format_result(result))

# %%
# Conclusion
# ----------

print(experiments.conclusion(result, "token_accuracy"))
print(
    experiments.conclusion(
        result, "valid_loss", what="held-out loss", higher_is_better=False, fmt="{:.3f}"
    )
)
