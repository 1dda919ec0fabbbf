r"""
The convolutional encoder and the causal decoder
================================================

The encoder and the decoder of ConvS2S are stacks of the same
:class:`~convs2s_edu.ConvBlock`; they differ in where the zeros go. The encoder
pads :math:`(k-1)/2` zeros on each side, so every output sees a window
*centred* on its position. The decoder pads :math:`k-1` zeros on the left only,
so output :math:`i` sees inputs :math:`i-k+1, \dots, i` and never a later one:
it is *causal*, which lets training compute all target positions at once
without peeking at the answer.

This page measures both properties on untrained models: how far each output
sees after :math:`l` layers (its receptive field), and that changing a future
target token leaves the earlier outputs untouched. The models use
``ConvS2SConfig`` (the original notebook's initialisation); the site trains
``ConvS2SConfig.paper()``, but both properties come from where the zeros go,
not from the weights, and the build checks them for the paper's configuration.
"""

# %%
# Receptive fields, measured by gradients
# ---------------------------------------
# An output position depends on an input position exactly when the gradient of
# the one with respect to the other is non-zero. For every depth :math:`l` the
# cell builds a model with :math:`l` layers and records which input embeddings
# have a non-zero gradient at one output position :math:`i` in the middle:
#
# * encoder: the output :math:`z^u_i` of :class:`~convs2s_edu.ConvEncoder`
#   with respect to the source embeddings :math:`e_j`;
# * decoder: the logits at :math:`i` of :class:`~convs2s_edu.ConvDecoder`
#   with respect to the target embeddings :math:`g_j`.
#
# A forward hook on the embedding module
# (:func:`~convs2s_edu.lab.figures.capture`) keeps its output, so the gradients
# flow through the modules' own forward passes. Each layer of width :math:`k`
# adds :math:`k-1` positions (§3.2's example: "stacking 6 blocks with k=5 results
# in an input field of 25 elements"), so after :math:`l` layers an output sees
#
# .. math:: r(l) = 1 + l\,(k-1)
#
# inputs: centred on :math:`i` in the encoder, ending at :math:`i` in the
# decoder.

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from convs2s_edu import ConvBlock, ConvDecoder, ConvEncoder, ConvS2S, ConvS2SConfig, sos_index
from convs2s_edu.lab import figures

VOCAB_SIZE, LENGTH, CENTRE, MAX_LAYERS = 50, 31, 15, 7
tiny = ConvS2SConfig(vocab_size=VOCAB_SIZE, embed_dim=16, hidden_dim=16, dropout=0.0)  # k = 3
rng = torch.Generator().manual_seed(0)
src = torch.randint(1, VOCAB_SIZE + 1, (1, LENGTH), generator=rng)  # no padding
tgt_in = torch.randint(1, VOCAB_SIZE + 1, (1, LENGTH), generator=rng)
tgt_in[0, 0] = sos_index(VOCAB_SIZE)


def encoder_field(n_layers: int) -> np.ndarray:
    """Which source positions j change z^u_i: a boolean vector over j."""
    torch.manual_seed(n_layers)
    enc = ConvEncoder(tiny.replace(n_encoder_layers=n_layers)).eval()
    with figures.capture({"e": enc.embed}, retain_grad=True) as seen:
        z = enc(src).states  # (1, S, f): z^u
    z[0, CENTRE].sum().backward()
    return (seen["e"][0].grad[0].abs().sum(dim=-1) > 0).numpy()


def decoder_field(n_layers: int) -> np.ndarray:
    """Which target input positions j change the logits at position i."""
    torch.manual_seed(n_layers)
    cfg = tiny.replace(n_encoder_layers=1, n_decoder_layers=n_layers)
    enc, dec = ConvEncoder(cfg).eval(), ConvDecoder(cfg).eval()
    with figures.capture({"e": dec.embed}, retain_grad=True) as seen:
        logits, _ = dec(tgt_in, enc(src))  # (1, T, V)
    r = torch.randn(logits.shape[-1])  # a random direction: no accidental cancellation
    (logits[0, CENTRE] * r).sum().backward()
    return (seen["e"][0].grad[0].abs().sum(dim=-1) > 0).numpy()


