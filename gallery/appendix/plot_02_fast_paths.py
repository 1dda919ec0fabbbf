r"""
The fast paths: the same models, computed faster
=================================================

The model files of ``convs2s_edu`` compute every equation the way the papers write
it: :class:`~convs2s_edu.ConvBlock` convolves with :class:`torch.nn.Conv1d`, the GRU
encoder runs :class:`torch.nn.GRU` over the packed source, and the GRU decoder's
teacher forcing calls :meth:`~convs2s_edu.GRUDecoder.step` once per target position,
computing the Bahdanau energy with its :math:`\tanh`. That is the code to read.

The site and the command line train through :mod:`convs2s_edu.fast` instead
wherever a short timing on the machine finds it faster (``TrainConfig.fast=None``, the
default: :mod:`convs2s_edu.training.calibrate`). It holds four subclasses that change *how* a
module computes, never *what* (dropout's masks: the same in distribution):

* :class:`~convs2s_edu.fast.FastConvBlock` computes :math:`[A\ B] = W * X + b_w` in
  the shape §3.2 gives the kernel, :math:`W \in \mathbb{R}^{2d \times kd}`: one matrix
  product of all :math:`BT` windows :math:`[x_i; \dots; x_{i+k-1}]` with :math:`W^\top`.
* :class:`~convs2s_edu.fast.FastGRUEncoder` steps both directions of the encoder's GRU
  together and writes its backward pass out, so that the weight gradients are one
  matrix product over every step instead of one small product per step.
* :class:`~convs2s_edu.fast.FastGRUDecoder` runs teacher forcing over the *packed*
  target (a row leaves the loop when its target ends: no step is computed on padding),
  computes what depends only on the known inputs :math:`y_{t-1}` once for every step,
  and evaluates :math:`v_a^\top \tanh(x)` as :math:`2 v_a^\top \sigma(2x) - \sum v_a`,
  whose constant the softmax ignores.
* :class:`~convs2s_edu.fast.FastDropout` draws dropout's masks from 16-bit random
  numbers, four from each 64-bit draw, where :class:`torch.nn.Dropout` draws one random
  number per element: the same function in distribution, :math:`p` rounded to a
  multiple of 1/65536 (:doc:`/departures`).

:func:`~convs2s_edu.fast.use_fast_paths` switches a model's modules to these classes in
place (and back); the parameters do not change. This page asks two questions: do the
fast paths compute the same numbers, and what do they buy on this machine?
"""

# %%
# The same numbers
# ----------------
# Both models as the site trains them, one batch of the site's data, the reference and
# the fast path on the same weights: the largest difference of the logits (at the
# positions the loss reads) and of any parameter's gradient, with dropout off (the two
# paths draw different masks; ``tests/test_fast_dropout.py`` checks the fast masks'
# distribution). Float32 sums in another order differ in the last bits; the tests check
# the same in float64 with :func:`torch.testing.assert_close`.

import copy

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import build_model, sequence_loss
from convs2s_edu.fast import FAST_CLASSES, use_fast_paths
from convs2s_edu.lab.site import is_quick_mode, site_config
from convs2s_edu.lab.timing import time_interleaved, training_batches, window_runner
from convs2s_edu.training.calibrate import machine_choice
from convs2s_edu.training.step import make_train_step

# sphinx_gallery_thumbnail_number = 1
MODELS = ("convs2s", "gru")
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
torch.set_num_threads(1)  # the site's timings: one thread (the Speed chapter varies it)
configs = {name: site_config(name) for name in MODELS}  # dropout 0.1, as trained
batches = {name: training_batches(configs[name], 4) for name in MODELS}


def logits_and_grads(model, batch):
    model.zero_grad()
    logits = model(batch.src, batch.tgt_in)
    sequence_loss(logits, batch.tgt_out).backward()
    return logits.detach(), [p.grad.clone() for p in model.parameters()]


print("fast classes:", ", ".join(f"{r.__name__} -> {f.__name__}" for r, f in FAST_CLASSES.items()))
for name in MODELS:
    torch.manual_seed(0)
    model = build_model(configs[name]).eval()  # dropout off: the same function
    b = batches[name][0]
    ref_logits, ref_grads = logits_and_grads(model, b)
    fast_logits, fast_grads = logits_and_grads(use_fast_paths(model), b)
    read = b.tgt_out != 0  # the positions the loss reads
    d_logits = (fast_logits - ref_logits)[read].abs().max().item()
    d_grads = max((f - r).abs().max().item() for f, r in zip(fast_grads, ref_grads))
    print(f"{LABELS[name]:16s} max |logits| difference {d_logits:.1e}, gradients {d_grads:.1e}")
    # sphinx_gallery_start_ignore
    assert d_logits < 1e-4 and d_grads < 1e-4, (name, d_logits, d_grads)
    # sphinx_gallery_end_ignore

