r"""
Speed: both models against this machine's limits
=================================================

The paper argues that convolutions train in parallel over all positions (§1, see
:ref:`the training speed page <sphx_glr_auto_examples_speed_plot_01_training_speed.py>`);
the speed it *measures* against a recurrent model is generation (§5.3, at the end of
this page). How fast either model runs on *this* machine depends on how much arithmetic
a target token costs, and on what fraction of the machine's arithmetic limits the model
reaches. This page runs ``convs2s-edu bench`` (:func:`~convs2s_edu.lab.bench.run_bench`)
on the machine the site was built on and prints its table: nothing below is typed by
hand.

What the columns mean
---------------------
* **tokens/s**: training throughput (target tokens per second, padding
  excluded), the median over windows of training steps timed *interleaved*
  (every model and execution path takes turns on the same batches, so a busy
  machine slows all alike); **range** is the slowest and fastest window.
* **x eager**: throughput over the eager fp32 path of the same model: the model as
  its file writes it (the site trains on the path this machine chose, below, among the
  reference and the :ref:`fast paths <sphx_glr_auto_examples_appendix_plot_02_fast_paths.py>`).
* **GFLOP/tok**: floating-point operations per target token of a training step
  (forward and backward), counted by
  :class:`torch.utils.flop_counter.FlopCounterMode`: matrix products and
  convolutions only.
* **% peak**, **% big GEMM**: achieved FLOP/s (GFLOP/tok x tokens/s) as a
  fraction of the CPU's *theoretical* peak ("-" where none is known) and of
  the *measured* rate of a large dense matrix product, both in the path's
  precision (below). A value above 100% is starred; the lines under the
  table say why.
* **GEMM-bound %** (fp32 paths): the share of a step that its own matrix
  products would take at their measured fp32 rates; the rest is element-wise
  operations, memory traffic, Python and framework overhead.
* **warm-up s**: the untimed first steps, compile time included.
"""

# %%
# The measurement
# ---------------
# Quick builds (``CONVS2S_EDU_QUICK=1``) use small budgets and, on a CPU, time
# only the eager paths (compiling takes minutes on two cores); the full build
# runs the bench as ``convs2s-edu bench`` does. On a CPU the bench also times
# both models, on the path the site trains with, at every thread count,
# interleaved, with a verdict at each (the last table; :ref:`the training speed
# page <sphx_glr_auto_examples_speed_plot_01_training_speed.py>` draws the same
# measurement for the site's models).

import textwrap

import matplotlib.pyplot as plt

from convs2s_edu.lab.bench import format_bench, run_bench
from convs2s_edu.lab.site import comparison, is_quick_mode, site_config
from convs2s_edu.training import resolve_device
from convs2s_edu.training.calibrate import default_path

QUICK = is_quick_mode()
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
device = resolve_device("auto")
result = run_bench(device=str(device), quick=QUICK, profile=True)
print(format_bench(result, profile=False))

# %%
# The machine's limits
# --------------------
# The theoretical peak multiplies documented figures (``convs2s_edu._machine``
# states where each comes from): with :math:`c` cores at clock :math:`f`, each
# with :math:`u` FMA units of :math:`\ell` fp32 lanes (an FMA is 2 FLOPs),
#
# .. math:: P_{\text{fp32}} = c \, f \, \ell \, u \times 2.
#
# The bf16 peak counts AMX's 1024 FLOP per cycle and core (Intel's figure), or
# twice the fp32 lanes with AVX512_BF16. The clock is the CPU's maximum (turbo) clock
# where Linux reports it, else the highest documented turbo of the CPU's line (a
# virtual machine may report only its base clock), so a large GEMM, the most
# arithmetic-bound kernel there is, should reach between half and all of :math:`P`.
# The bench checks that and says why where it does not:

limits = result["limits"]
for name in [n for n in ("fp32", "bf16") if n in limits]:
    print(f"{name}: {limits[name]['check'] or 'large GEMM within 50-100% of the peak'}")

# %%
# The path the gallery trains on
# ------------------------------
# :func:`~convs2s_edu.training.calibrate.default_path`: on a CPU, a short timing decides
# it once per machine; the lines under the table say which path was fastest here.

for name in LABELS:
    print(f"default path of {name}: {default_path(device, site_config(name)).name}")

# %%
# Can ConvS2S beat the GRU here?
# ------------------------------
# An epoch costs *FLOPs per token x tokens*; its time is that product over the
# FLOP/s the model achieves. So the ratio of the two models' speeds is the
# ratio of their achieved FLOP/s over the ratio of their FLOPs per token: a
# model doing :math:`r` times the arithmetic per token must achieve :math:`r`
# times the FLOP/s to break even. The numbers come from the table above.

