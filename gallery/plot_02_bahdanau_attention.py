r"""
Bahdanau attention (the GRU baseline)
=====================================

The :ref:`previous page <sphx_glr_auto_examples_plot_01_fixed_size_bottleneck.py>`
trained the GRU encoder-decoder with one fixed summary of the source and with
attention; this page takes the attention apart. The recurrent baseline scores
every source position with a small **additive network** (Bahdanau attention),
once per decoder step, and step :math:`t` waits for the decoder state of step
:math:`t-1`. ConvS2S, on :ref:`the multi-step attention page
<sphx_glr_auto_examples_plot_07_multistep_attention.py>`, scores with a dot
product in every decoder layer, for all target positions at once.

This page asks how one step of the GRU decoder reads the source: it computes the
additive attention with tiny dimensions by hand next to
:class:`~convs2s_edu.BahdanauAttention`, then repeats one whole decoder step by hand.
:ref:`What each query knows <sphx_glr_auto_examples_plot_08_two_queries.py>` compares
the two models' queries once ConvS2S is taught.
"""

# %%
# The additive score
# ------------------
# The recurrent decoder scores source annotation :math:`h_j` (forward and
# backward GRU states, concatenated) against its *previous* state
# :math:`s_{t-1}` with a one-hidden-layer network, as section 6 of Shi's
# article writes it (Bahdanau et al., 2014, appendix A.1.2, swap the letters,
# :math:`W_a s_{i-1} + U_a h_j`, and have no :math:`b_a`; :ref:`departures`).
# :math:`h_j` is always a GRU annotation; ConvS2S's decoder state is :math:`h^l_i`.
#
# .. math::
#
#     e_{tj} &= v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a) \\
#     a_{tj} &= \frac{\exp(e_{tj})}{\sum_k \exp(e_{tk})} \\
#     c_t &= \sum_j a_{tj} h_j
#
# :math:`W_a h_j + b_a` does not depend on :math:`t`:
# :meth:`BahdanauAttention.keys <convs2s_edu.BahdanauAttention.keys>` computes
# it once per source (the keys), and every step adds :math:`U_a s_{t-1}`.
# The worked example: :math:`m = 3` source positions, annotations of size
# :math:`2n = 4`, decoder state :math:`n = 2`, hidden layer :math:`n' = 3`, and
# weights rounded to one decimal so that the printout can be checked by hand.

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import BahdanauAttention, RNNSeq2Seq, RNNSeq2SeqConfig
from convs2s_edu.data import collate_batch, generate_dataset
from convs2s_edu.lab import figures

torch.set_printoptions(precision=3, sci_mode=False)
gen = torch.Generator().manual_seed(4)

# random numbers rounded to one decimal (+ 0.0 turns -0.0 into 0.0)
rounded = lambda *shape: torch.round(torch.randn(*shape, generator=gen) * 10) / 10 + 0.0
show = lambda name, tensor: print(f"{name} =\n{tensor}")
m, n, n_att = 3, 2, 3
bahdanau = BahdanauAttention(enc_dim=2 * n, dec_dim=n, attention_dim=n_att)
with torch.no_grad():
    for param in (bahdanau.W_a.weight, bahdanau.U_a.weight, bahdanau.b_a, bahdanau.v_a):
        param.copy_(rounded(*param.shape))

h_ann = rounded(1, m, 2 * n)  # annotations h_j  (B, S, 2n)
s_prev = rounded(1, n)  # s_{t-1}          (B, n)
mask = torch.zeros(1, m, dtype=torch.bool)
with torch.no_grad():
    keys = bahdanau.keys(h_ann)  # W_a h_j + b_a, once per source: (B, S, n')
    e_b = bahdanau.energy(s_prev, keys)  # (B, S)
    c_b, a_b = bahdanau(s_prev, keys, h_ann, mask)  # (B, 2n), (B, S)
    W_a, U_a = bahdanau.W_a.weight, bahdanau.U_a.weight
    hidden = torch.tanh(h_ann[0] @ W_a.T + s_prev[0] @ U_a.T + bahdanau.b_a)  # (S, n')
    e_hand = hidden @ bahdanau.v_a  # (S,)
    a_b_hand = e_hand.exp() / e_hand.exp().sum()
    c_b_hand = a_b_hand @ h_ann[0]  # (2n,)

