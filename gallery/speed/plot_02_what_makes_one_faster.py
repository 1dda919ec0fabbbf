r"""
What could make one model faster
================================

Two properties of the models bear on their speed. Both are facts about the
architectures, computed below from the models themselves; they hold
whichever model :ref:`the interleaved measurement
<sphx_glr_auto_examples_speed_plot_01_training_speed.py>` found faster, and
this page does not pick one of them to explain the result.
"""

# %%
# Arithmetic and sequential steps
# -------------------------------
# * **Arithmetic per token.** A training step multiplies every token's
#   activations by the weights of every layer, forward and backward. The
#   count below is of the floating-point operations of matrix products and
#   convolutions in one forward and backward pass over a batch of the training
#   set (:func:`~convs2s_edu.lab.timing.training_flops_per_token`, through
#   :class:`torch.utils.flop_counter.FlopCounterMode`), divided by its target
#   tokens. When the hardware is busy doing arithmetic, as a CPU with a couple
#   of cores usually is, time tends to follow this count.
# * **Dependent operations.** The GRU decoder computes
#   :math:`s_t = \mathrm{GRU}(s_{t-1}, [E y_{t-1}; c_t])`: step :math:`t` needs
#   step :math:`t-1`, so :math:`T` decoder inputs are :math:`T` small
#   operations in a row, each with its own attention, forward and again
#   backward; the bidirectional encoder runs :math:`S` steps (the source
#   length) in each direction, the two directions side by side: a chain of
#   :math:`S + T`, in training and in generation alike. ConvS2S
#   computes each layer for all positions at once, so in training its chain is
#   :math:`L_{enc} + L_{dec}` layers, whatever :math:`S` and :math:`T` are.
#   In generation the next token needs the previous one, so its decoder runs
#   its :math:`L_{dec}` layers once per token: :math:`L_{enc} + T L_{dec}`.
#   When the hardware has far more parallel units than one small operation
#   can use, as a GPU has, time tends to follow this count, not the arithmetic.
#
# :func:`~convs2s_edu.lab.schematic.critical_path` counts these from each
# model's configuration and one real example's lengths: the first training
# example, with :math:`S` source tokens and :math:`T` decoder inputs
# (``<sos>`` and the reference).

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import build_model, make_datasets, train_or_load
from convs2s_edu.lab.schematic import critical_path
from convs2s_edu.lab.site import comparison, site_config
from convs2s_edu.lab.timing import training_flops_per_token

MODELS = ("convs2s", "gru")
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
cfg = site_config("convs2s")
results = {name: train_or_load(site_config(name)) for name in MODELS}

train_set = make_datasets(cfg)[0]
flop_batch = train_set.collate(train_set.examples[: cfg.batch_size])  # the first batch, unshuffled
flops = {n: training_flops_per_token(results[n].model, flop_batch) for n in MODELS}
x, y = train_set.examples[0]
S, T = len(x), len(y) + 1  # decoder inputs: <sos>, y_1, ..., y_n
paths = {n: critical_path(results[n].model, S, T) for n in MODELS}
print(f"arithmetic: one batch of {cfg.batch_size} training examples")
print(f"dependent operations: one example, S = {S} source tokens, T = {T} decoder inputs\n")
print(f"{'':16s} {'MFLOP per':>10s}  {'dependent operations':^42s}")
print(f"{'model':16s} {'target tok':>10s}  {'training':^20s}  {'generation':^20s}")
for n in MODELS:
    cells = [
        f"{p['formula']} = {p['count']}" for p in (paths[n]["training"], paths[n]["generation"])
    ]
    print(f"{LABELS[n]:16s} {flops[n] / 1e6:>10.2f}  {cells[0]:^20s}  {cells[1]:^20s}")
for n in MODELS:
    worked = (paths[n][phase]["worked"] for phase in ("training", "generation"))
    print(f"{LABELS[n]}: training {next(worked)}, generation {next(worked)}")
PHASES = ("training", "generation")
counts = {phase: {LABELS[n]: paths[n][phase]["count"] for n in MODELS} for phase in PHASES}
print(f"\nConvS2S does {flops['convs2s'] / flops['gru']:.2f}x the GRU's arithmetic per token.")
for phase in PHASES:
    chain = f"chain of dependent operations ({phase})"
    print(
        textwrap.fill(
            comparison(chain, counts[phase], fmt="{:d}", higher="longer", lower="shorter"),
            width=68,
        )
    )