# %%
# What they buy
# -------------
# Training steps of each model through the reference and through the fast path, timed
# interleaved (:func:`~convs2s_edu.lab.timing.time_interleaved`: every round runs one
# window of each, the order reversed every other round, so that a machine that slows
# down slows all four alike), one thread. A window's throughput counts the real target
# tokens it trained on; the ratio of the two paths is taken within each round.

QUICK = is_quick_mode()
rounds, steps = (3, 1) if QUICK else (8, 4)
windows, warmups = {}, {}
for name in MODELS:
    torch.manual_seed(0)
    reference = build_model(configs[name]).train()
    for path, model in (("reference", reference), ("fast", copy.deepcopy(reference))):
        use_fast_paths(model, path == "fast")
        step = make_train_step(model, torch.optim.Adam(model.parameters(), lr=1e-3))
        windows[f"{name}/{path}"] = window_runner(step, batches[name], steps)
        warmups[f"{name}/{path}"] = window_runner(step, batches[name], 2)
m = time_interleaved(windows, rounds, "cpu", warmup=warmups, steps_per_window=steps)

print(m.machine.describe())
for name in MODELS:
    ref, fast = (m.throughput[f"{name}/{p}"].median for p in ("reference", "fast"))
    r = m.round_ratios(f"{name}/fast", f"{name}/reference")  # within each round
    print(
        f"{LABELS[name]:16s} reference {ref:>7,.0f} tokens/s, fast {fast:>7,.0f}: "
        f"{r.median:.2f}x (rounds {r.min:.2f}-{r.max:.2f})"
    )

# %%
# Which path ``train`` takes here: by default (``TrainConfig.fast=None``) a short timing
# of each configuration's step decides, once per machine
# (:func:`~convs2s_edu.training.calibrate.machine_choice`): the fast path only when it
# beats the reference by the margin in every round.

for name in MODELS:
    choice = machine_choice(configs[name], say=False)
    low, high = min(choice["speedups"]), max(choice["speedups"])
    path = "fast paths" if choice["fast"] else "reference"
    print(f"{LABELS[name]:16s} trains on the {path} here: rounds {low:.2f}-{high:.2f}x")

fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
for i, name in enumerate(MODELS):
    for j, path in enumerate(("reference", "fast")):
        w = m.window_throughputs(f"{name}/{path}")
        med = np.median(w)
        ax.bar(i + 0.38 * j - 0.19, med, 0.36, color=f"C{j}", label=path if i == 0 else None)
        ax.errorbar(i + 0.38 * j - 0.19, med, [[med - min(w)], [max(w) - med]], color="k")
ax.set_xticks(range(len(MODELS)), [LABELS[n] for n in MODELS])
ax.set_ylabel("real target tokens / s")
ax.set_title("One training step, reference and fast path (bars: windows' range)")
ax.legend()
plt.show()

# %%
# What you saw
# ------------
# * The first cell: with dropout off, the fast paths give the reference's logits and
#   gradients up to float32 rounding, on the site's own sizes.
# * The ratios above say what each model's fast path buys on this machine, with the
#   range of the rounds beside them: a range that crosses 1 means no resolved
#   difference. The GRU's fast paths remove work (padding, a module call per step,
#   one small weight-gradient product per step); ConvS2S's change which kernel
#   multiplies, a matrix product instead of the CPU's convolution, so what they buy
#   depends on how fast this CPU's convolution kernels are against its matrix products,
#   and draw dropout's masks from a quarter of the random numbers (both models).
# * The models the site shows are always the reference classes:
#   :func:`~convs2s_edu.train` switches back before it returns the model.
#
# Try it
# ------
# **1. The identity behind the decoder's energy.** Check numerically that
# :math:`\tanh(x) = 2\sigma(2x) - 1`, and that adding a constant to every energy
# :math:`e_{tj}` leaves the softmax over :math:`j` unchanged.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>

x = torch.linspace(-6, 6, 101)
gap = (torch.tanh(x) - (2 * torch.sigmoid(2 * x) - 1)).abs().max()
print(f"max |tanh(x) - (2 sigma(2x) - 1)| = {gap:.1e}")
e = torch.randn(7)
print(f"softmax shift: {(torch.softmax(e, 0) - torch.softmax(e - 3.5, 0)).abs().max():.1e}")

# %%
# .. raw:: html
#
#    </details>
#
# **2. The padding the packed decoder skips.** In the batches timed above, what fraction
# of the GRU decoder's (row, step) pairs lies after a row's last token?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>

padding = [float(b.tgt_padding_mask.float().mean()) for b in batches["gru"]]
print(
    f"padding fraction of the target: {np.mean(padding):.0%} (per batch: "
    f"{', '.join(f'{p:.0%}' for p in padding)})"
)

# %%
# .. raw:: html
#
#    </details>
#
# **3. One fast path at a time.** :func:`~convs2s_edu.fast.use_fast_paths` takes any
# module: switch only the GRU model's encoder (``use_fast_paths(model.encoder)``) and
# time it against the reference and the whole fast path, as above. Which of the two
# GRU fast paths buys more here?
