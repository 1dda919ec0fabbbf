r"""
The paper's weight normalisation and initialisation (§3.5)
==========================================================

Gehring et al. train stacks of up to 20 convolutional layers per side. To
keep the activations and the gradients of such deep stacks at a steady scale
they combine four measures (§3.4-3.5 of the paper):

* the :math:`\sqrt{0.5}` scaling of every residual sum (always on here, see
  :ref:`the GLU block page <sphx_glr_auto_examples_plot_02_glu_block.py>`);
* **weight normalisation** and an **initialisation** that preserves the
  variance of the activations, dropout included;
* **encoder gradient scaling** by the number of attention mechanisms;
* **context scaling** by :math:`m\sqrt{1/m}`, :math:`m` the source length.

The seed notebook leaves the last three out, and so do the package's model
configurations by default (the training entry point, and so the rest of the
site, trains the paper's model);
:meth:`ConvS2SConfig.paper() <convs2s_edu.ConvS2SConfig.paper>` turns
them on through three flags (``weight_norm``, ``scale_encoder_grad``,
``scale_context``). This page is about the first flag, on untrained models,
with numbers the page computes: the weight-normalised parametrisation of a
:class:`~convs2s_edu.ConvBlock`, the standard deviations of the initial
weights and the variance of the activations layer by layer. The
:ref:`next page <sphx_glr_auto_examples_plot_11_gradient_context_scaling.py>`
covers the two scaling flags, the way the context joins the decoder state, and
a short training run of the seed's configuration against the paper's.
"""

# %%
# Weight normalisation (§3.5)
# ---------------------------
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

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch.nn.utils import parametrize

from convs2s_edu import (
    ConvBlock,
    ConvS2S,
    ConvS2SConfig,
    collate_batch,
    generate_dataset,
)
from convs2s_edu.lab import figures

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
# received (next section) carries over to :math:`W`. After that the two
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
# The paper's initialisation (§3.5)
# ---------------------------------
# The initialisation is chosen so that every layer, at the start of training,
# passes on activations of about the variance it receives. With dropout, an
# input unit is kept with probability :math:`p` and scaled by :math:`1/p`,
# which multiplies the variance of the layer's input by :math:`1/p`; the
# weights make up for it. For a layer with :math:`n_l` inputs per output unit
# (its fan-in):
#
# .. math::
#
#     w_j, p_j &\sim \mathcal{N}(0,\ 0.1) && \text{token and position embeddings} \\
#     W &\sim \mathcal{N}\big(0,\ \sqrt{p / n_l}\big) && \text{linear layers after dropout} \\
#     W &\sim \mathcal{N}\big(0,\ \sqrt{1 / n_l}\big) && \text{other linear layers} \\
#     W &\sim \mathcal{N}\big(0,\ \sqrt{4p / n_l}\big),\ n_l = k d
#       && \text{convolutions followed by a GLU}
#
# (the second argument of :math:`\mathcal{N}` is a standard deviation). The
# factor 4 is for the gated linear unit, which passes about a quarter of the
# variance of its input when the gates :math:`\sigma(B)` are near
# :math:`\sigma(0) = 1/2`; biases start at zero.
#
# PyTorch's default, which the seed uses, draws the weights of
# :class:`torch.nn.Linear` and :class:`torch.nn.Conv1d` uniformly from
# :math:`\pm 1/\sqrt{n_l}` (standard deviation :math:`1/\sqrt{3 n_l}`), and
# the embeddings from :math:`\mathcal{N}(0, 1)`.
#
# The cell builds the seed's model and the paper's model, both at the seed's
# sizes, and measures the standard deviation of their initial weights. With
# weight normalisation, the weight measured is :math:`W = g\,v/\lVert v \rVert`,
# which at initialisation is :math:`v`.

seed_cfg = ConvS2SConfig()  # the seed: no normalisation tricks
paper_cfg = ConvS2SConfig.paper()  # all three flags on
torch.manual_seed(0)
seed_model = ConvS2S(seed_cfg)
torch.manual_seed(0)
paper_model = ConvS2S(paper_cfg)

f, d, k = paper_cfg.embed_dim, paper_cfg.hidden_dim, paper_cfg.kernel_size
p_keep = 1.0 - paper_cfg.dropout
print(f"f = {f}, d = {d}, k = {k}, dropout = {paper_cfg.dropout} -> p = {p_keep:.2f}")


def weight_of(model, path):
    """The weight tensor at ``path`` ("encoder.blocks.0.conv", ...)."""
    module = model.get_submodule(path)
    return module.weight.detach()


