r"""
Weight normalisation (§4.2)
===========================

Gehring et al. train stacks of up to 20 convolutional layers per side. To
keep the activations and the gradients of such deep stacks at a steady scale
they combine four measures (§3.4, §3.5 and §4.2 of the paper):

* the :math:`\sqrt{0.5}` scaling of every residual sum (always on here, see
  :ref:`the deep-stack page <sphx_glr_auto_examples_plot_05_deep_stack.py>`);
* **weight normalisation** (this page) and an **initialisation** that
  preserves the variance of the activations, dropout included (:ref:`the
  initialisation page <sphx_glr_auto_examples_normalisation_plot_03_initialisation.py>`);
* **encoder gradient scaling** by the number of attention mechanisms
  (:ref:`its page <sphx_glr_auto_examples_normalisation_plot_01_encoder_gradient_scaling.py>`);
* **context scaling** by :math:`m\sqrt{1/m}`, :math:`m` the source length
  (:ref:`its page <sphx_glr_auto_examples_normalisation_plot_05_context_scaling.py>`).

The original notebook leaves the last three out, and so do the package's model
configurations by default (the training entry point, and so the rest of the
site, trains the paper's model);
:meth:`ConvS2SConfig.paper() <convs2s_edu.ConvS2SConfig.paper>` turns
them on through three flags (``weight_norm``, ``scale_encoder_grad``,
``scale_context``). This page is about weight normalisation, on untrained
models, with numbers the page computes: the weight-normalised
parametrisation of a :class:`~convs2s_edu.ConvBlock`.
"""

# %%
# Weight normalisation (§4.2)
# ---------------------------
# §4.2: "We also use weight normalization for all layers except for lookup
# tables (Salimans & Kingma, 2016)."
# Weight normalisation (Salimans & Kingma, 2016) writes the weights of every
# output unit :math:`o` of a layer as a length :math:`g_o` times a direction:
#
# .. math:: W_o = g_o\, \frac{v_o}{\lVert v_o \rVert}
#
# so that training adjusts the length of a weight vector and its direction
# through separate parameters. With ``weight_norm=True`` every convolution and
# every linear layer of the model is parametrised this way
# (:func:`torch.nn.utils.parametrizations.weight_norm`, one :math:`g_o` per
# output channel). The layer keeps no tensor ``weight`` of its own: it stores
# ``g`` and ``v`` and recomputes :math:`W` from them whenever it is used.
#
# The cell below builds one small :class:`~convs2s_edu.ConvBlock`
# (:math:`d = 4` channels in, :math:`2d` out, width :math:`k = 3`) with weight
# normalisation and rebuilds its weight by hand from ``g`` and ``v``.

import matplotlib.pyplot as plt
import torch
from torch.nn.utils import parametrize

from convs2s_edu import ConvBlock

torch.set_printoptions(precision=3, sci_mode=False)
torch.manual_seed(0)

small = ConvBlock(d=4, kernel_size=3, weight_norm=True)
conv = small.conv
g_wn = conv.parametrizations.weight.original0  # g: (2d, 1, 1)
v_wn = conv.parametrizations.weight.original1  # v: (2d, d, k)
print("weight-normalised:", parametrize.is_parametrized(conv, "weight"))
print("parameters of the convolution:")
for name, p in conv.named_parameters():
    print(f"  {name:38s} {tuple(p.shape)}")

with torch.no_grad():
    v_norm = v_wn.flatten(1).norm(dim=1).view(-1, 1, 1)  # ||v_o||: (2d, 1, 1)
    W_hand = g_wn * v_wn / v_norm
print("g =", g_wn.flatten())
error = (conv.weight - W_hand).abs().max()
print(f"max |conv.weight - g v / ||v|||: {error:.1e}")

# sphinx_gallery_start_ignore
assert parametrize.is_parametrized(conv, "weight")
assert g_wn.shape == (8, 1, 1) and v_wn.shape == (8, 4, 3)
assert torch.allclose(conv.weight, W_hand, atol=1e-7)
# sphinx_gallery_end_ignore

