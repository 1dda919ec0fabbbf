r"""
ConvS2S by hand: one decoder step in numbers
============================================

This page shrinks a real :class:`~convs2s_edu.ConvDecoder` until every number fits on a
line (sizes :math:`f = d = 2`, kernel width :math:`k = 3`, :math:`m = 3` source tokens,
weights such as :math:`1`, :math:`-1`, :math:`0.5` set by hand) and follows one decoder
position through one layer with plain arithmetic.

Where it simplifies: one decoder layer; the encoder outputs :math:`z_j` and source
embeddings :math:`e_j` given by hand; no dropout or weight normalisation; the map
:math:`f \to d` before the convolution is the identity, :math:`W_c` has no bias, and the
output layer :math:`W_o` is left out. Positions count from 0, as in the code. The module
is the package's own, unchanged; the build checks every by-hand number against it.
"""

# %%
# The decoder and its hand-set weights
# ------------------------------------
# The convolution's weight has shape :math:`(2d, d, k)`: its first :math:`d` rows give
# :math:`A`, the last :math:`d` give :math:`B`, the last axis holds the taps for
# :math:`i-2, i-1, i`. The decoder input is ``<sos>`` then token 2; we follow :math:`i = 1`.

import math

import matplotlib.pyplot as plt
import torch

from convs2s_edu import ConvDecoder, ConvS2SConfig, sos_index
from convs2s_edu.lab import figures
from convs2s_edu.seq2seq import EncoderOut

T = torch.tensor


def show(name, value):  # a vector on one line, a matrix one row per line
    for r, row in enumerate(value.detach().reshape(-1, value.shape[-1]).tolist()):
        print(f"{name if r == 0 else '':>26} {'=' if r == 0 else ' '} [", end="")
        print(" ".join(f"{x:7.4f}" for x in row), "]")


num = lambda x: f"({x:g})" if x < 0 else f"{x:g}"  # a factor, negatives in brackets
cfg = ConvS2SConfig(vocab_size=3, embed_dim=2, hidden_dim=2, n_decoder_layers=1, dropout=0.0)
f, d, k, m, i = cfg.embed_dim, cfg.hidden_dim, cfg.kernel_size, 3, 1
torch.manual_seed(0)  # W_o keeps its random initial weights; nothing below uses them
decoder = ConvDecoder(cfg).eval()
emb, conv, att, W_c = decoder.embed, decoder.blocks[0].conv, decoder.attention[0], decoder.W_c[0]
with torch.no_grad():
    # token rows: pad, 1, 2, 3, <sos>, <eos>; position rows p_0, p_1, ...
    emb.token.weight.copy_(T([[0, 0], [1, -1], [0, 1], [1, 1], [1, 0], [-1, 0]]))
    emb.position.weight.zero_()
    emb.position.weight[1] = T([0.5, 0.0])
    decoder.in_proj.weight.copy_(torch.eye(2))  # x_i = g_i
    decoder.in_proj.bias.zero_()
    # per output: [channel 0's taps (i-2, i-1, i), channel 1's taps]
    W_A = [[[1, 0.5, 1], [1, 0, 0]], [[1, 0, -1], [0, 1, 1]]]  # A_0, A_1
    W_B = [[[1, 0, 0], [1, 0, 1]], [[1, 1, 0], [1, 0, -1]]]  # B_0, B_1
    conv.weight.copy_(T(W_A + W_B))
    conv.bias.copy_(T([0, 0, -1, 1]))
    att.W_d.weight.copy_(T([[1, 0], [0, -1]]))
    att.b_d.copy_(T([0, 0.5]))
    W_c.weight.copy_(T([[1, 0], [0.5, -1]]))
    W_c.bias.zero_()

z = T([[1, 0], [0, 1], [-1, 0.5]])  # z_j, keys (m, f)
e = T([[0, 0.5], [0.5, 0], [0, -1]])  # e_j, source embeddings (m, f)
enc = EncoderOut(z[None], e[None], torch.zeros(1, m, dtype=torch.bool), z.mean(0)[None])
tgt_in = T([[sos_index(cfg.vocab_size), 2]])

