r"""
The sorting task
================

Both models of this project, ConvS2S and its recurrent baseline, learn one toy
task: read a sequence of random integers and write the same integers back in
ascending order. The output is exactly as long as the input, every input token
reappears somewhere in the output, and where it goes depends on all the other
tokens. A model has to *re-arrange* its input, which is what attention is for.

This page draws a few examples, pads them into a batch (the tensors every model
consumes) and shows the padding masks that tell the models which positions hold
no token.
"""

# %%
# Examples
# --------
# :func:`~convs2s_edu.generate_dataset` draws ``(input_seq, sorted_seq)`` pairs
# with lengths uniform in ``[min_len, max_len]`` and tokens uniform in
# ``1..vocab_size``, with repetition. The training pages use the original
# notebook's sizes; this page uses shorter sequences so that a whole batch
# fits in one legible figure.

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from convs2s_edu import PAD, collate_batch, eos_index, generate_dataset, sos_index
from convs2s_edu.data import n_token_ids

VOCAB_SIZE = 50  # the original notebook's vocabulary: tokens 1..50
examples = generate_dataset(n_samples=4, min_len=3, max_len=8, vocab_size=VOCAB_SIZE, seed=3)
for x, y in examples:
    print(f"{str(x):36s} -> {y}")

# sphinx_gallery_start_ignore
for x, y in examples:
    assert y == sorted(x) and len(x) == len(y)
# sphinx_gallery_end_ignore

# %%
# Special tokens
# --------------
# Three ids are not integers of the task: padding, start of sequence and end
# of sequence. Padding takes the lowest id, below every token, and ``<sos>``/``<eos>`` sit
# just above the vocabulary, so a model embeds ``vocab_size + 3`` ids.

print(f"PAD   = {PAD}")
print(f"<sos> = {sos_index(VOCAB_SIZE)}")
print(f"<eos> = {eos_index(VOCAB_SIZE)}")
print(f"ids a model embeds: {n_token_ids(VOCAB_SIZE)}")

# %%
# A padded batch
# --------------
# :func:`~convs2s_edu.collate_batch` right-pads the sources to the longest one
# and builds the two decoder-side tensors used for :term:`teacher forcing`:
# ``tgt_in`` is ``<sos>`` followed by the sorted sequence, ``tgt_out`` is the
# sorted sequence followed by ``<eos>``. Position ``t`` of ``tgt_out`` is what
# the decoder must predict after reading ``tgt_in`` up to position ``t``, so
# the two are the same sequence shifted by one.

batch = collate_batch(examples, VOCAB_SIZE)
for name in (
    "src",
    "tgt_in",
    "tgt_out",
    "src_padding_mask",
    "tgt_padding_mask",
    "src_lengths",
):
    t = getattr(batch, name)
    print(f"{name:17s} shape {str(tuple(t.shape)):8s} dtype {t.dtype}")
print("real target tokens in the batch (<eos> included):", batch.n_target_tokens)

# sphinx_gallery_start_ignore
# teacher forcing: tgt_in shifted left by one is tgt_out, wherever both are real tokens
real = ~batch.tgt_padding_mask
assert (batch.tgt_in[:, 1:][real[:, 1:]] == batch.tgt_out[:, :-1][real[:, 1:]]).all()
assert (batch.tgt_in[:, 0] == sos_index(VOCAB_SIZE)).all()
assert (batch.src_padding_mask == batch.src.eq(PAD)).all()
assert (batch.tgt_padding_mask == batch.tgt_out.eq(PAD)).all()
assert batch.tgt_out.shape[1] == batch.src.shape[1] + 1
# sphinx_gallery_end_ignore

# %%
# The batch, drawn
# ----------------
# Each panel is one tensor: a row per example, a column per position. Colours
# mark the kind of token (grey: padding, blue: an integer of the task,
# green: ``<sos>``, orange: ``<eos>``) and every cell carries its id. The two
# mask panels are ``True`` (dark) exactly where the tensor to their left holds
# padding. Every model derives its masks from ``PAD`` the same way, so padded
# positions never receive attention and never count in the loss. The small
# helper below draws one tensor; the figure is the five panels side by side.

KIND_COLOURS = ListedColormap(["#d9d9d9", "#9ecae1", "#a1d99b", "#fdae6b"])
KIND_NAMES = ["PAD", "token 1..vocab_size", "<sos>", "<eos>"]
PANELS = {  # tensor -> (title, is a mask)
    "src": ("src", False),
    "src_padding_mask": ("src_padding_mask", True),
    "tgt_in": ("tgt_in (decoder input)", False),
    "tgt_out": ("tgt_out (targets)", False),
    "tgt_padding_mask": ("tgt_padding_mask", True),
}


