r"""
What each query knows
=====================

Both models now have their attention: :ref:`the GRU's
<sphx_glr_auto_examples_plot_02_bahdanau_attention.py>` scores the source once per
decoder step with its previous state, :ref:`ConvS2S's
<sphx_glr_auto_examples_plot_07_multistep_attention.py>` in every decoder layer with
:math:`d^l_i = W^l_d h^l_i + b^l_d + g_i`. This page asks one question of the two
queries: **does the query that picks the source token for output** :math:`i` **know
the token just written,** :math:`y_{i-1}`? On sorting that token says which source
value comes next, so the answer matters. The cell changes one decoder input of an
untrained pair of models and finds the rows of attention that move.
"""

# %%
# The two models and what they return
# -----------------------------------
# On the same padded batch, ConvS2S returns one map per decoder layer,
# ``(B, L, T, S)``, from one parallel pass; the GRU one map, ``(B, T, S)``, built one
# row (one decoder step) at a time. Both compute the padded target positions too (the
# loss reads none of them). Untrained, the maps mean nothing yet; which rows a change
# reaches does not depend on training.

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import ConvS2S, ConvS2SConfig, RNNSeq2Seq, RNNSeq2SeqConfig
from convs2s_edu.data import collate_batch, generate_dataset

torch.manual_seed(0)
rnn = RNNSeq2Seq(RNNSeq2SeqConfig(vocab_size=50)).eval()  # the original notebook's sizes
conv = ConvS2S(ConvS2SConfig(vocab_size=50)).eval()
batch = collate_batch(generate_dataset(2, 5, 8, 50, seed=2), 50)
with torch.no_grad():
    _, a_conv = conv(batch.src, batch.tgt_in, return_attention=True)  # (B, L, T, S)
    _, a_rnn = rnn(batch.src, batch.tgt_in, return_attention=True)  # (B, T, S)
shapes = f"ConvS2S {tuple(a_conv.shape)} (B, L, T, S);  GRU {tuple(a_rnn.shape)} (B, T, S)"
print(f"src {tuple(batch.src.shape)} (B, S);  {shapes}")
pad = batch.src_padding_mask
print("every row sums to 1:", bool(torch.allclose(a_conv.sum(-1), torch.tensor(1.0))))
print("weight on padded sources:", float((a_conv * pad[:, None, None]).sum()))

# sphinx_gallery_start_ignore
assert torch.allclose(a_rnn.sum(-1), torch.ones(a_rnn.shape[:-1]), atol=1e-5)
assert (a_conv * pad[:, None, None]).sum() == 0 and (a_rnn * pad[:, None]).sum() == 0
# sphinx_gallery_end_ignore

# %%
# One decoder input changed
# -------------------------
# Positions count from 0 here, as the rows of the maps do: the decoder input at
# position :math:`i` is the token written just before output :math:`i` (``<sos>`` at
# position 0). ConvS2S's query for output :math:`i` holds that token in :math:`g_i`,
# and its causal convolution passes it to the queries of the :math:`k - 1` next
# positions. The GRU's energy
# :math:`e_{tj} = v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a)` reads only
# :math:`s_{t-1}`; :math:`y_{t-1}` enters :math:`s_t` after :math:`c_t` is read, so
# step :math:`t` attends knowing :math:`y_{t-2}` but not the token just written.
# Prediction: changing the decoder input at position 3 moves ConvS2S's layer 1 rows
# 3 to :math:`3 + k - 1`, and the GRU's rows from 4 on. The cell changes it and
# lists the rows that move.

moved = lambda new, old: (new - old).abs().amax(dim=(0, -1)).nonzero().flatten().tolist()
t3 = 3
tgt_other = batch.tgt_in.clone()
tgt_other[:, t3] = tgt_other[:, t3] % 50 + 1  # another ordinary token
with torch.no_grad():
    a_rnn2 = rnn(batch.src, tgt_other, return_attention=True)[1]
    a_conv2 = conv(batch.src, tgt_other, return_attention=True)[1]