# (name, path in the model, fan-in n_l, the paper's std)
layers = [
    ("encoder conv (block 1)", "encoder.blocks.0.conv", k * d, "sqrt(4p/n)"),
    ("decoder conv (block 1)", "decoder.blocks.0.conv", k * d, "sqrt(4p/n)"),
    ("encoder in_proj f->d", "encoder.in_proj", f, "sqrt(p/n)"),
    ("encoder out_proj d->f", "encoder.out_proj", d, "sqrt(1/n)"),
    ("attention W_d d->f", "decoder.attention.0.W_d", d, "sqrt(1/n)"),
    ("context W_c f->d", "decoder.W_c.0", f, "sqrt(1/n)"),
    ("output W_o d->V", "decoder.W_o", d, "sqrt(p/n)"),
    ("token embedding w", "encoder.embed.token", None, "0.1"),
    ("position embedding p", "encoder.embed.position", None, "0.1"),
]

print(
    f"\n{'weight':24s} {'n_l':>5s} {'paper formula':>14s} {'expected':>9s} "
    f"{'paper init':>11s} {'seed init':>10s}"
)
measured = {}
for name, path, fan_in, formula in layers:
    if fan_in is None:
        expected = 0.1
    elif formula.startswith("sqrt(4p"):
        expected = math.sqrt(4 * p_keep / fan_in)
    elif formula.startswith("sqrt(1/"):  # no dropout on this layer's input
        expected = math.sqrt(1.0 / fan_in)
    else:
        expected = math.sqrt(p_keep / fan_in)
    w_paper = weight_of(paper_model, path)
    w_seed = weight_of(seed_model, path)
    if "token" in name:  # the PAD row is zero in both models
        w_paper, w_seed = w_paper[1:], w_seed[1:]
    measured[name] = (expected, w_paper.std().item(), w_seed.std().item())
    n_text = "" if fan_in is None else str(fan_in)
    print(
        f"{name:24s} {n_text:>5s} {formula:>14s} {expected:9.4f} "
        f"{measured[name][1]:11.4f} {measured[name][2]:10.4f}"
    )

# sphinx_gallery_start_ignore
for name, (expected, got_paper, _) in measured.items():
    rel = 0.08 if "W_o" in name else 0.05
    assert abs(got_paper / expected - 1) < rel, (name, expected, got_paper)
# the seed's linear/conv layers follow 1/sqrt(3 n)
for name, _path, fan_in, _ in layers:
    if fan_in is not None:
        seed_std = measured[name][2]
        assert abs(seed_std * math.sqrt(3 * fan_in) - 1) < 0.08, name
# sphinx_gallery_end_ignore

# %%
# Activation variance through the stacks at initialisation
# --------------------------------------------------------
# What the initialisation is for: the cell runs both untrained models on one
# batch of the sorting task and records, with forward hooks
# (:func:`~convs2s_edu.lab.figures.capture`), the variance of
# the activations after every stage of the encoder (embedding :math:`e`,
# projection to :math:`d`, the four blocks, projection back to :math:`z^u`)
# and of the decoder (embedding :math:`g`, projection, then for every layer the
# output of its convolutional block and the state after the attention context
# has been added). The models are in training mode, so that dropout is active:
# the factor :math:`p` of the initialisation is there to compensate for it.
# Only real tokens count, not padding.

batch = collate_batch(
    generate_dataset(64, 8, 20, seed_cfg.vocab_size, seed=0),
    seed_cfg.vocab_size,
)
n_layers = seed_cfg.n_encoder_layers
enc_stages = ["$e$", "in_proj"]
enc_stages += [f"block {i + 1}" for i in range(n_layers)] + ["$z^u$"]
dec_stages = ["$g$", "in_proj"]
for i in range(seed_cfg.n_decoder_layers):
    dec_stages += [f"conv {i + 1}", f"+ctx {i + 1}"]


def stage_variances(model):
    """Variance of the activations after every stage, encoder and decoder."""
    enc, dec = model.encoder, model.decoder
    # encoder: e, in_proj, every block, z (out_proj)
    enc_modules = [enc.embed, enc.in_proj, *enc.blocks, enc.out_proj]
    outputs = {"enc " + name: module for name, module in zip(enc_stages, enc_modules)}
    # decoder: g, in_proj, then per layer the block output and the state
    # after the context (= the input of the next block, or of the final
    # dropout before W_o)
    outputs |= {"dec $g$": dec.embed, "dec in_proj": dec.in_proj}
    outputs |= {f"dec conv {i + 1}": block for i, block in enumerate(dec.blocks)}
    after_context = [*dec.blocks[1:], dec.dropout]
    inputs = {f"dec +ctx {i + 1}": module for i, module in enumerate(after_context)}
    torch.manual_seed(1)  # the same dropout masks for both models
    model.train()
    with (
        torch.no_grad(),
        figures.capture(outputs) as seen_out,
        figures.capture(inputs, inputs=True) as seen_in,
    ):
        model(batch.src, batch.tgt_in)
    captured = {name: calls[-1] for name, calls in (seen_out | seen_in).items()}
    src_real, tgt_real = ~batch.src_padding_mask, ~batch.tgt_padding_mask
    enc_var = [captured["enc " + s][src_real].var().item() for s in enc_stages]
    dec_var = [captured["dec " + s][tgt_real].var().item() for s in dec_stages]
    return np.array(enc_var), np.array(dec_var)


