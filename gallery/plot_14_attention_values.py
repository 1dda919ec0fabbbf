r"""
What the values carry
=====================

ConvS2S's attention scores the source with the keys :math:`z^u_j`, the encoder's
output, and reads the values :math:`z^u_j + e_j`, the output plus the input
embedding (§3.3, eq. 2). This page asks one question of the site's trained ConvS2S:
**what does** :math:`e_j` **add to the values?** The paper's reason for it: the keys
carry "potentially large input contexts", and :math:`e_j` "provides point
information about a specific input element". Sorting copies source tokens, so the
point information should matter. Three measurements: how the context splits between
:math:`z` and :math:`e`, the trained model with :math:`e` knocked out of its values,
and models retrained with values :math:`z` alone or :math:`e` alone.
"""

# %%
# The model and its attention on the test set
# -------------------------------------------
# The site's trained ConvS2S, teacher-forced on its test set, as on :ref:`the page
# before <sphx_glr_auto_examples_plot_13_trained_attention.py>`: ``a`` holds
# :math:`a^l_{ij}` of every layer; ``steps`` marks the real output steps. How much a
# context can carry of one token depends on how concentrated its weights are, so the
# cell also prints each layer's mean largest weight next to uniform weights' 1/m.

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import collate_batch, train_or_load
from convs2s_edu.lab.experiments import budget
from convs2s_edu.lab.site import comparison, quick_caveat, site_config
from convs2s_edu.training.config import make_datasets

trained = train_or_load(site_config("convs2s"))
model, V = trained.model.eval(), trained.config.vocab_size
tb = collate_batch(list(make_datasets(trained.config)[2]), V)
with torch.no_grad():
    _, a = model(tb.src, tb.tgt_in, return_attention=True)  # (B, L, T, S)
steps = tb.tgt_out.ne(0)  # (B, T): real output steps
print(f"{tb.src.shape[0]} test examples, {int(steps.sum()):,} steps")
# how concentrated each layer reads: its mean largest weight, against uniform weights
peaks = [f"{a[:, l].amax(-1)[steps].mean():.3f}" for l in range(a.shape[1])]
print(f"mean largest weight, layers 1-{a.shape[1]}: {', '.join(peaks)}", end="; ")
print(f"uniform: mean 1/m = {(1 / tb.src_lengths.float()).mean():.3f}")

# %%
# The context split, and :math:`e` knocked out
# --------------------------------------------
# The context splits,
# :math:`c^l_i = c_z + c_e` with :math:`c_z = \sum_j a^l_{ij} z^u_j` and
# :math:`c_e = \sum_j a^l_{ij} e_j`, and its squared length splits into two
# shares that add up to one, :math:`\|c\|^2 = c \cdot c_z + c \cdot c_e` (norms
# do not add). Then the trained model reads values without :math:`e` (a
# knock-out after training, not a model trained without it), and the cell
# prints the teacher-forced token accuracy.

with torch.no_grad():
    enc = model.encode(tb.src)  # states z^u (B, S, f), embedded e (B, S, f)
    c_z = a @ enc.states[:, None]  # (B, L, T, f)
    c_e = a @ enc.embedded[:, None]
    c = c_z + c_e
    share_e = ((c * c_e).sum(-1) / (c * c).sum(-1)).transpose(1, 2)[steps]  # (N, L)
    logits = {
        "z + e (as trained)": model.decoder(tb.tgt_in, enc)[0],
        "z alone (e knocked out)": model.decoder(
            tb.tgt_in, enc._replace(embedded=0 * enc.embedded)
        )[0],
    }
print("share of e in |c|^2, per layer:", np.round(share_e.mean(0).numpy(), 2))
real = tb.tgt_out.ne(0)
accuracy = {k: (v.argmax(-1) == tb.tgt_out)[real].float().mean().item() for k, v in logits.items()}
print(comparison("teacher-forced token accuracy", accuracy))
quick_caveat("the printout above")

