r"""
What attention costs
====================

ConvS2S attends in every decoder layer. §5.5 of the paper says what that costs in
training: "Training with attention in all five decoder layers processes 3624 target
words per second on average on a single GPU, compared to 3772 words per second for
attention in a single layer. This is only a 4% slow down when adding 4 attention
modules", and gives part of the reason: "we batch the computation of an attention
module over all target words". This page asks the same question of both models on the
machine that built the site: how many training tokens per second does attention take?
"""

# %%
# Four models, timed together
# ---------------------------
# ConvS2S as the site trains it, and the same model with attention in its last decoder
# layer only (:class:`~convs2s_edu.ablations.AblationConfig`'s ``attention_layers``, the paper's
# ablation of Table 5); the GRU with Bahdanau's attention, and the same GRU with one
# fixed context instead (``attention=False``: RNNencdec, the model Bahdanau et al.
# compare against). Fresh, untrained models (a step's duration does not depend on the
# weights) on the path the model trains with here, the same batches of the site's data,
# timed in interleaved windows (:func:`~convs2s_edu.lab.timing.measure_training`), one
# thread. FLOPs per target token are counted by
# :func:`~convs2s_edu.lab.timing.training_flops_per_token` (forward and backward).

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import build_model
from convs2s_edu.fast import use_fast_paths
from convs2s_edu.lab.site import is_quick_mode, site_config
from convs2s_edu.lab.timing import measure_training, training_batches, training_flops_per_token
from convs2s_edu.training import resolve_path

QUICK = is_quick_mode()
ROUNDS, STEPS = (3, 2) if QUICK else (8, 4)
torch.set_num_threads(1)  # the site's timings: one thread (the Speed chapter varies it)
L = build_model(site_config("convs2s")).cfg.n_decoder_layers
VARIANTS = {  # label: (model, model options)
    f"ConvS2S, attention in all {L} layers": ("convs2s", {}),
    f"ConvS2S, attention in layer {L} only": ("convs2s", {"attention_layers": (L,)}),
    "GRU + attention": ("gru", {}),
    "GRU, one fixed context": ("gru", {"attention": False}),
}
batches = training_batches(site_config("convs2s"), 4)
fast = {n: resolve_path(site_config(n), say=False).fast for n in ("convs2s", "gru")}
models, flops = {}, {}
for label, (name, options) in VARIANTS.items():  # both variants on the model's path
    torch.manual_seed(0)
    model = build_model(site_config(name, model_options=options)).train()
    models[label] = use_fast_paths(model, fast[name])
    flops[label] = training_flops_per_token(models[label], batches[0])
m = measure_training(models, batches, steps_per_window=STEPS, n_rounds=ROUNDS, warmup_steps=1)
print(m.machine.describe())
for label in VARIANTS:
    w = m.window_throughputs(label)
    print(
        f"{label:36s} {np.median(w):>7,.0f} tokens/s ({min(w):,.0f}-{max(w):,.0f}), "
        f"{flops[label] / 1e6:.2f} MFLOP per token"
    )

# %%
# What attention takes
# --------------------
# For each model, the tokens per second with all its attention over those without
# (ConvS2S: attention in one layer; the GRU: none), taken within each round so that a
# slow minute of the machine slows both, and the same ratio of the FLOPs per token. The
# paper's ratio is printed beside them; its setting differs (printed below the ratios).

labels = list(VARIANTS)
for full, fewer in ((labels[0], labels[1]), (labels[2], labels[3])):
    r = m.round_ratios(full, fewer)  # within each round
    print(
        f"{full} / {fewer}: {r.median:.2f}x the tokens per second "
        f"(rounds {r.min:.2f}-{r.max:.2f}), {flops[full] / flops[fewer]:.2f}x the FLOPs per token"
    )
print(f"the paper (§5.5): 3624 / 3772 = {3624 / 3772:.3f}x the target words per second")
conv = build_model(site_config("convs2s")).cfg
print(
    f"here: {L} decoder layers of width {conv.hidden_dim}, kernel {conv.kernel_size}, "
    f"batches of {batches[0].src.shape[0]} sorting examples, the CPU above; the paper: 5 "
    "decoder layers of 512 units, kernel 5, WMT'14 En-De, one GPU"
)

# %%
# The same numbers as bars: tokens per second of each model, the line across each bar
# spanning its slowest and fastest window.

fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
for i, label in enumerate(VARIANTS):
    w = np.array(m.window_throughputs(label)) / 1000
    ax.barh(i, np.median(w), color=f"C{i // 2}", hatch="" if i % 2 == 0 else "//")
    ax.plot([min(w), max(w)], [i, i], color="k", linewidth=1.5)
ax.set_yticks(range(len(VARIANTS)), list(VARIANTS))
ax.invert_yaxis()
ax.set_xlabel("training tokens per second, thousands (one thread)")
ax.set_title("With and without (most of) the attention")
plt.show()

# %%
# What you saw
# ------------
# * ConvS2S computes each layer's attention for all target positions in two batched
#   matrix products (scores, then contexts); the first ratio says what the attention of
#   the other layers costs here, beside the paper's 4%.
# * The GRU attends once per decoder step, inside its loop over the target; its ratio
#   says what that costs against one fixed context.
# * Whether the ratios of FLOPs and of time agree says whether attention's arithmetic
#   or its many small operations set its cost on this machine.
#
# Try it
# ------
# **1. More source.** Attention's arithmetic grows with the source length :math:`m`
# (every query scores every source position), the convolutions' does not. Predict how
# the first ratio moves when every source is twice as long, then time it with longer
# batches (``site_config("convs2s", min_len=16, max_len=40)``; raise
# ``max_positions`` to 64 or more).
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The attention's share of the FLOPs grows with :math:`m`; count it without timing:

long = site_config("convs2s", min_len=16, max_len=40)
long_batch = training_batches(long, 1)[0]
for label in labels[:2]:
    name, options = VARIANTS[label]
    cfg = site_config(name, min_len=16, max_len=40, model_options=options)
    torch.manual_seed(0)
    n = training_flops_per_token(build_model(cfg), long_batch)
    print(f"{label}: {n / 1e6:.2f} MFLOP per token at lengths 16-40")

# %%
# .. raw:: html
#
#    </details>
