r"""
Depth and kernel width
======================

A stack of :math:`L` convolutions of width :math:`k` sees
:math:`r = 1 + L(k-1)` input positions (§3.2): the paper's WMT models stack
up to 20 layers so that :math:`r` covers a sentence. The paper's ablation
(§5.6) varies :math:`L` and :math:`k`. The task's sources have 8-20 tokens.
Does :math:`r` have to cover them, when the decoder can attend to every
source position anyway?
"""

# %%
# Setup
# -----
# A grid of layers (encoder and decoder alike) × kernel width; the default
# model is :math:`L = 4, k = 3`.

import matplotlib.pyplot as plt

from convs2s_edu import experiments, is_quick_mode, resolve_device, site_config

result = experiments.run_experiment("depth_kernel")
task = site_config("convs2s")
print(result.budget.describe())
print(f"device: {resolve_device('auto')}")
print(
    f"task: sources of {task.min_len}-{task.max_len} tokens; the decoder reads up to "
    f"{task.max_len + 1} inputs (<sos> + the sorted tokens)"
)
for row in result.rows:
    covers = "covers" if row["receptive_field"] >= task.max_len else "does not cover"
    print(
        f"  {row['arm']:>6}: receptive field r = 1 + {row['layers']}×"
        f"({row['kernel_size']}-1) = {row['receptive_field']:>2}, {covers} "
        f"{task.max_len} tokens"
    )
if is_quick_mode():
    print(
        "\nNOTE: quick build (CONVS2S_EDU_QUICK=1): one seed, a tiny budget; "
        "no difference can be resolved."
    )

# %%
# Results
# -------

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
experiments.plot_arms(axes[0], result, "token_accuracy", label="token accuracy (%)")
experiments.plot_arms(
    axes[1], result, "sec_per_epoch", label="seconds per epoch", percent=False, color="C1"
)
for ax in axes:
    ax.set_xticks(
        range(len(result.rows)), [f"{r['arm']}\nr={r['receptive_field']}" for r in result.rows]
    )
fig.suptitle("Depth × kernel width: mean over seeds, whiskers min–max")
plt.show()

print(experiments.format_result(result))

# %%
# Conclusion
# ----------

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
