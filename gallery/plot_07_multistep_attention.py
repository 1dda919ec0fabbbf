r"""
Multi-step attention (ConvS2S)
==============================

ConvS2S decides, for every output position, how much of every source position
to read. It scores with a **dot product** between a decoder state and an
encoder output, and does it in **every decoder layer** ("multi-step"), for all
target positions at once: the context that layer 1 reads enters layer 2's
query, so layer 2 attends knowing what layer 1 found.

This page computes one layer's attention by hand next to the module
:class:`~convs2s_edu.MultiStepAttention`, then follows a context from layer 1
into layer 2, before training and on the trained model. The GRU baseline
scores differently, with a small additive network once per decoder step;
:ref:`its attention <sphx_glr_auto_examples_plot_02_bahdanau_attention.py>` has
a page of its own. Here :math:`h` is always the ConvS2S decoder state
:math:`h^l_i`.
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
# A worked example: a source of :math:`m = 3` tokens, embeddings of size
# :math:`f = 3`, decoder states of size :math:`d = 4` and two target positions.
# The weights are random numbers rounded to one decimal so that the printout
# can be checked by hand; they replace the module's initial ones, so the
# initialisation (the original notebook's or the paper's) plays no part here.


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
# Attention in every layer: layer 1's context in layer 2's query
# --------------------------------------------------------------
# §3.3 gives the reason for an attention in every layer: "the attention of the first
# layer determines a useful source context which is then fed to the second layer
# that takes this information into account when computing attention", and "the
# decoder also has immediate access to the attention history of the :math:`k-1`
# previous time steps because the conditional inputs :math:`c^{l-1}_{i-k}, \dots,
# c^{l-1}_i` are part of :math:`h^{l-1}_{i-k}, \dots, h^{l-1}_i` which are input to
# :math:`h^l_i`". The cell builds a small untrained ConvS2S with two decoder layers
# (kernel width :math:`k = 3`) and follows the path by hand: layer 1's output
# :math:`\sqrt{0.5}\,(h^1_i + W^1_c c^1_i)` holds its context, layer 2's convolution
# block turns it into :math:`h^2_i`, and :math:`d^2_i = W^2_d h^2_i + b^2_d + g_i`
# scores the source.

from convs2s_edu import ConvS2S, ConvS2SConfig, sos_index

small = ConvS2SConfig(vocab_size=6, embed_dim=4, hidden_dim=4, n_decoder_layers=2, dropout=0.0)
torch.manual_seed(1)
tiny = ConvS2S(small).eval()
src = torch.tensor([[4, 1, 5, 2, 3]])  # (B, S)
tgt_in = torch.tensor([[sos_index(6), 1, 2, 3, 4, 5]])  # (B, T): <sos> y_1 ... y_5
seen = {}


def record(module, inputs, outputs):  # layer 1's inputs (h, g, memory) and outputs (c, a)
    seen.update(zip(("h1", "g", "memory", "c1"), (*inputs, outputs[0])))
    return seen["change"](outputs) if "change" in seen else None


tiny.decoder.attention[0].register_forward_hook(record)
with torch.no_grad():
    _, a_tiny = tiny(src, tgt_in, return_attention=True)  # (B, L, T, S)
    out1 = (seen["h1"] + tiny.decoder.W_c[0](seen["c1"])) * 0.5**0.5  # its context in it
    h2 = tiny.decoder.blocks[1](out1)  # layer 2's convolution block
    d2 = tiny.decoder.attention[1].W_d(h2) + tiny.decoder.attention[1].b_d + seen["g"]  # d^2_i
    a2_hand = torch.softmax(d2 @ seen["memory"].z.transpose(1, 2), dim=-1)  # a^2_ij
print(f"layer 2's weights, by hand against the module: {(a2_hand - a_tiny[:, 1]).abs().max():.1e}")

# %%
# Now change what layer 1 read at one position :math:`i_0 = 2` only, as if it had put all
# its weight on another source position, and compare every position's weights again.
# Layer 1's weights cannot change (its query holds no context); layer 2's change at
# :math:`i_0` and at the :math:`k-1 = 2` positions after it, whose convolution windows
# hold :math:`i_0`, and nowhere else: the attention history of §3.3, and causality.

i0, j_other = 2, 0


def elsewhere(outputs):  # c^1_{i0} as if layer 1 had read source position j_other only
    c = outputs[0].clone()
    c[:, i0] = seen["memory"].z_plus_e[:, j_other]  # that position's value z_j + e_j
    return c, outputs[1]


seen["change"] = elsewhere
with torch.no_grad():
    _, a_changed = tiny(src, tgt_in, return_attention=True)
moved = (a_changed - a_tiny).abs().sum(-1)[0] / 2  # (L, T): total variation per position
for l in range(2):
    print(f"layer {l + 1}: weight moved at positions i = 0..5:", moved[l].numpy().round(4))

fig, ax = plt.subplots(figsize=(6.4, 2.8), layout="constrained")
span = (i0 - 0.5, i0 + small.kernel_size - 0.5)  # positions i0 .. i0 + k - 1
ax.axvspan(*span, color="0.9", label="$i_0, \\dots, i_0 + k - 1$")
for l, hatch in ((0, ""), (1, "//")):
    x = torch.arange(moved.shape[1]) + 0.38 * l - 0.19
    ax.bar(x, moved[l], 0.36, hatch=hatch, label=f"layer {l + 1}", color=f"C{l}")
ax.set_yscale("log")  # a bar of 0 is not drawn: no weight moved there
ax.set_ylim(moved[moved > 0].min() / 10, 1)
ax.set(xlabel="target position $i$", ylabel="weight moved (total variation)")
ax.set_title("Layer 1's context changed at $i_0 = 2$ only")
ax.legend()
plt.show()

# %%
# The trained model
# -----------------
# The same question of the trained ConvS2S (:ref:`trained on the training page
# <sphx_glr_auto_examples_plot_10_training.py>`), on the test set: switch layer 1's
# context off (:math:`c^1_i = 0`), and see how far the later layers' weights move
# and what the token accuracy of teacher-forced prediction becomes.

from convs2s_edu import collate_batch, train_or_load
from convs2s_edu.lab.site import quick_caveat, site_config
from convs2s_edu.training.config import make_datasets

trained = train_or_load(site_config("convs2s"))
model = trained.model.eval()
tb = collate_batch(list(make_datasets(trained.config)[2]), trained.config.vocab_size)
real = tb.tgt_out.ne(0)  # (B, T): the positions the loss reads
with torch.no_grad():
    logits, a_on = model(tb.src, tb.tgt_in, return_attention=True)
    hook = model.decoder.attention[0].register_forward_hook(
        lambda module, inputs, outputs: (torch.zeros_like(outputs[0]), outputs[1])  # c^1 = 0
    )
    logits_off, a_off = model(tb.src, tb.tgt_in, return_attention=True)
    hook.remove()
for name, out in (("intact", logits), ("layer 1's context off", logits_off)):
    print(f"{name:22s} token accuracy {(out.argmax(-1) == tb.tgt_out)[real].float().mean():.1%}")
moved = (a_on - a_off).abs().sum(-1) / 2  # (B, L, T): total variation per position
for l in range(moved.shape[1]):
    print(f"layer {l + 1}: mean weight moved per position {moved[:, l][real].mean():.3f}")
quick_caveat("this printout")

# %%
# What you saw
# ------------
# * Every decoder layer :math:`l` scores every source position with a dot product,
#   :math:`a^l_{ij} = \mathrm{softmax}_j(d^l_i \cdot z_j)`, reads the values
#   :math:`z_j + e_j`, and adds :math:`W^l_c c^l_i` to its state; padded source
#   positions get zero weight.
# * Layer 2's query is built from layer 1's output, context included: changing what
#   layer 1 read at one position moves layer 2's weights there and at the :math:`k-1`
#   positions after it, and nowhere else. The printout above gives what switching layer
#   1's context off does to the trained model.
# * What each trained layer attends to is :ref:`a page after training
#   <sphx_glr_auto_examples_plot_13_trained_attention.py>`.
#
# Try it
# ------
# **1. Padding.** In the padding example above, set the padded position's key
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
