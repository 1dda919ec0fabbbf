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

from convs2s_edu.lab import experiments
from convs2s_edu.lab.site import is_quick_mode, site_config
from convs2s_edu.training import resolve_device

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

# %%
# What you saw
# ------------
# * Six ConvS2S models on a grid of depth :math:`L` (encoder and decoder
#   alike) × kernel width :math:`k`, each printed with its receptive field
#   :math:`r = 1 + L(k-1)` next to the longest source of the task.
# * The receptive field bounds what a convolution stack sees of its *own*
#   input; the decoder's attention reads every source position in every
#   layer, whatever :math:`r` is (exercise 2).
# * Deeper and wider stacks have more parameters and cost more time per
#   epoch; the table shows whether they also sort better at this budget.
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
# **3. The cost of a wider kernel.** How many parameters does :math:`k = 5`
# add to the 4-layer model with :math:`d = 128`, compared with :math:`k = 3`?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# A block's convolution has :math:`2d` filters of :math:`k \times d` weights,
# so two more taps add :math:`2d \cdot 2d = 4d^2 = 65{,}536` weights per block,
# and there are 4 encoder and 4 decoder blocks: 524,288. Nothing else depends
# on :math:`k`. The cell checks the formula against the parameter counts of
# the two trained arms in the table.

measured = result.row("L4-k5")["n_parameters"] - result.row("L4-k3")["n_parameters"]
d = conv_cfg.hidden_dim
print(f"trained arms: {measured:,.0f} more parameters; 8 blocks x 4d^2 = {8 * 4 * d**2:,}")

# sphinx_gallery_start_ignore
assert measured == 8 * 4 * d**2
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