depths = np.arange(1, MAX_LAYERS + 1)
enc_fields = np.stack([encoder_field(int(l)) for l in depths])  # (L, S)
dec_fields = np.stack([decoder_field(int(l)) for l in depths])  # (L, T)

k = tiny.kernel_size
print(f"k = {k}, output position i = {CENTRE}")
print(" l | 1 + l(k-1) | encoder: size  inputs | decoder: size  inputs")
for l, ef, df in zip(depths, enc_fields, dec_fields):
    ej, dj = np.flatnonzero(ef), np.flatnonzero(df)
    print(
        f"{l:2d} | {1 + l * (k - 1):10d} "
        f"| {ef.sum():13d}  {ej.min():2d}..{ej.max():2d} "
        f"| {df.sum():13d}  {dj.min():2d}..{dj.max():2d}"
    )

# sphinx_gallery_start_ignore
for l, ef, df in zip(depths, enc_fields, dec_fields):
    r = 1 + l * (k - 1)
    assert ef.sum() == r and df.sum() == r
    ej, dj = np.flatnonzero(ef), np.flatnonzero(df)
    assert ej.min() == CENTRE - l * (k - 1) // 2 and ej.max() == CENTRE + l * (k - 1) // 2
    assert dj.max() == CENTRE and dj.min() == CENTRE - l * (k - 1)
    assert (np.diff(ej) == 1).all() and (np.diff(dj) == 1).all()  # contiguous windows
# sphinx_gallery_end_ignore

# %%
# The figure draws the same table: one row per depth, filled where input
# :math:`j` reaches output :math:`i` (outlined); the dots mark the edges that
# :math:`1 + l(k-1)` predicts. The encoder's window grows by :math:`(k-1)/2`
# per side and layer, the decoder's to the left only.


def draw_field(ax, fields, title, causal):
    extent = (-0.5, fields.shape[1] - 0.5, depths[-1] + 0.5, depths[0] - 0.5)
    ax.imshow(fields, cmap="Blues", vmin=-0.2, vmax=1.3, aspect="auto", extent=extent)
    reach = depths * (k - 1)
    left = CENTRE - (reach if causal else reach // 2)
    right = CENTRE + (0 * reach if causal else reach // 2)
    edge = dict(color="tab:orange", markersize=4)
    ax.plot(left - 0.5, depths, "o", **edge, label="formula: edge of $1 + l(k-1)$")
    ax.plot(right + 0.5, depths, "o", **edge)
    label = f"output position $i$ = {CENTRE}"
    ax.axvspan(CENTRE - 0.5, CENTRE + 0.5, fill=False, edgecolor="tab:red", lw=1.5, label=label)
    ax.set(title=title, xlabel="input position $j$", ylabel="layers $l$", yticks=depths)


fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 3.8), layout="constrained", sharey=True)
draw_field(ax0, enc_fields, "Encoder: centred convolutions", causal=False)
draw_field(ax1, dec_fields, "Decoder: causal convolutions", causal=True)
ax1.legend(loc="lower right", fontsize=9)
fig.suptitle(r"Inputs $j$ that reach output $i$ after $l$ layers (non-zero gradient)")
plt.show()

# %%
# The window of an encoder output with the original notebook's configuration, against
# the original notebook's longest sources: when the window is the shorter, it is
# attention over all :math:`z^u_j` that gives every decoder position the whole source.

original = ConvS2SConfig()
MAX_LEN = 20  # the original notebook's sequences have 8 to 20 tokens
layers, width = original.n_encoder_layers, original.kernel_size
field = 1 + layers * (width - 1)
print(f"original notebook: {layers} encoder layers, k = {width}: receptive field {field}")
print(f"longest source: {MAX_LEN} tokens; covered by one output: {field >= MAX_LEN}")