# %%
# At initialisation PyTorch sets :math:`g_o = \lVert v_o \rVert`, so the
# initial :math:`W` equals :math:`v` and whatever initialisation :math:`v`
# received (:ref:`next page <sphx_glr_auto_examples_normalisation_plot_03_initialisation.py>`)
# carries over to :math:`W`. After that the two
# parameters play separate roles: multiplying :math:`v` by a constant leaves
# :math:`W` unchanged, and the norm of every row :math:`W_o` is exactly
# :math:`g_o`. The cell checks both on the block above.

with torch.no_grad():
    print(f"max |g - ||v|||  at init: {(g_wn - v_norm).abs().max():.1e}")
    W_before = conv.weight.clone()
    v_wn.mul_(3.0)  # a longer v, same direction
    change = (conv.weight - W_before).abs().max()
    print(f"max |W(3 v) - W(v)|:       {change:.1e}")
    g_wn.copy_(torch.linspace(0.5, 4.0, 8).view(-1, 1, 1))  # new lengths
    row_norms = conv.weight.flatten(1).norm(dim=1)
print("new g        :", g_wn.flatten())
print("||W_o|| rows :", row_norms)

# sphinx_gallery_start_ignore
assert change < 1e-6
assert torch.allclose(row_norms, g_wn.flatten(), atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# What you saw
# ------------
# * A weight-normalised layer stores a length :math:`g_o` and a direction
#   :math:`v_o` per output unit and rebuilds :math:`W_o = g_o v_o/\lVert v_o
#   \rVert` at every use; at initialisation :math:`g_o = \lVert v_o \rVert`, so
#   :math:`W` starts as :math:`v`.
#
# Try it
# ------
# Predict first, then unfold the solution; code solutions run when the site
# is built.
#
# **1. A longer v.** Multiply the direction parameter :math:`v` (``original1``
# of the parametrisation) of a weight-normalised :class:`~convs2s_edu.ConvBlock`
# by 10. Does the block's output change? And if you multiply :math:`g`
# (``original0``) by 10 instead?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Scaling :math:`v` leaves the output unchanged: :math:`W` only sees the
# direction :math:`v/\lVert v \rVert`, and a factor 10 cancels in the ratio
# (the difference printed is rounding error). Scaling :math:`g` multiplies
# every row of :math:`W` by 10, so both halves :math:`A` and :math:`B` of the
# convolution output change and so does the output of the GLU.

torch.manual_seed(0)
blk = ConvBlock(d=4, kernel_size=3, weight_norm=True).eval()
x = torch.randn(2, 6, 4)  # (B, T, d)
params = blk.conv.parametrizations.weight
with torch.no_grad():
    y_before = blk(x)
    params.original1.mul_(10.0)  # v <- 10 v
    y_v10 = blk(x)
    params.original0.mul_(10.0)  # g <- 10 g
    y_g10 = blk(x)
print(f"v x 10: max |change of the output| = {(y_v10 - y_before).abs().max():.1e}")
print(f"g x 10: max |change of the output| = {(y_g10 - y_before).abs().max():.1e}")

# sphinx_gallery_start_ignore
assert torch.allclose(y_v10, y_before, atol=1e-5)
assert (y_g10 - y_before).abs().max() > 0.1
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>

# %%
# A length and a direction, in one figure
# ---------------------------------------
# The exercise's two experiments over a range of factors, on a fresh block:
# how far the block's output moves when :math:`v` or :math:`g` is multiplied
# by each factor (the largest change over the batch).

torch.manual_seed(0)
blk = ConvBlock(d=4, kernel_size=3, weight_norm=True).eval()
params = blk.conv.parametrizations.weight
fresh = {k: t.clone() for k, t in blk.state_dict().items()}
factors = torch.logspace(-1, 1, 9).tolist()
moved = {"v (direction)": [], "g (length)": []}
with torch.no_grad():
    y_fresh = blk(x)
    for factor in factors:
        for label, part in zip(moved, (params.original1, params.original0)):
            blk.load_state_dict(fresh)
            part.mul_(factor)
            moved[label].append((blk(x) - y_fresh).abs().max().item())

fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
for (label, changes), marker in zip(moved.items(), ("o", "s")):
    ax.plot(factors, changes, marker + "-", label=f"multiply {label}")
ax.set_xscale("log")
ax.set_xlabel("factor")
ax.set_ylabel("max |change of the block's output|")
ax.legend()
ax.grid(alpha=0.3)
plt.show()
print(f"largest change when v is scaled: {max(moved['v (direction)']):.1e}")