conv_gru = result["models"]
conv, gru = conv_gru["convs2s"], conv_gru["gru"]
fc, fg = conv["paths"][conv["fastest"]], gru["paths"][gru["fastest"]]
flop_ratio = conv["flops_per_token"] / gru["flops_per_token"]
rate_ratio = fc["flops_per_second"] / fg["flops_per_second"]
print(f"ConvS2S does {flop_ratio:.2f}x the GRU's FLOPs per target token.")
for label, e, f in (("ConvS2S", conv, fc), ("the GRU", gru, fg)):
    peak = f["fraction_of_theoretical_peak"]
    peak = "no theoretical peak" if peak is None else f"{100 * peak:.1f}% of the peak"
    print(
        f"{label} on {e['fastest']}: {f['flops_per_second'] / 1e9:.2f} GFLOP/s, {peak}, "
        f"{100 * f['fraction_of_large_gemm']:.1f}% of the large GEMM's rate"
    )
print(
    f"So ConvS2S trains at {rate_ratio / flop_ratio:.2f}x the GRU's tokens per second "
    f"(measured directly: {fc['tokens_per_second'] / fg['tokens_per_second']:.2f}x); "
    f"it would need {flop_ratio:.2f}x the GRU's FLOP/s to break even."
)
for name, e in result["models"].items():
    bound = e["gemm_seconds_per_token"]
    print(
        f"{name}: if every matrix product ran at its measured rate and nothing else cost "
        f"time, a token would take {1e6 * bound:.1f} us; eager fp32 takes "
        f"{1e6 / e['paths']['eager-fp32']['tokens_per_second']:.1f} us."
    )

# %%
# Every path the bench timed, for both models: real target tokens per second
# from the table above, the fastest path of each model outlined.

fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
for k, (name, e) in enumerate(conv_gru.items()):
    names = list(e["paths"])
    tps = [e["paths"][p]["tokens_per_second"] for p in names]
    at = [i + 0.4 * k - 0.2 for i in range(len(names))]
    bars = ax.barh(at, tps, 0.38, color=f"C{k}", label=LABELS[name])
    bars[names.index(e["fastest"])].set(edgecolor="k", linewidth=2)
ax.set_yticks(range(len(names)), names)
ax.invert_yaxis()
ax.set_xlabel("real target tokens / s")
ax.legend()
plt.show()

# %%
# Decoding and the incremental cache
# ----------------------------------
# Greedy and beam-5 decoding rates of untrained models (they decode to the
# length limit, as trained ones do on this task); ConvS2S greedy decoding with
# its incremental cache against recomputing the whole prefix at every step is
# printed under the table above.

for name, e in result["models"].items():
    d = e["decoding"]
    greedy, beam = d["greedy_sentences_per_second"], d["beam5_sentences_per_second"]
    print(f"{name}: greedy {greedy:,.1f} sentences/s, beam 5 {beam:,.1f} sentences/s")
rates = {LABELS[n]: e["decoding"]["greedy_sentences_per_second"] for n, e in conv_gru.items()}
print(textwrap.fill(comparison("greedy decoding rate", rates, fmt="{:,.1f} sentences/s"), 68))

# %%
# The paper's measured speed: generation (§5.3)
# ---------------------------------------------
# Table 3 of the paper, printed below, times the *generation* of the WMT'14
# English-French development set against GNMT (Wu et al., 2016), whose encoder
# and decoder are each an 8-layer LSTM; the GNMT times are quoted from Wu et
# al., on other hardware (the paper calls the CPU rows not directly
# comparable). Generating, ConvS2S's decoder writes one token after the
# other, a chain of :math:`L_{enc} + T L_{dec}` operations (:ref:`what makes
# one faster <sphx_glr_auto_examples_speed_plot_02_what_makes_one_faster.py>`);
# its encoder still runs over the whole source at once, where GNMT's 8-layer
# LSTM encoder runs position by position. The paper's set-up points to more
# candidates: a step of the ConvS2S decoder is, per layer, one small
# convolution over the :math:`k` latest inputs and a dot-product attention,
# against a step of an 8-layer LSTM stack; convolution states that have not
# changed are shifted, not recomputed (the incremental cache timed above); and
# batches hold up to 128 sentences *of equal length*, so no source is padded
# (the outputs still end at different steps). The paper does not measure which
# of these matters how much.

