r"""
What the decoder sees of its own output
=======================================

ConvS2S's decoder is a stack of causal convolutions: with :math:`L` layers of width
:math:`k`, the state at position :math:`i` depends on the last :math:`L(k-1) + 1`
decoder inputs and on nothing earlier (the :ref:`path between two positions
<sphx_glr_auto_examples_speed_plot_02_what_makes_one_faster.py>`). Sorting a source
with repeated values tests exactly that window: to write the right number of copies of
a value, the decoder must know how many it has written (its own recent outputs, inside
the window while there are few) and how many the source holds (only attention can read
that). The GRU carries its whole output history in one state :math:`s_t`. This page asks
of both trained models: does a long run of equal values come out with the right count?
"""

# %%
# Sources with a run of copies
# ----------------------------
# For every run length :math:`r` from 1 to the longest training source, the cell builds
# test sources of that length's range that hold one value :math:`r` times and distinct
# other values around it, decodes them greedily with both trained models, and counts
# how often the output holds that value exactly :math:`r` times.

import matplotlib.pyplot as plt
import numpy as np
import torch

from convs2s_edu import decode_all, sos_index, train_or_load
from convs2s_edu.lab.site import quick_caveat, site_config
from convs2s_edu.registry import model_entry

MODELS = ("convs2s", "gru")
LABELS = {name: model_entry(name).label for name in MODELS}
results = {name: train_or_load(site_config(name)) for name in MODELS}
cfg = results["convs2s"].config
decoder = results["convs2s"].model.decoder
window = len(decoder.blocks) * (decoder.cfg.kernel_size - 1) + 1
print(
    f"ConvS2S decoder: {len(decoder.blocks)} layers of width {decoder.cfg.kernel_size}: "
    f"position i sees the last {window} decoder inputs"
)
print(f"training sources: {cfg.min_len}-{cfg.max_len} tokens of 1..{cfg.vocab_size}")

rng = np.random.default_rng(0)
PER_RUN = 40  # sources per run length
runs = range(1, cfg.max_len + 1)


def source_with_run(r: int) -> tuple[list[int], int]:
    """A source of a training length holding one value r times, the others distinct."""
    length = int(rng.integers(max(cfg.min_len, r), cfg.max_len + 1))
    values = rng.choice(np.arange(1, cfg.vocab_size + 1), size=length - r + 1, replace=False)
    x = [int(values[0])] * r + [int(v) for v in values[1:]]
    rng.shuffle(x)
    return x, int(values[0])


sources = {r: [source_with_run(r) for _ in range(PER_RUN)] for r in runs}
right = {name: [] for name in MODELS}
for name in MODELS:
    model = results[name].model.eval()
    for r in runs:
        outputs = decode_all(model, [x for x, _ in sources[r]])
        counts = [out.count(v) for out, (_, v) in zip(outputs, sources[r])]
        right[name].append(np.mean([c == r for c in counts]))
for name in MODELS:
    shares = ", ".join(f"{r}: {p:.0%}" for r, p in zip(runs, right[name]))
    print(f"{LABELS[name]}, right count by run length: {shares}")

# %%
# The same as a figure, with the ConvS2S decoder's window marked: beyond it, the
# decoder cannot see where its run of copies began.

fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
for name, style in zip(MODELS, ("o-", "s--")):
    ax.plot(list(runs), 100 * np.array(right[name]), style, label=LABELS[name], ms=4)
ax.axvline(window, color="0.5", linestyle=":", label=f"ConvS2S window ({window} inputs)")
ax.set(xlabel="copies of one value in the source", ylabel="outputs with that count (%)")
ax.set_ylim(-3, 103)
ax.set_xticks(list(runs)[1::2])
ax.legend()
plt.show()
quick_caveat("the figure above")

# %%
# Where attention looks while the run is written
# ----------------------------------------------
# Teacher-forced on one source with a long run, the ConvS2S decoder's last layer's
# weight on the run's source positions, at every output position: whether attention
# keeps the run in view while the copies are written, one after another.

r = min(cfg.max_len - 6, window + 3)  # a run longer than the window, among others
x, v = source_with_run(r)
y = sorted(x)
model = results["convs2s"].model
V = cfg.vocab_size
src = torch.tensor([x])
tgt_in = torch.tensor([[sos_index(V), *y]])  # <sos> y_1 ... y_n
with torch.no_grad():
    _, a = model(src, tgt_in, return_attention=True)  # (B, L, T, S)
on_run = a[0, -1][:, torch.tensor(x) == v].sum(-1)  # (T,): weight on the run's positions
first = y.index(v)
print(f"a run of {r} copies of {v}, written at output positions {first + 1}..{first + r}")
print("weight on the run, by output position:", on_run.numpy().round(2))

fig, ax = plt.subplots(figsize=(6.4, 2.8), layout="constrained")
ax.plot(range(1, len(on_run) + 1), on_run, "o-", ms=3)
ax.axvspan(first + 0.5, first + r + 0.5, color="0.9", label="the run is written here")
ax.set(xlabel="output position", ylabel="last layer's weight on the run")
ax.legend()
plt.show()

# %%
# What you saw
# ------------
# * How often each trained model writes a run of copies with the right count, by the
#   run's length, and where the ConvS2S decoder's window ends.
# * Where ConvS2S's last attention layer looks while it writes a long run: the source
#   holds the count; the decoder's own window holds at most the last few copies.
# * This is a hypothesis tested on a toy task, not a claim of the paper, which does not
#   discuss repeated tokens. The :ref:`claims page
#   <sphx_glr_auto_examples_experiments_plot_06_claims.py>` judges the paper's own claims.
#
# Try it
# ------
# **1. A wider window.** Train ConvS2S with 6 decoder layers
# (``site_config("convs2s", model_options={"n_decoder_layers": 6})``) and run the count
# test again. Where should its curve change, if the window is what limits it?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The window grows by :math:`k - 1` inputs a layer:

for layers in (4, 6, 8):
    print(f"{layers} decoder layers: a window of {layers * (decoder.cfg.kernel_size - 1) + 1}")

# %%
# .. raw:: html
#
#    </details>
