r"""
Decoding: greedy search, beam search and the incremental cache
==============================================================

Training feeds the decoder the reference prefix; at test time a model must
build its output one token at a time from its own previous outputs. This page
looks at two sides of that loop:

* **which** output to pick: greedy search keeps the single most probable
  token at every step, beam search (width 5 in the paper, §4.3) keeps the five
  most probable prefixes;
* **how fast** one step is: the ConvS2S decoder recomputed over the whole
  prefix at every step, or a cache of every convolution's last few inputs;
  and what sets the paper's measured generation speed (§5.3).

Both models also decode greedily, in your browser, any sequence you type on
:doc:`the page that tries them </try>`.
"""

# %%
# Greedy search against beam search
# ---------------------------------
# Both trained models are loaded from the cache filled by the
# :ref:`training page <sphx_glr_auto_examples_plot_10_training.py>` (run on its
# own, this page trains them first). Each decodes the whole test set with
# :func:`~convs2s_edu.greedy_decode` and with :func:`~convs2s_edu.beam_search`
# (``beam_size=5``, the paper's "beam of width 5", §4.3), in batches
# (:func:`~convs2s_edu.decode_all`). Beam search ranks finished hypotheses by their
# log-probability divided by their length, as §4.3 does ("We divide the
# log-likelihoods of the final hypothesis in beam search by their length
# :math:`|\mathbf{y}|`"; the paper gives no reason, Wu et al., 2016, §7: otherwise
# beam search favours short outputs, which add fewer negative log-probabilities).
# The last column is the wall-clock time of decoding the whole test set.

import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch.utils.benchmark import Timer

from convs2s_edu import (
    beam_search,
    build_model,
    collate_batch,
    decode_all,
    exact_match,
    greedy_decode,
    make_datasets,
    token_accuracy,
    train_or_load,
)
from convs2s_edu.lab.schematic import critical_path
from convs2s_edu.lab.site import comparison, is_quick_mode, site_config, trend
from convs2s_edu.lab.timing import time_incremental_vs_full
from convs2s_edu.training import resolve_device

# sphinx_gallery_thumbnail_number = 2
MODELS = ("convs2s", "gru")
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
BEAM = 5

results = {name: train_or_load(site_config(name)) for name in MODELS}
cfg = results["convs2s"].config
examples = list(make_datasets(cfg)[2])  # the test set
sources, references = (list(t) for t in zip(*examples))
for name, r in results.items():
    print(f"{LABELS[name]:16s} trained for {len(r.history.epochs)} epochs on {r.history.device}")

outputs, scores = {}, {}  # (model, beam) -> output; -> (exact match, token accuracy, seconds)
for name in MODELS:
    for k in (1, BEAM):
        start = time.perf_counter()
        pred = outputs[name, k] = decode_all(results[name].model, sources, beam_size=k)
        seconds = time.perf_counter() - start
        em, tok = exact_match(pred, references), token_accuracy(pred, references)
        scores[name, k] = (em, tok, seconds)

print(f"\n{len(examples):,} test examples")
print(f"{'model':16s} {'search':>10s} {'exact match':>12s} {'token acc.':>11s} {'seconds':>8s}")
for (name, k), (em, tok, seconds) in scores.items():
    search = "greedy" if k == 1 else f"beam {k}"
    print(f"{LABELS[name]:16s} {search:>10s} {em:>12.1%} {tok:>11.1%} {seconds:>8.2f}")

# sphinx_gallery_start_ignore
src = collate_batch(examples[:32], cfg.vocab_size).src
for name in MODELS:  # a beam of width 1 is greedy search
    model = results[name].model
    assert beam_search(model, src, beam_size=1) == greedy_decode(model, src)
# sphinx_gallery_end_ignore

# %%
# What beam search changed, among the test examples whose two outputs differ:
# fixed (greedy wrong, beam right), broken (the reverse) or wrong either way.

print(f"{'model':16s} {'changed':>8s} {'fixed':>6s} {'broken':>7s} {'wrong either way':>17s}")
for name in MODELS:
    g, b = outputs[name, 1], outputs[name, BEAM]
    changed = [(gi == y, bi == y) for gi, bi, y in zip(g, b, references) if gi != bi]
    fixed = sum(not gr and br for gr, br in changed)
    broke = sum(gr and not br for gr, br in changed)
    rest = len(changed) - fixed - broke
    print(f"{LABELS[name]:16s} {len(changed):>8d} {fixed:>6d} {broke:>7d} {rest:>17d}")
for name in MODELS:
    em = {f"{LABELS[name]} with beam {BEAM}": scores[name, BEAM][0], "greedy": scores[name, 1][0]}
    print(comparison("exact match", em))

