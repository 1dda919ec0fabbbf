r"""
The two models at a glance
==========================

Attention (the previous page) lets the recurrent decoder look back at every
source position, but each step still waits for the one before (:math:`s_t`
needs :math:`s_{t-1}`). ConvS2S keeps the attention and drops the recurrence;
this page puts the two side by side before the next pages take ConvS2S apart.

Both trained models run on one sorting example, first as boxes and arrows in
the spirit of the paper's Figure 1 (Gehring et al., 2017): every operation a
box, every tensor an arrow labelled with its symbol and its shape in a forward
pass. ConvS2S stacks convolutions with gated linear units (GLU) and has an
attention in every decoder layer; the recurrent baseline (Bahdanau et al.,
2014) reads the source with a bidirectional GRU and writes one token per GRU
step, each asking a single additive attention where to look. Beside each, its
critical path: how many operations must run one after another. Then the
activations: what every box computed, as heatmaps of each tensor's first
channels.
"""
# %%
# The trained models
# ------------------
# :func:`~convs2s_edu.train_or_load` loads both models from the cache when an
# earlier page (or an earlier build) trained them, and trains them otherwise
# (:ref:`the training page <sphx_glr_auto_examples_plot_09_training.py>` says
# how long that takes).

import matplotlib.pyplot as plt
import torch

from convs2s_edu import collate_batch, make_datasets, train_or_load
from convs2s_edu.lab import figures
from convs2s_edu.lab.schematic import convs2s_schematic, gru_schematic
from convs2s_edu.lab.site import site_config

MODELS = ("convs2s", "gru")
results = {name: train_or_load(site_config(name)) for name in MODELS}
test_set = make_datasets(site_config("convs2s"))[2]
cfg = results["convs2s"].config
print(f"trained on {cfg.n_train:,} examples for {cfg.epochs} epochs")

# %%
# One example
# -----------
# The shortest test example, run with teacher forcing: the decoder reads
# ``<sos>`` and the correct prefix, as in training, and predicts the next token
# at every position at once.

CHANNELS = 12  # channels shown per tensor (of 128)
source, target = min(test_set.examples, key=lambda ex: (len(ex[0]), ex[0]))
batch = collate_batch([(source, target)], cfg.vocab_size)
print("source:", source)
print("sorted:", target)

# %%
# ConvS2S as boxes and arrows
# ---------------------------
# :func:`~convs2s_edu.lab.schematic.convs2s_schematic` runs the trained model
# on the example and draws it: every label below is the shape of a tensor of
# that forward pass (the batch of one left out). Follow the orange arrows:
# the keys :math:`z_j` and values :math:`z_j + e_j` leave the encoder, every
# decoder layer's query :math:`d_i = W_d h_i + b_d + g_i` scores them, and the
# context :math:`c_i` comes back as :math:`W_c c_i`, added to the decoder
# state before the next layer. The box on the left counts the critical path.

conv_figure = convs2s_schematic(results["convs2s"].model, batch.src, batch.tgt_in)
conv_figure

# %%
# The GRU baseline as boxes and arrows
# ------------------------------------
# The same example through the baseline. The orange arrow back from
# :math:`s_t` to :math:`s_{t-1}` is the sequential dependency: step :math:`t`
# needs the state of step :math:`t-1`, in training as in generation.

gru_figure = gru_schematic(results["gru"].model, batch.src, batch.tgt_in)
gru_figure

# %%
# The critical paths side by side, counted from the two models' configurations
# and this example's lengths:

for name, fig in (("ConvS2S", conv_figure), ("GRU", gru_figure)):
    for phase in ("training", "generation"):
        path = fig.critical_path[phase]
        print(f"{name:8s} {phase:10s} {path['formula']:>15s} = {path['count']}")

# sphinx_gallery_start_ignore
# The site's build (docs/conf.py) sets CONVS2S_EDU_SITE_DATA: the landing page opens
# with these two figures.
from convs2s_edu.lab.site import record_svg

_ = record_svg("schematic_convs2s", conv_figure.svg)  # the paths written: not shown
_ = record_svg("schematic_gru", gru_figure.svg)
# sphinx_gallery_end_ignore

# %%
# ConvS2S activations: what every box computed
# --------------------------------------------
# Forward hooks (:func:`~convs2s_edu.lab.figures.capture`) record the
# embeddings :math:`e_j = w_j + p_j`, the output of every encoder block
# (convolution, GLU, residual), the encoder output :math:`z_j`, the decoder's
# attention weights :math:`a^l_{ij}` (one matrix per decoder layer) and every
# decoder layer's state *after* its context :math:`W_c c_i` was added: the
# input of the next block, or of the output layer after the last.