# sphinx_gallery_start_ignore
assert torch.allclose(c, a @ (enc.states + enc.embedded)[:, None], atol=1e-5)
assert torch.isfinite(share_e).all()
# sphinx_gallery_end_ignore

# %%
# Retrained with values :math:`z` alone or :math:`e` alone
# --------------------------------------------------------
# A knock-out asks what the trained model lost; retraining asks what a model
# can learn without. The build trains ConvS2S at the Experiments section's
# budget (its first seed) three times: values :math:`z^u_j + e_j` as in the paper (that
# section's reference arm), :math:`z^u_j` alone and :math:`e_j` alone
# (``AblationConfig.attention_values``; the keys stay :math:`z^u_j`). The cell
# plots their held-out learning curves, the loss (left) and exact match
# (right), and prints where each ends. One seed each: a hint of what each part
# of the values is worth, not a verdict.

ablation = {}  # the Experiments section's reference ConvS2S, then the two retrained ones
for k in ("z + e", "z", "e"):
    values = {} if k == "z + e" else {"attention_values": k}
    ablation[k] = train_or_load(budget().config("convs2s", **values))
fig, (ax_loss, ax) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
for k, run in ablation.items():
    ev = run.history.evals
    ax_loss.plot([e["step"] for e in ev], [e["valid_loss"] for e in ev], label=f"values {k}")
    ax.plot([e["step"] for e in ev], [100 * e["exact_match"] for e in ev], label=f"values {k}")
    em, loss = ev[-1]["exact_match"], ev[-1]["valid_loss"]
    print(f"values {k:5s}: {run.history.steps} steps, held-out exact match {em:6.1%}, ", end="")
    print(f"loss {loss:.3f} nats/token")
ax_loss.set(xlabel="optimiser step", ylabel="held-out loss (nats per token)")
ax.set(xlabel="optimiser step", ylabel="held-out exact match (%)")
fig.suptitle("ConvS2S trained with three kinds of attention values", fontsize=11)
ax_loss.legend()
plt.show()
quick_caveat("the learning curves above")
# the loss, which moves long before exact match leaves 0% or nears 100%
ends = {f"values {k}": run.history.evals[-1]["valid_loss"] for k, run in ablation.items()}
both = "values z + e"
for one in ("values z", "values e"):
    print(comparison("held-out loss", {both: ends[both], one: ends[one]}, fmt="{:.3f} nats"))

# %%
# What you saw
# ------------
# * The share of :math:`e` in each layer's squared context length, printed per layer.
# * What the trained model loses when its values lose :math:`e`: the token accuracy
#   above, with and without it.
# * What a model can learn with values :math:`z` alone or :math:`e` alone: the learning
#   curves and the held-out losses printed under them (one seed each).
#
# Try it
# ------
# **1. The keys with** :math:`e` **too.** The paper's keys are :math:`z^u_j` alone. On
# the trained model, predict whether scoring with :math:`z^u_j + e_j` changes the
# weights much, then compute layer 1's mean largest weight both ways.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The weights change: the trained queries were learnt against :math:`z^u_j`, and
# adding :math:`e_j` adds :math:`d^1_i \cdot e_j` to every score. How much is what the
# printout says; a model trained with such keys would learn other queries.

with torch.no_grad():
    enc1 = model.encode(tb.src)
    dec = model.decoder
    g = dec.embed(tb.tgt_in)  # (B, T, f)
    att = dec.attention[0]
    d1 = att.W_d(dec.blocks[0](dec.in_proj(g))) + att.b_d + g  # (B, T, f): layer 1's queries
    pad = tb.src_padding_mask[:, None, :]
    for name, keys in (("z", enc1.states), ("z + e", enc1.states + enc1.embedded)):
        w = torch.softmax((d1 @ keys.mT).masked_fill(pad, float("-inf")), dim=-1)
        print(f"keys {name:5s}: layer 1's mean largest weight {w.amax(-1)[steps].mean():.3f}")

# %%
# .. raw:: html
#
#    </details>
