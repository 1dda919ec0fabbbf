r"""
Multi-step attention and Bahdanau attention
===========================================

Both models decide, for every output position, how much of every source
position to read. They differ in how they score a source position and in how
often they do it:

* ConvS2S scores with a **dot product** between a decoder state and an
  encoder output, and does it in **every decoder layer** ("multi-step"), for
  all target positions at once.
* The GRU baseline scores with a small **additive network** (Bahdanau
  attention), once per decoder step, and step :math:`t` has to wait for the
  decoder state of step :math:`t-1`.

This page writes out both with tiny dimensions, computes them by hand next to
the modules :class:`~convs2s_edu.MultiStepAttention` and
:class:`~convs2s_edu.BahdanauAttention`, and compares the shapes the two
models return.
"""

# %%
# Multi-step attention (ConvS2S, eq. 1)
# -------------------------------------
# Decoder layer :math:`l` combines its state :math:`h^l_i` with the embedding
# :math:`g_i` of the previous target token into a query :math:`d^l_i`, scores
# every encoder output :math:`z^u_j` by a dot product, and reads the
# attention-weighted sum of :math:`z^u_j + e_j`, the encoder output plus the
# source embedding:
#
# .. math::
#
#     d^l_i &= W^l_d h^l_i + b^l_d + g_i \\
#     a^l_{ij} &= \frac{\exp(d^l_i \cdot z^u_j)}{\sum_{t=1}^{m} \exp(d^l_i \cdot z^u_t)} \\
#     c^l_i &= \sum_{j=1}^{m} a^l_{ij}\,(z^u_j + e_j)
#
# Keys :math:`z^u_j` and values :math:`z^u_j + e_j` come from the encoder once
# (:class:`~convs2s_edu.convs2s.ConvMemory`); every decoder layer has its own
# :math:`W^l_d, b^l_d`.
#
# A worked example: a source of :math:`m = 3` tokens, embeddings of size
# :math:`f = 3`, decoder states of size :math:`d = 4` and two target positions.
# The weights are random numbers rounded to one decimal so that the printout
# can be checked by hand.

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import (
    BahdanauAttention,
    ConvS2S,
    ConvS2SConfig,
    MultiStepAttention,
    RNNSeq2Seq,
    RNNSeq2SeqConfig,
    collate_batch,
    generate_dataset,
)
from convs2s_edu.convs2s import ConvMemory
from convs2s_edu.lab import figures

torch.set_printoptions(precision=3, sci_mode=False)
gen = torch.Generator().manual_seed(4)


def rounded(*shape):
    """Random numbers rounded to one decimal (+ 0.0 turns -0.0 into 0.0)."""
    x = torch.randn(*shape, generator=gen)
    return torch.round(x * 10) / 10 + 0.0


def show(name, tensor):
    print(f"{name} =\n{tensor}")


f, d, m, T = 3, 4, 3, 2
att = MultiStepAttention(hidden_dim=d, embed_dim=f)
with torch.no_grad():
    att.W_d.weight.copy_(rounded(f, d))  # W_d: (f, d)
    att.b_d.copy_(rounded(f))  # b_d: (f,)

z = rounded(1, m, f)  # z^u_j      (B, S, f)
e = rounded(1, m, f)  # e_j        (B, S, f)
h = rounded(1, T, d)  # h^l_i      (B, T, d)
g = rounded(1, T, f)  # g_i        (B, T, f)
enc = ConvMemory(z=z, z_plus_e=z + e, padding_mask=torch.zeros(1, m, dtype=torch.bool))
for name, value in [
    ("W_d", att.W_d.weight.data),
    ("b_d", att.b_d.data),
    ("z^u", z[0]),
    ("e", e[0]),
    ("h", h[0]),
    ("g", g[0]),
]:
    show(name, value)

# %%
# The module returns the context :math:`c` and the weights :math:`a`; the
# query :math:`d` is internal, so the cell computes all three by hand from
# the equations and prints both versions.

with torch.no_grad():
    c_module, a_module = att(h, g, enc)  # (B, T, f), (B, T, S)

    d_hand = h[0] @ att.W_d.weight.T + att.b_d + g[0]  # (T, f)
    scores = d_hand @ z[0].T  # (T, S): d_i . z_j
    a_hand = scores.exp() / scores.exp().sum(dim=1, keepdim=True)
    c_hand = a_hand @ (z[0] + e[0])  # (T, f)