# sphinx_gallery_start_ignore
assert all(f > 0 for f in flops.values())
conv_cfg, gru_cfg = (results[n].model.cfg for n in MODELS)
assert counts["training"]["ConvS2S"] == conv_cfg.n_encoder_layers + conv_cfg.n_decoder_layers
assert counts["generation"]["ConvS2S"] == conv_cfg.n_encoder_layers + T * conv_cfg.n_decoder_layers
assert gru_cfg.n_encoder_layers == gru_cfg.n_decoder_layers == 1
assert counts["training"][LABELS["gru"]] == counts["generation"][LABELS["gru"]] == S + T
# sphinx_gallery_end_ignore

# %%
# The two counts side by side: arithmetic per target token, and the chain of
# operations that must run one after another, in training and in generation.

fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2), layout="constrained")
names = [LABELS[n] for n in MODELS]
left.bar(names, [flops[n] / 1e6 for n in MODELS], color=["C0", "C1"])
left.set(title="arithmetic", ylabel="MFLOP per target token")
for k, (phase, shade) in enumerate(zip(PHASES, ("0.3", "0.7"))):  # greys: not the models'
    chain = [counts[phase][name] for name in names]
    at = [i + 0.4 * k - 0.2 for i in range(len(names))]
    right.bar(at, chain, 0.38, color=shade, label=phase)
right.set_xticks(range(len(names)), names)
right.set(title=f"dependent operations (S = {S}, T = {T})", ylabel="operations in a row")
right.legend()
plt.show()

# %%
# The training column is the paper's argument for convolutions (§1): its count
# for ConvS2S does not grow with the length. The generation column is why that
# argument does not carry over to decoding: there ConvS2S, too, runs one step
# per token, and only its encoder keeps the parallelism over positions.
#
# Which of the two counts dominates the time is a property of the hardware, so
# the result on this machine is not a verdict on the architectures in general:
# the paper measured its speed on translation-sized models, mostly on GPUs.
# What this machine measured is on :ref:`the training speed page
# <sphx_glr_auto_examples_speed_plot_01_training_speed.py>`; the
# :ref:`next page <sphx_glr_auto_examples_speed_plot_03_length_scaling.py>`
# counts the same two quantities at growing sequence lengths and times them.
#
# The path between two positions
# ------------------------------
# §1 of the paper: "we can obtain a feature representation capturing relationships
# within a window of :math:`n` words by applying only :math:`\mathcal{O}(n/k)`
# convolutional operations for kernels of width :math:`k`, compared to a linear number
# :math:`\mathcal{O}(n)` for recurrent neural networks". In the causal decoder, every
# layer reaches :math:`k - 1` positions further back, so two target positions
# :math:`n - 1` apart meet after :math:`\lceil (n-1)/(k-1) \rceil` convolutions; the
# GRU carries the signal through :math:`n - 1` steps. The cell measures the reach of
# the untrained decoder's convolution blocks with autograd (which inputs the last
# position's output depends on) and counts both paths by distance.

torch.manual_seed(0)
decoder = build_model(cfg).decoder.eval()
k, L_dec, far = decoder.cfg.kernel_size, len(decoder.blocks), 24
x0 = torch.randn(1, far, decoder.cfg.hidden_dim, requires_grad=True)
h, reach = x0, []
for block in decoder.blocks:  # the convolution blocks alone: no attention
    h = block(h)
    grad = torch.autograd.grad(h[0, -1].sum(), x0, retain_graph=True)[0][0]  # (T, d)
    reach.append(far - 1 - int(grad.abs().sum(-1).nonzero().min()))
