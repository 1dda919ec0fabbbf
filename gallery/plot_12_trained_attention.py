r"""
How the trained ConvS2S sorts with its attention
================================================

:ref:`The heatmaps <sphx_glr_auto_examples_plot_11_attention_heatmaps.py>` show
*where* the trained attention looks. This page asks *how*: what decides the
score :math:`d^l_i \cdot z^u_j` of a source token, where each decoder layer
points, what the values :math:`z^u_j + e_j` carry (and what a model retrained
without :math:`z` or :math:`e` learns), how the layers feed each
other, and how large the scores are without the Transformer's
:math:`1/\sqrt{d}`. Every number comes from the site's trained ConvS2S,
teacher-forced on its test set, as on the heatmap page.
"""

# %%
# The model and its attention on the test set
# -------------------------------------------
# ``a`` holds :math:`a^l_{ij}` of every layer :math:`l`, output step :math:`i`
# and source position :math:`j`; ``prev`` the token the decoder reads at step
# :math:`i` (the previous output, :math:`y_{i-1}`), ``nxt`` the one it must
# write (:math:`y_i`).

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import ConvS2S, ConvS2SConfig, collate_batch, eos_index, sos_index, train_or_load
from convs2s_edu.lab.experiments import budget
from convs2s_edu.lab.site import comparison, quick_caveat, site_config
from convs2s_edu.training.config import make_datasets

trained = train_or_load(site_config("convs2s"))
model, V = trained.model.eval(), trained.config.vocab_size
test = list(make_datasets(trained.config)[2])
tb = collate_batch(test, V)
with torch.no_grad():
    _, a = model(tb.src, tb.tgt_in, return_attention=True)  # (B, L, T, S)
prev, nxt, src = tb.tgt_in, tb.tgt_out, tb.src  # (B, T), (B, T), (B, S)
steps = nxt.ne(0) & nxt.ne(eos_index(V)) & prev.ne(sos_index(V))  # y_{i-1} known
L = a.shape[1]
print(f"{len(test)} test examples, {int(steps.sum()):,} steps, {L} decoder layers")

# %%
# Attention against the source value, given the previous output
# -------------------------------------------------------------
# To write :math:`y_i` a sorter needs the smallest source value not yet
# written: the smallest one at or above :math:`y_{i-1}`. The cell averages the
# weight :math:`a^l_{ij}` by the source value :math:`x_j` minus the previous
# output :math:`y_{i-1}`: a sorter's weight peaks just above 0. Left, the last
# layer by (previous output, source value); right, every layer.

diff = src[:, None, :] - prev[:, :, None]  # (B, T, S): x_j - y_{i-1}
pairs = steps[:, :, None] & src.ne(0)[:, None, :]  # (B, T, S): real (i, j)
offsets = np.arange(-V + 1, V)
curves = np.zeros((L, len(offsets)))
for l in range(L):
    w, dx = a[:, l][pairs], diff[pairs]
    sums = torch.zeros(2 * V - 1).index_add_(0, dx + V - 1, w)
    counts = torch.zeros(2 * V - 1).index_add_(0, dx + V - 1, torch.ones_like(w))
    curves[l] = (sums / counts.clamp(min=1)).numpy()
    curves[l][counts.numpy() < 50] = np.nan  # too few (i, j) pairs to average
grid_sum, grid_n = torch.zeros(V + 1, V + 1), torch.zeros(V + 1, V + 1)
rows, cols = prev[:, :, None].expand_as(pairs)[pairs], src[:, None, :].expand_as(pairs)[pairs]
grid_sum.index_put_((rows, cols), a[:, -1][pairs], accumulate=True)
grid_n.index_put_((rows, cols), torch.ones_like(rows, dtype=torch.float), accumulate=True)

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
extent = (0.5, V + 0.5, 0.5, V + 0.5)  # cell (y, x) at the values themselves
image = ax0.imshow(
    (grid_sum / grid_n.clamp(min=1))[1:, 1:], origin="lower", cmap="viridis", extent=extent
)
ax0.set(xlabel="source value $x_j$", ylabel="previous output $y_{i-1}$")
ax0.set_title(f"Mean weight, layer {L}")
fig.colorbar(image, ax=ax0, shrink=0.8)
for l in range(L):
    ax1.plot(offsets, curves[l], label=f"layer {l + 1}", linewidth=1.5)