# what the module computes, recorded by forward hooks; "out" is the input of W_o
outs = {"g": emb, "Y": conv, "h": decoder.blocks[0], "W_d h": att.W_d, "a": att}
with torch.no_grad(), figures.capture(outs | {"W_c c": W_c}) as seen:
    with figures.capture({"out": decoder.W_o}, inputs=True) as seen_in:
        decoder(tgt_in, enc)
module = {name: calls[0] for name, calls in (seen | seen_in).items()}  # (B, T, ...) each
show("z_0, z_1, z_2", z)
show("e_0, e_1, e_2", e)

# %%
# Causal padding and the two halves :math:`A`, :math:`B` (§3.2)
# -------------------------------------------------------------
# The block's input is the embedding of the previous target token plus its position's,
# :math:`x_i = g_i = w_i + p_i` (§3.1; the identity map in between). The decoder pads
# :math:`k-1` zeros on the left, so position :math:`i` sees :math:`x_{i-k+1}, \dots, x_i`
# and nothing later; the convolution maps the window :math:`X = [x_{i-2}, x_{i-1}, x_i]`
# (channels by taps) to :math:`2d` numbers:
#
# .. math:: [A\ B] = W * X + b_w, \qquad
#     Y_o = b_o + \sum_{\text{channel}\ c} \sum_{\text{tap}\ t} W_{o,c,t}\,X_{c,t}.
#
# The window's first column is padding: its weights multiply zeros. Each line lists
# weight * input for channel 0's three taps, channel 1's, then the bias.

x = g = emb.token.weight.data[tgt_in[0]] + emb.position.weight.data[: tgt_in.shape[1]]
show("g_0, g_1 = x_0, x_1", g)
padded = torch.cat([torch.zeros(d, k - 1), x.T], dim=1)  # (d, k-1+T): channels x positions
window = padded[:, i : i + k]  # columns i-2, i-1, i
show("padded input (d, k-1+T)", padded)
show(f"window for i = {i}", window)
Y = (conv.weight.data * window).sum((1, 2)) + conv.bias.data  # (2d,): A_0, A_1, B_0, B_1
A, B = Y[:d], Y[d:]
W_flat = conv.weight.data.flatten(1)  # (2d, d*k)
for o, name in enumerate(["A_0", "A_1", "B_0", "B_1"]):
    terms = " + ".join(f"{num(wt)}*{num(xt)}" for wt, xt in zip(W_flat[o], window.flatten()))
    print(f"{name} = {terms} + {num(conv.bias[o])} = {Y[o]:g}")

# sphinx_gallery_start_ignore
torch.testing.assert_close(g, module["g"][0])
torch.testing.assert_close(Y, module["Y"][0, :, i])  # nn.Conv1d's output is (B, 2d, T)
# sphinx_gallery_end_ignore

# %%
# The gated linear unit and the scaled residual (§3.2, §3.4)
# ----------------------------------------------------------
# The gate :math:`\sigma(B) = 1 / (1 + e^{-B})` decides how much of :math:`A` passes;
# the block input is added back and the sum scaled by :math:`\sqrt{0.5}`:
#
# .. math:: v = A \otimes \sigma(B), \qquad h_i = \sqrt{0.5}\,(v + x_i).

sigma_B = 1 / (1 + torch.exp(-B))
v = A * sigma_B
h = math.sqrt(0.5) * (v + x[i])
show("sigma(B)", sigma_B)
show("v = A * sigma(B)", v)
show("v + x_i", v + x[i])
show("h_i = sqrt(0.5) (v + x_i)", h)

# sphinx_gallery_start_ignore
torch.testing.assert_close(v, torch.nn.functional.glu(module["Y"][0, :, i], dim=0))
torch.testing.assert_close(h, module["h"][0, i])
# sphinx_gallery_end_ignore