conv = results["convs2s"].model.cpu().eval()
enc, dec = conv.encoder, conv.decoder
after_context = [*dec.blocks[1:], dec.dropout]  # what reads each layer's h + W_c c
with torch.no_grad():
    with (
        figures.capture({"e": enc.embed, "g": dec.embed} | dict(enumerate(enc.blocks))) as taps,
        figures.capture(dict(enumerate(after_context)), inputs=True) as states,
    ):
        logits, attention = conv(batch.src, batch.tgt_in, return_attention=True)
    encoded = dec.memory(conv.encode(batch.src))  # z and z + e for the figure
L_enc, L_dec = len(enc.blocks), len(dec.blocks)
V = cfg.vocab_size
conv_pred_labels = figures.token_labels(logits[0].argmax(-1), V)
print(f"{L_enc} encoder blocks, {L_dec} decoder blocks, kernel width {conv.cfg.kernel_size}")
print("ConvS2S predicts (teacher forcing):", " ".join(conv_pred_labels))

# %%
# The lab's heatmaps draw them (:func:`~convs2s_edu.lab.figures.channel_heatmap`,
# :func:`~convs2s_edu.lab.figures.attention_heatmap`); a small helper draws the
# last panel, the output probabilities with the predicted token of every position.

src_labels = figures.token_labels(batch.src[0], V)
tgt_labels = figures.token_labels(batch.tgt_in[0], V)


def attention_map(ax, a, title):
    """Grey, small type, source labels turned like the heatmaps'."""
    kw = dict(cmap="Greys", fontsize=7, xlabel="source $j$", ylabel="decoder input $i$")
    figures.attention_heatmap(ax, a, src_labels, tgt_labels, title=title, **kw)
    ax.tick_params(axis="x", labelrotation=90)


def probabilities(ax, logits, labels):
    p = torch.softmax(logits.detach().float(), dim=-1).numpy()  # (T, V)
    ax.imshow(p.T, cmap="Greens", vmin=0, vmax=1, aspect="auto", origin="lower")
    ax.set_title("output $p(y_{i+1})$\npredicted token", fontsize=9)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    ax.set_ylabel("token id", fontsize=7)
    ax.tick_params(axis="y", labelsize=7)


def draw_convs2s():
    fig = plt.figure(figsize=(13, 9.5), layout="constrained")
    grid = fig.add_gridspec(3, max(L_enc + 3, L_dec + 2))
    block = "conv + GLU + residual"
    enc_panels = [("embedding\n$e_j = w_j + p_j$", taps["e"][0][0])]
    enc_panels += [(f"encoder block {i + 1}\n{block}", taps[i][0][0]) for i in range(L_enc)]
    enc_panels += [("keys $z_j$", encoded.z[0]), ("values $z_j + e_j$", encoded.z_plus_e[0])]
    block = "causal\nconv + GLU, then + $W_c c_i$"
    dec_panels = [("decoder input\n$g_i = w_i + p_i$", taps["g"][0][0])]
    dec_panels += [(f"decoder layer {l + 1}: {block}", states[l][0][0]) for l in range(L_dec)]
    for row, panels, labels in ((0, enc_panels, src_labels), (2, dec_panels, tgt_labels)):
        for col, (title, x) in enumerate(panels):
            ax = fig.add_subplot(grid[row, col])
            figures.channel_heatmap(ax, x, labels, title=title, channels=CHANNELS)
    for l in range(L_dec):
        title = f"attention in decoder layer {l + 1}\n$a^{l + 1}_{{ij}}$"
        attention_map(fig.add_subplot(grid[1, l]), attention[0, l], title)
    probabilities(fig.add_subplot(grid[2, len(dec_panels)]), logits[0], conv_pred_labels)
    fig.suptitle("ConvS2S activations: encoder (top), one attention per decoder layer, decoder")
    return fig


# %%
# GRU activations: what every box computed
# ----------------------------------------
# The same example through the recurrent model: the source embeddings, the
# bidirectional GRU's annotations :math:`h_j` (forward and backward halves
# concatenated), its one attention :math:`a_{tj}` and the decoder states
# :math:`s_t`, one GRU step per output position.