variances = {
    "seed (PyTorch default init)": stage_variances(seed_model),
    "paper (ConvS2SConfig.paper())": stage_variances(paper_model),
}
for name, (enc_var, dec_var) in variances.items():
    print(name)
    print("  encoder:", " ".join(f"{v:.3g}" for v in enc_var))
    print("  decoder:", " ".join(f"{v:.3g}" for v in dec_var))
    print(
        f"  Var(z^u) / Var(e) = {enc_var[-1] / enc_var[0]:.3f}, "
        f"last decoder state / Var(g) = {dec_var[-1] / dec_var[0]:.3f}"
    )

# sphinx_gallery_start_ignore
seed_enc, _ = variances["seed (PyTorch default init)"]
paper_enc, paper_dec = variances["paper (ConvS2SConfig.paper())"]
# the paper's init keeps the encoder's variance within a factor 2 of Var(e);
# the seed's loses more than a factor 10 over the same stack
assert 0.5 < paper_enc[-1] / paper_enc[0] < 2
assert seed_enc[-1] / seed_enc[0] < 0.1
assert paper_dec[-1] / paper_dec[0] < 4
# sphinx_gallery_end_ignore

# %%
# The figure divides every variance by that of the stack's own embeddings,
# :math:`\mathrm{Var}(e)` or :math:`\mathrm{Var}(g)`: the two initialisations
# start from embeddings of very different scale (standard deviation 1 against
# 0.1 per table), and what matters is whether the stack preserves the scale it
# is given. A flat line at 1 is a stack that neither amplifies nor damps.
#
# * Encoder: with the paper's initialisation the variance stays close to that
#   of the embeddings from the first stage to :math:`z^u`. With PyTorch's
#   default the projection already loses about two thirds of it (uniform
#   weights of standard deviation :math:`1/\sqrt{3 n_l}` give a variance
#   :math:`1/3` per layer) and every block about half, since the GLU output is
#   much smaller than the residual it is added to and :math:`\sqrt{0.5}`
#   halves the sum.
# * Decoder: in the seed's model every convolutional block shrinks the state
#   in the same way, but every layer also adds a context computed from the
#   source embeddings, which keeps the state from decaying further: the curve
#   zigzags down and levels off instead of falling like the encoder's. With the
#   paper's initialisation the blocks preserve the variance and each context
#   adds a little (its values :math:`z^u_j + e_j` sum two terms of about the
#   embeddings' variance), so the state grows slowly and stays of the order
#   of the embedding variance.
#
# With four layers per side the seed's model trains anyway (Adam rescales the
# updates, and the network can grow its weights); the paper's stacks are up to
# five times deeper, where a loss of half the variance per block would leave
# almost nothing of the input.

fig, axes = plt.subplots(1, 2, figsize=(12, 4), layout="constrained", width_ratios=[7, 10])
styles = {
    "seed (PyTorch default init)": ("tab:gray", "s--"),
    "paper (ConvS2SConfig.paper())": ("tab:blue", "o-"),
}
for name, (enc_var, dec_var) in variances.items():
    colour, style = styles[name]
    axes[0].semilogy(enc_var / enc_var[0], style, color=colour, label=name)
    axes[1].semilogy(dec_var / dec_var[0], style, color=colour, label=name)
for ax, stages, title in (
    (axes[0], enc_stages, "Encoder"),
    (axes[1], dec_stages, "Decoder"),
):
    ax.axhline(1.0, color="k", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(stages)), stages, rotation=45, ha="right")
    ax.set_title(f"{title}: activation variance at initialisation")
    ax.grid(axis="y", which="both", alpha=0.3)
axes[0].set_ylabel("Var(stage) / Var(embeddings)")
axes[0].legend(fontsize=9, loc="lower left")
plt.show()