# %%
# The query, the attention weights and the conditional input (§3.3, eqs. 1-2)
# ---------------------------------------------------------------------------
# The decoder state is mapped to the embedding size, the embedding of the previous
# target token is added, and a softmax over the dot products with the keys
# :math:`z_j` gives the weights:
#
# .. math:: d_i = W_d h_i + b_d + g_i, \qquad
#     a_{ij} = \frac{\exp(d_i \cdot z_j)}{\sum_{t=0}^{m-1} \exp(d_i \cdot z_t)}
#
# The weights then average the *values* :math:`z_j + e_j`, not the keys:
#
# .. math:: c_i = \sum_{j=0}^{m-1} a_{ij}\,(z_j + e_j).

W_d_h = att.W_d.weight.data @ h
d_i = W_d_h + att.b_d.data + g[i]
show("W_d", att.W_d.weight)
show("b_d", att.b_d)
show("W_d h_i", W_d_h)
show("d_i = W_d h_i + b_d + g_i", d_i)
scores = torch.stack([(d_i * z[j]).sum() for j in range(m)])
for j in range(m):
    terms = " + ".join(f"{d_i[c]:.4f}*{num(z[j, c])}" for c in range(f))
    print(f"d_i . z_{j} = {terms} = {scores[j]:.4f}")
a = torch.exp(scores) / torch.exp(scores).sum()
show("exp(d_i . z_j)", torch.exp(scores))
show("a_ij", a)
values = z + e
c = sum(a[j] * values[j] for j in range(m))
show("z_j + e_j", values)
show("c_i", c)

# sphinx_gallery_start_ignore
c_module, a_module = module["a"]
torch.testing.assert_close(W_d_h, module["W_d h"][0, i])
torch.testing.assert_close(a, a_module[0, i])
torch.testing.assert_close(c, c_module[0, i])
# sphinx_gallery_end_ignore

# %%
# With :math:`f = 2` every vector of this step is a point of the plane, each key
# :math:`z_j` with its weight :math:`a_{ij}` beside it.

fig, ax = plt.subplots(figsize=(5.2, 4.4), layout="constrained")
arrow = dict(angles="xy", scale_units="xy", scale=1, width=0.006)
ax.quiver(0, 0, *d_i, color="k", label="query $d_i$", **arrow)
for j in range(m):
    ax.quiver(0, 0, *z[j], color="C0", label="keys $z_j$" if j == 0 else None, **arrow)
    ax.annotate(f"$a_{{{i}{j}}}$ = {a[j]:.2f}", z[j], textcoords="offset points", xytext=(4, 4))
    ax.plot(*values[j], "s", color="C1", label="values $z_j + e_j$" if j == 0 else None)
ax.plot(*c, "*", ms=14, color="C3", label="context $c_i$")
reach = 1.25 * torch.cat([d_i[None], z, values, c[None]]).abs().max().item()
ax.set(xlim=(-reach, reach), ylim=(-reach, reach), aspect="equal")
ax.legend(fontsize=8)
plt.show()

# %%
# Adding the context to the state (§3.3)
# --------------------------------------
# :math:`W_c` maps :math:`c_i` from :math:`f` to :math:`d` (a departure shared with
# fairseq: the paper adds :math:`c_i` directly); the sum is scaled by :math:`\sqrt{0.5}`:
#
# .. math:: h_i \leftarrow \sqrt{0.5}\,(h_i + W_c c_i).

W_c_c = W_c.weight.data @ c + W_c.bias.data
out = math.sqrt(0.5) * (h + W_c_c)
show("W_c", W_c.weight)
show("W_c c_i", W_c_c)
show("h_i + W_c c_i", h + W_c_c)
show("sqrt(0.5) (h_i + W_c c_i)", out)

# sphinx_gallery_start_ignore
torch.testing.assert_close(W_c_c, module["W_c c"][0, i])
torch.testing.assert_close(out, module["out"][0, i])
# sphinx_gallery_end_ignore