# %%
# The decoder's padding, and the paper's wording
# ----------------------------------------------
# A convolution of width :math:`k` over :math:`n` inputs returns
# :math:`n - k + 1` outputs. §3.2 of the paper pads the decoder's input "by
# :math:`k-1` elements on both the left and right side by zero vectors, and
# then remove[s] :math:`k` elements from the end of the convolution output".
# Taken literally, that leaves one output too few; removing :math:`k - 1`
# elements gives exactly the outputs of the code's left padding. Both, for
# :math:`T = 6` and a decoder block's own convolution:

T6 = 6
blk = ConvBlock(4, k, causal=True).eval()
x6 = torch.randn(1, T6, 4)  # (B, T, d)
with torch.no_grad():  # F.pad's last pair pads dimension 1, the positions
    both = blk.convolve(F.pad(x6, (0, 0, k - 1, k - 1)))  # the paper's padding
    left = blk.convolve(F.pad(x6, (0, 0, *blk.padding)))  # the code's: (k - 1, 0)
print(f"T = {T6}, k = {k}, padding of the code (left, right) = {blk.padding}")
print(f"paper: {T6 + 2 * (k - 1)} inputs -> {both.shape[1]} outputs, remove k -> ", end="")
print(f"{both[:, :-k].shape[1]} outputs")
print(f"code : {T6 + k - 1} inputs -> {left.shape[1]} outputs")
same = torch.allclose(both[:, : -(k - 1)], left)
print(f"paper's outputs with k - 1 removed == the code's: {same}")

# sphinx_gallery_start_ignore
assert both[:, :-k].shape[1] == T6 - 1 and left.shape[1] == T6 and same
# sphinx_gallery_end_ignore

# %%
# Causality: a future token changes nothing before it
# ---------------------------------------------------
# A full :class:`~convs2s_edu.ConvS2S` decodes a target with teacher forcing,
# then again with the decoder input at position ``j`` replaced: the logits
# before ``j`` must be identical; from ``j`` on they may differ. A changed
# *source* token reaches every decoder position through attention.

torch.manual_seed(0)
model = ConvS2S(ConvS2SConfig(vocab_size=VOCAB_SIZE)).eval()  # the original notebook's sizes
T, j = tgt_in.shape[1], 20
changed_tgt = tgt_in.clone()
changed_tgt[0, j] = changed_tgt[0, j] % VOCAB_SIZE + 1  # another ordinary token
changed_src = src.clone()
changed_src[0, 3] = changed_src[0, 3] % VOCAB_SIZE + 1

with torch.no_grad():
    base = model(src, tgt_in)  # (1, T, V)
    diff_tgt = (model(src, changed_tgt) - base).abs().amax(dim=-1)[0]  # (T,)
    diff_src = (model(changed_src, tgt_in) - base).abs().amax(dim=-1)[0]
print(f"changed decoder input position j = {j}")
print(f"  max |change| of logits at positions <  j: {diff_tgt[:j].max():.3g}")
print(f"  max |change| of logits at positions >= j: {diff_tgt[j:].max():.3g}")
print("changed one source token")
print(f"  smallest max |change| over all decoder positions: {diff_src.min():.3g}")

# sphinx_gallery_start_ignore
assert diff_tgt[:j].max() == 0.0
assert diff_tgt[j] > 0
reach = model.cfg.n_decoder_layers * (model.cfg.kernel_size - 1)
assert (diff_tgt[j : j + reach + 1] > 0).all() and (diff_tgt[j + reach + 1 :] == 0).all()
assert (diff_src > 0).all()
paper = ConvS2S(ConvS2SConfig.paper(vocab_size=VOCAB_SIZE)).eval()  # the site's configuration
with torch.no_grad():
    diff_paper = (paper(src, changed_tgt) - paper(src, tgt_in)).abs().amax(dim=-1)[0]
