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
  convolution in a cache and compute only the new position.
"""

# %%
# Greedy search against beam search
# ---------------------------------
# Both trained models are loaded from the cache filled by the
# :ref:`training page <sphx_glr_auto_examples_plot_05_training.py>` (run on its
# own, this page trains them first). Each decodes the whole test set with
# :func:`~convs2s_edu.greedy_decode` and with :func:`~convs2s_edu.beam_search`
# (``beam_size=5``), 250 sources at a time (:func:`~convs2s_edu.decode_all`);
# a beam of width 1 is exactly greedy search. Beam search
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
from convs2s_edu.lab.site import is_quick_mode, site_config
from convs2s_edu.lab.timing import time_incremental_vs_full
from convs2s_edu.training import resolve_device

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

outputs, rows = {}, []
for name in MODELS:
    for k in (1, BEAM):
        start = time.perf_counter()
        pred = decode_all(results[name].model, sources, beam_size=k, batch_size=250)
        seconds = time.perf_counter() - start
        outputs[name, k] = pred
        rows.append(
            (name, k, exact_match(pred, references), token_accuracy(pred, references), seconds)
        )

print(f"\n{len(examples):,} test examples")
print(f"{'model':16s} {'search':>10s} {'exact match':>12s} {'token acc.':>11s} {'seconds':>8s}")
for name, k, em, tok, seconds in rows:
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
    print(
        f"{LABELS[name]:16s} {len(changed):>8d} {fixed:>6d} {broke:>7d} "
        f"{len(changed) - fixed - broke:>17d}"
    )

# %%
# The same scores as a chart. Beam search pays off when the most probable token
# at some step leads to a less probable sequence overall: a wrong early choice
# that greedy search cannot undo. When a model is already confident and
# right at almost every step, the beam rarely finds anything better.

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
width = 0.38
for ax, col, title in ((axes[0], 2, "Exact match"), (axes[1], 3, "Token accuracy")):
    for j, k in enumerate((1, BEAM)):
        vals = [100 * r[col] for r in rows if r[1] == k]
        bars = ax.bar(
            np.arange(len(MODELS)) + (j - 0.5) * width,
            vals,
            width,
            color=[COLOURS[n] for n in MODELS],
            alpha=1.0 if k == 1 else 0.55,
            hatch=None if k == 1 else "//",
            edgecolor="white",
        )
        ax.bar_label(bars, fmt="%.1f%%", fontsize=8, padding=2)
    ax.set_xticks(range(len(MODELS)), [LABELS[n] for n in MODELS])
    ax.set_ylim(0, 108)
    ax.set_ylabel("% of the test set")
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="y")
handles = [
    plt.Rectangle((0, 0), 1, 1, color="grey"),
    plt.Rectangle((0, 0), 1, 1, color="grey", alpha=0.55, hatch="//", ec="white"),
]
fig.legend(
    handles,
    ["greedy (beam 1)", f"beam {BEAM}"],
    loc="outside lower center",
    ncol=2,
    fontsize=9,
    frameon=False,
)
plt.show()

# %%
# Incremental decoding of ConvS2S
# -------------------------------
# A causal convolution of width :math:`k` computes position :math:`i` from
# its inputs at positions :math:`i-k+1, \dots, i` only. To compute the next
# position, a decoder therefore needs the last :math:`k-1` inputs of every
# layer, not the whole prefix. ``greedy_decode(..., incremental=True)`` keeps
# exactly those in a :class:`~convs2s_edu.convs2s.DecoderCache` and computes one new
# column of every layer per step; ``incremental=False`` runs the whole decoder
# over the whole prefix again at every step. Both give the same tokens, but
# over :math:`T` steps the full recompute processes
# :math:`1 + 2 + \dots + T = T(T+1)/2` positions per layer against :math:`T`.
#
# :func:`~convs2s_edu.lab.timing.time_incremental_vs_full` times both on random
# sources at the target lengths printed below, forcing exactly :math:`T`
# steps. The longest of them is far beyond the task's sequences, and beyond
# the position table of the trained model. The timing uses a fresh,
# **untrained** model of the same architecture
# (:func:`~convs2s_edu.build_model`) with a larger position table instead:
# the amount of computation per step does not depend on the values of the
# weights, so neither does the time. The GRU, timed alongside, is incremental by nature:
# its state :math:`s_{t-1}` already summarises the prefix.

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
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        greedy_decode(gru_timing, src, max_len=T, stop_at_eos=False)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    once()
    return min(once() for _ in range(REPEATS))


gru_seconds = [time_gru(T) for T in LENGTHS]
print(f"device: {device}, batch of {BATCH} sources, fastest of {REPEATS} run(s) after a warm-up")
print(
    f"{'steps T':>8s} {'ConvS2S full (s)':>17s} {'ConvS2S cached (s)':>19s} {'speed-up':>9s} "
    f"{'GRU (s)':>8s}"
)
for r, g in zip(records, gru_seconds):
    print(
        f"{r['target_len']:>8d} {r['seconds_full']:>17.3f} {r['seconds_incremental']:>19.3f} "
        f"{r['speedup']:>8.1f}x {g:>8.3f}"
    )

# sphinx_gallery_start_ignore
src = torch.randint(1, cfg.vocab_size + 1, (3, 30), generator=torch.Generator().manual_seed(1))
assert greedy_decode(conv_timing, src, incremental=True) == greedy_decode(
    conv_timing, src, incremental=False
)
# sphinx_gallery_end_ignore

# %%
# Left: the time to decode :math:`T` steps, on log-log axes, where a cost
# proportional to :math:`T` is a line of slope 1 and one proportional to
# :math:`T^2` a line of slope 2 (the grey guides). Right: the speed-up of the
# cache. The full recompute does quadratically many position-computations but
# each of its calls processes many positions at once, so on small batches the
# fixed cost per call hides part of the difference; the speed-up should still
# grow with :math:`T`.

T = np.array(LENGTHS, dtype=float)
full = np.array([r["seconds_full"] for r in records])
inc = np.array([r["seconds_incremental"] for r in records])
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
ax = axes[0]
ax.loglog(T, full, "o-", color="C0", label="ConvS2S, full recompute")
ax.loglog(T, inc, "s-", color="C0", mfc="white", label="ConvS2S, cached (incremental)")
ax.loglog(T, gru_seconds, "^-", color="C1", label="GRU (always incremental)")
ax.loglog(T, inc[0] * T / T[0], ":", color="grey", lw=1, label=r"guide $\propto T$")
ax.loglog(T, full[0] * (T / T[0]) ** 2, "--", color="grey", lw=0.8, label=r"guide $\propto T^2$")
ax.set_xticks(T, [str(int(t)) for t in T])
ax.minorticks_off()
ax.set_xlabel("decoding steps T")
ax.set_ylabel("seconds")
ax.yaxis.set_major_locator(mticker.LogLocator(subs=(1, 2, 5)))
ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
ax.set_title(f"Greedy decoding, batch of {BATCH}")
ax.legend(fontsize=8)
ax.grid(alpha=0.3, which="both")
ax = axes[1]
bars = ax.bar([str(int(t)) for t in T], full / inc, color="C0")
ax.bar_label(bars, fmt="%.1fx", fontsize=9, padding=2)
ax.axhline(1, color="k", lw=0.8)
ax.set_ylim(0, 1.18 * max(full / inc))
ax.set_xlabel("decoding steps T")
ax.set_ylabel("full time / cached time")
ax.set_title("Speed-up of the cache")
ax.grid(alpha=0.3, axis="y")
plt.show()

# %%
# Note what the cache does *not* change: with or without it, ConvS2S decodes
# one token after the other, exactly like the GRU. The parallelism that makes
# ConvS2S fast to train (all target positions at once, since teacher forcing
# knows them in advance) is not available at inference, where each token
# depends on the previous output. Only the encoder still runs over the whole
# source at once.


# %%
# What you saw
# ------------
# * Greedy search keeps one prefix; beam search keeps the :math:`K` most
#   probable ones and can recover from a token that looked best only locally.
# * ConvS2S can decode incrementally: every causal convolution keeps its last
#   :math:`k-1` inputs, so a step computes only the new position instead of
#   the whole prefix. Both ways give the same output.
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

from convs2s_edu import beam_search, greedy_decode, make_datasets, train_or_load
from convs2s_edu.lab.site import site_config

cfg_08 = site_config("convs2s")
model_08 = train_or_load(cfg_08).model
sources = [x for x, _ in make_datasets(cfg_08)[2].examples[:32]]
same = greedy_decode(model_08, sources) == beam_search(model_08, sources, beam_size=1)
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
cache = model_08.decoder.start(model_08.encode(torch.tensor([[3, 1, 2]])))
print([tuple(w.shape) for w in cache.windows])
c = model_08.cfg
print(
    sum(w.numel() for w in cache.windows),
    "=",
    c.n_decoder_layers,
    "x",
    c.kernel_size - 1,
    "x",
    c.hidden_dim,
)

# %%
# .. raw:: html
#
#    </details>