show("h_j", h_ann[0])
show("s_{t-1}", s_prev[0])
show("keys W_a h_j + b_a", keys[0])
show("e (module; by hand)", torch.stack([e_b[0], e_hand]))
show("a (module; by hand)", torch.stack([a_b[0], a_b_hand]))
show("c (module; by hand)", torch.stack([c_b[0], c_b_hand]))

# sphinx_gallery_start_ignore
assert torch.allclose(a_b[0], a_b_hand, atol=1e-6)
assert torch.allclose(c_b[0], c_b_hand, atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# :meth:`GRUDecoder.start <convs2s_edu.GRUDecoder.start>` stores the keys in
# :class:`~convs2s_edu.rnn.GRUDecoderState` for every
# :meth:`GRUDecoder.step <convs2s_edu.GRUDecoder.step>`: at the original notebook's sizes,
# :math:`m \cdot 2n \cdot n'` multiply-adds once instead of at all :math:`T` steps.

torch.manual_seed(0)
rnn = RNNSeq2Seq(RNNSeq2SeqConfig(vocab_size=50)).eval()  # the original notebook's sizes
S_max, T_max = 20, 21  # the original notebook's longest source, and its decoder input (<sos> + 20)
once = S_max * 2 * rnn.cfg.hidden_dim * rnn.cfg.attention_dim
print(f"W_a h_j once: {once:,d} multiply-adds; at every step: {once * T_max:,d}")
batch = collate_batch(generate_dataset(2, 5, 8, 50, seed=2), 50)
with torch.no_grad():
    enc_rnn = rnn.decoder.start(rnn.encode(batch.src))
    att = rnn.decoder.attention
    same = torch.allclose(enc_rnn.keys, att.W_a(enc_rnn.h) + att.b_a)
print("GRUDecoderState.keys == W_a(h) + b_a:", same)

# %%
# One step of the GRU decoder
# ---------------------------
# The whole step (section 6 of Shi's article; Bahdanau et al., 2014, appendix A.2.2):
# :meth:`GRUDecoder.start <convs2s_edu.GRUDecoder.start>` computes :math:`s_0` from the
# backward encoder GRU's last state, :meth:`GRUDecoder.step <convs2s_edu.GRUDecoder.step>`
# reads the context with :math:`s_{t-1}`, updates the state and scores the next token:
#
# .. math::
#
#     s_0 &= \tanh\big(W_{init}\, \overleftarrow{h}_1\big) \\
#     c_t &= \textstyle\sum_j a_{tj} h_j, \quad a_{tj} \text{ from } s_{t-1} \\
#     s_t &= f(s_{t-1}, y_{t-1}, c_t) = \mathrm{GRU}\big(s_{t-1}, [E y_{t-1}; c_t]\big) \\
#     p(y_t \mid y_{<t}, \mathbf{x}) &= \mathrm{softmax}(W_s s_t + b_s)
#
# :math:`f` is PyTorch's GRU cell on :math:`u = [E y_{t-1}; c_t]`, with gates :math:`r`
# (reset) and :math:`\zeta` (update; PyTorch's :math:`z`, a letter this site keeps for
# ConvS2S's :math:`z_j`). Bahdanau et al. (appendix A.1.1, :ref:`departures`) write
# :math:`s_i = (1 - z_i) \circ s_{i-1} + z_i \circ \tilde{s}_i`: their :math:`z_i` weighs
# the new state, :math:`\zeta` the old one, so :math:`\zeta = 1 - z_i`:
#
# .. math::
#
#     r &= \sigma(W_{ir} u + b_{ir} + W_{hr} s_{t-1} + b_{hr}), \qquad
#     \zeta = \sigma(W_{i\zeta} u + b_{i\zeta} + W_{h\zeta} s_{t-1} + b_{h\zeta}) \\
#     \tilde{s} &= \tanh\big(W_{in} u + b_{in} + r \odot (W_{hn} s_{t-1} + b_{hn})\big), \qquad
#     s_t = (1 - \zeta) \odot \tilde{s} + \zeta \odot s_{t-1}
#
# The first step of the untrained baseline on the batch above (:math:`y_0` is
# ``<sos>``): the shape of every quantity, then the step by hand from the weights.

y_prev = batch.tgt_in[:, 0]  # y_0 = <sos>   (B,)
with torch.no_grad():
    logits_1, _, state_1 = rnn.decoder.step(y_prev, enc_rnn)
    s_1 = state_1.s
    h1_backward = enc_rnn.h[:, 0, rnn.cfg.hidden_dim :]  # backward half of h_1: (B, n)
    s0_hand = torch.tanh(rnn.decoder.W_init(h1_backward))  # (B, n)
    c_1, _ = rnn.decoder.attention(s0_hand, enc_rnn.keys, enc_rnn.h, enc_rnn.padding_mask)
    u = torch.cat([rnn.decoder.embed(y_prev), c_1], dim=-1)  # [E y_0; c_1]
    gru = rnn.decoder.gru
    W_ir, W_izeta, W_in = gru.weight_ih_l0.chunk(3)  # rows: reset, update, new
    W_hr, W_hzeta, W_hn = gru.weight_hh_l0.chunk(3)
    b_ir, b_izeta, b_in = gru.bias_ih_l0.chunk(3)
    b_hr, b_hzeta, b_hn = gru.bias_hh_l0.chunk(3)
    r = torch.sigmoid(u @ W_ir.T + b_ir + s0_hand @ W_hr.T + b_hr)
    zeta = torch.sigmoid(u @ W_izeta.T + b_izeta + s0_hand @ W_hzeta.T + b_hzeta)
    s_tilde = torch.tanh(u @ W_in.T + b_in + r * (s0_hand @ W_hn.T + b_hn))
    s1_hand = (1 - zeta) * s_tilde + zeta * s0_hand  # (B, n)
    logits_hand = s1_hand @ rnn.decoder.W_s.weight.T + rnn.decoder.W_s.bias  # (B, V)
    p_1 = torch.softmax(logits_1, dim=-1)
for name, value, meaning in [
    ("s_0", enc_rnn.s, "(n_decoder_layers, B, n)"),
    ("y_0", y_prev, "(B,)"),
    ("E y_0", rnn.decoder.embed(y_prev), "(B, embed_dim)"),
    ("c_1", c_1, "(B, 2n)"),
    ("[E y_0; c_1]", u, "(B, embed_dim + 2n)"),
    ("s_1", s_1, "(n_decoder_layers, B, n)"),
    ("W_s", rnn.decoder.W_s.weight, "(V, n)"),
    ("p(y_1)", p_1, "(B, V)"),
]:
    print(f"{name:13s} {str(tuple(value.shape)):16s} {meaning}")
checks = [("s_0", enc_rnn.s[0], s0_hand), ("s_1", s_1[0], s1_hand)]
for name, module_value, hand_value in checks + [("logits", logits_1, logits_hand)]:
    print(f"max |{name} module - by hand| = {(module_value - hand_value).abs().max():.1e}")
print("rows of p(y_1) sum to", p_1.sum(dim=-1))

# sphinx_gallery_start_ignore
assert rnn.cfg.n_decoder_layers == 1
assert torch.allclose(enc_rnn.s[0], s0_hand, atol=1e-6)
assert torch.allclose(s_1[0], s1_hand, atol=1e-5)
assert torch.allclose(logits_1, logits_hand, atol=1e-5)
# the forward pass is this step, repeated
with torch.no_grad():
    state_t, steps = enc_rnn, []
    for t in range(batch.tgt_in.shape[1]):
        logit_t, _, state_t = rnn.decoder.step(batch.tgt_in[:, t], state_t)
        steps.append(logit_t)
    # at every target position, the padding too (the loss reads only the real ones)
    teacher_forced = rnn(batch.src, batch.tgt_in)
    assert torch.allclose(torch.stack(steps, dim=1), teacher_forced, atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# The forward pass is this step, repeated
# ---------------------------------------
# Teacher-forced, the decoder runs the step at every target position in turn, and row
# :math:`t` of the attention map is step :math:`t`'s :math:`a_{tj}`, read with
# :math:`s_{t-1}`: the map is built one row at a time. The cell runs the steps one by
# one, checks them against the model's forward pass, and draws the two examples' maps
# (padded source columns hatched: their weight is zero). Untrained, the weights are
# nearly uniform; the GRU's :math:`v_a` starts in :math:`[-0.1, 0.1]`.

with torch.no_grad():
    state_t, rows_a = enc_rnn, []
    for t in range(batch.tgt_in.shape[1]):
        _, a_t, state_t = rnn.decoder.step(batch.tgt_in[:, t], state_t)  # a_t: (B, 1, S)
        rows_a.append(a_t)
    a_steps = torch.cat(rows_a, dim=1)  # (B, T, S)
    a_forward = rnn(batch.src, batch.tgt_in, return_attention=True)[1]
print(f"max |map of the steps - map of forward()| = {(a_steps - a_forward).abs().max():.1e}")

fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), layout="constrained")
vmax = float(a_steps.max())  # one colour scale for both panels
for b, ax in enumerate(axes):
    t_real = int((~batch.tgt_padding_mask[b]).sum())
    cols = [str(j) for j in range(batch.src.shape[1])]
    im = figures.attention_heatmap(
        ax,
        a_steps[b, :t_real],
        cols,
        [str(t) for t in range(1, t_real + 1)],  # step 1 reads s_0, as above
        title=f"example {b}: {batch.src_lengths[b]} source tokens",
        vmax=vmax,
        ylabel="decoder step $t$",
    )
    for j in np.flatnonzero(batch.src_padding_mask[b].numpy()):
        hatch = plt.Rectangle((j - 0.5, -0.5), 1, t_real, fill=False, hatch="//", lw=0)
        ax.add_patch(hatch).set_edgecolor("gray")
