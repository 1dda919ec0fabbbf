r"""
The two models at a glance
==========================

One sorting example goes through both trained models, and every arrow of the
pictures below carries the numbers the models computed for it. The first
picture follows the paper's Figure 1 (Gehring et al., 2017): embeddings,
stacks of convolutions with gated linear units (GLU), an attention in every
decoder layer, and the sum :math:`z_j + e_j` that the attention reads its
values from. The second picture shows the recurrent baseline (Bahdanau et al.,
2014) on the same example: a bidirectional GRU reads the source, and one GRU
step per output token asks a single additive attention where to look.

Each heatmap shows the first channels of one tensor, one column per position;
colours are the values (blue negative, red positive). The pages of the gallery
then take every box apart.
"""

# %%
# The trained models
# ------------------
# :func:`~convs2s_edu.train_or_load` loads both models from the cache when an
# earlier page (or an earlier build) trained them, and trains them otherwise
# (:ref:`the training page <sphx_glr_auto_examples_plot_05_training.py>` says
# how long that takes).

import matplotlib.pyplot as plt
import torch

from convs2s_edu import collate_batch, evaluate, make_datasets, train_or_load
from convs2s_edu.lab import figures
from convs2s_edu.lab.site import is_quick_mode, site_config

MODELS = ("convs2s", "gru")
results = {name: train_or_load(site_config(name)) for name in MODELS}
test_set = make_datasets(site_config("convs2s"))[2]
cfg = results["convs2s"].config
print(
    f"trained on {cfg.n_train:,} examples for {cfg.epochs} epochs "
    f"({'quick mode' if is_quick_mode() else 'full mode'})"
)

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
# ConvS2S: what every box computed
# --------------------------------
# Forward hooks (:func:`~convs2s_edu.lab.figures.capture`) record the
# embeddings :math:`e_j = w_j + p_j`, the output of every encoder and decoder
# block (convolution, GLU, residual), the encoder output :math:`z_j` and the
# decoder's attention weights :math:`a^l_{ij}`, one matrix per decoder layer.

conv = results["convs2s"].model.cpu().eval()
enc, dec = conv.encoder, conv.decoder
modules = (
    {"e": enc.embed, "g": dec.embed, "out": dec.W_o}
    | {f"enc{i}": b for i, b in enumerate(enc.blocks)}
    | {f"dec{i}": b for i, b in enumerate(dec.blocks)}
)
with torch.no_grad():
    with figures.capture(modules) as taps:
        logits, attention = conv(batch.src, batch.tgt_in, return_attention=True)
    encoded = dec.memory(conv.encode(batch.src))  # z and z + e for the figure
L_enc, L_dec = len(enc.blocks), len(dec.blocks)
V = cfg.vocab_size
conv_pred = logits[0].argmax(-1).tolist()
print(f"{L_enc} encoder blocks, {L_dec} decoder blocks, kernel width {conv.cfg.kernel_size}")
print("ConvS2S predicts (teacher forcing):", " ".join(figures.token_labels(conv_pred, V)))

# %%
# The pictures are drawn with the lab's heatmaps
# (:func:`~convs2s_edu.lab.figures.channel_heatmap` for a tensor,
# :func:`~convs2s_edu.lab.figures.attention_heatmap` for an attention map) and
# a small helper at the end of this page; here is the ConvS2S one. Read it
# bottom-up on the left (the encoder), then across the attention row, then the
# decoder on the right.

src_labels = figures.token_labels(batch.src[0], V)
tgt_labels = figures.token_labels(batch.tgt_in[0], V)
out_labels = figures.token_labels(conv_pred, V)


def attention_map(ax, a, title):
    """The page's attention maps: grey, small type, source labels turned like the heatmaps'."""
    figures.attention_heatmap(
        ax,
        a,
        src_labels,
        tgt_labels,
        title=title,
        cmap="Greys",
        fontsize=7,
        xlabel="source $j$",
        ylabel="decoder input $i$",
    )
    ax.tick_params(axis="x", labelrotation=90)