print(f"decoder input {t3} changed (k = {conv.cfg.kernel_size}); rows that move:")
print(f"  GRU map            : {moved(a_rnn2, a_rnn)}")
print(f"  ConvS2S layer 1 map: {moved(a_conv2[:, 0], a_conv[:, 0])}")

# sphinx_gallery_start_ignore
assert moved(a_rnn2, a_rnn) == list(range(t3 + 1, batch.tgt_in.shape[1]))
assert moved(a_conv2[:, 0], a_conv[:, 0]) == list(range(t3, t3 + conv.cfg.kernel_size))
# sphinx_gallery_end_ignore

# %%
# The change as a figure: for every decoder position :math:`i` of the longer example,
# the largest change of a weight in row :math:`i`, on a log axis (rows that did not
# move at all sit on the bottom line), with position 3 dashed. ConvS2S's row 3 moves
# (its query holds the new :math:`g_3`); the GRU's row 3 does not (its query is the
# state from before that input was read), and every later GRU row moves, since the
# change stays in the recurrent state.

row = int(batch.src_lengths.argmax())
t_real = int((~batch.tgt_padding_mask[row]).sum())
changes = {
    "GRU + Bahdanau": a_rnn2[row] - a_rnn[row],
    "ConvS2S layer 1": a_conv2[row, 0] - a_conv[row, 0],
    "ConvS2S layer 2": a_conv2[row, 1] - a_conv[row, 1],
}
floor = 1e-9  # where a row that did not move is drawn
fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
positions = np.arange(t_real)
for (name, d), style in zip(changes.items(), ("o-", "s--", "^:")):
    largest = d[:t_real].abs().amax(-1).numpy()  # (T,)
    ax.plot(positions, np.maximum(largest, floor), style, label=name)
ax.axvline(t3, color="k", linewidth=0.8, linestyle="--")
ax.set(yscale="log", ylim=(floor / 3, 3), xticks=positions)
ax.set(xlabel="decoder position $i$", ylabel="largest |change| of a weight in row $i$")
ax.set_title(f"Attention rows moved by changing decoder input {t3}")
ax.text(0.5, floor * 2, "unchanged", fontsize=9, color="0.3")
ax.legend(loc="upper right")
plt.show()

# %%
# What you saw
# ------------
# * ConvS2S's query for output :math:`i` holds :math:`g_i`, the token just
#   written: its row :math:`i` moves with that token, and the convolution carries the
#   change :math:`k - 1` positions on.
# * The GRU's query :math:`s_{t-1}` does not: row :math:`t` moves only from the step
#   after, and then at every step, because the change stays in the recurrent state.
# * The GRU returns one map, built step by step; ConvS2S one map per layer, from one
#   parallel pass.
#
# Try it
# ------
# **1. Layer 2.** With the decoder input at position 3 changed, which rows of
# ConvS2S's *second* layer's map move (:math:`k = 3`)?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Rows 3 to 7: two causal layers of width :math:`k` carry the change
# :math:`2(k-1) = 4` positions to the right (:ref:`receptive fields
# <sphx_glr_auto_examples_plot_06_encoder_decoder.py>`).

print(moved(a_conv2[:, 1], a_conv[:, 1]))

# %%
# .. raw:: html
#
#    </details>
#
# **2. The last position.** Change the *last* real decoder input of the longer
# example instead. Which GRU rows move?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# None: no step after it reads the state it changed, and its own step's query was
# computed before it.

last = t_real - 1
tgt_last = batch.tgt_in.clone()
tgt_last[row, last] = tgt_last[row, last] % 50 + 1
with torch.no_grad():
    a_last = rnn(batch.src, tgt_last, return_attention=True)[1]
print(np.flatnonzero((a_last[row] - a_rnn[row])[:t_real].abs().amax(-1).numpy()))

# %%
# .. raw:: html
#
#    </details>
