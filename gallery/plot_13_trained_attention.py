r"""
How the trained ConvS2S sorts with its attention
================================================

:ref:`The heatmaps <sphx_glr_auto_examples_plot_12_attention_heatmaps.py>` show
*where* the trained attention looks. This page asks *how* it sorts with
them: which source value each layer weighs, given the token it has just written, and
where each layer points. Every number comes from the site's trained ConvS2S,
teacher-forced on its test set, as on the heatmap page.
"""

# %%
# The model and its attention on the test set
# -------------------------------------------
# ``a`` holds :math:`a^l_{ij}` of every layer :math:`l`, output step :math:`i`
# and source position :math:`j`; ``prev`` the token the decoder reads at step
# :math:`i` (the previous output, :math:`y_{i-1}`), ``nxt`` the one it must
# write (:math:`y_i`).

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import collate_batch, eos_index, sos_index, train_or_load
from convs2s_edu.lab.site import quick_caveat, site_config
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
# What you saw
# ------------
# * The weight of each layer, averaged by the source value minus the token just
#   written, peaks where the printout says; a sorter's peaks on the smallest source
#   value at or above that token.
# * Each layer's largest share of weight is on the token the printout names: the one
#   it writes next, the one it has just read, or the others.
#
# Try it
# ------
# **1. One row of the heatmap.** The previous output was 20 (or the nearest
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
