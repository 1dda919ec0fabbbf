r"""
Embeddings and the GLU block
============================

ConvS2S reads a sequence through two learned tables, one for tokens and one
for positions, and then through a stack of identical blocks: a convolution, a
*gated linear unit* (GLU) and a residual connection scaled by
:math:`\sqrt{0.5}`. This page takes both apart on untrained weights: what the
embeddings are and what one block computes. Why many such blocks can be
stacked is :ref:`the next page <sphx_glr_auto_examples_plot_05_deep_stack.py>`.
Its modules come from ``ConvS2SConfig()``, the original notebook's model with PyTorch's
initialisation; the site trains ``ConvS2SConfig.paper()``, the same sizes with
weight normalisation, the paper's initialisation and the two scalings. Shapes
and equations are the same; only the initial values differ.
"""

# %%
# Token and position embeddings
# -----------------------------
# A convolution does not know where in the sequence it is, so the model adds a
# learned vector per absolute position to every token vector (§3.1 of the
# paper):
#
# .. math:: e = (w_1 + p_1, \dots, w_m + p_m), \qquad w_j, p_j \in \mathbb{R}^f.
#
# :class:`~convs2s_edu.TokenPositionEmbedding` holds both tables. The decoder has
# its own instance for the target side, whose output the paper calls :math:`g`.
# The paper's sentence (§3.1):
#
#     "Both are combined to obtain input element representations
#     :math:`\mathbf{e} = (w_1 + p_1, \dots, w_m + p_m)`."
#
# The cell prints the lines of the module that compute it, read from the
# package's source, then the shapes of both tables.

import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from convs2s_edu import ConvBlock, ConvS2SConfig, TokenPositionEmbedding
from convs2s_edu.data import collate_batch, generate_dataset, n_token_ids
from convs2s_edu.lab.site import code_lines

print(code_lines(TokenPositionEmbedding.forward, "e_j = w_j + p_j"))

torch.manual_seed(0)
cfg = ConvS2SConfig()  # the original notebook's sizes
embed = TokenPositionEmbedding(n_token_ids(cfg.vocab_size), cfg.embed_dim, cfg.max_positions)
embed.eval()  # no dropout

batch = collate_batch(generate_dataset(4, 8, 20, cfg.vocab_size, seed=0), cfg.vocab_size)
e = embed(batch.src)
print("token table    w:", tuple(embed.token.weight.shape), " (token ids, f)")
print("position table p:", tuple(embed.position.weight.shape), " (max_positions, f)")
print("src              :", tuple(batch.src.shape), "  (B, S)")
print("e = w + p        :", tuple(e.shape), "  (B, S, f)")

# sphinx_gallery_start_ignore
assert torch.allclose(e, embed.token(batch.src) + embed.position(torch.arange(e.shape[1])))
assert (embed.token.weight[0] == 0).all()  # the PAD row is zero
# sphinx_gallery_end_ignore

# %%
# The same token at two positions gets two different vectors; only the token
# part is shared. Here the same id is embedded at positions 0 and 5:

tok = torch.tensor([[7, 1, 1, 1, 1, 7]])
e7 = embed(tok)[0]
cos = F.cosine_similarity(e7[0], e7[5], dim=0)
print(f"cosine similarity of token 7 at positions 0 and 5: {cos:.3f}")
pos = embed.position.weight
same = torch.allclose(e7[5] - e7[0], pos[5] - pos[0], atol=1e-6)
print(f"e_5 - e_0 equals p_5 - p_0: {same}")

# %%
# The convolution and the gated linear unit
# -----------------------------------------
# A block maps :math:`d` channels to :math:`2d` with one convolution of width
# :math:`k`, splits the result into halves :math:`A` and :math:`B`, and lets
# :math:`\sigma(B)` decide how much of :math:`A` passes (Dauphin et al., 2017):
#
# .. math::
#
#     [A\ B] = W * X + b_w, \qquad v([A\ B]) = A \otimes \sigma(B), \qquad
#     h^l_i = \sqrt{0.5}\,\big(v([A\ B])_i + h^{l-1}_i\big).
#
# The cell below computes one :class:`~convs2s_edu.ConvBlock` by hand and compares the
# result with the module's own forward pass. The block convolves with
# ``block.conv``, a :class:`torch.nn.Conv1d` holding :math:`W` as ``(2d, d, k)``; the
# cell computes :math:`W * X` the way §3.2 shapes the kernel instead,
# :math:`W \in \mathbb{R}^{2d \times kd}`: output :math:`i` is :math:`W` times the
# window :math:`[x_i; \dots; x_{i+k-1}]` of the padded input, all windows in one matrix
# product, and checks it against the block's convolution.

d, k = cfg.hidden_dim, cfg.kernel_size
block = ConvBlock(d, k).eval()
x = torch.randn(2, 10, d)  # (B, T, d)

