r"""
The paper's gradient and context scaling (§3.3-3.4)
===================================================

The :ref:`previous page <sphx_glr_auto_examples_plot_10_paper_normalisation.py>`
showed the first of the three flags of
:meth:`ConvS2SConfig.paper() <convs2s_edu.ConvS2SConfig.paper>`, weight
normalisation with the paper's initialisation. This page shows the other two,
on untrained models and with numbers the page computes: **encoder gradient
scaling** by the number of attention mechanisms (the gradient that reaches
the encoder) and **context scaling** by :math:`m\sqrt{1/m}` (the variance of
the attention context). It then shows the way
:class:`~convs2s_edu.ConvDecoder` adds the context to the decoder state, one
of the places where the code is more specific than the paper, and ends with a
short training run of the seed's configuration against the paper's.
"""

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import (
    ConvS2S,
    ConvS2SConfig,
    MultiStepAttention,
    TrainConfig,
    collate_batch,
    generate_dataset,
    sequence_loss,
    train_or_load,
)
from convs2s_edu.convs2s import ConvMemory
from convs2s_edu.lab import figures
from convs2s_edu.lab.site import is_quick_mode

# %%
# The models and the batch
# ------------------------
# The seed's configuration and the paper's (all three flags on), at the seed's
# sizes, and a batch of 64 sorting examples of 8 to 20 tokens.

seed_cfg = ConvS2SConfig()  # the seed: no normalisation tricks
paper_cfg = ConvS2SConfig.paper()  # all three flags on
torch.manual_seed(0)
paper_model = ConvS2S(paper_cfg)
f, d = paper_cfg.embed_dim, paper_cfg.hidden_dim
batch = collate_batch(
    generate_dataset(64, 8, 20, seed_cfg.vocab_size, seed=0),
    seed_cfg.vocab_size,
)
print(f"f = {f}, d = {d}, batch of {batch.src.shape[0]} sources")

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
# :class:`~convs2s_edu.ConvDecoder`, where the :math:`L` attentions are, applies
# it to the :math:`z^u` it receives when ``scale_encoder_grad`` is on.
# (fairseq's implementation divides by
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
    grads = [p.grad.flatten() for name, p in model.named_parameters() if name.startswith(prefix)]
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
print(f"{'parameters':20s} {'|grad| off':>11s} {'|grad| on':>11s} {'on / off':>9s}")
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
# .. math::
#
#     c^l_i \leftarrow m \sqrt{1/m}\; c^l_i, \qquad m \text{ the number of real source tokens.}
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
        enc_q = ConvMemory(z=keys * key_scale, z_plus_e=values, padding_mask=pad_mask)
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
    print(f"{label:28s} Var(c): m=1 {var[0]:.3f}, m=10 {var[9]:.3f}, m={M} {var[-1]:.3f}")

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
    with torch.no_grad(), figures.capture({"attention": model.decoder.attention[0]}) as seen:
        model(batch.src, batch.tgt_in)
    c, _ = seen["attention"][0]  # the attention returns (context, weights)
    return c[~batch.tgt_padding_mask]


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
    enc_out = dec.memory(paper_model.encode(batch.src))  # keys z, values z + e
    g_emb = dec.embed(batch.tgt_in)  # (B, T, f)
    h1 = dec.blocks[0](dec.in_proj(g_emb))  # (B, T, d)
    c1, _ = dec.attention[0](h1, g_emb, enc_out)  # (B, T, f)
    Wc_c1 = dec.W_c[0](c1)  # (B, T, d)
    h1_new = math.sqrt(0.5) * (h1 + Wc_c1)

with torch.no_grad(), figures.capture({"x": dec.blocks[1]}, inputs=True) as captured:
    paper_model(batch.src, batch.tgt_in)

real = ~batch.tgt_padding_mask
print("h^1      :", tuple(h1.shape), " (B, T, d)")
print("c^1      :", tuple(c1.shape), " (B, T, f)")
print("W_c^1    :", tuple(dec.W_c[0].weight.shape), " (d, f)")
print(f"max |by hand - model's input to block 2| = {(h1_new - captured['x'][0]).abs().max():.1e}")
var_h, var_c = h1[real].var().item(), Wc_c1[real].var().item()
print(
    f"Var(h^1) = {var_h:.4f}, Var(W_c c^1) = {var_c:.4f}, "
    f"their mean = {(var_h + var_c) / 2:.4f}, "
    f"Var(new h^1) = {h1_new[real].var().item():.4f}"
)

# sphinx_gallery_start_ignore
assert torch.allclose(h1_new, captured["x"][0], atol=1e-6)
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
# :class:`~convs2s_edu.TrainConfig` switches all three flags with
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
    "seed": train_or_load(short.replace(paper_normalisation=False), progress=False),
    "paper": train_or_load(short.replace(paper_normalisation=True), progress=False),
}
for name, result in runs.items():
    flags = {
        k: getattr(result.model.cfg, k)
        for k in ("weight_norm", "scale_encoder_grad", "scale_context")
    }
    print(f"{name:6s}: {flags}")

print(
    f"{short.n_train} training examples, {short.n_valid} held out, "
    f"batches of {short.batch_size}, {short.epochs} epochs"
)
print(f"{'config':8s} {'epoch':>5s} {'train loss':>11s} {'valid loss':>11s} {'s/epoch':>8s}")
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