def draw_convs2s():
    fig = plt.figure(figsize=(13, 9.5), layout="constrained")
    grid = fig.add_gridspec(3, max(L_enc + 3, L_dec + 2))
    enc_panels = [("embedding\n$e_j = w_j + p_j$", taps["e"][0][0])]
    enc_panels += [
        (
            f"encoder block {i + 1}\nconv + GLU + residual",
            taps[f"enc{i}"][0][0],
        )
        for i in range(L_enc)
    ]
    enc_panels += [
        ("encoder output $z_j$", encoded.z[0]),
        ("attention values\n$z_j + e_j$", encoded.z_plus_e[0]),
    ]
    for col, (title, x) in enumerate(enc_panels):
        figures.channel_heatmap(
            fig.add_subplot(grid[0, col]), x, src_labels, title=title, channels=CHANNELS
        )
    for l in range(L_dec):
        attention_map(
            fig.add_subplot(grid[1, l]),
            attention[0, l],
            f"attention in decoder layer {l + 1}\n$a^{l + 1}_{{ij}}$",
        )
    ax = fig.add_subplot(grid[1, L_dec:])
    ax.axis("off")
    ax.text(
        0,
        0.5,
        "every decoder layer $l$ has its own attention:\n"
        "$d^l_i = W^l_d h^l_i + b^l_d + g_i$\n"
        "$a^l_{ij} = \\mathrm{softmax}_j(d^l_i \\cdot z_j)$\n"
        "$c^l_i = \\sum_j a^l_{ij}(z_j + e_j)$\n"
        "added to $h^l_i$ before the next block",
        va="center",
        fontsize=11,
    )
    dec_panels = [("decoder input\n$g_i = w_i + p_i$", taps["g"][0][0])]
    dec_panels += [
        (f"decoder block {l + 1}\ncausal conv + GLU", taps[f"dec{l}"][0][0]) for l in range(L_dec)
    ]
    for col, (title, x) in enumerate(dec_panels):
        figures.channel_heatmap(
            fig.add_subplot(grid[2, col]), x, tgt_labels, title=title, channels=CHANNELS
        )
    ax = fig.add_subplot(grid[2, len(dec_panels)])
    probabilities(ax, logits[0], out_labels)
    fig.suptitle(
        "ConvS2S on one sorting example: encoder (top), "
        "one attention per decoder "
        "layer (middle), decoder (bottom)",
        fontsize=12,
    )
    return fig


# %%
# The GRU baseline: what every box computed
# -----------------------------------------
# The same example through the recurrent model: the source embeddings, the
# bidirectional GRU's states :math:`h_j` (forward and backward halves
# concatenated), its one attention :math:`\alpha_{ij}` and the decoder states
# :math:`s_i`, one GRU step per output position.

gru = results["gru"].model.cpu().eval()
modules = {"x": gru.encoder.embed, "y": gru.decoder.embed, "s": gru.decoder.gru}
with torch.no_grad():
    with figures.capture(modules) as gru_taps:
        gru_logits, gru_attention = gru(batch.src, batch.tgt_in, return_attention=True)
    h = gru.encode(batch.src).states[0]  # (S, 2n)
gru_pred = gru_logits[0].argmax(-1).tolist()
# the decoder's embedding and GRU run once per output position
y_in = torch.stack([out[0] for out in gru_taps["y"]])  # (T, E)
states = torch.cat([out[0][0] for out in gru_taps["s"]], dim=0)  # (T, n)
print("GRU predicts (teacher forcing):    ", " ".join(figures.token_labels(gru_pred, V)))


def draw_gru():
    fig, axes = plt.subplots(
        1,
        6,
        figsize=(13, 3.6),
        layout="constrained",
        width_ratios=[1, 1, 1.4, 1, 1, 1],
    )
    panels = [
        (axes[0], gru_taps["x"][0][0], "source embedding\n$E x_j$", src_labels),
        (axes[1], h, "bidirectional GRU\n$h_j = [\\vec h_j; \\overleftarrow{h}_j]$", src_labels),
        (axes[3], y_in, "decoder input\n$E y_{i-1}$", tgt_labels),
        (axes[4], states, "decoder GRU states $s_i$\n(one step after another)", tgt_labels),
    ]
    for ax, x, title, labels in panels:
        figures.channel_heatmap(ax, x, labels, title=title, channels=CHANNELS)
    attention_map(axes[2], gru_attention[0], "one additive attention\n$\\alpha_{ij}$")
    probabilities(axes[5], gru_logits[0], figures.token_labels(gru_pred, V))
    fig.suptitle("GRU + Bahdanau attention on the same example", fontsize=12)
    return fig


