r"""
Multi-step attention (ConvS2S)
==============================

ConvS2S decides, for every output position, how much of every source position
to read. It scores with a **dot product** between a decoder state and an
encoder output, and does it in **every decoder layer** ("multi-step"), for all
target positions at once.

This page writes the attention out with tiny dimensions and computes it by
hand next to the module :class:`~convs2s_edu.MultiStepAttention`. The GRU
baseline scores differently, with a small additive network once per decoder
step; :ref:`its attention <sphx_glr_auto_examples_plot_02_bahdanau_attention.py>`
has a page of its own. On this page :math:`h` is always the ConvS2S decoder
state :math:`h^l_i`; the GRU's :math:`h_j` (its encoder annotations) appear
only on that page.
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
# The paper's sentences (§3.3), one per equation:
#
#     "To compute the attention, we combine the current decoder state
#     :math:`h^l_i` with an embedding of the previous target element
#     :math:`g_i`" ... "the attention :math:`a^l_{ij}` of state :math:`i` and
#     source element :math:`j` is computed as a dot-product between the decoder
#     state summary :math:`d^l_i` and each output :math:`z^u_j` of the last
#     encoder block :math:`u`" ... "The conditional input :math:`c^l_i` to the
#     current decoder layer is a weighted sum of the encoder outputs as well as
#     the input element embeddings :math:`e_j`."
#
# and the lines of :meth:`MultiStepAttention.forward
# <convs2s_edu.MultiStepAttention.forward>` that compute them, read from the
# package's source:

from convs2s_edu import MultiStepAttention
from convs2s_edu.lab.site import code_lines

for equation in ("d_i = W_d h_i", "d_i · z_j", "a_ij = softmax_j", "c_i = Σ_j a_ij"):
    print(code_lines(MultiStepAttention.forward, equation))

# %%
#
# A worked example: a source of :math:`m = 3` tokens, embeddings of size
# :math:`f = 3`, decoder states of size :math:`d = 4` and two target positions.
# The weights are random numbers rounded to one decimal so that the printout
# can be checked by hand; they replace the module's initial ones, so the
# initialisation (the seed's or the paper's) plays no part here.


import matplotlib.pyplot as plt
import torch

from convs2s_edu.convs2s import ConvMemory

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
for name, value in [("W_d", att.W_d.weight.data), ("b_d", att.b_d.data), ("z^u", z[0])]:
    show(name, value)
for name, value in [("e", e[0]), ("h", h[0]), ("g", g[0])]:
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
err_a, err_c = (a_module[0] - a_hand).abs().max(), (c_module[0] - c_hand).abs().max()
print(f"max |module - hand|: a {err_a:.1e}, c {err_c:.1e}")
print("rows of a sum to", a_module.sum(dim=-1)[0])

# sphinx_gallery_start_ignore
assert torch.allclose(a_module[0], a_hand, atol=1e-6)
assert torch.allclose(c_module[0], c_hand, atol=1e-5)
# sphinx_gallery_end_ignore

# %%
# The worked example's scores and weights as the module computed them: a row
# per target position :math:`i`, a column per source position :math:`j`. The
# softmax turns every row of scores into weights that sum to 1.

fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.8), layout="constrained")
panels = ((r"scores $d_i \cdot z_j$", scores), (r"weights $a_{ij}$", a_module[0]))
for ax, (title, values) in zip(axes, panels):
    ax.imshow(values, cmap="viridis")
    bright = (values - values.min()) / (values.max() - values.min()) > 0.6  # dark text there
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            colour = "k" if bright[i, j] else "w"
            ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", color=colour)
    ax.set(title=title, xlabel="source position j", ylabel="target position i")
    ax.set_xticks(range(values.shape[1]))
    ax.set_yticks(range(values.shape[0]))
plt.show()

# %%
# Padding
# -------
# In a batch, shorter sources are padded. A padded position gets the score
# :math:`-\infty` before the softmax, hence weight exactly zero, and the other
# weights are unchanged. (The paper's model also multiplies :math:`c` by
# :math:`m\sqrt{1/m}`, ``scale_context``: :ref:`its own page
# <sphx_glr_auto_examples_normalisation_plot_05_context_scaling.py>`.)

pad_row = torch.zeros(1, 1, f)
enc_padded = ConvMemory(
    z=torch.cat([z, pad_row], dim=1),
    z_plus_e=torch.cat([z + e, pad_row], dim=1),
    padding_mask=torch.tensor([[False, False, False, True]]),
)
with torch.no_grad():
    c_pad, a_pad = att(h, g, enc_padded)

show("a with a padded 4th position", a_pad[0])
err_a = (a_pad[0, :, :m] - a_module[0]).abs().max()
print(f"max |a - a without padding| on the real positions: {err_a:.1e}")

# sphinx_gallery_start_ignore
assert (a_pad[..., m] == 0).all()
assert torch.allclose(a_pad[0, :, :m], a_module[0], atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# What you saw
# ------------
# * ConvS2S: every decoder layer :math:`l` scores every source position with a
#   dot product, :math:`a^l_{ij} = \mathrm{softmax}_j(d^l_i \cdot z_j)`, and
#   reads the values :math:`z_j + e_j`; all target positions at once.
# * Padded source positions get the score :math:`-\infty`, so zero weight.
# * What the trained model's attention does with these equations, layer by
#   layer, is :ref:`a page after training
#   <sphx_glr_auto_examples_plot_12_trained_attention.py>`.
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

torch.manual_seed(0)
scores = torch.randn(6)
for factor in (1, 10):
    print(factor, f"{torch.softmax(factor * scores, dim=0).max():.3f}")

# %%
# .. raw:: html
#
#    </details>
#
# **2. Padding.** In the padding example above, set the padded position's key
# and value to 100. Does its weight change, and does the context?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Neither: its score is :math:`-\infty` before the softmax, whatever its
# :math:`z`, so nothing of it reaches :math:`c`.

key, value = enc_padded.z.clone(), enc_padded.z_plus_e.clone()
key[:, m:], value[:, m:] = 100.0, 100.0  # only the padded position
c_big, a_big = att(h, g, enc_padded._replace(z=key, z_plus_e=value))
print("weights on padding:", a_big[0, :, m:].abs().max().item())
print("context changed:", not torch.equal(c_big, c_pad))

# %%
# .. raw:: html
#
#    </details>