show("d (by hand)", d_hand)
show("scores d_i . z_j (by hand)", scores)
show("a (module)", a_module[0])
show("a (by hand)", a_hand)
show("c (module)", c_module[0])
show("c (by hand)", c_hand)
print(
    f"max |module - hand|: a {(a_module[0] - a_hand).abs().max():.1e}, "
    f"c {(c_module[0] - c_hand).abs().max():.1e}"
)
print("rows of a sum to", a_module.sum(dim=-1)[0])

# sphinx_gallery_start_ignore
assert torch.allclose(a_module[0], a_hand, atol=1e-6)
assert torch.allclose(c_module[0], c_hand, atol=1e-5)
# sphinx_gallery_end_ignore

# %%
# Padding and the context scale
# -----------------------------
# In a batch, shorter sources are padded. A padded position gets the score
# :math:`-\infty` before the softmax, hence weight exactly zero, and the other
# weights are unchanged. With ``scale_context=True`` (the paper's §3.4, on in
# :meth:`~convs2s_edu.ConvS2SConfig.paper`) the context is multiplied by
# :math:`m\sqrt{1/m} = \sqrt{m}`, :math:`m` the number of real source tokens:
# a weighted average of :math:`m` vectors has less variance than one vector,
# and the scale gives some of it back.

pad_row = torch.zeros(1, 1, f)
enc_padded = ConvMemory(
    z=torch.cat([z, pad_row], dim=1),
    z_plus_e=torch.cat([z + e, pad_row], dim=1),
    padding_mask=torch.tensor([[False, False, False, True]]),
)
att_scaled = MultiStepAttention(hidden_dim=d, embed_dim=f, scale_context=True)
att_scaled.load_state_dict(att.state_dict())
with torch.no_grad():
    c_pad, a_pad = att(h, g, enc_padded)
    c_scaled, _ = att_scaled(h, g, enc)

show("a with a padded 4th position", a_pad[0])
print(
    f"max |a - a without padding| on the real positions: "
    f"{(a_pad[0, :, :m] - a_module[0]).abs().max():.1e}"
)
print(f"c_scaled / c = {(c_scaled / c_module).mean():.4f}, sqrt(m) = {m**0.5:.4f}")

# sphinx_gallery_start_ignore
assert (a_pad[..., m] == 0).all()
assert torch.allclose(a_pad[0, :, :m], a_module[0], atol=1e-6)
assert torch.allclose(c_scaled, c_module * m**0.5, atol=1e-5)
# sphinx_gallery_end_ignore

# %%
# Bahdanau attention (the GRU baseline)
# -------------------------------------
# The recurrent decoder scores source annotation :math:`h_j` (forward and
# backward GRU states, concatenated) against its *previous* state
# :math:`s_{t-1}` with a one-hidden-layer network, section 6 of the seed
# article and Bahdanau et al. (2014):
#
# .. math::
#
#     e_{tj} &= v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a) \\
#     a_{tj} &= \frac{\exp(e_{tj})}{\sum_k \exp(e_{tk})} \\
#     c_t &= \sum_j a_{tj} h_j
#
# :math:`W_a h_j` does not depend on :math:`t`, so
# :meth:`BahdanauAttention.keys <convs2s_edu.BahdanauAttention.keys>` computes
# it once per source sequence and every decoder step reuses it; only
# :math:`U_a s_{t-1}` is new at each step.
#
# The worked example: the same :math:`m = 3` source positions with annotations
# of size :math:`2n = 4`, a decoder state of size :math:`n = 2` and a hidden
# layer of size :math:`n' = 3`.

n, n_att = 2, 3
bahdanau = BahdanauAttention(enc_dim=2 * n, dec_dim=n, attention_dim=n_att)
with torch.no_grad():
    bahdanau.W_a.weight.copy_(rounded(n_att, 2 * n))
    bahdanau.U_a.weight.copy_(rounded(n_att, n))
    bahdanau.b_a.copy_(rounded(n_att))
    bahdanau.v_a.copy_(rounded(n_att))

h_ann = rounded(1, m, 2 * n)  # annotations h_j  (B, S, 2n)
s_prev = rounded(1, n)  # s_{t-1}          (B, n)
mask = torch.zeros(1, m, dtype=torch.bool)

with torch.no_grad():
    keys = bahdanau.keys(h_ann)  # W_a h_j, once per source: (B, S, n')
    c_b, a_b = bahdanau(s_prev, keys, h_ann, mask)  # (B, 2n), (B, S)

    hidden = torch.tanh(
        h_ann[0] @ bahdanau.W_a.weight.T + s_prev[0] @ bahdanau.U_a.weight.T + bahdanau.b_a
    )  # (S, n')
    e_hand = hidden @ bahdanau.v_a  # (S,)
    a_b_hand = e_hand.exp() / e_hand.exp().sum()
    c_b_hand = a_b_hand @ h_ann[0]  # (2n,)