with torch.no_grad():
    X = F.pad(x, (0, 0, *block.padding))  # (B, T + k - 1, d): zeros around the sequence
    T = x.shape[1]
    windows = torch.cat([X[:, j : j + T] for j in range(k)], dim=-1)  # (B, T, k d)
    W = block.conv.weight.transpose(1, 2).reshape(2 * d, k * d)  # W in R^{2d x kd}
    Y = windows @ W.T + block.conv.bias  # (B, T, 2d) = [A B]
    Y_conv = block.convolve(X)  # nn.Conv1d, channels first inside
    A, B = Y[..., :d], Y[..., d:]
    v = A * torch.sigmoid(B)  # the GLU
    h_by_hand = math.sqrt(0.5) * (v + x)
    h = block(x)

print("x:", tuple(x.shape), "(B, T, d)   [A B]:", tuple(Y.shape), "(B, T, 2d)")
print("A, B:", tuple(A.shape), tuple(B.shape), "  h:", tuple(h.shape), "(B, T, d), as x")
print(f"max |W X_i + b_w - block's nn.Conv1d| = {(Y - Y_conv).abs().max():.2e}")
print(f"max |block(x) - by hand| = {(h - h_by_hand).abs().max():.2e}")

# sphinx_gallery_start_ignore
assert torch.allclose(Y, Y_conv, atol=1e-5)
assert torch.allclose(h, h_by_hand, atol=1e-5)
# sphinx_gallery_end_ignore

# %%
# The paper's sentences (§3.2), and the lines of
# :meth:`ConvBlock.forward <convs2s_edu.ConvBlock.forward>` that compute them:
#
#     "We choose gated linear units (GLU; Dauphin et al., 2016) as non-linearity
#     which implement a simple gating mechanism over the output of the
#     convolution :math:`Y = [A\ B] \in \mathbb{R}^{2d}`" ... "To enable deep
#     convolutional networks, we add residual connections from the input of each
#     convolution to the output of the block."
#
# The residual's :math:`\sqrt{0.5}` is §3.4's, :ref:`the next page
# <sphx_glr_auto_examples_plot_05_deep_stack.py>`.

for equation in ("[A B] = W * X + b_w", "v([A B]) = A ⊗ σ(B)", "h = sqrt(0.5) (v + x)"):
    print(code_lines(ConvBlock.forward, equation))

# %%
# The gate as a function: left, :math:`\sigma(B)`, the share of :math:`A` that
# passes, over the values of :math:`B` this untrained block computes (grey);
# right, every entry's :math:`v` against its :math:`A`, coloured by its gate:
# the slope of each point's line through 0 is its :math:`\sigma(B)`. At
# initialisation :math:`B` is small and every gate about half open; training
# moves them (the printout gives this block's range).

b_grid = torch.linspace(-6, 6, 200)
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
ax0.plot(b_grid, torch.sigmoid(b_grid), color="tab:blue", linewidth=2, label=r"$\sigma(B)$")
counts = ax0.twinx()
counts.hist(B.flatten(), bins=40, color="0.6", alpha=0.6)
counts.set_yticks([])  # the grey histogram: where this block's B lie
ax0.set(xlabel="$B$", ylabel=r"$\sigma(B)$: share of $A$ passed", title="The gate")
dots = ax1.scatter(A.flatten(), v.flatten(), c=torch.sigmoid(B).flatten(), s=4, cmap="viridis")
ax1.set(xlabel="$A$", ylabel=r"$v = A \otimes \sigma(B)$", title="Each entry of the GLU")
fig.colorbar(dots, ax=ax1, label=r"$\sigma(B)$")
plt.show()
gates = torch.sigmoid(B)
print(f"this block's gates: from {gates.min():.2f} to {gates.max():.2f}, mean {gates.mean():.2f}")

# %%
# What you saw
# ------------
# * :math:`e_j = w_j + p_j`: the same token at two positions gets two vectors
#   that differ by :math:`p_5 - p_0` alone.
# * A block maps :math:`d` channels to :math:`2d`, the GLU back to :math:`d`:
#   :math:`\sigma(B)` decides, entry by entry, how much of :math:`A` passes.
# * The residual adds the block's input back and multiplies the sum by
#   :math:`\sqrt{0.5}`; :ref:`the next page
#   <sphx_glr_auto_examples_plot_05_deep_stack.py>` says why.
#
# Try it
# ------
# **1. Kernel width 5.** How many output channels does the convolution of a
# block with :math:`d = 128` have, and how many weights (bias included)?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`2d = 256` channels, each a :math:`k \times d` filter plus a bias:
# :math:`2d(kd + 1) = 256 \cdot 641 = 164{,}096` weights.

wide = ConvBlock(128, kernel_size=5)
print(wide.conv.out_channels, sum(p.numel() for p in wide.parameters()))

# %%
# .. raw:: html
#
#    </details>
#
# **2. A closed gate.** What does the GLU output when the gate half :math:`B`
# is :math:`-10` everywhere, and when it is :math:`+10`?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`\sigma(-10) \approx 4.5 \cdot 10^{-5}`: the gate is closed and the
# block adds almost nothing to the residual path. :math:`\sigma(10) \approx 1`:
# the gate is open and :math:`A` passes unchanged.

A = torch.tensor([2.0, -1.0, 0.5])
for gate in (-10.0, 10.0):
    print(gate, F.glu(torch.cat([A, torch.full_like(A, gate)]), dim=0))

# %%
# .. raw:: html
#
#    </details>