# %%
# The same scores as a chart. Beam search pays off when a locally most
# probable token leads to a less probable sequence, which greedy search cannot
# undo; it finds little for a model confident and right at almost every step.

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
for col, ax, title in ((0, axes[0], "Exact match"), (1, axes[1], "Token accuracy")):
    for j, (k, alpha, hatch) in enumerate(((1, 1.0, None), (BEAM, 0.55, "//"))):
        x = np.arange(len(MODELS)) + (j - 0.5) * 0.38
        vals = [100 * scores[n, k][col] for n in MODELS]
        kw = dict(color=["C0", "C1"], alpha=alpha, hatch=hatch, edgecolor="white")
        bars = ax.bar(x, vals, 0.38, label=f"beam {k}" if k > 1 else "greedy (beam 1)", **kw)
        ax.bar_label(bars, fmt="%.1f%%", fontsize=8, padding=2)
    ax.set_xticks(range(len(MODELS)), [LABELS[n] for n in MODELS])
    ax.set(ylim=(0, 108), ylabel="% of the test set", title=title)
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2, frameon=False)
plt.show()

# %%
# Incremental decoding of ConvS2S
# -------------------------------
# A causal convolution of width :math:`k` computes position :math:`i` from its
# inputs at positions :math:`i-k+1, \dots, i` only, so the next position needs
# the last :math:`k-1` inputs of every layer, not the whole prefix.
# ``greedy_decode(..., incremental=True)`` keeps exactly those in a
# :class:`~convs2s_edu.convs2s.DecoderCache` and computes one new column of
# every layer per step; ``incremental=False`` reruns the decoder over the
# whole prefix at every step: :math:`T(T+1)/2` positions per layer over
# :math:`T` steps, against :math:`T`, for the same tokens.
#
# :func:`~convs2s_edu.lab.timing.time_incremental_vs_full` times both on random
# sources, forcing exactly :math:`T` steps at each length below, far beyond the
# task's sequences, on a fresh **untrained** model of the same architecture
# (:func:`~convs2s_edu.build_model`) with a larger position table: the work
# per step does not depend on the weights. The GRU, timed alongside, is
# incremental by nature: :math:`s_{t-1}` summarises the prefix.

device = resolve_device("auto")
LENGTHS = (20, 50, 100)
BATCH, REPEATS = (4, 2) if is_quick_mode() else (16, 3)
torch.manual_seed(0)
conv_timing, gru_timing = (
    build_model(site_config(name, model_options={"max_positions": 128})).to(device).eval()
    for name in MODELS
)
records = time_incremental_vs_full(conv_timing, LENGTHS, batch_size=BATCH, repeats=REPEATS)


