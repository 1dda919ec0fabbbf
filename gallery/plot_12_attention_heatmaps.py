r"""
Where the trained models look: attention heatmaps
=================================================

Attention weights say, for every output position, how much each source
position contributes to it. For sorting there is a right answer: output
position :math:`i` should attend to the source position that holds the
:math:`i`-th smallest value (shared among its positions when it repeats).

This page draws the attention of both trained models on one test example
(every decoder layer of ConvS2S, the single Bahdanau attention of the GRU) and
then measures, over the whole test set, how often each attention points at
the right place. To watch both models' attention on a sequence of your own as
they decode it, :doc:`try the models in your browser </try>`.
"""

# %%
# One test example
# ----------------
# Both models come from the cache filled by the
# :ref:`training page <sphx_glr_auto_examples_plot_10_training.py>` (run on its
# own, this page trains them first). The example is the first test example of
# length 10, short enough for every cell to be read.
#
# The models are **teacher-forced with the reference** (``<sos>`` then the
# correct sorted sequence, as in training), so every heatmap row belongs to a
# known output token whatever the model would have decoded. Row :math:`i` is
# the attention used to predict the :math:`i`-th output token (the row label,
# ``<eos>`` last); column :math:`j` is source position :math:`j`.

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import (
    build_model,
    collate_batch,
    eos_index,
    greedy_decode,
    make_datasets,
    train_or_load,
)
from convs2s_edu.lab import figures
from convs2s_edu.lab.site import comparison, quick_caveat, site_config

MODELS = ("convs2s", "gru")
results = {name: train_or_load(site_config(name)) for name in MODELS}
conv, gru = (results[name].model.eval() for name in MODELS)
device = next(conv.parameters()).device  # a GPU when there is one
cfg = results["convs2s"].config
examples = list(make_datasets(cfg)[2])  # the test set
for name, r in results.items():
    print(f"{name:8s} trained for {len(r.history.epochs)} epochs on {r.history.device}")

# teacher-forced attention of every test example (padding is masked), then one of them
full = collate_batch(examples, cfg.vocab_size)
src, tgt_in, tgt_out = full.src, full.tgt_in, full.tgt_out  # (B, S), (B, T), (B, T)
with torch.no_grad():
    _, conv_all = conv(src.to(device), tgt_in.to(device), return_attention=True)  # (B, L, T, S)
    _, gru_all = gru(src.to(device), tgt_in.to(device), return_attention=True)  # (B, T, S)
conv_all, gru_all = conv_all.cpu(), gru_all.cpu()
LENGTH = 10
i = next(i for i, (x, _) in enumerate(examples) if len(x) == LENGTH)
src_tokens, ref_tokens = examples[i]
conv_attn = conv_all[i, :, : LENGTH + 1, :LENGTH].numpy()  # (L, T, S)
gru_attn = gru_all[i, : LENGTH + 1, :LENGTH].numpy()  # (T, S)
print("source   :", src_tokens)
print("reference:", ref_tokens)
print("ConvS2S attention:", conv_attn.shape, "(layers, output steps, source positions)")
print("GRU attention    :", gru_attn.shape, "(output steps, source positions)")

# sphinx_gallery_start_ignore
assert conv_attn.shape == (conv.cfg.n_decoder_layers, LENGTH + 1, LENGTH)
assert gru_attn.shape == (LENGTH + 1, LENGTH)
assert np.allclose(conv_attn.sum(-1), 1, atol=1e-5) and np.allclose(gru_attn.sum(-1), 1, atol=1e-5)
one = collate_batch([examples[i]], cfg.vocab_size).to(device)  # batching changes nothing
with torch.no_grad():
    one_attn = conv(one.src, one.tgt_in, return_attention=True)[1][0].cpu().numpy()
assert np.allclose(one_attn, conv_attn, atol=1e-5)
# sphinx_gallery_end_ignore

# %%
# ConvS2S: one attention per decoder layer
# ----------------------------------------
# Each ConvS2S decoder layer computes its own attention from its own state:
# the panels are separate decisions about where to look. Darker means more
# weight; every row sums to one. Red squares mark the source positions holding
# the token that row outputs (none for ``<eos>``).