ax1.axvline(0, color="k", linewidth=0.8, linestyle=":")
ax1.set(xlim=(-15, 15), xlabel="$x_j - y_{i-1}$", ylabel="mean weight $a_{ij}$")
ax1.set_title("Weight by distance above the previous output")
ax1.legend(fontsize=8)
plt.show()
quick_caveat("the figure above")
for l in range(L):
    peak = offsets[np.nanargmax(curves[l])]
    print(f"layer {l + 1}: the largest mean weight at x_j - y_(i-1) = {peak}")

# %%
# Where each layer points
# -----------------------
# The share of each layer's weight on the source positions holding the token it
# must write, on those holding the token it has just read (the previous
# output, when it differs), and elsewhere; one sentence per layer, naming the
# largest share. (The heatmap page's table counts the same by each layer's
# most attended position instead of its weights.)

holds_next = src[:, None, :].eq(nxt[:, :, None])  # (B, T, S)
holds_prev = src[:, None, :].eq(prev[:, :, None]) & ~holds_next
for l in range(L):
    on_next = (a[:, l] * holds_next).sum(-1)[steps].mean().item()
    on_prev = (a[:, l] * holds_prev).sum(-1)[steps].mean().item()
    shares = {"the token it writes next": on_next, "the token it has just read": on_prev}
    shares["the other source tokens"] = 1 - on_next - on_prev
    where = max(shares, key=shares.get)
    detail = ", ".join(f"{v:.0%} on {k}" for k, v in shares.items())
    print(f"Layer {l + 1} puts its largest share of weight on {where} ({detail}).")

# %%
# Keys :math:`z`, values :math:`z + e`: what the values carry
# -------------------------------------------------------------
# §3.3: the keys carry "potentially large input contexts", and :math:`e_j`
# "provides point information about a specific input element". Sorting copies
# source tokens, so the point information should matter. The context splits,
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

# sphinx_gallery_start_ignore
assert torch.allclose(c, a @ (enc.states + enc.embedded)[:, None], atol=1e-5)
assert torch.isfinite(share_e).all()
# sphinx_gallery_end_ignore

# %%
# Retrained with values :math:`z` alone or :math:`e` alone
# --------------------------------------------------------
# A knock-out asks what the trained model lost; retraining asks what a model
# can learn without. The build trains ConvS2S at the Experiments section's
# budget (seed 0) three times: values :math:`z^u_j + e_j` as in the paper (that
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
# the loss, which moves long before exact match leaves 0% or nears 100%
ends = {f"values {k}": run.history.evals[-1]["valid_loss"] for k, run in ablation.items()}
both = "values z + e"
for one in ("values z", "values e"):
    print(comparison("held-out loss", {both: ends[both], one: ends[one]}, fmt="{:.3f} nats"))

# %%
# Several hops: the attention history
# -----------------------------------
# Every layer adds its context to its state,
# :math:`h^l_i \leftarrow \sqrt{0.5}\,(h^l_i + W^l_c c^l_i)`, so the query
# :math:`d^{l+1}_i` is computed from what layers :math:`1..l` read (§3.3's
# "hops") and, through the causal convolution, from the contexts of the
# :math:`k-1` previous positions. The cell runs one test example through the
# first two layers and asks which contexts :math:`c^1_{i'}` the query
# :math:`d^2_i` depends on.

dec, i_q = model.decoder, 6
one = collate_batch(test[:1], V)
memory = dec.memory(model.encode(one.src))
g1 = dec.embed(one.tgt_in)  # (1, T, f)
h1 = dec.blocks[0](dec.in_proj(g1))
c1, _ = dec.attention[0](h1, g1, memory)  # (1, T, f): layer 1's contexts
c1.retain_grad()
h2 = dec.blocks[1](math.sqrt(0.5) * (h1 + dec.W_c[0](c1)))
d2 = dec.attention[1].W_d(h2) + dec.attention[1].b_d + g1  # (1, T, f): layer 2's queries
(d2[0, i_q] * torch.randn(d2.shape[-1])).sum().backward()
seen = (c1.grad[0].abs().sum(-1) > 0).nonzero().flatten().tolist()
print(f"k = {model.cfg.kernel_size}: d^2_{i_q} depends on c^1 at positions {seen}")