def draw_panel(ax, values, title, is_mask):
    """One tensor as a grid: a row per example, a column per position."""
    v = values.numpy()
    if is_mask:  # dark where True
        ax.imshow(v, cmap="Greys", vmin=-0.3, vmax=1.3)
        labels = np.where(v, "T", "F")
    else:  # coloured by the kind of token
        sos, eos = sos_index(VOCAB_SIZE), eos_index(VOCAB_SIZE)
        kind = np.select([v == PAD, v == sos, v == eos], [0, 2, 3], 1)
        ax.imshow(kind, cmap=KIND_COLOURS, vmin=-0.5, vmax=3.5)
        labels = v.astype(str)
    for (r, c), text in np.ndenumerate(labels):
        white = is_mask and v[r, c]
        ax.text(
            c, r, text, ha="center", va="center", fontsize=10, color="white" if white else "black"
        )
    ax.set_title(title, fontsize=11)
    ax.set_xlabel("position")
    ax.set_xticks(range(v.shape[1]))
    ax.set_yticks(range(v.shape[0]))
    ax.set_xticks(np.arange(v.shape[1] + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(v.shape[0] + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="both", labelsize=8, length=0)


S, T = batch.src.shape[1], batch.tgt_in.shape[1]
fig, axes = plt.subplots(
    1, 5, figsize=(11, 2.6), layout="constrained", width_ratios=[S, S, T, T, T]
)
for ax, (name, (title, is_mask)) in zip(axes, PANELS.items()):
    draw_panel(ax, getattr(batch, name), title, is_mask)
axes[0].set_ylabel("example")
swatches = [plt.Rectangle((0, 0), 1, 1, color=KIND_COLOURS(i)) for i in range(4)]
fig.legend(swatches, KIND_NAMES, loc="outside lower center", ncol=4, frameon=False, fontsize=10)
fig.suptitle("A padded batch of sorting examples", fontsize=12)
plt.show()

# %%
# Repeated tokens
# ---------------
# Tokens are drawn with repetition, so longer sequences often hold the same
# integer twice and the sorted output must repeat it too: a model cannot just
# "mark which integers occur". The share of sequences with at least one
# repeated token, at the original notebook's lengths (8 to 20) and vocabulary:

big = generate_dataset(n_samples=2000, min_len=8, max_len=20, vocab_size=VOCAB_SIZE, seed=0)
has_repeat = np.mean([len(set(x)) < len(x) for x, _ in big])
print(f"sequences with a repeated token: {has_repeat:.0%}")


# %%
# What you saw
# ------------
# * A sorting example is a pair ``(x, sorted(x))`` of equal length. Token ids
#   are ordered ``PAD = 0`` < the integers ``1..V`` < ``<sos> = V+1`` <
#   ``<eos> = V+2``, so a model embeds ``V + 3`` ids.
# * :func:`~convs2s_edu.collate_batch` right-pads the sources and builds
#   ``tgt_in`` (``<sos>`` then the sorted tokens) and ``tgt_out`` (the sorted
#   tokens then ``<eos>``): one sequence shifted by one position, which is
#   teacher forcing.
# * The padding masks are ``True`` exactly where a tensor holds ``PAD``.
#
# Try it
# ------
# Predict first, then unfold the solution; code solutions run when the site
# is built, so their output is always the package's.
#
# **1. A vocabulary of 10.** Which ids do ``<sos>`` and ``<eos>`` get, and how
# many ids does a model embed?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# ``<sos> = 11``, ``<eos> = 12`` and 13 ids (``PAD`` included):

from convs2s_edu import collate_batch, eos_index, generate_dataset, sos_index
from convs2s_edu.data import n_token_ids

print(sos_index(10), eos_index(10), n_token_ids(10))

# %%
# .. raw:: html
#
#    </details>
#
# **2. Two sources of lengths 3 and 6.** What are the shapes of ``src`` and
# ``tgt_in``, and how many ``True`` does the short example's row of
# ``tgt_padding_mask`` hold?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# ``src`` is padded to the longest source, ``(2, 6)``; the decoder tensors get
# one more position for ``<sos>``/``<eos>``, ``(2, 7)``. The short target uses
# 3 tokens + ``<eos>`` = 4 of the 7 positions, so 3 are padding:

pair = collate_batch([([5, 2, 9], [2, 5, 9]), ([4] * 6, [4] * 6)], 10)
print(tuple(pair.src.shape), tuple(pair.tgt_in.shape))
print(int(pair.tgt_padding_mask[0].sum()))

# %%
# .. raw:: html
#
#    </details>
#
# **3. A vocabulary of 5 and sequences of 8 tokens.** What share of the
# sequences repeats a token?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# All of them: 8 tokens drawn from 5 values must repeat one (the pigeonhole
# principle), so a model can never sort by "marking which values occur".

tiny = generate_dataset(n_samples=500, min_len=8, max_len=8, vocab_size=5)
print(f"{sum(len(set(x)) < len(x) for x, _ in tiny) / len(tiny):.0%}")

# %%
# .. raw:: html
#
#    </details>