# %%
# What you saw
# ------------
# * :func:`~convs2s_edu.scale_gradient` leaves the forward pass alone and
#   multiplies the gradient by :math:`1/L` on its way back: the logits of the
#   two models were identical, and every encoder layer received exactly
#   :math:`1/L` of its former gradient.
# * A uniform average of :math:`m` independent values has :math:`1/m` of
#   their variance; multiplying the context by :math:`m\sqrt{1/m}` restores it
#   while the attention is spread out, and inflates it when the attention
#   picks one position.
# * The package maps the context to the decoder's size with :math:`W^l_c` and
#   scales the sum with the state by :math:`\sqrt{0.5}`, a departure from the
#   paper's plain :math:`h^l_i + c^l_i`.
#
# Try it
# ------
# Predict first, then unfold the solution; code solutions run when the site
# is built.
#
# **1. Four attentions.** The seed's decoder has 4 layers, so 4 attentions
# read :math:`z^u`. By what factor does ``scale_encoder_grad`` multiply the
# gradient that reaches the encoder, and what is the gradient of :math:`z^u`
# when each of the 4 attentions sends back a gradient of ones?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# By :math:`1/L = 1/4`. Without scaling the 4 gradients add up to 4 in every
# entry; with it they add up to 1, the gradient of a single attention. The
# cell feeds one tensor through :func:`~convs2s_edu.scale_gradient` and uses
# the result 4 times, once per attention.

from convs2s_edu import scale_gradient

L_seed = seed_cfg.n_decoder_layers
for factor in (1.0, 1.0 / L_seed):
    z_u = torch.zeros(3, requires_grad=True)
    z_seen = scale_gradient(z_u, factor)  # what the L attentions read
    total = sum(z_seen.sum() for _ in range(L_seed))  # L uses, gradient 1 each
    total.backward()
    print(f"L = {L_seed}, factor {factor:.4f}: dL/dz^u = {z_u.grad.tolist()}")

# sphinx_gallery_start_ignore
assert L_seed == 4
assert torch.allclose(z_u.grad, torch.ones(3))
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
#
# **2. Nine source tokens.** What is :math:`m\sqrt{1/m}` for :math:`m = 9`,
# and why is that the right factor under uniform attention?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`m\sqrt{1/m} = \sqrt{m}`, so :math:`\sqrt{9} = 3`. Uniform attention
# averages 9 independent values of variance 1: the average has variance
# :math:`1/9`, standard deviation :math:`1/3`, and multiplying by 3 brings the
# standard deviation back to 1. The cell checks this on 9 unit-variance
# vectors drawn at random, and prints the page's own measurement at
# :math:`m = 9` (near-uniform attention, scaled).

m9 = 9
print(f"m sqrt(1/m) = {m9 * math.sqrt(1 / m9):.4f}, sqrt(m) = {math.sqrt(m9):.4f}")
gen9 = torch.Generator().manual_seed(9)
vals9 = torch.randn(20000, m9, f, generator=gen9)  # m unit-variance values
avg9 = vals9.mean(dim=1)  # uniform attention: a_j = 1/m
print(f"Var(uniform average)         = {avg9.var():.4f} (1/m = {1 / m9:.4f})")
print(f"Var(m sqrt(1/m) x average)   = {(m9 * math.sqrt(1 / m9) * avg9).var():.4f}")
print(f"page's experiment, m = 9     = {context_var['near-uniform', True][m9 - 1]:.4f}")

# sphinx_gallery_start_ignore
assert abs(m9 * math.sqrt(1 / m9) - 3) < 1e-12
assert abs(avg9.var().item() * m9 - 1) < 0.05
assert abs(context_var["near-uniform", True][m9 - 1] - 1) < 0.2
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
#
# **3. Adam and the gradient scaling.** The short run above trains with Adam.
# Take the two models of the gradient-scaling section (same weights, with and
# without ``scale_encoder_grad``) and make one optimiser step from the same
# batch. How do the steps of the encoder's blocks compare, with Adam and with
# plain SGD?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# With SGD the step is the learning rate times the gradient, so the scaled
# model moves its encoder blocks :math:`1/L` as far. Adam divides every
# gradient by a running estimate of its own size, so a constant factor on a
# parameter's gradient cancels: the two steps are the same, up to Adam's
# :math:`\epsilon`. That is why the paper's gradient scaling, designed with
# SGD (Nesterov's momentum) in mind, changes little in the page's Adam run
# (a little only: the embeddings get a mix of scaled and unscaled gradient,
# and gradient clipping rescales all gradients by a common factor that
# differs between the two models). In an Adam run this flag alone should
# change little; the other two flags change the forward pass itself. The
# cell uses the learning rate of the page's run for both optimisers.


def encoder_step(model, optimiser_class, lr):
    """Norm of one optimiser step of the encoder blocks, from a copy of model."""
    twin = ConvS2S(model.cfg).eval()
    twin.load_state_dict(model.state_dict())
    before = torch.cat([p.detach().flatten() for p in twin.encoder.blocks.parameters()])
    optimiser = optimiser_class(twin.parameters(), lr=lr)
    sequence_loss(twin(batch.src, batch.tgt_in), batch.tgt_out).backward()
    optimiser.step()
    after = torch.cat([p.detach().flatten() for p in twin.encoder.blocks.parameters()])
    return (after - before).norm().item()


steps = {}
for opt_name, opt_class in (("SGD", torch.optim.SGD), ("Adam", torch.optim.Adam)):
    step_off = encoder_step(grad_off, opt_class, short.lr)
    step_on = encoder_step(grad_on, opt_class, short.lr)
    steps[opt_name] = step_on / step_off
    print(
        f"{opt_name:4s}: |step| off {step_off:.3e}, on {step_on:.3e}, "
        f"on / off = {steps[opt_name]:.4f} (1/L = {1 / L:.4f})"
    )

# sphinx_gallery_start_ignore
assert abs(steps["SGD"] - 1 / L) < 1e-3
assert abs(steps["Adam"] - 1) < 1e-2
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