print(
    f"reach back after 1..{L_dec} layers: {reach} positions; l (k - 1) = "
    f"{[l * (k - 1) for l in range(1, L_dec + 1)]}"
)
distance = np.arange(1, 21)
conv_ops = -(-distance // (k - 1))  # ceil((n - 1) / (k - 1))
print("distance n - 1:      ", distance.tolist())
print("ConvS2S convolutions:", [int(c) if c <= L_dec else "-" for c in conv_ops])
print("GRU steps:           ", distance.tolist())

fig, ax = plt.subplots(figsize=(6.4, 3), layout="constrained")
ax.step(distance, distance, where="mid", color="C1", label="GRU: recurrent steps")
inside = conv_ops <= L_dec
ax.step(
    distance[inside],
    conv_ops[inside],
    where="mid",
    color="C0",
    linestyle="--",
    label="ConvS2S decoder: convolutions",
)
ax.axvspan(
    reach[-1] + 0.5,
    distance[-1] + 0.5,
    color="0.9",
    label=f"beyond {L_dec} layers' reach: no path in the stack",
)
ax.set(xlabel="distance between two target positions", ylabel="operations on the path")
ax.set_xticks(distance[1::2])
ax.legend()
plt.show()

# %%
# Beyond the reach of the stack no path joins two target positions at all: what the
# decoder knows of outputs further back comes to it only through attention, from the
# source. The encoder is not causal (each layer reaches :math:`(k-1)/2` positions to
# each side), and the decoder's attention reads every source position at once.
#
# What a second thread can do
# ---------------------------
# PyTorch runs each operation (a matrix product, an element-wise function, a
# softmax) on its intra-op threads: a second thread takes half of *one*
# operation's work, and every operation ends with the threads waiting for
# each other. A thread therefore helps an operation in proportion to its size,
# and helps a model in proportion to how much of its time goes to large
# operations. :class:`torch.profiler.profile` lists the operations of one
# training step, after an unprofiled warm-up step (thousands of operations:
# enough for an average; reading the profile of a step costs more than the
# step); the cell below counts them and divides the step's
# arithmetic (the count above times its target tokens) among them, then
# prints the profiler's time per operation at one thread and at every
# thread of this machine. A model made of many small operations in a chain,
# as the GRU's decoder is, has fewer floating-point operations to share per
# operation; how much that costs it is the measured difference between the
# two rows of a model.

from torch.profiler import ProfilerActivity, profile

from convs2s_edu._machine import usable_cores
from convs2s_edu.training.step import make_train_step


def operations_per_step(name: str, threads: int) -> dict:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model = build_model(site_config(name)).train()
        step = make_train_step(model, torch.optim.Adam(model.parameters()), 1.0)
        step(flop_batch)  # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step(flop_batch)
    finally:
        torch.set_num_threads(before)
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    n_ops = sum(e.count for e in events)
    seconds = sum(e.self_cpu_time_total for e in events) / 1e6
    return {"ops": n_ops, "seconds": seconds}


n_tokens = flop_batch.n_target_tokens
thread_counts = sorted({1, usable_cores()})
print(f"{'model':16s} {'threads':>7s} {'ops/step':>9s} {'kFLOP/op':>9s} {'us/op':>7s}")
per_op = {}
for n in MODELS:
    for t in thread_counts:
        p = operations_per_step(n, t)
        kflop = flops[n] * n_tokens / p["ops"] / 1e3
        per_op[(n, t)] = us = 1e6 * p["seconds"] / p["ops"]
        print(f"{LABELS[n]:16s} {t:>7d} {p['ops']:>9,.0f} {kflop:>9,.0f} {us:>7.1f}")

# %%
# The first columns are facts about the models (the same on every machine); the
# time per operation is this machine's, measured once, without the interleaving
# of the speed page, so read it as a picture of where the time goes, not as a
# speed measurement.
#
# What you saw
# ------------
# * Each model's arithmetic per token, its chain of dependent operations and the path
#   between two positions, counted from the models; what an operation costs here
#   (which model is faster, the interleaved measurement of the introduction says).
#
# Try it
# ------
# **1. Double the width.** With :math:`d = f = 256` instead of 128, predict
# how each model's arithmetic per token changes, and its chain of dependent
# operations.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The matrix products grow with the square of the width, so the arithmetic per
# token grows about fourfold (the embeddings and the output layer less); the
# chains do not change: width adds work to each operation, not operations.
# Counted on untrained models of both widths, the same batch:

wide = {"hidden_dim": 256, "embed_dim": 256}
for n in MODELS:
    model = build_model(site_config(n, model_options=wide))
    ratio = training_flops_per_token(model, flop_batch) / flops[n]
    chain, was = critical_path(model, S, T)["training"]["count"], paths[n]["training"]["count"]
    print(f"{LABELS[n]:16s} arithmetic x{ratio:.2f}, training chain {chain} (was {was})")

# %%
# .. raw:: html
#
#    </details>
#
# **2. Longer sequences.** With sources of 40 tokens, how long is each model's
# chain in training and in generation?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The GRU's chain is :math:`S + T` in both; ConvS2S's stays
# :math:`L_{enc} + L_{dec}` in training and grows by :math:`L_{dec}` per token
# in generation:

for n in MODELS:
    long = critical_path(results[n].model, 40, 41)
    print(
        f"{LABELS[n]:16s} "
        + ", ".join(f"{ph} {long[ph]['formula']} = {long[ph]['count']}" for ph in PHASES)
    )

# %%
# .. raw:: html
#
#    </details>