fig.colorbar(im, ax=list(axes), shrink=0.8, label="$a_{tj}$")
fig.suptitle("The untrained GRU's attention, one row per decoder step")
plt.show()

# sphinx_gallery_start_ignore
assert torch.allclose(a_steps, a_forward, atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# What you saw
# ------------
# * The GRU scores :math:`e_{tj} = v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a)`
#   once per decoder step, with :math:`W_a h_j + b_a` computed once per source.
# * One step reads the context with :math:`s_{t-1}`, then updates the state with
#   :math:`[E y_{t-1}; c_t]` and scores the next token; the forward pass is this step
#   repeated, so step :math:`t` waits for step :math:`t-1`.
#
# Try it
# ------
# **1. A sharper softmax.** Multiply :math:`v_a` of the worked example by 10. Predict
# what happens to the weights :math:`a_{tj}`, then compute them.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Every score :math:`e_{tj}` is 10 times larger, so the softmax moves its weight onto
# the largest score: the position that had the most weight gets nearly all of it.
# The scale of :math:`v_a` sets how peaked the attention can be, and training learns it.

with torch.no_grad():
    sharp = torch.softmax(10 * bahdanau.energy(s_prev, keys), dim=-1)
print(f"a with v_a: {a_b[0]}\na with 10 v_a: {sharp[0]}")

# %%
# .. raw:: html
#
#    </details>
