r"""
Embeddings and the GLU block
============================

ConvS2S reads a sequence through two learned tables, one for tokens and one
for positions, and then through a stack of identical blocks: a convolution, a
*gated linear unit* (GLU) and a residual connection scaled by
:math:`\sqrt{0.5}`. This page takes both apart on random, untrained weights:
what the embeddings are, what the block computes, and why the residual sum is
multiplied by :math:`\sqrt{0.5}`.
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

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from convs2s_edu import (
    ConvBlock,
    ConvS2SConfig,
    TokenPositionEmbedding,
    collate_batch,
    generate_dataset,
)
from convs2s_edu.data import n_token_ids

torch.manual_seed(0)
cfg = ConvS2SConfig()  # the seed's sizes
embed = TokenPositionEmbedding(n_token_ids(cfg.vocab_size), cfg.embed_dim, cfg.max_positions)
embed.eval()  # no dropout

batch = collate_batch(generate_dataset(4, 8, 20, cfg.vocab_size, seed=0), cfg.vocab_size)
e = embed(batch.src)
print("token table    w:", tuple(embed.token.weight.shape), " (token ids, f)")
print(
    "position table p:",
    tuple(embed.position.weight.shape),
    " (max_positions, f)",
)
print("src              :", tuple(batch.src.shape), "  (B, S)")
print("e = w + p        :", tuple(e.shape), "  (B, S, f)")

# sphinx_gallery_start_ignore
S = batch.src.shape[1]
by_hand = embed.token(batch.src) + embed.position(torch.arange(S))
assert torch.allclose(e, by_hand)
assert (embed.token.weight[0] == 0).all()  # the PAD row is zero
# sphinx_gallery_end_ignore

# %%
# The same token at two positions gets two different vectors; only the token
# part is shared. Here the same id is embedded at positions 0 and 5:

tok = torch.tensor([[7, 1, 1, 1, 1, 7]])
e7 = embed(tok)[0]
cos = F.cosine_similarity(e7[0], e7[5], dim=0)
print(f"cosine similarity of token 7 at positions 0 and 5: {cos:.3f}")
same = torch.allclose(
    e7[5] - e7[0],
    embed.position.weight[5] - embed.position.weight[0],
    atol=1e-6,
)
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
# The cell below computes one :class:`~convs2s_edu.ConvBlock` by hand from its
# convolution ``block.conv`` and compares the result with the module's own
# forward pass.

d, k = cfg.hidden_dim, cfg.kernel_size
block = ConvBlock(d, k).eval()
x = torch.randn(2, 10, d)  # (B, T, d)

with torch.no_grad():
    X = F.pad(x.transpose(1, 2), block.padding)  # (B, d, T + k - 1): zeros around the sequence
    Y = block.conv(X)  # (B, 2d, T) = [A B]
    A, B = Y[:, :d], Y[:, d:]
    v = A * torch.sigmoid(B)  # the GLU
    h_by_hand = math.sqrt(0.5) * (v.transpose(1, 2) + x)
    h = block(x)

print("x      :", tuple(x.shape), " (B, T, d)")
print("[A B]  :", tuple(Y.shape), " (B, 2d, T)")
print("A, B   :", tuple(A.shape), tuple(B.shape))
print("h      :", tuple(h.shape), " (B, T, d): same length, same width")
print(f"max |block(x) - by hand| = {(h - h_by_hand).abs().max():.2e}")

# sphinx_gallery_start_ignore
assert torch.allclose(h, h_by_hand, atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# Why :math:`\sqrt{0.5}`: variance through a deep stack
# -----------------------------------------------------
# The residual connection adds the block's input to its output. If the two
# summands are independent and have the same variance, the sum has twice that
# variance, and after :math:`l` blocks the activations have grown by
# :math:`2^l`. Multiplying every sum by :math:`\sqrt{0.5}` halves the variance
# again (§3.4 of the paper: "This assumes that both summands have the same
# variance, which is not always true but effective in practice").
#
# The experiment below pushes one random input through a stack of untrained
# blocks and records the variance of every layer's output :math:`h^l`:
#
# * **scaled**: the module's forward pass,
#   :math:`h^l = \sqrt{0.5}\,(v + h^{l-1})`;
# * **plain sum**: the same blocks, but the output computed by hand without the
#   scale, :math:`h^l = v + h^{l-1}`.
#
# Both use the paper's initialisation (``weight_norm=True``,
# :math:`W \sim \mathcal{N}(0, \sqrt{4/(kd)})`, §3.5), chosen so that the GLU
# output :math:`v` has about the variance of the block's input, which is the
# assumption behind :math:`\sqrt{0.5}`. A third curve uses PyTorch's default
# initialisation, which is what this package's default configuration uses
# (``weight_norm=False``, as in the seed notebook), with the scale.

N_LAYERS = 40


def plain_block(block: ConvBlock, h: torch.Tensor) -> torch.Tensor:
    """``block`` without the sqrt(0.5): v([A B]) + h."""
    y = block.conv(F.pad(h.transpose(1, 2), block.padding))  # (B, 2d, T)
    return F.glu(y, dim=1).transpose(1, 2) + h


def run_stack(weight_norm: bool, scaled: bool, x0: torch.Tensor):
    """Var(h^0..h^L), and Var(v^l) / Var(h^{l-1}) for every layer."""
    torch.manual_seed(1)
    blocks = [ConvBlock(d, k, weight_norm=weight_norm).eval() for _ in range(N_LAYERS)]
    h, variances, ratios = x0, [x0.var().item()], []
    with torch.no_grad():
        for blk in blocks:
            v = plain_block(blk, h) - h  # the GLU output alone
            ratios.append((v.var() / h.var()).item())
            h = blk(h) if scaled else v + h
            variances.append(h.var().item())
    return np.array(variances), np.array(ratios)


x0 = torch.randn(4, 32, d)  # unit variance
runs = {
    "plain sum, paper init": run_stack(weight_norm=True, scaled=False, x0=x0),
    "scaled, paper init": run_stack(weight_norm=True, scaled=True, x0=x0),
    "scaled, PyTorch default init": run_stack(weight_norm=False, scaled=True, x0=x0),
}

print(f"{N_LAYERS} blocks, Var(h^0) = {x0.var():.3f}")
for name, (var, _) in runs.items():
    growth = (var[-1] / var[0]) ** (1 / N_LAYERS)
    print(f"{name:30s} Var(h^L) = {var[-1]:9.3g}, mean growth per layer = {growth:.3f}")

# sphinx_gallery_start_ignore
# the scale divides the variance growth of every layer
g_plain = (runs["plain sum, paper init"][0][-1]) ** (1 / N_LAYERS)
g_scaled = (runs["scaled, paper init"][0][-1]) ** (1 / N_LAYERS)
assert g_plain > 2 and g_scaled < g_plain / 1.5
# sphinx_gallery_end_ignore

# %%
# The left panel shows the variance of :math:`h^l` on a log scale, with
# :math:`2^l` (the plain sum of two equal-variance terms) and :math:`1` (what
# the scaling aims for) as references. The right panel shows the assumption
# itself: the ratio of the variance of the GLU output :math:`v` to that of the
# block input. A ratio of 1 is "both summands have the same variance".
#
# * Without the scale the variance explodes at least as fast as :math:`2^l`.
#   It grows faster still because, at the paper's initialisation, the GLU
#   output has *more* variance than its input: the initialisation makes
#   :math:`\mathrm{Var}(A) = 4\,\mathrm{Var}(x)` so that
#   :math:`\mathrm{Var}(A \otimes \sigma(B)) = \mathrm{Var}(A)\,
#   \mathbb{E}[\sigma(B)^2]` comes back to :math:`\mathrm{Var}(x)` if
#   :math:`\mathbb{E}[\sigma(B)^2] = 1/4`; but that is only its lower bound
#   (:math:`\sigma(0)^2`), and it approaches :math:`1/2` as the activations
#   grow and the gates saturate. The ratio is therefore typically between 1
#   and 2 (the printout above gives the measured values).
# * With the scale, the same blocks grow by the small factor
#   :math:`(1 + \text{ratio})/2` per layer: orders of magnitude less over the
#   stack, which is the point of :math:`\sqrt{0.5}`. Weight normalisation,
#   which lets training rescale every layer, takes care of the rest.
# * With PyTorch's default initialisation the GLU output is much smaller than
#   its input, so :math:`\sqrt{0.5}` *shrinks* the signal layer after layer
#   until the convolution biases dominate. This package's default model has
#   only four layers per stack, and training adapts the weights, but it is one
#   reason :meth:`~convs2s_edu.ConvS2SConfig.paper` turns the paper's
#   initialisation on together with the scaling.

layers = np.arange(N_LAYERS + 1)
styles = ["-", "-", "--"]
colours = ["tab:red", "tab:blue", "tab:gray"]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained", width_ratios=[3, 2])
for (name, (var, ratio)), ls, c in zip(runs.items(), styles, colours):
    label = name.replace("scaled", r"scaled by $\sqrt{0.5}$")
    ax0.semilogy(layers, var, ls, color=c, label=label, linewidth=2)
    ax1.plot(layers[1:], ratio, ls, color=c, label=label, linewidth=2)
ax0.semilogy(layers, 2.0**layers, ":", color="k", label=r"$2^l$")
ax0.axhline(1.0, color="k", linewidth=0.8, linestyle=(0, (1, 3)))
ax0.set_xlabel("layer $l$")
ax0.set_ylabel(r"Var$(h^l)$")
ax0.set_title("Activation variance through a stack of ConvBlocks")
ax0.legend(fontsize=8, loc="upper left")
ax1.axhline(1.0, color="k", linewidth=0.8, linestyle=":")
ax1.set_yscale("log")
ax1.set_xlabel("layer $l$")
ax1.set_ylabel(r"Var$(v^l)$ / Var$(h^{l-1})$")
ax1.set_title("The assumption: Var$(v)$ = Var$(h)$?")
plt.show()


# %%
# What you saw
# ------------
# * A token enters as :math:`e_j = w_j + p_j`: the same token at two positions
#   gets two different vectors.
# * A block maps :math:`d` channels to :math:`2d` with one convolution, and the
#   GLU gates one half with the sigmoid of the other,
#   :math:`v = A \otimes \sigma(B)`, back to :math:`d` channels.
# * The residual sum is scaled by :math:`\sqrt{0.5}`, which undoes the doubling
#   of the variance when both summands have the same variance. In the stack
#   above the paper-initialised GLU output has *more* variance than its input
#   (the right panel's ratio is above 1), so even the scaled stack grows, by
#   about :math:`(1 + \text{ratio})/2` per layer: far less than the plain sum,
#   and a small factor at the seed's depth of 4 blocks (exercise 3).
#
# Try it
# ------
# Predict first, then unfold the solution; code solutions run when the site
# is built.
#
# **1. Kernel width 5.** How many output channels does the convolution of a
# block with :math:`d = 128` have, and how many weights (bias included)?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`2d = 256` channels, each a :math:`k \times d` filter plus a bias:
# :math:`2d(kd + 1) = 256 \cdot 641 = 164{,}096` weights.

import torch
import torch.nn.functional as F

from convs2s_edu import ConvBlock

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
#
# **3. The seed's depth.** The trained models have 4 encoder blocks. By how
# much does the variance grow through 4 scaled blocks with the paper's
# initialisation?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# A small factor, printed below next to the plain sum's: training absorbs it
# easily (weight normalisation learns every layer's scale). The plain sum
# grows much faster, and the gap widens with every block.

torch.manual_seed(1)
stack = [ConvBlock(128, 3, weight_norm=True).eval() for _ in range(4)]
x0 = torch.randn(4, 32, 128)
with torch.no_grad():
    h, h_plain = x0, x0
    for blk in stack:
        h = blk(h)  # sqrt(0.5) (v + h)
        pre = F.pad(h_plain.transpose(1, 2), blk.padding)
        h_plain = F.glu(blk.conv(pre), dim=1).transpose(1, 2) + h_plain
print(f"scaled:    Var(h^4) / Var(h^0) = {h.var() / x0.var():.2f}")
print(f"plain sum: Var(h^4) / Var(h^0) = {h_plain.var() / x0.var():.2f}")

# %%
# .. raw:: html
#
#    </details>