def time_gru(T):
    """Mean of REPEATS greedy decodes of exactly T steps, timed as the ConvS2S columns."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(1, cfg.vocab_size + 1, (BATCH, T), generator=gen).to(device)  # (B, T)
    run = "greedy_decode(gru_timing, src, max_len=T, stop_at_eos=False)"
    scope = {"greedy_decode": greedy_decode, "gru_timing": gru_timing, "src": src, "T": T}
    return Timer(run, globals=scope, num_threads=torch.get_num_threads()).timeit(REPEATS).median


gru_seconds = [time_gru(T) for T in LENGTHS]
full = np.array([r["seconds_full"] for r in records])
inc = np.array([r["seconds_incremental"] for r in records])
print(f"device: {device}, batch of {BATCH} sources, mean of {REPEATS} run(s) after 2 warm-ups")
print(
    f"{'steps T':>8s} {'ConvS2S full':>13s} {'ConvS2S cached':>15s} {'speed-up':>9s} {'GRU':>8s}"
)
for T, f, i, g in zip(LENGTHS, full, inc, gru_seconds):
    print(f"{T:>8d} {f:>11.3f} s {i:>13.3f} s {f / i:>8.1f}x {g:>6.3f} s")

# sphinx_gallery_start_ignore
src = torch.randint(1, cfg.vocab_size + 1, (3, 30), generator=torch.Generator().manual_seed(1))
assert greedy_decode(conv_timing, src) == greedy_decode(conv_timing, src, incremental=False)
assert np.allclose(full / inc, [r["speedup"] for r in records])
# sphinx_gallery_end_ignore

# %%
# Left: the time to decode :math:`T` steps on log-log axes, where the grey
# guides of slope 1 and 2 are costs proportional to :math:`T` and :math:`T^2`.
# Right: the speed-up of the cache. Quadratic work predicts a speed-up that
# grows with :math:`T`, but each full call processes many positions at once,
# so on small batches the fixed cost per call hides part of it. The sentence
# under the figure says what this run measured.

T = np.array(LENGTHS, dtype=float)
fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
ax.loglog(T, full, "o-", color="C0", label="ConvS2S, full recompute")
ax.loglog(T, inc, "s-", color="C0", mfc="white", label="ConvS2S, cached (incremental)")
ax.loglog(T, gru_seconds, "^-", color="C1", label="GRU (always incremental)")
ax.loglog(T, inc[0] * T / T[0], ":", color="grey", lw=1, label=r"guide $\propto T$")
ax.loglog(T, full[0] * (T / T[0]) ** 2, "--", color="grey", lw=0.8, label=r"guide $\propto T^2$")
ax.set_xticks(T, [str(int(t)) for t in T])
ax.minorticks_off()
ax.set(xlabel="decoding steps T", ylabel="seconds", title=f"Greedy decoding, batch of {BATCH}")
ax.legend(fontsize=8)
bars = bx.bar([str(int(t)) for t in T], full / inc, color="C0")
bx.bar_label(bars, fmt="%.1fx", fontsize=9, padding=2)
bx.axhline(1, color="k", lw=0.8)
bx.set_ylim(0, 1.18 * max(full / inc))
bx.set(xlabel="decoding steps T", ylabel="full time / cached time", title="Speed-up of the cache")
plt.show()
print(trend("the speed-up of the cache", LENGTHS, full / inc, along="T =", fmt="{:.1f}x"))

# %%
# Two speed claims, and where each holds
# --------------------------------------
# The paper's argument for convolutions (§1) is about *training*: teacher
# forcing knows every target position in advance, so ConvS2S computes them all
# at once. *Generating*, with or without the cache, ConvS2S writes one token
# after the other like the GRU; only its encoder still runs over the whole
# source at once. The chains of dependent operations at the longest length
# (:func:`~convs2s_edu.lab.schematic.critical_path`, source as long as target):

for name, model in zip(MODELS, (conv_timing, gru_timing)):
    p = critical_path(model, LENGTHS[-1], LENGTHS[-1])
    print(f"{LABELS[name]:16s} training {p['training']['worked']:>15s}")
    print(f"{'':16s} generation {p['generation']['worked']:>13s}")

# %%
# Yet the speed the paper *measures* against a recurrent model is generation (§5.3,
# Table 3, printed on :ref:`the bench page
# <sphx_glr_auto_examples_speed_plot_04_bench.py>`), against GNMT, an 8-layer LSTM
# encoder and decoder. The paper does not measure which of several things makes it
# fast: the encoder runs over the whole source at once, GNMT's position by position; a
# ConvS2S decoder step is, per layer, one small convolution over the :math:`k` latest
# inputs and a dot-product attention, not a step of a deep LSTM stack; unchanged states
# are shifted, not recomputed (the cache above); batches hold up to 128 sentences *of
# equal length*, so no source is padded (the outputs still end at different steps).
# This page times two small models on this machine: nothing about an 8-layer LSTM,
# since the recurrent model here is a one-layer GRU.

at_longest = {"ConvS2S (cached)": inc[-1], "the GRU": gru_seconds[-1]}
time_T = f"time of {LENGTHS[-1]} greedy steps"
print(comparison(time_T, at_longest, fmt="{:.3f} s", higher="longer", lower="shorter"))

# %%
# What you saw
# ------------
# * Greedy search keeps one prefix; beam search keeps the :math:`K` most
#   probable ones and can recover from a token that looked best only locally.
# * ConvS2S can decode incrementally: every causal convolution keeps its last
#   :math:`k-1` inputs, so a step computes only the new position, with the
#   same output as recomputing the whole prefix.
# * Generating, ConvS2S's decoder too runs one step per token; only its
#   encoder keeps the parallelism of training. The paper does not separate
#   what its measured generation speed (§5.3) comes from.
# * Next, :ref:`what the decoder sees of its own output
#   <sphx_glr_auto_examples_plot_16_decoder_window.py>` while it writes it.
#
# Try it
# ------
# **1. A beam of width 1.** Does beam search with ``beam_size=1`` give the
# greedy output?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Yes: a beam of one keeps the single most probable token at every step,
# which is greedy search (length penalty aside, which cannot reorder a single
# hypothesis).

convs2s_model = results["convs2s"].model  # the trained ConvS2S
same = greedy_decode(convs2s_model, sources[:32]) == beam_search(
    convs2s_model, sources[:32], beam_size=1
)
print("beam 1 == greedy on 32 test sources:", same)

# %%
# .. raw:: html
#
#    </details>
#
# **2. The cache.** How many past inputs does each decoder layer keep for
# incremental decoding with kernel width 3, and how many numbers is that for
# the trained model (batch of one)?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`k - 1 = 2` inputs of :math:`d` channels per layer, whatever the
# length of the output so far: :math:`L \cdot (k-1) \cdot d` numbers.

# the decoder's state before its first step, for a batch of one source
one_source = torch.tensor([[3, 1, 2]], device=next(convs2s_model.parameters()).device)
cache = convs2s_model.decoder.start(convs2s_model.encode(one_source))
print([tuple(w.shape) for w in cache.windows])
c, total = convs2s_model.cfg, sum(w.numel() for w in cache.windows)
print(f"{total} = {c.n_decoder_layers} x {c.kernel_size - 1} x {c.hidden_dim}")

# %%
# .. raw:: html
#
#    </details>