gru = results["gru"].model.cpu().eval()
modules = {"x": gru.encoder.embed, "y": gru.decoder.embed, "s": gru.decoder.gru}
with torch.no_grad():
    gru_logits, gru_attention = gru(batch.src, batch.tgt_in, return_attention=True)
    # the same teacher forcing one step at a time, to see every step's modules at work
    with figures.capture(modules) as gru_taps:
        state = gru.decoder.start(gru.encode(batch.src))
        for t in range(batch.tgt_in.shape[1]):
            state = gru.decoder.step(batch.tgt_in[:, t], state)[2]
    h = gru.encode(batch.src).states[0]  # (S, 2n)
gru_pred_labels = figures.token_labels(gru_logits[0].argmax(-1), V)
y_in = torch.stack([out[0] for out in gru_taps["y"]])  # (T, E): one call per step
s_t = torch.cat([out[0][0] for out in gru_taps["s"]], dim=0)  # (T, n): likewise
print("GRU predicts (teacher forcing):    ", " ".join(gru_pred_labels))


def draw_gru():
    ratios = [1, 1, 1.4, 1, 1, 1]  # the attention map gets more room
    fig, axes = plt.subplots(1, 6, figsize=(13, 3.6), layout="constrained", width_ratios=ratios)
    panels = [
        (axes[0], gru_taps["x"][0][0], "source embedding\n$E x_j$", src_labels),
        (axes[1], h, "bidirectional GRU\n$h_j = [\\vec h_j; \\overleftarrow{h}_j]$", src_labels),
        (axes[3], y_in, "decoder input\n$E y_{t-1}$", tgt_labels),
        (axes[4], s_t, "decoder GRU states $s_t$\n(one step after another)", tgt_labels),
    ]
    for ax, x, title, labels in panels:
        figures.channel_heatmap(ax, x, labels, title=title, channels=CHANNELS)
    attention_map(axes[2], gru_attention[0], "one additive attention\n$a_{tj}$")
    probabilities(axes[5], gru_logits[0], gru_pred_labels)
    fig.suptitle("GRU + Bahdanau attention: activations on the same example")
    return fig


# %%
# The activations
# ---------------
# Each heatmap shows the first channels of one tensor, one column per
# position; colours are the values (blue negative, red positive), each panel
# on its own scale. Read the ConvS2S picture from the top: the encoder, the
# attention row, then the decoder, each layer's state after its context.

draw_convs2s()
plt.show()

# %%
# The baseline has one attention, and its decoder states come one after
# another: step :math:`t` needs :math:`s_{t-1}`.

draw_gru()
plt.show()

# %%
# What you saw
# ------------
# * ConvS2S computes every position of a layer at once: its blocks are
#   convolutions (causal in the decoder), and each decoder layer has its own
#   attention, which reads :math:`z_j + e_j` and adds :math:`W_c c_i` to the state.
# * The GRU baseline reads the source with a bidirectional GRU and writes one
#   token per step, each step waiting for the state of the one before.
# * The critical paths printed above count what cannot run at the same time;
#   the speed chapter measures what that is worth on real hardware.
#
# Try it
# ------
# **1. Steps in a row.** For the example above, how many GRU decoder steps
# ran one after another, and how many decoder layers did ConvS2S stack?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# One GRU step per decoder input (``<sos>`` and the sorted tokens), against a
# fixed number of ConvS2S layers, whatever the length:

print("GRU decoder steps:", len(gru_taps["s"]))  # one call per step
print("decoder inputs:   ", len(tgt_labels))
print("ConvS2S decoder layers:", L_dec)

# %%
# .. raw:: html
#
#    </details>
#
# **2. Where the source enters.** The decoder reads the source only through
# the orange arrows. Set every :math:`W_c` to zero: does the ConvS2S decoder's
# output still depend on the source? Predict, then compare two sources.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# It does not: with :math:`W_c c_i = 0` nothing of the encoder reaches the
# decoder state, and the logits of two different sources come out identical
# (the largest difference printed first). With the trained :math:`W_c` they
# differ (second number):

other = batch.src.flip(1)  # the same tokens in the reverse order


def source_gap():
    """The largest logit difference between the two sources."""
    with torch.no_grad():
        return float((conv(batch.src, batch.tgt_in) - conv(other, batch.tgt_in)).abs().max())


trained_gap = source_gap()
zero = [W.register_forward_hook(lambda m, i, out: torch.zeros_like(out)) for W in dec.W_c]
blind_gap = source_gap()  # every W_c c_i replaced by zeros
for hook in zero:
    hook.remove()
print(f"largest logit difference: without W_c {blind_gap:.2e}, trained {trained_gap:.2e}")
# sphinx_gallery_start_ignore
assert blind_gap == 0.0 and trained_gap > 0.0 and source_gap() == trained_gap
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
