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
critical path: how many operations must run one after another.
"""
# %%
# The trained models
# ------------------
# :func:`~convs2s_edu.train_or_load` loads both models from the cache when an
# earlier page (or an earlier build) trained them, and trains them otherwise
# (:ref:`the training page <sphx_glr_auto_examples_plot_10_training.py>` says
# how long that takes).

import matplotlib.pyplot as plt
import torch

from convs2s_edu import collate_batch, make_datasets, train_or_load
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

schematics = {"ConvS2S": conv_figure, "GRU + attention": gru_figure}
for name, fig in schematics.items():
    for phase in ("training", "generation"):
        path = fig.critical_path[phase]
        print(f"{name:16s} {phase:10s} {path['formula']:>15s} = {path['count']}")

fig, ax = plt.subplots(figsize=(6.4, 2.6), layout="constrained")
for k, (phase, hatch) in enumerate((("training", ""), ("generation", "//"))):
    counts = [f.critical_path[phase]["count"] for f in schematics.values()]
    ax.barh(
        [i + 0.38 * k - 0.19 for i in range(2)],
        counts,
        0.36,
        hatch=hatch,
        label=phase,
        color=["C0", "C1"],
        edgecolor="k",
    )
ax.set_yticks(range(2), list(schematics))
ax.invert_yaxis()
ax.set(xlabel="operations that must run one after another", title="Critical paths, this example")
ax.legend()
plt.show()

# sphinx_gallery_start_ignore
# The site's build (docs/conf.py) sets CONVS2S_EDU_SITE_DATA: the landing page opens
# with these two figures.
from convs2s_edu.lab.site import record_svg

_ = record_svg("schematic_convs2s", conv_figure.svg)  # the paths written: not shown
_ = record_svg("schematic_gru", gru_figure.svg)
# sphinx_gallery_end_ignore

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

gru, conv = results["gru"].model.eval(), results["convs2s"].model.eval()
steps = []
hook = gru.decoder.gru.register_forward_hook(lambda *args: steps.append(1))
with torch.no_grad():
    state = gru.decoder.start(gru.encode(batch.src))
    for t in range(batch.tgt_in.shape[1]):  # the decoder's own loop, one input at a time
        state = gru.decoder.step(batch.tgt_in[:, t], state)[2]
hook.remove()
print("GRU decoder steps:", len(steps), "for", batch.tgt_in.shape[1], "decoder inputs")
print("ConvS2S decoder layers:", len(conv.decoder.blocks))

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
zero = [W.register_forward_hook(lambda m, i, out: torch.zeros_like(out)) for W in conv.decoder.W_c]
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
