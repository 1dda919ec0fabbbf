r"""
Depth of the encoder and of the decoder, separately
===================================================

A stack of :math:`L` convolutions of width :math:`k` sees
:math:`r = 1 + L(k-1)` input positions (§3.2's example: 6 blocks with
:math:`k = 5` see 25); the paper's WMT models stack 15 to 20 layers per side
(§5.1). Its ablation (§5.6)
varies the depth of the encoder with the decoder fixed, and of the decoder
with the encoder fixed (Figure 2; with the kernel width, Tables 7 and 8), and
finds that "deeper architectures are particularly beneficial for the encoder
but less so for the decoder. Decoder setups with two layers already perform
well whereas for the encoder accuracy keeps increasing steadily with more
layers until up to 9 layers when accuracy starts to plateau." This page varies each side separately
around the 4 + 4 layers of the site's models (kernel width 3) on sorting,
whose sources have 8-20 tokens.
"""

# %%
# Setup
# -----
# Three arms: 4 + 4 layers (the site's model), 2 encoder + 4 decoder layers,
# 4 encoder + 2 decoder layers. The receptive field of each side:

import matplotlib.pyplot as plt

from convs2s_edu.lab import experiments
from convs2s_edu.lab.site import site_config

result = experiments.experiment_result("depth")
task = site_config("convs2s")
print(result.budget.describe())
print(f"task: sources of {task.min_len}-{task.max_len} tokens")
for row in result.rows:
    print(
        f"  {row['arm']:>9}: encoder r = {row['encoder_receptive_field']:>2}, decoder r = "
        f"{row['decoder_receptive_field']:>2} (of {task.max_len + 1} decoder inputs)"
    )

# %%
# Learning curves
# ---------------

fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
experiments.plot_curves(ax, result)
ax.set_title("Held-out exact match while training")
plt.show()

# %%
# Results
# -------

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
experiments.plot_arms(
    axes[0], result, "valid_loss", label="held-out loss", percent=False, color="C3"
)
experiments.plot_arms(axes[1], result, "exact_match", label="test exact match (%)")
fig.suptitle("Depth, one side at a time: mean over seeds, whiskers min–max")
plt.show()

print(experiments.format_result(result))

# %%
# Conclusion
# ----------
# Computed from the numbers above; the paper's two claims are judged on
# :ref:`the claims page <sphx_glr_auto_examples_experiments_plot_06_claims.py>`.

print(
    experiments.conclusion(
        result, "valid_loss", what="held-out loss", higher_is_better=False, fmt="{:.4f}"
    )
)

# %%
# What you saw
# ------------
# * The encoder and the decoder made shallower one at a time, the other side
#   left at 4 layers, as the paper does it.
# * Every attention reads the whole encoder output, so a shallow encoder's
#   small receptive field limits what each source vector summarises, not which
#   source positions the decoder can reach.
#
# Try it
# ------
# Predict first, then unfold the solution; code solutions run when the site
# is built.
#
# **1. Kernel width 5.** What is the receptive field of 4 layers with
# :math:`k = 5`, and of the paper's 6 blocks with :math:`k = 5`? How many
# layers of width 3 does a stack need to cover the longest source?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`1 + 4 \cdot 4 = 17` and :math:`1 + 6 \cdot 4 = 25` (the paper's own
# example in §3.2). With :math:`k = 3` every layer adds 2 positions, so
# :math:`1 + 2L \ge` the longest source needs the :math:`L` printed below.

print("L=4, k=5:", experiments.receptive_field(4, 5))
print("L=6, k=5:", experiments.receptive_field(6, 5))
L_cover = next(n for n in range(1, 100) if experiments.receptive_field(n, 3) >= task.max_len)
print(
    f"k=3 covers {task.max_len} tokens from L = {L_cover} "
    f"(r = {experiments.receptive_field(L_cover, 3)})"
)

# %%
# .. raw:: html
#
#    </details>
#
# **2. What the decoder sees.** In the default model (:math:`L = 4`,
# :math:`k = 3`), the prediction at the last position of a
# 21-token decoder input depends on which of its decoder inputs, and on
# which source positions?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# On the last :math:`r = 9` decoder inputs only (the decoder is causal: its
# window reaches back, never forward), but on *every* source position: each
# attention reads the whole encoder output. The cell measures both with
# gradients on a fresh model: a position the output does not depend on gets
# a gradient of exactly zero.

import torch

from convs2s_edu import ConvS2S, ConvS2SConfig, sos_index
from convs2s_edu.lab import figures

conv_cfg = ConvS2SConfig()
V = conv_cfg.vocab_size
torch.manual_seed(0)
fresh = ConvS2S(conv_cfg).eval()
src = torch.randint(1, V + 1, (1, task.max_len))  # (B, S)
tgt_in = torch.cat([torch.tensor([[sos_index(V)]]), src.sort(dim=1).values], dim=1)  # (B, S + 1)
embeddings = {"source": fresh.encoder.embed, "decoder input": fresh.decoder.embed}
with figures.capture(embeddings, retain_grad=True) as seen:
    fresh(src, tgt_in)[0, -1].sum().backward()  # the last position's logits
embedded = {name: outputs[0] for name, outputs in seen.items()}
for name, e in embedded.items():
    seen = (e.grad[0].abs().sum(dim=-1) > 0).nonzero().flatten().tolist()  # positions
    print(f"{name}: {len(seen)} of {e.shape[1]} positions matter: {seen[0]}-{seen[-1]}")
r = experiments.receptive_field(conv_cfg.n_decoder_layers, conv_cfg.kernel_size)
print(f"1 + L(k-1) = {r}")

# sphinx_gallery_start_ignore
assert (embedded["decoder input"].grad[0].abs().sum(-1) > 0).sum() == r
assert (embedded["source"].grad[0].abs().sum(-1) > 0).all()
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
#
# **3. The cost of a layer.** How many parameters does the second-to-last
# encoder layer of the arms above add, at the experiments' width :math:`d`?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# A block's convolution has :math:`2d` filters of :math:`k \times d` weights and
# :math:`2d` biases; with weight normalisation every filter also has a length
# :math:`g`: :math:`2dkd + 2d + 2d`. The two encoder layers the arm *enc2-dec4*
# lacks are twice that. The cell checks the formula against the parameter
# counts of the two arms' models, built as the experiment builds them.

from convs2s_edu.training import build_model


def arm_parameters(name):
    arm = result.experiment.select([name])[0]
    model = build_model(result.budget.train_config(arm, 0))
    return sum(p.numel() for p in model.parameters())


measured = arm_parameters("enc4-dec4") - arm_parameters("enc2-dec4")
d, k = result.budget.width, 3
formula = 2 * (2 * d * k * d + 4 * d)
print(f"the two arms' models: {measured:,.0f} more parameters; 2 x (2dkd + 4d) = {formula:,}")

# sphinx_gallery_start_ignore
assert measured == 2 * (2 * d * k * d + 4 * d)
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