assert diff_paper[:j].max() == 0.0 and diff_paper[j] > 0
# sphinx_gallery_end_ignore

# %%
# Per decoder position, on a log scale (exact zeros at the bottom edge): the
# target token at ``j`` reaches only the positions within the decoder's
# :term:`receptive field` from ``j`` on; the source token reaches every position.

floor = 1e-9
fig, ax = plt.subplots(figsize=(9, 3.4), layout="constrained")
changed = f"decoder input at position j = {j} changed"
ax.semilogy(np.arange(T), np.maximum(diff_tgt.numpy(), floor), "o-", label=changed)
changed = "source token at position 3 changed"
ax.semilogy(np.arange(T), np.maximum(diff_src.numpy(), floor), "s-", alpha=0.7, label=changed)
ax.axvline(j - 0.5, color="tab:red", linestyle="--", linewidth=1)
ax.annotate("exactly 0", (0, floor), xytext=(0, 4), textcoords="offset points", fontsize=8)
ax.set(ylim=(floor / 3, None), xlabel="decoder position $i$", ylabel=r"max$_v$ |$\Delta$ logit|")
ax.set_title("Causal decoder: no position sees a later target token")
ax.legend(fontsize=8)
plt.show()

# %%
# What you saw
# ------------
# * The encoder pads :math:`(k-1)/2` zeros on each side: after :math:`l`
#   blocks an output sees a centred window of :math:`1 + l(k-1)` inputs.
# * The decoder pads :math:`k-1` zeros on the left only: output :math:`i` sees
#   inputs :math:`i - l(k-1), \dots, i` and nothing later, so training can
#   compute every target position at once. The paper's "pad both sides, remove
#   :math:`k`" leaves one output too few; removing :math:`k-1` is left padding.
# * Both were measured: by gradients, and by changing a future token.
#
# Try it
# ------
# **1. Kernel width 5.** What receptive field does an encoder output have after
# 4 blocks, and which inputs does decoder output 20 see?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`1 + 4 \cdot 4 = 17` inputs, 8 on each side, for the encoder; inputs
# 4 to 20 for the decoder. Measured by gradients, as above:


def seen_by(blocks, position, length=41, d=8):
    """Input positions whose gradient reaches output ``position``."""
    x = torch.randn(1, length, d, requires_grad=True)
    torch.nn.Sequential(*blocks)(x)[0, position].sum().backward()
    hit = (x.grad[0].abs().sum(-1) > 0).nonzero().flatten()
    return hit.min().item(), hit.max().item(), len(hit)


torch.manual_seed(0)
for causal in (False, True):
    stack = [ConvBlock(8, 5, causal=causal).eval() for _ in range(4)]
    first, last, n = seen_by(stack, 20)
    print(f"causal={causal}: inputs {first}..{last} ({n} positions)")

# %%
# .. raw:: html
#
#    </details>
#
# **2. Causal padding on the right.** Put the decoder's :math:`k-1` zeros on
# the right instead of the left. What breaks, and which test catches it?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Output :math:`i` now sees inputs :math:`i, \dots, i+k-1`: the *next* target
# tokens, which teacher forcing puts in the decoder's input. Training would
# learn to copy them (a near-zero loss) and fail at test time, with no next
# token to copy. ``tests/test_seq2seq.py::test_decoder_is_causal`` fails for
# every model with the convolutional decoder, and so does the block-level
# causality test of ``tests/test_convs2s.py``. Right padding by hand:

blk = ConvBlock(8, 3, causal=True).eval()
x = torch.randn(1, 10, 8, requires_grad=True)
right = F.pad(x, (0, 0, 0, blk.kernel_size - 1))  # (1, 10 + k - 1, 8)
v = F.glu(blk.convolve(right), dim=-1)  # (1, 10, 8)
v[0, 3].sum().backward()
print("output 3 depends on inputs", (x.grad[0].abs().sum(-1) > 0).nonzero().flatten().tolist())

# %%
# .. raw:: html
#
#    </details>