# %%
# Headline numbers of this build
# ------------------------------
# Exact match (every token right) and token accuracy on the test set with
# greedy decoding, and how long training took, measured when this site was
# built. The landing page shows the same numbers, next to the training speed
# of the two models timed side by side on the training page (a training run's
# own clock also measures whatever else the machine was doing).

headline = {"mode": "quick" if is_quick_mode() else "full", "models": {}}
for name in MODELS:
    scores = evaluate(results[name].model, test_set)
    history = results[name].history
    headline["models"][name] = {
        "exact_match": scores["exact_match"],
        "token_accuracy": scores["token_accuracy"],
        "training_seconds": sum(history.column("seconds")),
        "epochs": len(history.epochs),
        "n_parameters": history.n_parameters,
        "device": history.device,
    }
    m = headline["models"][name]
    print(
        f"{name:8s} exact match {m['exact_match']:6.1%}  token accuracy "
        f"{m['token_accuracy']:6.1%}  "
        f"trained in {m['training_seconds']:.0f} s  "
        f"{m['n_parameters']:,} parameters"
    )
headline.update(n_test=len(test_set), n_train=cfg.n_train, epochs=cfg.epochs)

# sphinx_gallery_start_ignore
# The site's build (docs/conf.py) sets CONVS2S_EDU_SITE_DATA: the landing page
# includes a table made from these numbers.
from convs2s_edu.lab.site import record

record("headline", headline)
# sphinx_gallery_end_ignore

# %%
# Drawing helper
# --------------
# The last panel of the two pictures above: the output probabilities with the
# predicted token of every position.


def probabilities(ax, logits, labels):
    p = torch.softmax(logits.detach().float(), dim=-1).numpy()  # (T, V)
    ax.imshow(p.T, cmap="Greens", vmin=0, vmax=1, aspect="auto", origin="lower")
    ax.set_title("output $p(y_{i+1})$\npredicted token", fontsize=9)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    ax.set_ylabel("token id", fontsize=7)
    ax.tick_params(axis="y", labelsize=7)


# %%
# The pictures
# ------------

draw_convs2s()
plt.show()

# %%
# Reading the ConvS2S picture: every encoder block widens what a position
# sees by :math:`k - 1 = 2` positions (kernel width 3), all positions of a
# block are computed at once, and every decoder layer has an attention of its
# own. The baseline below has one attention, and its decoder states come one
# after another: step :math:`i` needs :math:`s_{i-1}`.

draw_gru()
plt.show()

# %%
# What you saw
# ------------
# * ConvS2S computes every position of a layer at once: the encoder's blocks
#   and the decoder's causal blocks are convolutions, and each decoder layer
#   has an attention of its own that reads :math:`z_j + e_j`.
# * The GRU baseline reads the source with a bidirectional GRU and writes one
#   token per step, each step waiting for the state of the one before.
# * Both models were trained on the same sorting examples; the gallery pages
#   take every box of these pictures apart.
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
# **2. The first encoder block.** How many source positions can one output
# of the first encoder block depend on? And of the fourth?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`k` after one block and :math:`1 + 4(k-1)` after four, in a window
# centred on the output (9 positions, 4 on each side, for :math:`k = 3`). An
# output near the ends of the source sees only part of it, as the counts per
# position below show; the attention, which reads every position, does not
# depend on one output seeing everything.

k = conv.cfg.kernel_size
print("window after 1..4 blocks:", [1 + n * (k - 1) for n in range(1, 5)])
half = L_enc * (k - 1) // 2
S_len = len(source)
print(
    "positions seen by each encoder output:",
    [min(S_len - 1, j + half) - max(0, j - half) + 1 for j in range(S_len)],
)
print("source length:", S_len)

# %%
# .. raw:: html
#
#    </details>
