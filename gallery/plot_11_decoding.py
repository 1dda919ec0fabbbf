r"""
Decoding: greedy search, beam search and the incremental cache
==============================================================

Training feeds the decoder the reference prefix; at test time a model must
build its output one token at a time from its own previous outputs. This page
looks at two sides of that loop:

* **which** output to pick: greedy search keeps the single most probable
  token at every step, beam search (width 5 in the paper's experiments) keeps
  the five most probable prefixes;
* **how fast** one step is: ConvS2S can either recompute its decoder over the
  whole prefix at every step, or keep the last few inputs of every
  convolution in a cache and compute only the new position; and what sets
  the paper's measured generation speed (§5.3).

Both models also decode greedily, in your browser, any sequence you type on
:doc:`the page that tries them </try>`.
"""

# %%
# Greedy search against beam search
# ---------------------------------
# Both trained models are loaded from the cache filled by the
# :ref:`training page <sphx_glr_auto_examples_plot_08_training.py>` (run on its
# own, this page trains them first). Each decodes the whole test set with
# :func:`~convs2s_edu.greedy_decode` and with :func:`~convs2s_edu.beam_search`
# (``beam_size=5``), in batches (:func:`~convs2s_edu.decode_all`); a beam of
# width 1 is exactly greedy search. Beam search
# ranks finished hypotheses by their log-probability divided by their length,
# so that short outputs are not favoured just for having fewer factors. The
# last column is the wall-clock time of decoding the whole test set.

import time

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import torch

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
from convs2s_edu.training.device import synchronize

# sphinx_gallery_thumbnail_number = 2
MODELS = ("convs2s", "gru")
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
COLOURS = {"convs2s": "C0", "gru": "C1"}
BEAM = 5

results = {name: train_or_load(site_config(name)) for name in MODELS}
cfg = results["convs2s"].config
test_set = make_datasets(cfg)[2]
examples = list(test_set)
sources = [x for x, _ in examples]
references = [y for _, y in examples]
for name in MODELS:
    h = results[name].history
    print(f"{LABELS[name]:16s} trained for {len(h.epochs)} epochs on {h.device}")
if is_quick_mode():
    print(
        "\nNOTE: quick build (CONVS2S_EDU_QUICK=1): small data and few epochs, so the\n"
        "models are far from trained, and the timings below use fewer repeats and\n"
        "smaller batches than the full build."
    )