out_labels = figures.token_labels(tgt_out[i, : LENGTH + 1], cfg.vocab_size)  # reference, <eos>
src_labels = figures.token_labels(src[i, :LENGTH], cfg.vocab_size)
right = np.array([[s == y for s in src_tokens] for y in ref_tokens + [None]])  # (T, S)


def heatmap(ax, attn, title):
    """The attention map, with the right answer marked by red squares."""
    im = figures.attention_heatmap(
        ax, attn, src_labels, out_labels, title=title, xlabel="source token", ylabel="output token"
    )
    ax.set_aspect("equal")  # square cells
    rows, cols = np.nonzero(right)
    ax.scatter(cols, rows, marker="s", s=70, facecolors="none", edgecolors="red", linewidths=1)
    return im


n_layers = conv_attn.shape[0]
fig, axes = plt.subplots((n_layers + 1) // 2, 2, figsize=(8, 7.6), layout="constrained")
for layer, ax in enumerate(axes.flat):
    if layer < n_layers:
        im = heatmap(ax, conv_attn[layer], f"ConvS2S decoder layer {layer + 1}")
    else:
        ax.remove()
fig.colorbar(im, ax=axes, shrink=0.6, label="attention weight")
fig.suptitle("ConvS2S attention, teacher-forced with the reference", fontsize=11)
plt.show()
quick_caveat("the heatmaps above")

# %%
# The GRU's attention, next to the ideal one
# ------------------------------------------
# The GRU has one Bahdanau attention, computed before each decoder step from
# the previous state :math:`s_{t-1}`, which has not read the token written
# last, :math:`y_{t-1}` (fed in after the attention): the query knows it only
# through where it looked the step before. The right panel is a perfect
# sorter's attention: each row's weight split evenly over its red squares.

ideal = right / np.maximum(right.sum(axis=1, keepdims=True), 1)
fig, axes = plt.subplots(1, 2, figsize=(8, 4.2), layout="constrained")
heatmap(axes[0], gru_attn, "GRU (Bahdanau) attention")
im = heatmap(axes[1], ideal, "ideal attention for sorting")
fig.colorbar(im, ax=axes, shrink=0.8, label="attention weight")
plt.show()

# %%
# Measured over the test set
# --------------------------
# One example can mislead, so the next cell counts over the whole test set
# what the most attended source position holds at each output step
# (``<eos>`` excluded):
#
# * **→ reference**: the token this step should output (teacher-forced);
# * **→ emitted**: the token the model wrote (greedy, on its own outputs);
# * **→ previous**: the token the decoder just read (teacher-forced, step 2 on);
# * **weight on ref.**: the total weight on the positions holding the
#   reference token (softer than the argmax); **chance**: the share of steps
#   at which a random source position holds it.


def argmax_hits(attn, src, wanted):
    """attn (B, T, S); src (B, S); wanted (B, T) token ids -> hits (B, T) bool."""
    return src.gather(1, attn.argmax(-1)).eq(wanted)  # token at the most attended position


steps = tgt_out.ne(0) & tgt_out.ne(eos_index(cfg.vocab_size))  # (B, T): real tokens, no <eos>
after_first = steps & (torch.arange(steps.shape[1]) > 0)  # (B, T): from the second step on
holds_ref = src.unsqueeze(1).eq(tgt_out.unsqueeze(2))  # (B, T, S): position j holds y_t
# greedy decoding moves the sources to the model's device itself
greedy = {name: greedy_decode(results[name].model, src, return_attention=True) for name in MODELS}
src_len = src.ne(0).sum(1, keepdim=True)  # (B, 1); chance: share of them holding y_t
chance = (holds_ref.sum(-1) / src_len)[steps].float().mean().item()


def greedy_hit_rate(tokens, attentions, layer=None):
    """Share of emitted tokens whose most attended source position holds that token."""
    hits = [
        x[int((a if layer is None else a[layer])[t].argmax())] == y  # a[layer]: (T_b, S_b)
        for (x, _), out, a in zip(examples, tokens, attentions)
        for t, y in enumerate(out)
    ]
    return sum(hits) / max(len(hits), 1)


attn_sets = [(f"ConvS2S layer {l + 1}", conv_all[:, l], "convs2s", l) for l in range(n_layers)]
table = [
    (
        label,
        argmax_hits(attn, src, tgt_out)[steps].float().mean().item(),
        greedy_hit_rate(*greedy[name], layer),
        argmax_hits(attn, src, tgt_in)[after_first].float().mean().item(),
        (attn * holds_ref).sum(-1)[steps].mean().item(),
    )
    for label, attn, name, layer in attn_sets + [("GRU", gru_all, "gru", None)]
]

print(f"{len(examples):,} test examples, {int(steps.sum()):,} output steps\n")
header = ("attention", "-> reference", "-> emitted", "-> previous", "weight on ref.")
print(f"{header[0]:16s}" + "".join(f"{h:>15s}" for h in header[1:]))
for label, *vals in table:
    print(f"{label:16s}" + "".join(f"{v:>15.1%}" for v in vals))
print(f"{'chance':16s}{chance:>15.1%}\n")
tie = (0.5 / int(steps.sum())) ** 0.5  # the largest standard error of a difference of shares
for label, to_ref, *_ in table:  # the -> reference column against chance
    print(comparison("share at the reference", {label: to_ref, "chance": chance}, tie=tie))
best = max(table[:-1], key=lambda row: row[1])
print(comparison("share", {f"{best[0]} (best)": best[1], "GRU": table[-1][1]}, tie=tie))

# sphinx_gallery_start_ignore
for _, *vals in table:
    assert all(0.0 <= v <= 1.0 for v in vals)
assert 0 < chance < 0.5
# sphinx_gallery_end_ignore

# %%
# The **→ reference** column as a chart, one bar per attention, with chance
# as a dashed line.

fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
bars = ax.bar(range(len(table)), [100 * row[1] for row in table], color=["C0"] * n_layers + ["C1"])
ax.bar_label(bars, fmt="%.0f%%", padding=2)
ax.axhline(100 * chance, color="k", ls="--", lw=1, label="chance")
fig.legend(loc="outside right upper", frameon=False)
ax.set_xticks(range(len(table)), [row[0].replace("ConvS2S ", "ConvS2S\n") for row in table])
ax.set(ylabel="% of output steps", ylim=(0, 108))
ax.set_title("Most attended source position holds the reference token")
plt.show()

# %%
# How to read it
# --------------
# An attention whose argmax lands on the reference token far more often than
# chance has learned the sorting alignment: it finds the next value to write.
# Multi-step attention lets each ConvS2S layer look elsewhere: a lower layer
# can gather information (about the token just written, say: **→ previous**)
# that a higher layer uses to find the next one. The GRU's single attention
# searches in one look, from the decoder state alone. **→ emitted** asks
# whether a wrong token was a value the attention found and copied.

# %%
# What you saw
# ------------
# * For sorting, output position :math:`i` should look at the source
#   position(s) holding the :math:`i`-th smallest value.
# * ConvS2S has one attention per decoder layer, each deciding separately
#   where to look; the GRU has one attention, computed before each step.
# * Over the test set, the share of steps whose most attended position holds
#   the right value says how much each attention "points".
#
# Try it
# ------
# **1. The ideal row.** For the source ``[5, 3, 9]``, where should output
# positions 0, 1 and 2 look?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# At positions 1, 0 and 2 (values 3, 5, 9): the argsort of the source.

source = [5, 3, 9]
print(np.argsort(source, kind="stable").tolist())

# %%
# .. raw:: html
#
#    </details>
#
# **2. A repeated value.** For ``[4, 4, 1]``, what is the ideal attention row
# of output position 1?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Output 1 writes the value 4, which sits at positions 0 and 1: half the
# weight on each, none on position 2.

source = [4, 4, 1]
value = sorted(source)[1]
row = np.array([s == value for s in source], dtype=float)
print(row / row.sum())

# %%
# .. raw:: html
#
#    </details>
#
# **3. Before training.** How often does the most attended position of an
# *untrained* ConvS2S hold the right value? Predict it from chance.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Near chance (about one over the length): untrained weights carry no alignment.

torch.manual_seed(0)
untrained = build_model(cfg).to(device).eval()
with torch.no_grad():
    _, fresh = untrained(src.to(device), tgt_in.to(device), return_attention=True)
hit = argmax_hits(fresh[:, -1].cpu(), src, tgt_out)[steps].float().mean().item()
print(comparison("share", {"untrained last layer": hit, "chance": chance}, tie=tie))
shares = {"untrained last layer": hit, "trained last layer": table[-2][1]}
print(comparison("share", shares, tie=tie))

# %%
# .. raw:: html
#
#    </details>
