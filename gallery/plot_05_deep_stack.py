r"""
A deep stack: the residual's √0.5 and the GLU's linear path
===========================================================

ConvS2S stacks many identical blocks, :math:`h^l = \sqrt{0.5}\,(v([A\ B]) + h^{l-1})`
(:ref:`the previous page <sphx_glr_auto_examples_plot_04_glu_block.py>` computes one).
A deep stack trains only if the signal keeps its size on the way up and the
gradient on the way down. This page asks both questions of untrained blocks:
what the :math:`\sqrt{0.5}` does to the variance of the activations (§3.4), and
why the GLU's *linear* half lets gradients through where a :math:`\tanh` gate
would shrink them (§3.2).
"""

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
# uses PyTorch's default initialisation, the original notebook's
# (``weight_norm=False``). The first printout is the line of :meth:`ConvBlock.forward
# <convs2s_edu.ConvBlock.forward>` that scales the sum.

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from convs2s_edu import ConvBlock, ConvS2SConfig
from convs2s_edu.lab import site

print(site.code_lines(ConvBlock.forward, "h = sqrt(0.5) (v + x)"))

cfg = ConvS2SConfig()  # the original notebook's sizes
d, k = cfg.hidden_dim, cfg.kernel_size
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
# * :math:`\sqrt{0.5}` turns a residual block's variance factor
#   :math:`1 + \text{ratio}` into :math:`(1 + \text{ratio})/2`: the scaled stack
#   grows far more slowly than the plain sum, and keeps its size only where the
#   ratio is 1.
# * The GLU passes :math:`\nabla A` times the gate alone; a :math:`\tanh` gate
#   adds the factor :math:`\tanh'(A) \le 1`, block after block.
# * The paper's normalisation and initialisation have :ref:`a chapter of their
#   own <sphx_glr_auto_examples_normalisation_plot_04_activation_variance.py>`, on
#   untrained models, with a last page of short training runs of its own.
#
# Try it
# ------
# **1. The original notebook's depth.** The trained models have 4 encoder blocks.
# Predict :math:`\mathrm{Var}(h^4) / \mathrm{Var}(h^0)` in the variance experiment's
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
#
# **2. The ReLU's factor.** Predict the ReLU's mean factor on the
# :math:`\nabla A` path in block 1, and the GLU's, before reading the printout.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`\mathbb{1}[A > 0]` is 1 on about half the entries, so about 0.5. The
# GLU's :math:`\sigma(B)` averages about 0.5 too, since :math:`B` is symmetric
# about 0; but it is never 0: no entry's gradient is cut off entirely.

relu, glu_gate = factor["ReLU(A), He"], factor[glu]
print(f"ReLU {relu:.3f}, GLU {glu_gate:.3f}")


# %%
# .. raw:: html
#
#    </details>