# sphinx_gallery_start_ignore
assert seen == list(range(i_q - model.cfg.kernel_size + 1, i_q + 1))
# sphinx_gallery_end_ignore

# %%
# No :math:`1/\sqrt{d}`: the scale of the scores
# ----------------------------------------------
# The scores are plain dot products; the Transformer, which came later,
# divides them by :math:`\sqrt{d_k}`, since a dot product of :math:`f`
# independent entries of variance :math:`\sigma^2` has standard deviation
# :math:`\sigma^2\sqrt{f}`, and a large spread makes the softmax nearly one-hot.
# The ConvS2S paper says nothing about the scale of its scores. The
# cell measures layer 1's scores on the test set with the paper's
# initialisation, the seed's (PyTorch's) and after training, with the mean
# largest weight next to :math:`1/m`.

print(f"mean 1/m = {(1 / tb.src_lengths.float()).mean():.3f} (uniform attention)")
nets = {}
for name, cfg in (("paper's init", ConvS2SConfig.paper()), ("seed's init", ConvS2SConfig())):
    torch.manual_seed(0)
    nets[name] = ConvS2S(cfg).eval()
nets["trained"] = model
for name, net in nets.items():
    dec0, att0 = net.decoder, net.decoder.attention[0]
    with torch.no_grad():
        g0 = dec0.embed(tb.tgt_in)
        d_1 = att0.W_d(dec0.blocks[0](dec0.in_proj(g0))) + att0.b_d + g0  # (B, T, f)
        scores = d_1 @ dec0.memory(net.encode(tb.src)).z.mT  # (B, T, S)
        _, a0 = net(tb.src, tb.tgt_in, return_attention=True)
    sd, peak = scores[pairs].std(), a0[:, 0].amax(-1)[steps].mean()
    f_net = net.cfg.embed_dim
    print(f"{name:13s}: std(d.z) {sd:6.3f}, / sqrt(f) {sd / math.sqrt(f_net):.3f}, ", end="")
    print(f"mean largest weight {peak:.3f}")

# %%
# What you saw
# ------------
# * The printouts say where the weight of each layer peaks, relative to the
#   previous output, and which source token each layer points at.
# * The values' squared length splits between :math:`z` and :math:`e`; knocking
#   :math:`e` out of the trained model's values changes its accuracy by what the
#   comparison prints, and models retrained with one of the two end where the
#   learning curves show.
# * Layer :math:`l+1`'s query sees what layers :math:`\le l` read, at its own
#   and the :math:`k-1` previous positions.
# * The scores have no :math:`1/\sqrt{d}`, and the paper does not discuss their
#   scale; the printout gives their spread under each initialisation and after training.
#
# Try it
# ------
# **1. The Transformer's** :math:`1/\sqrt{d_k}`. Two vectors of :math:`f = 128`
# independent entries with variance 1: predict the standard deviation of
# their dot product, and after dividing it by :math:`\sqrt{f}`.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# A sum of :math:`f` independent products of variance 1 has variance
# :math:`f`: standard deviation :math:`\sqrt{128} \approx 11.3`, and 1 after the
# division. Without it, scores 11 apart already give a softmax weight ratio of
# :math:`e^{11}`.

q, k_ = torch.randn(10_000, 128), torch.randn(10_000, 128)
dots = (q * k_).sum(-1)
print(
    f"std {dots.std():.2f}, sqrt(f) = {128**0.5:.2f}, after / sqrt(f): {dots.std() / 128**0.5:.3f}"
)

# %%
# .. raw:: html
#
#    </details>
#
# **2. One row of the heatmap.** The previous output was 20 (or the nearest
# value the test set has). Which source value does the last layer weigh most,
# on average? Read it off the left heatmap, then compute it.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The row of ``grid_sum / grid_n`` for that previous output, and its largest
# entry; a sorter's is the smallest value at or above it that sources hold.

seen_prev = (grid_n.sum(1) > 0).nonzero().flatten()
y_prev = int(seen_prev[(seen_prev - 20).abs().argmin()])
row = grid_sum[y_prev] / grid_n[y_prev].clamp(min=1)
print(f"previous output {y_prev}: largest mean weight on source value {int(row.argmax())}")

# %%
# .. raw:: html
#
#    </details>