# %%
# The same step at the original notebook's sizes
# ----------------------------------------------
# Nothing above depends on the sizes: the original notebook's :math:`f = d = 128`,
# seeded random weights and source, the same arithmetic written with matrix products.

torch.manual_seed(0)
big = ConvDecoder(ConvS2SConfig(n_decoder_layers=1, dropout=0.0)).eval()
zb, eb = torch.randn(2, m, big.cfg.embed_dim)
cv, ab, Wc = big.blocks[0].conv, big.attention[0], big.W_c[0]
with torch.no_grad(), figures.capture({"out": big.W_o}, inputs=True) as big_seen:
    big(tgt_in, enc._replace(states=zb[None], embedded=eb[None]))
    gb = big.embed(tgt_in)[0]
    xb = big.in_proj(gb)  # (T, d)
    win = torch.cat([torch.zeros(k - 1, xb.shape[1]), xb])[i : i + k]  # (k, d)
    Ab, Bb = (torch.einsum("oct,tc->o", cv.weight, win) + cv.bias).chunk(2)
    hb = math.sqrt(0.5) * (Ab / (1 + torch.exp(-Bb)) + xb[i])
    cb = torch.softmax(zb @ (ab.W_d.weight @ hb + ab.b_d + gb[i]), dim=0) @ (zb + eb)
    out_b = math.sqrt(0.5) * (hb + Wc.weight @ cb + Wc.bias)
err = (big_seen["out"][0][0, i] - out_b).abs().max()
print(f"f = d = {big.cfg.hidden_dim}: max |module - by hand| = {err:.1e}")

# sphinx_gallery_start_ignore
torch.testing.assert_close(out_b, big_seen["out"][0][0, i])
# sphinx_gallery_end_ignore

# %%
# What you saw
# ------------
# * One decoder position through one layer, in numbers: the causal window, the two
#   halves :math:`A` and :math:`B` of the gated linear unit, the scaled residual, the
#   query :math:`d_i`, the weights :math:`a_{ij}` over the keys :math:`z_j`, the context
#   over the values :math:`z_j + e_j`, and the context added to the state; every number
#   equal to what the module computes, at these sizes and at the original notebook's.
# * Where :math:`\sqrt{0.5}` and the values :math:`z_j + e_j` come from: :ref:`Five
#   questions learners ask <sphx_glr_auto_examples_plot_17_questions.py>`.
#
# Try it
# ------
# **1. Causal padding.** The decoder input grows to four positions. Which of
# :math:`x_0, \dots, x_3` can change the block's output :math:`h` at position :math:`i = 1`?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Only :math:`x_{i-1}` and :math:`x_i`: the window's first tap, :math:`i-2`, falls on
# the padding, and later positions are never in it. Nudging one input at a time:

block = decoder.blocks[0]
x4 = T([[[1.0, 0.0], [0.5, 1.0], [1.0, 1.0], [-1.0, 0.5]]])  # (B, T, d)
for j in range(x4.shape[1]):
    nudged = x4.clone()
    nudged[0, j] += 1
    print(f"x_{j} changes h_1:", not torch.equal(block(nudged)[0, 1], block(x4)[0, 1]))

# %%
# .. raw:: html
#
#    </details>
#
# **2. A larger key.** Double :math:`z_1` (its value :math:`z_1 + e_1` changes too). What
# is the new score :math:`d_i \cdot z_1`, and does :math:`a_{i1}` grow or shrink?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The score doubles (:math:`d_i` does not depend on the source in a one-layer decoder),
# so :math:`a_{i1}` grows if the score was positive. The module says:

z2 = z * T([[1], [2], [1]])  # z_1 doubled
with torch.no_grad(), figures.capture({"a": att}) as seen2:
    decoder(tgt_in, enc._replace(states=z2[None]))
print(f"old score {scores[1]:.4f}, new score {(d_i * z2[1]).sum():.4f}")
print(f"old a_i1 {a[1]:.4f}, new a_i1 {seen2['a'][0][1][0, i, 1]:.4f}")

# %%
# .. raw:: html
#
#    </details>
