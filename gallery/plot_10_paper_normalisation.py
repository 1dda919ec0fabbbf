r"""
The paper's normalisation and initialisation (§3.4-3.5)
=======================================================

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
``scale_context``). This page shows what each one does, on untrained models,
with numbers the page computes: the weight-normalised parametrisation of a
:class:`~convs2s_edu.ConvBlock`, the standard deviations of the initial
weights, the variance of the activations layer by layer, the gradient that
reaches the encoder and the variance of the attention context. It then
shows the way :class:`~convs2s_edu.ConvDecoder` adds the context to the
decoder state, one of the places where the code is more specific than the
paper, and ends with a short training run of the seed's configuration against
the paper's.
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
    EncoderOut,
    MultiStepAttention,
    collate_batch,
    generate_dataset,
)
from convs2s_edu.train import TrainConfig, is_quick_mode, sequence_loss, train

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
print(
    f"f = {f}, d = {d}, k = {k}, dropout = {paper_cfg.dropout} "
    f"-> p = {p_keep:.2f}"
)


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
for name, path, fan_in, _ in layers:
    if fan_in is not None:
        seed_std = measured[name][2]
        assert abs(seed_std * math.sqrt(3 * fan_in) - 1) < 0.08, name
# sphinx_gallery_end_ignore

# %%
# Activation variance through the stacks at initialisation
# --------------------------------------------------------
# What the initialisation is for: the cell runs both untrained models on one
# batch of the sorting task and records, with forward hooks, the variance of
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
    captured, hooks = {}, []

    def keep_output(name):
        def hook(module, inputs, output):
            captured[name] = output.detach()

        return hook

    def keep_input(name):
        def hook(module, inputs):
            captured[name] = inputs[0].detach()

        return hook

    # encoder: e, in_proj, every block, z (out_proj)
    enc_modules = [enc.embed, enc.in_proj, *enc.blocks, enc.out_proj]
    for name, module in zip(enc_stages, enc_modules):
        hooks.append(module.register_forward_hook(keep_output("enc " + name)))
    # decoder: g, in_proj, then per layer the block output and the state
    # after the context (= the input of the next block, or of the final
    # dropout before W_o)
    hooks.append(dec.embed.register_forward_hook(keep_output("dec $g$")))
    hooks.append(dec.in_proj.register_forward_hook(keep_output("dec in_proj")))
    after_context = [*dec.blocks[1:], dec.dropout]
    for i, block in enumerate(dec.blocks):
        hooks.append(
            block.register_forward_hook(keep_output(f"dec conv {i + 1}"))
        )
        hooks.append(
            after_context[i].register_forward_pre_hook(
                keep_input(f"dec +ctx {i + 1}")
            )
        )
    torch.manual_seed(1)  # the same dropout masks for both models
    model.train()
    with torch.no_grad():
        model(batch.src, batch.tgt_in)
    for hook in hooks:
        hook.remove()
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

fig, axes = plt.subplots(
    1, 2, figsize=(12, 4), layout="constrained", width_ratios=[7, 10]
)
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
# Encoder gradient scaling (§3.4)
# -------------------------------
# Every one of the :math:`L` decoder layers has its own attention, and every
# attention reads the same encoder output :math:`z^u`: in the backward pass,
# :math:`L` gradients add up in :math:`z^u` and flow on into the encoder. The
# paper scales the gradients of the encoder layers by the number of attention
# mechanisms:
#
# .. math::
#
#     \frac{\partial \mathcal{L}}{\partial z^u} \leftarrow
#     \frac{1}{L}\,\frac{\partial \mathcal{L}}{\partial z^u}
#
# :func:`~convs2s_edu.scale_gradient` is the identity in the forward pass and
# multiplies the gradient by :math:`1/L` in the backward pass;
# :class:`~convs2s_edu.ConvEncoder` applies it to :math:`z^u` when
# ``scale_encoder_grad`` is on. (fairseq's implementation divides by
# :math:`2L`; this package follows the paper's wording.)
#
# The cell builds two models that differ only in that flag, gives them the
# same weights with ``load_state_dict``, and computes the loss and its
# gradient on the same batch (evaluation mode, so no dropout).

torch.manual_seed(0)
off_cfg = ConvS2SConfig.paper(scale_encoder_grad=False)
grad_off = ConvS2S(off_cfg).eval()
grad_on = ConvS2S(off_cfg.replace(scale_encoder_grad=True)).eval()
grad_on.load_state_dict(grad_off.state_dict())

logits = {}
for name, model in (("off", grad_off), ("on", grad_on)):
    out = model(batch.src, batch.tgt_in)
    sequence_loss(out, batch.tgt_out).backward()
    logits[name] = out.detach()
print(
    "forward pass: max |logits(on) - logits(off)| = "
    f"{(logits['on'] - logits['off']).abs().max():.1e}"
)


def grad_norm(model, prefix):
    """Norm of the gradient of all parameters whose name starts with prefix."""
    grads = [
        p.grad.flatten()
        for name, p in model.named_parameters()
        if name.startswith(prefix)
    ]
    return torch.cat(grads).norm().item()


L = off_cfg.n_decoder_layers
groups = [
    ("encoder.in_proj", "encoder in_proj"),
    ("encoder.blocks", "encoder blocks"),
    ("encoder.out_proj", "encoder out_proj"),
    ("encoder.embed", "encoder embeddings"),
    ("decoder", "decoder (all)"),
]
print(f"\nL = {L} decoder layers, 1/L = {1 / L:.4f}")
print(
    f"{'parameters':20s} {'|grad| off':>11s} {'|grad| on':>11s} "
    f"{'on / off':>9s}"
)
ratios = {}
for prefix, label in groups:
    n_off, n_on = grad_norm(grad_off, prefix), grad_norm(grad_on, prefix)
    ratios[label] = n_on / n_off
    print(f"{label:20s} {n_off:11.3e} {n_on:11.3e} {ratios[label]:9.4f}")

# sphinx_gallery_start_ignore
assert torch.equal(logits["on"], logits["off"])
for label in ("encoder in_proj", "encoder blocks", "encoder out_proj"):
    assert abs(ratios[label] - 1 / L) < 1e-5, (label, ratios[label])
assert abs(ratios["decoder (all)"] - 1) < 1e-6
assert 1 / L + 1e-3 < ratios["encoder embeddings"] < 1
# sphinx_gallery_end_ignore

# %%
# The logits are identical, and every layer between the embeddings and
# :math:`z^u` receives exactly :math:`1/L` of its former gradient; the
# decoder's gradients are untouched. The embedding tables of the encoder land
# in between: they reach the loss along two paths, through the encoder's
# layers (scaled) and directly, as the :math:`e_j` in the attention values
# :math:`z^u_j + e_j` (not scaled).
#
# The context scaling :math:`m\sqrt{1/m}` (§3.4)
# ----------------------------------------------
# The conditional input of a decoder layer is a weighted average of :math:`m`
# value vectors, :math:`c_i = \sum_j a_{ij} (z^u_j + e_j)`. If the values are
# independent with variance :math:`\sigma^2` and the attention is uniform,
# :math:`a_{ij} = 1/m`, the average has variance :math:`\sigma^2 / m`: the
# longer the source, the weaker the context. The paper multiplies it by
# :math:`m\sqrt{1/m} = \sqrt{m}`, which restores :math:`\sigma^2`, "assuming
# the attention scores are uniformly distributed":
#
# .. math:: c^l_i \leftarrow m \sqrt{1/m}\; c^l_i, \qquad m \text{ the number of real source tokens.}
#
# The experiment feeds one :class:`~convs2s_edu.MultiStepAttention` (seed
# sizes, with and without ``scale_context``, same weights) a batch of random
# sources of every length :math:`m` from 1 to 30, padded to 30, whose values
# have unit variance. Two kinds of keys give two kinds of attention:
#
# * small keys: all scores :math:`d_i \cdot z_j` near zero, so the attention is
#   nearly uniform, the case the scaling is designed for;
# * large keys: scores of a large spread, so every query attends to nearly one
#   position, as a trained model often does.

M, REPS, T_q = 30, 48, 4
lengths = torch.arange(1, M + 1).repeat_interleave(REPS)  # (B,)
B = len(lengths)
pad_mask = torch.arange(M)[None, :] >= lengths[:, None]  # (B, M)
gen = torch.Generator().manual_seed(0)
values = torch.randn(B, M, f, generator=gen)  # z + e, unit variance
keys = torch.randn(B, M, f, generator=gen)
h_q = torch.randn(B, T_q, d, generator=gen)
g_q = torch.randn(B, T_q, f, generator=gen)

torch.manual_seed(0)
att_plain = MultiStepAttention(d, f, scale_context=False)
att_scaled = MultiStepAttention(d, f, scale_context=True)
att_scaled.load_state_dict(att_plain.state_dict())

context_var, peak = {}, {}
with torch.no_grad():
    for kind, key_scale in (("near-uniform", 0.01), ("peaked", 1.0)):
        enc_q = EncoderOut(
            z=keys * key_scale, z_plus_e=values, padding_mask=pad_mask
        )
        for scaled, att in ((False, att_plain), (True, att_scaled)):
            c, a = att(h_q, g_q, enc_q)  # (B, T, f), (B, T, S)
            per_m = [c[lengths == m].var().item() for m in range(1, M + 1)]
            context_var[kind, scaled] = np.array(per_m)
        peak[kind] = a.max(dim=-1).values[lengths == M].mean().item()

m_axis = np.arange(1, M + 1)
print(
    f"mean largest attention weight at m = {M}: "
    f"near-uniform {peak['near-uniform']:.3f} (1/m = {1 / M:.3f}), "
    f"peaked {peak['peaked']:.3f}"
)
for (kind, scaled), var in context_var.items():
    label = f"{kind}, {'scaled' if scaled else 'not scaled'}"
    print(
        f"{label:28s} Var(c): m=1 {var[0]:.3f}, m=10 {var[9]:.3f}, "
        f"m={M} {var[-1]:.3f}"
    )

# sphinx_gallery_start_ignore
u_plain = context_var["near-uniform", False]
u_scaled = context_var["near-uniform", True]
p_scaled = context_var["peaked", True]
assert np.allclose(u_plain * m_axis, 1, atol=0.15)  # ~1/m
assert np.allclose(u_scaled, 1, atol=0.15)  # ~1
assert p_scaled[-1] > 0.5 * M  # ~m when attention is one-hot
# sphinx_gallery_end_ignore

# %%
# The figure plots the variance of the context against the source length, on
# log-log axes, with the two reference curves :math:`1/m` and :math:`1`.
# Under near-uniform attention the unscaled context follows :math:`1/m` and
# the scaled one stays at the variance of a single value, as the paper's
# argument says. Under peaked attention the context is close to a single
# value already, so the unscaled variance stays near 1 and the scaling
# *inflates* it to about :math:`m`: the correction is right only as long as
# the attention is spread out, which is the case at initialisation, when the
# scaling matters most.

fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
curve_styles = {
    ("near-uniform", False): ("tab:blue", "--", "near-uniform, not scaled"),
    ("near-uniform", True): (
        "tab:blue",
        "-",
        r"near-uniform, scaled by $m\sqrt{1/m}$",
    ),
    ("peaked", False): ("tab:orange", "--", "peaked, not scaled"),
    ("peaked", True): ("tab:orange", "-", r"peaked, scaled by $m\sqrt{1/m}$"),
}
for key, var in context_var.items():
    colour, ls, label = curve_styles[key]
    ax.loglog(m_axis, var, ls, color=colour, label=label, linewidth=2)
ax.loglog(m_axis, 1 / m_axis, ":", color="k", label="$1/m$")
ax.axhline(1.0, color="k", linewidth=0.8, linestyle=(0, (1, 3)))
ax.set_xlabel("source length $m$ (real tokens)")
ax.set_ylabel("Var($c_i$)")
ax.set_title("Variance of the attention context, values of unit variance")
ax.legend(fontsize=8)
plt.show()

# %%
# The same effect inside the model: the first decoder layer's context in the
# paper's model, with the batch of the sorting task above (sources of 8 to 20
# tokens), measured with and without ``scale_context`` on the same weights.
# At initialisation the model's attention is close to uniform, so the ratio
# of the two variances should be close to the factor :math:`m` of the
# argument above; the cell prints it next to the mean source length.

no_ctx = ConvS2S(paper_cfg.replace(scale_context=False)).eval()
no_ctx.load_state_dict(paper_model.state_dict())
paper_model.eval()


def first_context(model):
    """c^1_i of the first decoder layer, real target positions only."""
    captured = {}
    hook = model.decoder.attention[0].register_forward_hook(
        lambda module, inputs, output: captured.update(c=output[0])
    )
    with torch.no_grad():
        model(batch.src, batch.tgt_in)
    hook.remove()
    return captured["c"][~batch.tgt_padding_mask]


var_scaled = first_context(paper_model).var().item()
var_plain = first_context(no_ctx).var().item()
m_mean = batch.src_lengths.float().mean().item()
print(f"mean source length m = {m_mean:.1f}")
print(f"Var(c^1) with scale_context   : {var_scaled:.4f}")
print(f"Var(c^1) without scale_context: {var_plain:.4f}")
print(f"ratio: {var_scaled / var_plain:.1f}")

# sphinx_gallery_start_ignore
assert 0.5 * batch.src_lengths.min() < var_scaled / var_plain
assert var_scaled / var_plain < 1.5 * batch.src_lengths.max()
# sphinx_gallery_end_ignore

# %%
# Adding the context to the decoder state (§3.3, a departure)
# -----------------------------------------------------------
# The paper adds the conditional input to the state of the decoder layer,
# :math:`h^l_i + c^l_i`. In this package the context :math:`c^l_i` has the
# embedding size :math:`f` and the state :math:`h^l_i` the convolution size
# :math:`d`, so :class:`~convs2s_edu.ConvDecoder` maps the context with a
# linear layer :math:`W^l_c` (``decoder.W_c[l]``, :math:`f \to d`) and scales
# the sum by :math:`\sqrt{0.5}`, like every residual sum, as fairseq does:
#
# .. math:: h^l_i \leftarrow \sqrt{0.5}\,\big(h^l_i + W^l_c c^l_i\big)
#
# :ref:`departures` explains why. The cell computes the first decoder layer of
# the paper's model by hand, from its block, its attention and
# :math:`W^1_c`, and compares the result with what the model passes to its
# second block.

dec = paper_model.decoder
with torch.no_grad():
    enc_out = paper_model.encode(batch.src)
    g_emb = dec.embed(batch.tgt_in)  # (B, T, f)
    h1 = dec.blocks[0](dec.in_proj(g_emb))  # (B, T, d)
    c1, _ = dec.attention[0](h1, g_emb, enc_out)  # (B, T, f)
    Wc_c1 = dec.W_c[0](c1)  # (B, T, d)
    h1_new = math.sqrt(0.5) * (h1 + Wc_c1)

captured = {}
hook = dec.blocks[1].register_forward_pre_hook(
    lambda module, inputs: captured.update(x=inputs[0])
)
with torch.no_grad():
    paper_model(batch.src, batch.tgt_in)
hook.remove()

real = ~batch.tgt_padding_mask
print("h^1      :", tuple(h1.shape), " (B, T, d)")
print("c^1      :", tuple(c1.shape), " (B, T, f)")
print("W_c^1    :", tuple(dec.W_c[0].weight.shape), " (d, f)")
print(
    "max |by hand - model's input to block 2| = "
    f"{(h1_new - captured['x']).abs().max():.1e}"
)
var_h, var_c = h1[real].var().item(), Wc_c1[real].var().item()
print(
    f"Var(h^1) = {var_h:.4f}, Var(W_c c^1) = {var_c:.4f}, "
    f"their mean = {(var_h + var_c) / 2:.4f}, "
    f"Var(new h^1) = {h1_new[real].var().item():.4f}"
)

# sphinx_gallery_start_ignore
assert torch.allclose(h1_new, captured["x"], atol=1e-6)
assert abs(h1_new[real].var().item() / ((var_h + var_c) / 2) - 1) < 0.2
# sphinx_gallery_end_ignore

# %%
# The variance of the new state is close to the mean of the two variances:
# :math:`\sqrt{0.5}` turns the sum of two roughly independent terms into
# something of the same scale as its parts, the argument of §3.4 for the
# residual sums, applied here to the context as well.

# %%
# A short training run: the seed's configuration against the paper's
# -------------------------------------------------------------------
# Do the three flags change training on the sorting task? A full answer takes
# several seeds and the full schedule; this cell gives a first look at a
# scale that runs in seconds: both configurations trained on the same few
# hundred examples, in the same small batches, with the same optimiser (Adam,
# learning rate :math:`10^{-3}`, gradient clipping) and the same seed, for a
# few epochs (fewer in quick mode); the cell prints the sizes.
# :class:`~convs2s_edu.train.TrainConfig` switches all three flags with
# ``paper_normalisation`` (the printout shows the flags each model got). One
# run per configuration is an anecdote, not a measurement of the difference:
# read the curves as an illustration of what the three flags change early in
# training.

short = TrainConfig(
    n_train=640,
    n_valid=200,
    n_test=1,
    batch_size=16,
    epochs=2 if is_quick_mode() else 8,
    seed=0,
)
runs = {
    "seed": train(short.replace(paper_normalisation=False), progress=False),
    "paper": train(short.replace(paper_normalisation=True), progress=False),
}
for name, result in runs.items():
    flags = {k: getattr(result.model.cfg, k)
             for k in ("weight_norm", "scale_encoder_grad", "scale_context")}
    print(f"{name:6s}: {flags}")

print(
    f"{short.n_train} training examples, {short.n_valid} held out, "
    f"batches of {short.batch_size}, {short.epochs} epochs"
)
print(
    f"{'config':8s} {'epoch':>5s} {'train loss':>11s} {'valid loss':>11s} "
    f"{'s/epoch':>8s}"
)
for name, result in runs.items():
    for row in result.history.epochs:
        print(
            f"{name:8s} {row['epoch']:5d} {row['train_loss']:11.3f} "
            f"{row['valid_loss']:11.3f} {row['seconds']:8.2f}"
        )
final = {name: r.history.epochs[-1]["valid_loss"] for name, r in runs.items()}
better = "lower" if final["paper"] < final["seed"] else "higher"
print(
    f"after {short.epochs} epochs the paper's configuration has the {better} "
    f"validation loss ({final['paper']:.3f} against {final['seed']:.3f})"
)

# sphinx_gallery_start_ignore
assert runs["paper"].model.cfg.weight_norm and not runs["seed"].model.cfg.weight_norm
assert final["paper"] != final["seed"]  # two different models, two different curves
for result in runs.values():
    assert all(np.isfinite(result.history.step_losses))
    # both learn something: below the loss of a uniform guess over 53 ids
    assert result.history.epochs[-1]["valid_loss"] < math.log(53)
# sphinx_gallery_end_ignore

# %%
# The thin lines are the training loss of every batch (dropout on), the
# markers the loss on the held-out examples after every epoch (dropout off),
# both against epochs. The models start from the same data order and differ
# only in the three flags. The printout above says which configuration ended
# lower on this run;
# :ref:`the training page <sphx_glr_auto_examples_plot_05_training.py>`
# trains the paper's ConvS2S against the GRU over the full schedule, and
# ``convs2s-edu compare --seed-convs2s`` does the same with the seed's ConvS2S.

fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
colours = {"seed": "tab:gray", "paper": "tab:blue"}
labels = {
    "seed": "seed (ConvS2SConfig())",
    "paper": "paper (ConvS2SConfig.paper())",
}
for name, result in runs.items():
    steps = np.array(result.history.step_losses)
    x = np.arange(1, len(steps) + 1) / (len(steps) / short.epochs)
    ax.plot(x, steps, color=colours[name], alpha=0.45, linewidth=1)
    epochs = result.history.column("epoch")
    ax.plot(
        epochs,
        result.history.column("valid_loss"),
        "o-",
        color=colours[name],
        label=f"{labels[name]}, held-out",
        linewidth=2,
    )
ax.set_xlabel("epoch")
ax.set_ylabel("cross-entropy per token")
ax.set_title("Training loss (thin) and held-out loss (markers)")
ax.legend(fontsize=9)
plt.show()