TABLE_3 = (  # Gehring et al. (2017), Table 3: (system, BLEU, seconds); b is the beam
    ("GNMT GPU (K80)", 31.20, 3028),
    ("GNMT CPU 88 cores", 31.20, 1322),
    ("GNMT TPU", 31.21, 384),
    ("ConvS2S GPU (K40) b=1", 33.45, 327),
    ("ConvS2S GPU (M40) b=1", 33.45, 221),
    ("ConvS2S GPU (GTX-1080ti) b=1", 33.45, 142),
    ("ConvS2S CPU 48 cores b=1", 33.45, 142),
    ("ConvS2S GPU (K40) b=5", 34.10, 587),
    ("ConvS2S CPU 48 cores b=5", 34.10, 482),
    ("ConvS2S GPU (M40) b=5", 34.10, 406),
    ("ConvS2S GPU (GTX-1080ti) b=5", 34.10, 256),
)
for system, bleu, seconds in TABLE_3:
    print(f"{system:30s} BLEU {bleu:5.2f} {seconds:>6,d} s")
paper = {row[0]: row[2] for row in TABLE_3}
pair = {k: paper[k] for k in ("ConvS2S GPU (K40) b=1", "GNMT GPU (K80)")}
said = comparison("generation time", pair, fmt="{:,d} s", higher="longer", lower="shorter")
print(textwrap.fill(said, 68))

# %%
# What this page's decoding numbers can say: how the two small models of this
# site decode on this machine, untrained, in batches of test sentences of
# mixed lengths, and how much the cache saves. What they cannot say: anything
# about ConvS2S against an 8-layer LSTM at translation scale. The recurrent
# model here is a one-layer GRU, whose step is a small operation, and neither
# equal-length batching nor the paper's hardware is reproduced.

# %%
# Where the time goes
# -------------------
# The top rows of :mod:`torch.profiler` for a few eager fp32 training steps of
# each model, sorted by the time spent in the operation itself ("self").

for name, e in result["models"].items():
    print(f"{name}:")
    print(textwrap.indent(e["profile"], "  "))

# %%
# What you saw
# ------------
# * The machine line at the top says where these numbers come from; a shared or
#   busy machine shows as a wide **range** column, and the ratios then say little.
# * **% peak** and **% big GEMM** place each model against the machine's
#   stated and measured limits; **GEMM-bound %** says how much of a step is
#   matrix arithmetic at its own shapes' rates; the rest is everything else.
# * The paper's measured speed is generation against an 8-layer LSTM (§5.3);
#   the decoding rates here are of this site's small models, on this machine.
# * ``tools/gpu_check.py`` runs the same bench on a GPU, where launch overhead
#   can limit models this small; CUDA graphs (``compile_mode="reduce-overhead"``)
#   address exactly that.
#
# Try it
# ------
# **1. Break even.** ConvS2S does the printed multiple of the GRU's arithmetic
# per target token. What fraction of the large GEMM's rate would ConvS2S have
# to reach, on its fastest path, to train as many tokens per second as the GRU
# does here?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Time per token is FLOPs per token divided by the achieved FLOP/s, so the two
# models tie when ConvS2S achieves the GRU's FLOP/s times the FLOP ratio.

need = fc["fraction_of_large_gemm"] * fg["flops_per_second"] * flop_ratio / fc["flops_per_second"]
reach = {"ConvS2S's fastest path": fc["fraction_of_large_gemm"], "the break-even point": need}
print(textwrap.fill(comparison("fraction of the large GEMM's rate", reach), 68))

# %%
# .. raw:: html
#
#    </details>
#
# **2. An epoch from the table.** Using only the table, how long should one
# epoch of the original notebook's configuration (10,000 examples) take each model here?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# An epoch is a fixed number of target tokens; divide it by the measured
# tokens per second of the fastest path.

from convs2s_edu.lab.timing import epoch_tokens  # noqa: E402

seed_tokens = epoch_tokens(site_config("convs2s").replace(n_train=10_000))
for name, e in result["models"].items():
    rate = e["paths"][e["fastest"]]["tokens_per_second"]
    print(f"{name}: {seed_tokens:,} tokens / {rate:,.0f} tokens/s = {seed_tokens / rate:.1f} s")

# %%
# .. raw:: html
#
#    </details>
#
# **3. The cache in theory.** Recomputing the prefix costs
# :math:`1 + 2 + \dots + T = T(T+1)/2` decoder columns against :math:`T` with
# the cache. What speed-up does that predict at each length above, and what
# besides the decoder columns does a step cost?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# :math:`(T+1)/2`. But a step costs more than its columns: every step also
# runs the attention over the whole source, the output layer and Python's
# per-call overhead, whether or not the prefix is recomputed, and the full
# recompute processes its columns in one large call. Both pull the measured
# speed-up away from the prediction:

for r in conv["incremental"]:
    T = r["target_len"]
    speedups = {"the measurement": r["speedup"], "the prediction": (T + 1) / 2}
    print(f"T={T:>3}: " + comparison("speed-up", speedups, fmt="{:.1f}x"))

# %%
# .. raw:: html
#
#    </details>