# %%
# What you saw
# ------------
# * A weight-normalised layer stores a length :math:`g_o` and a direction
#   :math:`v_o` per output unit and rebuilds :math:`W_o = g_o v_o/\lVert v_o
#   \rVert` at every use; at initialisation :math:`g_o = \lVert v_o \rVert`, so
#   :math:`W` starts as :math:`v`.
# * The paper draws every weight from a normal distribution whose standard
#   deviation depends on the fan-in :math:`n_l`, on the dropout in front of the
#   layer (the retain probability :math:`p`) and, for the convolutions, on the
#   GLU after them (the factor 4); the measured standard deviations of a fresh
#   model match the formulas.
# * With this initialisation the encoder passes on activations of about the
#   variance of its embeddings; with PyTorch's default every stage loses some,
#   and the losses compound with depth.
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
#
# **2. The paper's numbers.** What standard deviation does the paper prescribe
# for the convolution of a block with :math:`k = 3`, :math:`d = 128`, with
# dropout 0.1 in front of it, and without dropout? Which of the two is larger?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`\sqrt{4p/(kd)}` with :math:`p = 0.9`, and with :math:`p = 1`. The
# value with dropout is the smaller one, by a factor :math:`\sqrt{0.9}`:
# dropout scales the kept inputs by :math:`1/p` and so raises the variance of
# the layer's input, which smaller weights make up for. The cell computes both
# from the formula and measures the weights of freshly built blocks.

k_ex, d_ex = 3, 128
for drop in (0.1, 0.0):
    p_ex = 1.0 - drop  # retain probability
    formula_std = math.sqrt(4 * p_ex / (k_ex * d_ex))
    torch.manual_seed(0)
    fresh = ConvBlock(d_ex, k_ex, dropout=drop, weight_norm=True)
    measured_std = fresh.conv.weight.detach().std().item()
    print(
        f"dropout {drop}: p = {p_ex:.1f}, sqrt(4p/(kd)) = {formula_std:.4f}, "
        f"measured {measured_std:.4f}"
    )
    # sphinx_gallery_start_ignore
    assert abs(measured_std / formula_std - 1) < 0.02
    # sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
#
# **3. Without the** :math:`\sqrt{0.5}`. Stack 20 paper-initialised blocks
# (the paper's deepest encoder) and leave out the :math:`\sqrt{0.5}` of the
# residual sum, :math:`h^l = v + h^{l-1}`. Roughly how fast does the variance
# of the activations grow with depth, with and without the scale?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Without the scale, every block adds the GLU output :math:`v` to its input,
# and the two are roughly independent, so the variances add: at least a
# doubling per block, and more here, because the paper-initialised GLU output
# has more variance than its input (see
# :ref:`the GLU block page <sphx_glr_auto_examples_plot_02_glu_block.py>`).
# Growth by a constant factor per block is exponential growth: after 20
# blocks the activations are many orders of magnitude larger than the
# embeddings. The :math:`\sqrt{0.5}` halves the variance of every sum, so the
# scaled stack grows by a factor about 2 smaller per block; with 20 blocks
# that is a factor of about :math:`2^{20}` between the two. The cell prints
# the variance ratio after 4, 10 and 20 blocks, the growth factor per block of
# both sums, and how far apart they end.

import torch.nn.functional as F

torch.manual_seed(1)
deep = [ConvBlock(128, 3, weight_norm=True).eval() for _ in range(20)]
x0 = torch.randn(4, 32, 128)  # (B, T, d), unit variance
ratios = {"with sqrt(0.5)": [], "without": []}
with torch.no_grad():
    h_scaled, h_plain = x0, x0
    for blk in deep:
        h_scaled = blk(h_scaled)  # sqrt(0.5) (v + h)
        pre = F.pad(h_plain.transpose(1, 2), blk.padding)  # (B, d, T + k - 1)
        h_plain = F.glu(blk.conv(pre), dim=1).transpose(1, 2) + h_plain  # v + h
        ratios["with sqrt(0.5)"].append((h_scaled.var() / x0.var()).item())
        ratios["without"].append((h_plain.var() / x0.var()).item())
for name, r in ratios.items():
    per_block = r[-1] ** (1 / len(r))
    print(
        f"{name:15s} Var(h^l)/Var(h^0): l=4 {r[3]:.3g}, l=10 {r[9]:.3g}, "
        f"l=20 {r[19]:.3g}; about x{per_block:.2f} per block"
    )
gap = ratios["without"][-1] / ratios["with sqrt(0.5)"][-1]
print(f"without / with after 20 blocks: {gap:.3g} (2^20 = {2**20:.3g})")

# sphinx_gallery_start_ignore
assert ratios["without"][-1] > 2.0**20
per_scaled = ratios["with sqrt(0.5)"][-1] ** (1 / 20)
per_plain = ratios["without"][-1] ** (1 / 20)
assert 1.5 < per_plain / per_scaled < 3  # about a factor 2 per block
assert 2.0**15 < gap < 2.0**25
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