show("h", h_ann[0])
show("s_{t-1}", s_prev[0])
show("keys W_a h_j", keys[0])
with torch.no_grad():
    show("e (module)", bahdanau.energy(s_prev, keys)[0])
show("e (by hand)", e_hand)
show("a (module)", a_b[0])
show("a (by hand)", a_b_hand)
show("c (module)", c_b[0])
show("c (by hand)", c_b_hand)

# sphinx_gallery_start_ignore
assert torch.allclose(a_b[0], a_b_hand, atol=1e-6)
assert torch.allclose(c_b[0], c_b_hand, atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# Keys computed once
# ------------------
# :meth:`GRUDecoder.start <convs2s_edu.GRUDecoder.start>` stores
# :math:`W_a h_j` in :class:`~convs2s_edu.rnn.GRUDecoderState` and
# :meth:`GRUDecoder.step <convs2s_edu.GRUDecoder.step>` passes it to the attention at
# every step. At the seed's sizes this saves, per sequence, the multiply-adds
# counted below: :math:`W_a h_j` costs :math:`m \cdot 2n \cdot n'` once instead
# of at each of the :math:`T` steps.

rnn_cfg = RNNSeq2SeqConfig()
S_max, T_max = (
    20,
    21,
)  # the seed's longest source, and its decoder input (<sos> + 20)
once = S_max * 2 * rnn_cfg.hidden_dim * rnn_cfg.attention_dim
print(f"W_a h_j once : {once:>12,d} multiply-adds")
print(f"at every step: {once * T_max:>12,d} multiply-adds")

rnn = RNNSeq2Seq(RNNSeq2SeqConfig(vocab_size=50)).eval()
batch = collate_batch(generate_dataset(2, 5, 8, 50, seed=2), 50)
with torch.no_grad():
    enc_rnn = rnn.decoder.start(rnn.encode(batch.src))
    same = torch.allclose(enc_rnn.keys, rnn.decoder.attention.W_a(enc_rnn.h))
print("GRUDecoderState.keys == W_a(h):", same)

# %%
# One step of the GRU decoder
# ---------------------------
# The attention is one part of a decoder step. The whole step, section 6 of
# the seed article and Bahdanau et al. (2014), appendix A.2.2, starts from an
# initial state computed by
# :meth:`GRUDecoder.start <convs2s_edu.GRUDecoder.start>` from the first
# state of the backward encoder GRU, the one that has read the whole source
# from right to left. :meth:`GRUDecoder.step <convs2s_edu.GRUDecoder.step>`
# then reads the context with :math:`s_{t-1}`, updates the state and scores
# the next token:
#
# .. math::
#
#     s_0 &= \tanh\big(W_{init}\, \overleftarrow{h}_1\big) \\
#     c_t &= \textstyle\sum_j a_{tj} h_j, \quad a_{tj} \text{ from } s_{t-1} \\
#     s_t &= f(s_{t-1}, y_{t-1}, c_t) = \mathrm{GRU}\big(s_{t-1}, [E y_{t-1}; c_t]\big) \\
#     p(y_t \mid y_{<t}, \mathbf{x}) &= \mathrm{softmax}(W_s s_t + b_s)
#
# :math:`f` is PyTorch's GRU cell over the concatenation of the embedded
# previous token and the context. With :math:`u = [E y_{t-1}; c_t]`, gates
# :math:`r` (reset) and :math:`z` (update):
#
# .. math::
#
#     r &= \sigma(W_{ir} u + b_{ir} + W_{hr} s_{t-1} + b_{hr}), \qquad
#     z = \sigma(W_{iz} u + b_{iz} + W_{hz} s_{t-1} + b_{hz}) \\
#     \tilde{s} &= \tanh\big(W_{in} u + b_{in} + r \odot (W_{hn} s_{t-1} + b_{hn})\big), \qquad
#     s_t = (1 - z) \odot \tilde{s} + z \odot s_{t-1}
#
# The cell runs the first step of the untrained baseline on the batch above
# (:math:`y_0` is ``<sos>``), prints the shape of every quantity, and repeats
# the step by hand from the module's weights.

n_dec = rnn.cfg.hidden_dim
y_prev = batch.tgt_in[:, 0]  # y_0 = <sos>   (B,)
with torch.no_grad():
    logits_1, a_1, state_1 = rnn.decoder.step(y_prev, enc_rnn)
    s_1 = state_1.s

    # s_0 = tanh(W_init h_1^backward): backward half of the first annotation
    h1_backward = enc_rnn.h[:, 0, n_dec:]  # (B, n)
    s0_hand = torch.tanh(rnn.decoder.W_init(h1_backward))  # (B, n)
    # c_1 from s_0
    c_1, _ = rnn.decoder.attention(s0_hand, enc_rnn.keys, enc_rnn.h, enc_rnn.padding_mask)
    u = torch.cat([rnn.decoder.embed(y_prev), c_1], dim=-1)  # [E y_0; c_1]
    gru = rnn.decoder.gru
    W_ir, W_iz, W_in = gru.weight_ih_l0.chunk(3)  # rows: reset, update, new
    W_hr, W_hz, W_hn = gru.weight_hh_l0.chunk(3)
    b_ir, b_iz, b_in = gru.bias_ih_l0.chunk(3)
    b_hr, b_hz, b_hn = gru.bias_hh_l0.chunk(3)
    r = torch.sigmoid(u @ W_ir.T + b_ir + s0_hand @ W_hr.T + b_hr)
    z_gate = torch.sigmoid(u @ W_iz.T + b_iz + s0_hand @ W_hz.T + b_hz)
    s_tilde = torch.tanh(u @ W_in.T + b_in + r * (s0_hand @ W_hn.T + b_hn))
    s1_hand = (1 - z_gate) * s_tilde + z_gate * s0_hand  # (B, n)
    # p(y_1) = softmax(W_s s_1 + b_s)
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
for name, module_value, hand_value in [
    ("s_0", enc_rnn.s[0], s0_hand),
    ("s_1", s_1[0], s1_hand),
    ("logits", logits_1, logits_hand),
]:
    error = (module_value - hand_value).abs().max()
    print(f"max |{name} module - by hand| = {error:.1e}")
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
    assert torch.allclose(torch.stack(steps, dim=1), rnn(batch.src, batch.tgt_in), atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# Why these steps are sequential: :math:`s_t` needs :math:`s_{t-1}`, both
# through the GRU and through the context :math:`c_t`, whose attention
# weights are computed from :math:`s_{t-1}`. Even in training, when teacher
# forcing supplies every :math:`y_{t-1}` in advance, step :math:`t` cannot
# start before step :math:`t-1` has finished, so the forward pass of
# :class:`~convs2s_edu.RNNSeq2Seq` loops over the :math:`T` target
# positions. In ConvS2S a decoder state depends only on the layer below, not
# on the same layer at earlier positions, so each layer is one convolution
# and one attention over all positions at once.

# %%
# Side by side: what the two models return
# ----------------------------------------
# Run an untrained model of each kind on the same padded batch. ConvS2S
# returns one attention map per decoder layer, ``(B, L, T, S)``, all computed
# in one parallel pass; the GRU returns one map, ``(B, T, S)``, built one row
# (one decoder step) at a time.

conv = ConvS2S(ConvS2SConfig(vocab_size=50)).eval()
with torch.no_grad():
    _, a_conv = conv(batch.src, batch.tgt_in, return_attention=True)
    _, a_rnn = rnn(batch.src, batch.tgt_in, return_attention=True)
print("src     ", tuple(batch.src.shape), " (B, S)")
print("ConvS2S ", tuple(a_conv.shape), " (B, L, T, S)")
print("GRU     ", tuple(a_rnn.shape), " (B, T, S)")

# sphinx_gallery_start_ignore
assert torch.allclose(a_conv.sum(-1), torch.ones(a_conv.shape[:-1]), atol=1e-5)
assert torch.allclose(a_rnn.sum(-1), torch.ones(a_rnn.shape[:-1]), atol=1e-5)
pad = batch.src_padding_mask
assert (a_conv.masked_select(pad[:, None, None, :].expand_as(a_conv)) == 0).all()
assert (a_rnn.masked_select(pad[:, None, :].expand_as(a_rnn)) == 0).all()
# sphinx_gallery_end_ignore

# %%
# The maps of the shorter example of the batch: every row is a distribution
# over source positions and sums to 1; the padded source columns (hatched) get
# weight zero. Untrained, the maps mean nothing yet: the GRU's additive scores
# start small, so its rows are close to uniform, while ConvS2S's dot products
# of 128-dimensional vectors are large enough to make some rows peaked at
# arbitrary positions. A trained model should look, at every step, at the
# source token that comes next in sorted order.

row = int(batch.src_lengths.argmin())
S_b = batch.src.shape[1]
t_real = int((~batch.tgt_padding_mask[row]).sum())
maps = [(f"ConvS2S layer {l + 1}", a_conv[row, l]) for l in range(a_conv.shape[1])]
maps.append(("GRU + Bahdanau", a_rnn[row]))
vmax = max(float(a[:t_real].max()) for _, a in maps)

positions = [str(j) for j in range(S_b)]
fig, axes = plt.subplots(1, len(maps), figsize=(13, 3.4), layout="constrained", sharey=True)
for ax, (title, a) in zip(axes, maps):
    im = figures.attention_heatmap(
        ax,
        a,
        positions,
        [str(i) for i in range(t_real)],
        title=title,
        cmap="viridis",
        vmax=vmax,
        ylabel="decoder position $i$" if ax is axes[0] else "",
    )
    for j in np.flatnonzero(batch.src_padding_mask[row].numpy()):
        ax.add_patch(
            plt.Rectangle(
                (j - 0.5, -0.5),
                1,
                t_real,
                fill=False,
                hatch="//",
                edgecolor="white",
                linewidth=0,
            )
        )
fig.colorbar(im, ax=axes, shrink=0.9, label="attention weight")
fig.suptitle(
    "Attention maps of untrained models, source "
    f"{batch.src[row, : batch.src_lengths[row]].tolist()}"
)
plt.show()


# %%
# What you saw
# ------------
# * ConvS2S: every decoder layer :math:`l` scores every source position with a
#   dot product, :math:`a^l_{ij} = \mathrm{softmax}_j(d^l_i \cdot z_j)`, and
#   reads the values :math:`z_j + e_j`; all target positions at once.
# * Bahdanau: one small network scores
#   :math:`v_a^\top \tanh(W_a s_{t-1} + U_a h_j)`, once per decoder step, and
#   step :math:`t` waits for :math:`s_{t-1}`.
# * Padded source positions get the score :math:`-\infty`, so zero weight.
#
# Try it
# ------
# **1. Sharper or flatter?** Multiply every score by 10. Does the largest
# attention weight grow or shrink?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# It grows: a softmax of larger differences is closer to one-hot. The scale of
# :math:`d_i \cdot z_j` is a temperature that training learns through the
# weights.

import torch

from convs2s_edu import MultiStepAttention
from convs2s_edu.convs2s import ConvMemory

torch.manual_seed(0)
scores = torch.randn(6)
for factor in (1, 10):
    print(factor, f"{torch.softmax(factor * scores, dim=0).max():.3f}")

# %%
# .. raw:: html
#
#    </details>
#
# **2. Padding.** A source of 4 real tokens padded to 6. What weight do the two
# padded positions get, and does the context change when you change their
# :math:`z`?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Zero, and no: their scores are :math:`-\infty` before the softmax, so
# nothing of them reaches :math:`c`.

d_, f_ = 8, 4
att = MultiStepAttention(hidden_dim=d_, embed_dim=f_)
z, e = torch.randn(1, 6, f_), torch.randn(1, 6, f_)
pad = torch.tensor([[False] * 4 + [True] * 2])
h, g = torch.randn(1, 3, d_), torch.randn(1, 3, f_)
c1, a1 = att(h, g, ConvMemory(z=z, z_plus_e=z + e, padding_mask=pad))
z2 = z.clone()
z2[:, 4:] = 100.0  # change only the padded positions
c2, _ = att(h, g, ConvMemory(z=z2, z_plus_e=z2 + e, padding_mask=pad))
print("weights on padding:", a1[0, :, 4:].abs().max().item())
print("context changed:", not torch.equal(c1, c2))

# %%
# .. raw:: html
#
#    </details>
#
# **3. The context scale.** With ``scale_context=True`` and :math:`m = 9` real
# source tokens, by what factor does the context grow?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`m\sqrt{1/m} = \sqrt{m} = 3` (§3.4 of the paper): a context averaged
# over :math:`m` values has shrunk by about :math:`\sqrt{m}` when the weights
# are spread out, and the scale puts that back.

plain = MultiStepAttention(hidden_dim=d_, embed_dim=f_)
scaled = MultiStepAttention(hidden_dim=d_, embed_dim=f_, scale_context=True)
scaled.load_state_dict(plain.state_dict())  # the same weights
z, e = torch.randn(1, 9, f_), torch.randn(1, 9, f_)
enc = ConvMemory(z=z, z_plus_e=z + e, padding_mask=torch.zeros(1, 9).bool())
ratio = scaled(h, g, enc)[0] / plain(h, g, enc)[0]
print(f"{ratio.mean():.4f}")

# %%
# .. raw:: html
#
#    </details>