outputs, scores = {}, {}  # (model, beam) -> output; -> (exact match, token accuracy, seconds)
for name in MODELS:
    for k in (1, BEAM):
        start = time.perf_counter()
        pred = outputs[name, k] = decode_all(results[name].model, sources, beam_size=k)
        seconds = time.perf_counter() - start
        scores[name, k] = (
            exact_match(pred, references),
            token_accuracy(pred, references),
            seconds,
        )

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
# What beam search changed: of the test examples whose output differs between
# the two searches, how many beam search fixed (greedy wrong, beam right), how
# many it broke (greedy right, beam wrong), and how many stayed wrong either way.

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
# The same scores as a chart. Beam search pays off when the most probable token
# at some step leads to a less probable sequence overall: a wrong early choice
# that greedy search cannot undo. When a model is already confident and
# right at almost every step, the beam rarely finds anything better.

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
for col, ax, title in ((0, axes[0], "Exact match"), (1, axes[1], "Token accuracy")):
    for j, (k, alpha, hatch) in enumerate(((1, 1.0, None), (BEAM, 0.55, "//"))):
        x, vals = (
            np.arange(len(MODELS)) + (j - 0.5) * 0.38,
            [100 * scores[n, k][col] for n in MODELS],
        )
        kw = dict(color=[COLOURS[n] for n in MODELS], alpha=alpha, hatch=hatch, edgecolor="white")
        bars = ax.bar(x, vals, 0.38, label=f"beam {k}" if k > 1 else "greedy (beam 1)", **kw)
        ax.bar_label(bars, fmt="%.1f%%", fontsize=8, padding=2)
    ax.set_xticks(range(len(MODELS)), [LABELS[n] for n in MODELS])
    ax.set(ylim=(0, 108), ylabel="% of the test set", title=title)
    ax.grid(alpha=0.3, axis="y")
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
# every layer per step; ``incremental=False`` runs the whole decoder over the
# whole prefix again at every step. Both give the same tokens, but over
# :math:`T` steps the full recompute processes :math:`T(T+1)/2` positions per
# layer against :math:`T`.
#
# :func:`~convs2s_edu.lab.timing.time_incremental_vs_full` times both on random
# sources, forcing exactly :math:`T` steps at each length printed below, up to
# far beyond the task's sequences: on a fresh, **untrained** model of the same
# architecture (:func:`~convs2s_edu.build_model`) with a larger position
# table, since the computation per step does not depend on the weights. The
# GRU, timed alongside, is incremental by nature: :math:`s_{t-1}` already
# summarises the prefix.

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
    """Fastest of REPEATS greedy decodes of exactly T steps (after one warm-up)."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(1, cfg.vocab_size + 1, (BATCH, T), generator=gen).to(device)  # (B, T)

    def once():
        synchronize(device)
        start = time.perf_counter()
        greedy_decode(gru_timing, src, max_len=T, stop_at_eos=False)
        synchronize(device)
        return time.perf_counter() - start

    once()
    return min(once() for _ in range(REPEATS))


gru_seconds = [time_gru(T) for T in LENGTHS]
full = np.array([r["seconds_full"] for r in records])
inc = np.array([r["seconds_incremental"] for r in records])
print(f"device: {device}, batch of {BATCH} sources, fastest of {REPEATS} run(s) after a warm-up")
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
# Left: the time to decode :math:`T` steps, on log-log axes, where a cost
# proportional to :math:`T` is a line of slope 1 and one proportional to
# :math:`T^2` a line of slope 2 (the grey guides). Right: the speed-up of the
# cache. The full recompute does quadratically many position-computations,
# which predicts a speed-up that grows with :math:`T`; but each of its calls
# processes many positions at once, so on small batches the fixed cost per
# call hides part of the difference. The sentence under the figure says what
# this run measured.

T = np.array(LENGTHS, dtype=float)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
ax = axes[0]
ax.loglog(T, full, "o-", color="C0", label="ConvS2S, full recompute")
ax.loglog(T, inc, "s-", color="C0", mfc="white", label="ConvS2S, cached (incremental)")
ax.loglog(T, gru_seconds, "^-", color="C1", label="GRU (always incremental)")
ax.loglog(T, inc[0] * T / T[0], ":", color="grey", lw=1, label=r"guide $\propto T$")
ax.loglog(T, full[0] * (T / T[0]) ** 2, "--", color="grey", lw=0.8, label=r"guide $\propto T^2$")
ax.set_xticks(T, [str(int(t)) for t in T])
ax.minorticks_off()
ax.set(xlabel="decoding steps T", ylabel="seconds", title=f"Greedy decoding, batch of {BATCH}")
ax.yaxis.set_major_locator(mticker.LogLocator(subs=(1, 2, 5)))
ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
ax.legend(fontsize=8)
ax.grid(alpha=0.3, which="both")
ax = axes[1]
bars = ax.bar([str(int(t)) for t in T], full / inc, color="C0")
ax.bar_label(bars, fmt="%.1fx", fontsize=9, padding=2)
ax.axhline(1, color="k", lw=0.8)
ax.set_ylim(0, 1.18 * max(full / inc))
ax.set(xlabel="decoding steps T", ylabel="full time / cached time", title="Speed-up of the cache")
ax.grid(alpha=0.3, axis="y")
plt.show()
print(trend("the speed-up of the cache", LENGTHS, full / inc, along="T =", fmt="{:.1f}x"))

# %%
# Two speed claims, and where each holds
# --------------------------------------
# The paper's argument for convolutions (§1) is about *training*: teacher
# forcing knows every target position in advance, so ConvS2S computes them all
# at once. In *generation* that parallelism over the target is gone: with or
# without the cache, ConvS2S writes one token after the other like the GRU,
# and only its encoder still runs over the whole source at once. The chains of
# dependent operations at the longest length above
# (:func:`~convs2s_edu.lab.schematic.critical_path`, source as long as target):

for name, model in zip(MODELS, (conv_timing, gru_timing)):
    p = critical_path(model, LENGTHS[-1], LENGTHS[-1])
    print(f"{LABELS[name]:16s} training {p['training']['worked']:>15s}")
    print(f"{'':16s} generation {p['generation']['worked']:>13s}")

# %%
# Yet the speed the paper *measures* is generation (§5.3, Table 3, printed on
# :ref:`the bench page <sphx_glr_auto_examples_speed_plot_04_bench.py>`),
# against GNMT, an 8-layer LSTM encoder and decoder. Several things could
# make it fast, and the paper does not measure which matters how much: the
# encoder still runs over the whole source at once, where GNMT's 8-layer LSTM
# encoder runs position by position; a ConvS2S decoder step is, per layer, one
# small convolution over the :math:`k` latest inputs and a dot-product
# attention, against a step of a deep LSTM stack; unchanged convolution states
# are shifted, not recomputed (the cache above); and batches of up to 128
# sentences *of equal length* spend no step on padding. This page measures the
# cache and these two small models on this machine: it says nothing about an
# 8-layer LSTM, since the recurrent model here is a one-layer GRU.

at_longest = {"ConvS2S (cached)": inc[-1], "the GRU": gru_seconds[-1]}
time_T = f"time of {LENGTHS[-1]} greedy steps"
print(comparison(time_T, at_longest, fmt="{:.3f} s", higher="longer", lower="shorter"))

# %%
# What you saw
# ------------
# * Greedy search keeps one prefix; beam search keeps the :math:`K` most
#   probable ones and can recover from a token that looked best only locally.
# * ConvS2S can decode incrementally: every causal convolution keeps its last
#   :math:`k-1` inputs, so a step computes only the new position instead of
#   the whole prefix. Both ways give the same output.
# * Generating, ConvS2S's decoder too runs one step per token; only its
#   encoder keeps the parallelism over positions that training has. The paper
#   does not separate what its measured generation speed (§5.3) comes from.
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

model_08 = results["convs2s"].model
same = greedy_decode(model_08, sources[:32]) == beam_search(model_08, sources[:32], beam_size=1)
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
one_source = torch.tensor([[3, 1, 2]], device=next(model_08.parameters()).device)
cache = model_08.decoder.start(model_08.encode(one_source))
print([tuple(w.shape) for w in cache.windows])
c, total = model_08.cfg, sum(w.numel() for w in cache.windows)
print(f"{total} = {c.n_decoder_layers} x {c.kernel_size - 1} x {c.hidden_dim}")

# %%
# .. raw:: html
#
#    </details>
