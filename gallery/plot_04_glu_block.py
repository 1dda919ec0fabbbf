r"""
Embeddings and the GLU block
============================

ConvS2S reads a sequence through two learned tables, one for tokens and one
for positions, and then through a stack of identical blocks: a convolution, a
*gated linear unit* (GLU) and a residual connection scaled by
:math:`\sqrt{0.5}`. This page takes both apart on untrained weights: what the
embeddings are, what the block computes, why the residual sum is multiplied
by :math:`\sqrt{0.5}`, and why the GLU's linear half helps gradients through
a deep stack. Its modules come from ``ConvS2SConfig()``, the seed's model
with PyTorch's initialisation; the site trains ``ConvS2SConfig.paper()``, the
same sizes with weight normalisation, the paper's initialisation and the two
scalings. Shapes and equations are the same; only the initial values differ,
and the variance section runs both.
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

from convs2s_edu import ConvBlock, ConvS2SConfig, TokenPositionEmbedding
from convs2s_edu.data import collate_batch, generate_dataset, n_token_ids
from convs2s_edu.lab import site

torch.manual_seed(0)
cfg = ConvS2SConfig()  # the seed's sizes
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
# Why :math:`\sqrt{0.5}`: variance through a deep stack
# -----------------------------------------------------
# If the two summands of a residual sum are independent with the same
# variance, the sum has twice that variance, and :math:`l` blocks multiply it
# by :math:`2^l`; :math:`\sqrt{0.5}` halves it again (§3.4: "This assumes that
# both summands have the same variance which is not always true but
# effective in practice"). The experiment pushes one random input through
# untrained blocks, **scaled** (the module's
# :math:`h^l = \sqrt{0.5}\,(v + h^{l-1})`) or as a **plain sum**
# (:math:`v + h^{l-1}`, by hand), with the paper's initialisation
# (``weight_norm=True``, :math:`W \sim \mathcal{N}(0, \sqrt{4/(kd)})`, §3.5,
# meant to give :math:`v` the variance of the block's input); a third curve
# uses PyTorch's default initialisation, the seed's (``weight_norm=False``).

N_LAYERS = 40


def run_stack(weight_norm: bool, scaled: bool, x0: torch.Tensor):
    """Var(h^0..h^L), and Var(v^l) / Var(h^{l-1}) for every layer."""
    torch.manual_seed(1)
    blocks = [ConvBlock(d, k, weight_norm=weight_norm).eval() for _ in range(N_LAYERS)]
    h, variances, ratios = x0, [x0.var().item()], []
    with torch.no_grad():
        for blk in blocks:
            v = F.glu(blk.convolve(F.pad(h, (0, 0, *blk.padding))), dim=-1)  # the GLU
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
var_plain, var_scaled = runs["plain sum, paper init"][0][-1], runs["scaled, paper init"][0][-1]
assert var_plain > 2**N_LAYERS and var_scaled < var_plain / 1.5**N_LAYERS
# sphinx_gallery_end_ignore

# %%
# Left, the variance of :math:`h^l` (log scale) with :math:`2^l` and :math:`1`
# as references; right, the assumption itself: the ratio of the variance of
# the GLU output :math:`v` to that of the block input (1: "both summands have
# the same variance").
#
# * A plain sum multiplies the variance by :math:`1 + \text{ratio}` per layer,
#   a scaled one by :math:`(1 + \text{ratio})/2`: the point of :math:`\sqrt{0.5}`.
# * The paper's :math:`\mathrm{Var}(A) = 4\,\mathrm{Var}(x)` gives
#   :math:`\mathrm{Var}(A \otimes \sigma(B)) = \mathrm{Var}(A)\,\mathbb{E}[\sigma(B)^2]
#   = \mathrm{Var}(x)` if :math:`\mathbb{E}[\sigma(B)^2] = 1/4`; but
#   :math:`1/4 = \sigma(0)^2` is only its lower bound, and it approaches
#   :math:`1/2` as the gates saturate: the measured ratio is the right panel's,
#   and weight normalisation lets training rescale every layer.
# * Where the ratio is below 1 (the grey curve is PyTorch's initialisation),
#   :math:`\sqrt{0.5}` shrinks the signal layer after layer:
#   one reason :meth:`~convs2s_edu.ConvS2SConfig.paper` turns the paper's
#   initialisation on together with the scaling.

layers = np.arange(N_LAYERS + 1)
styles, colours = ["-", "-", "--"], ["tab:red", "tab:blue", "tab:gray"]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained", width_ratios=[3, 2])
for (name, (var, ratio)), ls, c in zip(runs.items(), styles, colours):
    label = name.replace("scaled", r"scaled by $\sqrt{0.5}$")
    ax0.semilogy(layers, var, ls, color=c, label=label, linewidth=2)
    ax1.plot(layers[1:], ratio, ls, color=c, label=label, linewidth=2)
ax0.semilogy(layers, 2.0**layers, ":", color="k", label=r"$2^l$")
ax0.axhline(1.0, color="k", linewidth=0.8, linestyle=(0, (1, 3)))
ax0.set(xlabel="layer $l$", ylabel=r"Var$(h^l)$", title="Activation variance through ConvBlocks")
ax0.legend(fontsize=8, loc="upper left")
ax1.axhline(1.0, color="k", linewidth=0.8, linestyle=":")
ax1.set(yscale="log", xlabel="layer $l$", ylabel=r"Var$(v^l)$ / Var$(h^{l-1})$")
ax1.set_title("The assumption: Var$(v)$ = Var$(h)$?")
plt.show()

# %%
# Why a *linear* path: gradients through 20 blocks
# ------------------------------------------------
# In the GLU's gradient, :math:`\nabla A` is multiplied by the gate alone
# (Dauphin et al., 2017, §3, cited in §3.2 of the paper):
#
# .. math::
#
#     \nabla[A \otimes \sigma(B)] = \nabla A \otimes \sigma(B)
#         + A \otimes \sigma'(B)\,\nabla B, \qquad
#     \nabla[\tanh(A) \otimes \sigma(B)] = \tanh'(A)\,\nabla A \otimes \sigma(B)
#         + \tanh(A) \otimes \sigma'(B)\,\nabla B.
#
# The LSTM-style gate that §3.2 contrasts (Oord et al., 2016) multiplies that
# term by :math:`\tanh'(A) \le 1`, small wherever :math:`|A|` is large; a ReLU
# by 1 or 0. The cell stacks 20 blocks :math:`h^l = \sqrt{0.5}\,(v + h^{l-1})`
# that differ only in :math:`v`: the gated ones share weights from
# :math:`\mathcal{N}(0, \sqrt{3/(kd)})`, where a GLU keeps a unit variance
# (printed), ReLU's :math:`A` is rescaled to He's :math:`\sqrt{2/(kd)}`. It
# prints the mean factor on the :math:`\nabla A` path in block 1 (the same input
# for all three) and the gradient norm that reaches :math:`h^0`.

D_G, L_G = 64, 20
torch.manual_seed(2)
weights = [torch.randn(2 * D_G, D_G, k) * math.sqrt(3.0 / (k * D_G)) for _ in range(L_G)]
x_g = torch.randn(4, D_G, 32)  # (B, d, T)
units = {  # name: (v, its factor on the grad-A path)
    "A σ(B) (GLU)": lambda a, b: (a * b.sigmoid(), b.sigmoid()),
    "tanh(A) σ(B)": lambda a, b: (a.tanh() * b.sigmoid(), (1 - a.tanh() ** 2) * b.sigmoid()),
    "ReLU(A), He": lambda a, b: (F.relu(a * math.sqrt(2 / 3)), (a > 0).float()),
}
grads, stds, factor = {}, {}, {}
for name, unit in units.items():
    h, hs = x_g.clone().requires_grad_(True), []
    for w in weights:
        hs.append(h)
        a, b = F.conv1d(F.pad(h, (k - 1, 0)), w).chunk(2, dim=1)  # [A B] = W * X
        v, dv_da = unit(a, b)
        factor.setdefault(name, dv_da.mean().item())  # first block only
        h = math.sqrt(0.5) * (v + h)
    hs.append(h)
    r = torch.randn(h.shape, generator=torch.Generator().manual_seed(0))
    gs = torch.autograd.grad((h * r).sum(), hs)  # dL/dh^l for every l
    grads[name] = np.array([g.norm().item() for g in gs]) / gs[-1].norm().item()
    stds[name] = np.array([t.std().item() for t in hs])
glu, tanh_gate, _ = units
gain = 3 * torch.randn(100_000).mul(3**0.5).sigmoid().pow(2).mean()  # 3 E[σ(√3 Z)²]
print(f"one GLU at this scale: Var(v) / Var(x) = {gain:.3f}")  # A, B ~ N(0, 3)
for name in units:
    print(f"{name:13s} factor {factor[name]:.3f}, |grad h^0| / |grad h^L| = {grads[name][0]:.3g}")
pair = {"the GLU": factor[glu], "the tanh gate": factor[tanh_gate]}
print(site.comparison("mean factor on the grad-A path in block 1", pair, fmt="{:.3f}"))
pair = {"the GLU stack": grads[glu][0], "the tanh-gate stack": grads[tanh_gate][0]}
print(site.comparison("gradient norm reaching h^0", pair, fmt="{:.3g}"))

# sphinx_gallery_start_ignore
assert factor[tanh_gate] < factor[glu]  # tanh' <= 1, the same A and B in block 1
# sphinx_gallery_end_ignore

# %%
# Left, the gradient norm at every :math:`h^l` relative to the top's; right,
# the activations' size. A gradient norm carries both: the factors on the
# :math:`\nabla A` path multiply from block to block, and gradients scale with
# the activations they flow through.

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
for name, c in zip(units, ("tab:blue", "tab:red", "tab:gray")):
    ax0.semilogy(grads[name], color=c, linewidth=2, label=name)
    ax1.semilogy(stds[name], color=c, linewidth=2, label=name)
ax0.set(xlabel="layer $l$", ylabel=r"$\|\partial \mathcal{L}/\partial h^l\|$ / top's")
ax0.set_title(f"Gradient reaching layer $l$ ({L_G} blocks)")
ax1.set(xlabel="layer $l$", ylabel="std$(h^l)$", title="Activations' size")
ax0.legend(fontsize=8)
plt.show()


# %%
# What you saw
# ------------
# * A block maps :math:`d` channels to :math:`2d`, the GLU back to :math:`d`.
# * :math:`\sqrt{0.5}` turns a residual block's variance factor
#   :math:`1 + \text{ratio}` into :math:`(1 + \text{ratio})/2`.
# * The GLU passes :math:`\nabla A` times the gate alone; a :math:`\tanh` gate
#   adds the factor :math:`\tanh'(A) \le 1`.
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
#
# **3. The seed's depth.** The trained models have 4 encoder blocks. Predict
# :math:`\mathrm{Var}(h^4) / \mathrm{Var}(h^0)` in the variance experiment's
# scaled and plain stacks (paper's initialisation).
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The product of :math:`(1 + \text{ratio})/2`, or of :math:`1 + \text{ratio}`,
# over the first 4 layers, read off the experiment's curves:

for name in ("scaled, paper init", "plain sum, paper init"):
    var, ratio = runs[name]
    print(f"{name:22s} Var(h^4) / Var(h^0) = {var[4] / var[0]:.2f}, ratios {ratio[:4].round(2)}")

# %%
# .. raw:: html
#
#    </details>
