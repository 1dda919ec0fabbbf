r"""
Encoder gradient scaling (§3.4)
===============================

One of the three flags of
:meth:`ConvS2SConfig.paper() <convs2s_edu.ConvS2SConfig.paper>`, with
:ref:`weight normalisation
<sphx_glr_auto_examples_normalisation_plot_02_weight_normalisation.py>` and the
paper's initialisation: **encoder gradient scaling** by the number of
attention mechanisms, which changes the gradient that reaches the encoder and
nothing in the forward pass. The chapter opens with it because the lesson
trains with Adam, and what Adam makes of a scaled gradient decides what this
flag can change. This page shows it on untrained models, with numbers the
page computes.
"""

import matplotlib.pyplot as plt
import torch

from convs2s_edu import (
    ConvS2S,
    ConvS2SConfig,
    TrainConfig,
    collate_batch,
    generate_dataset,
    sequence_loss,
)

# %%
# The batch
# ---------
# A batch of 64 sorting examples of 8 to 20 tokens.

original_cfg = ConvS2SConfig()  # the original notebook's: no normalisation tricks
batch = collate_batch(
    generate_dataset(64, 8, 20, original_cfg.vocab_size, seed=0),
    original_cfg.vocab_size,
)
print(f"batch of {batch.src.shape[0]} sources")

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
    named = model.named_parameters()
    grads = [p.grad.flatten() for name, p in named if name.startswith(prefix)]
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
# Under Adam the scaling cancels
# ------------------------------
# The paper trains with Nesterov's momentum (§4.2), where a step is the
# learning rate times the (averaged) gradient, so :math:`1/L` on the gradient
# is :math:`1/L` on the step as long as the gradient's norm stays under the
# clipping threshold. The paper also "renormalize[s] gradients if their norm
# exceeds 0.1" (§4.2): then the whole gradient is rescaled to norm 0.1, and the
# :math:`1/L` sets the encoder's share of that step against the decoder's
# rather than its size. The site trains with Adam, whose step for every
# parameter is :math:`\eta\,\hat{m} / (\sqrt{\hat{v}} + \epsilon)`, the running
# mean of the gradient divided by the running root mean square of the same
# gradient: a constant factor :math:`c` on one parameter's gradient multiplies
# :math:`\hat{m}` and :math:`\sqrt{\hat{v}}` alike and cancels, up to
# :math:`\epsilon`. In the site's runs the flag therefore leaves the encoder
# layers' steps as they were; what it still changes is the embeddings' mix of
# scaled and unscaled gradient, and the global norm that gradient clipping
# measures. Exercise 2 makes one step with each optimiser and prints the ratio
# of the encoder blocks' steps (:ref:`departures` lists this with the other
# departures).

# %%
# What you saw
# ------------
# * :func:`~convs2s_edu.scale_gradient` leaves the forward pass alone and
#   multiplies the gradient by :math:`1/L` on its way back: the logits of the
#   two models were identical, and every encoder layer received exactly
#   :math:`1/L` of its former gradient.
# * The paper's one reason for the scaling: "the encoder received too much
#   gradient otherwise" (§3.4), in runs with Nesterov's momentum (§4.2), whose step
#   follows the gradient. Adam divides the factor out of every step (exercise 2
#   measures it).
#
# Try it
# ------
# Predict first, then unfold the solution; code solutions run when the site
# is built.
#
# **1. Four attentions.** The original notebook's decoder has 4 layers, so 4 attentions
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

L_original = original_cfg.n_decoder_layers
for factor in (1.0, 1.0 / L_original):
    z_u = torch.zeros(3, requires_grad=True)
    z_seen = scale_gradient(z_u, factor)  # what the L attentions read
    total = sum(z_seen.sum() for _ in range(L_original))  # L uses, gradient 1 each
    total.backward()
    print(f"L = {L_original}, factor {factor:.4f}: dL/dz^u = {z_u.grad.tolist()}")

# sphinx_gallery_start_ignore
assert L_original == 4
assert torch.allclose(z_u.grad, torch.ones(3))
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
#
# **2. Adam and the gradient scaling.** The site trains with Adam.
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
# :math:`\epsilon`. That is why the paper's gradient scaling, which it gives
# because "the encoder received too much gradient otherwise" (§3.4) in runs with
# Nesterov's momentum (§4.2), changes little in an Adam run such as
# :ref:`the short run of the original notebook's configuration against the paper's
# <sphx_glr_auto_examples_normalisation_plot_06_original_against_paper.py>`
# (a little only: the embeddings get a mix of scaled and unscaled gradient,
# and gradient clipping rescales all gradients by a common factor that
# differs between the two models). In an Adam run this flag alone should
# change little; the other two flags change the forward pass itself. The
# cell uses the learning rate of the site's runs
# (:class:`~convs2s_edu.TrainConfig`'s default) for both optimisers.


def encoder_step(model, optimiser_class, lr):
    """Norm of one optimiser step of the encoder blocks, from a copy of model."""
    twin = ConvS2S(model.cfg).eval()
    twin.load_state_dict(model.state_dict())
    blocks = list(twin.encoder.blocks.parameters())
    before = torch.cat([p.detach().flatten() for p in blocks])
    optimiser = optimiser_class(twin.parameters(), lr=lr)
    sequence_loss(twin(batch.src, batch.tgt_in), batch.tgt_out).backward()
    optimiser.step()
    after = torch.cat([p.detach().flatten() for p in blocks])
    return (after - before).norm().item()


steps = {}
for opt_name, opt_class in (("SGD", torch.optim.SGD), ("Adam", torch.optim.Adam)):
    step_off = encoder_step(grad_off, opt_class, TrainConfig().lr)
    step_on = encoder_step(grad_on, opt_class, TrainConfig().lr)
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

# %%
# The page in one figure
# ----------------------
# Every ratio "scaling on / off" this page printed: the gradients of each group
# of parameters, then one step of the encoder blocks under each optimiser. The
# dashed line is :math:`1/L`, the grey one 1 (no change).

names = [*ratios, "encoder blocks: SGD step", "encoder blocks: Adam step"]
values = [*ratios.values(), steps["SGD"], steps["Adam"]]
fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
ax.barh(names, values, color=["C0"] * len(ratios) + ["C2", "C3"])
ax.axvline(1 / L, ls="--", color="k", label=f"1/L = {1 / L:.2f}")
ax.axvline(1, color="0.6")
ax.invert_yaxis()
ax.set_xlabel("gradient scaling on / off")
ax.set_xlim(0, 1.3)
ax.legend(loc="upper right")
plt.show()
