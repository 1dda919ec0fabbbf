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
# ``1..vocab_size``, with repetition. The training pages use the seed
# notebook's sizes; this page uses shorter sequences so that a whole batch
# fits in one legible figure.

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from convs2s_edu import (
    PAD,
    collate_batch,
    eos_index,
    generate_dataset,
    n_token_ids,
    sos_index,
)

VOCAB_SIZE = 50  # the seed's vocabulary: tokens 1..50
examples = generate_dataset(
    n_samples=4, min_len=3, max_len=8, vocab_size=VOCAB_SIZE, seed=3
)
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
# and builds the two decoder-side tensors used for *teacher forcing*:
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
print(
    "real target tokens in the batch (<eos> included):", batch.n_target_tokens
)

# sphinx_gallery_start_ignore
# teacher forcing: tgt_in shifted left by one is tgt_out, wherever both are real tokens
real = ~batch.tgt_padding_mask
assert (
    batch.tgt_in[:, 1:][real[:, 1:]] == batch.tgt_out[:, :-1][real[:, 1:]]
).all()
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
# positions never receive attention and never count in the loss.

KIND_COLOURS = ListedColormap(["#d9d9d9", "#9ecae1", "#a1d99b", "#fdae6b"])


def token_kind(ids: np.ndarray) -> np.ndarray:
    """0 padding, 1 ordinary token, 2 <sos>, 3 <eos>."""
    kind = np.ones_like(ids)
    kind[ids == PAD] = 0
    kind[ids == sos_index(VOCAB_SIZE)] = 2
    kind[ids == eos_index(VOCAB_SIZE)] = 3
    return kind


def draw_ids(ax, ids, title):
    ids = ids.numpy()
    ax.imshow(token_kind(ids), cmap=KIND_COLOURS, vmin=-0.5, vmax=3.5)
    for (r, c), v in np.ndenumerate(ids):
        ax.text(c, r, str(v), ha="center", va="center", fontsize=8)
    decorate(ax, ids.shape, title)


def draw_mask(ax, mask, title):
    mask = mask.numpy()
    ax.imshow(mask, cmap="Greys", vmin=-0.3, vmax=1.3)
    for (r, c), v in np.ndenumerate(mask):
        ax.text(
            c,
            r,
            "T" if v else "F",
            ha="center",
            va="center",
            fontsize=8,
            color="white" if v else "black",
        )
    decorate(ax, mask.shape, title)


def decorate(ax, shape, title):
    ax.set_title(title, fontsize=10)
    ax.set_xticks(range(shape[1]))
    ax.set_yticks(range(shape[0]))
    ax.set_xlabel("position")
    ax.tick_params(labelsize=7, length=0)
    ax.set_xticks(np.arange(shape[1] + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(shape[0] + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)


S, T = batch.src.shape[1], batch.tgt_in.shape[1]
fig, axes = plt.subplots(
    1, 5, figsize=(13, 2.9), width_ratios=[S, S, T, T, T], layout="constrained"
)
draw_ids(axes[0], batch.src, "src")
draw_mask(axes[1], batch.src_padding_mask, "src_padding_mask")
draw_ids(axes[2], batch.tgt_in, "tgt_in (decoder input)")
draw_ids(axes[3], batch.tgt_out, "tgt_out (targets)")
draw_mask(axes[4], batch.tgt_padding_mask, "tgt_padding_mask")
axes[0].set_ylabel("example")
handles = [
    plt.Rectangle((0, 0), 1, 1, color=KIND_COLOURS(i)) for i in range(4)
]
fig.legend(
    handles,
    ["PAD", "token 1..vocab_size", "<sos>", "<eos>"],
    loc="outside lower center",
    ncol=4,
    frameon=False,
    fontsize=9,
)
fig.suptitle("A padded batch of sorting examples", fontsize=11)
plt.show()

# %%
# Repeated tokens
# ---------------
# Tokens are drawn with repetition, so longer sequences often hold the same
# integer twice and the sorted output must repeat it too: a model cannot just
# "mark which integers occur". The share of sequences with at least one
# repeated token, at the seed's lengths (8 to 20) and vocabulary:

big = generate_dataset(
    n_samples=2000, min_len=8, max_len=20, vocab_size=VOCAB_SIZE, seed=0
)
has_repeat = np.mean([len(set(x)) < len(x) for x, _ in big])
print(f"sequences with a repeated token: {has_repeat:.0%}")
