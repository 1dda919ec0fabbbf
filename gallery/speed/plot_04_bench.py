r"""
Speed: both models against this machine's own limit
===================================================

The paper argues that convolutions train in parallel over all positions (§1,
see :ref:`the training speed page
<sphx_glr_auto_examples_speed_plot_01_training_speed.py>`); the speed it
*measures* is generation (§5.3, at the end of this page). How fast either
model runs on *this* machine depends on how much arithmetic a target token
costs, and on what fraction of the machine's arithmetic rate the model
reaches. This page runs ``convs2s-edu bench`` (:func:`~convs2s_edu.lab.bench.run_bench`)
on the machine the site was built on and prints its table: nothing below is
typed by hand.

What the columns mean
---------------------
* **tokens/s**: training throughput (target tokens per second, padding
  excluded), the median over windows of training steps timed *interleaved*
  (every model and execution path takes turns on the same batches, so a busy
  machine slows all alike); **range** is the slowest and fastest window.
* **x eager**: throughput over the eager fp32 path of the same model: the
  model as its file writes it (the site trains on the fast paths instead, the
  :ref:`appendix page <sphx_glr_auto_examples_appendix_plot_02_fast_paths.py>`).
* **GFLOP/tok**: floating-point operations per target token of a training step
  (forward and backward), counted by
  :class:`torch.utils.flop_counter.FlopCounterMode`: matrix products and
  convolutions only.
* **% peak**: achieved FLOP/s (GFLOP/tok x tokens/s) as a fraction of the
  *measured* peak: the fastest dense float32 matrix product among the model's
  own GEMM shapes, timed by the same run.
* **GEMM-bound %**: the share of a step that the model's matrix products would
  take if each ran at its measured rate: what remains is everything else
  (element-wise operations, memory traffic, Python and framework overhead).
* **warm-up s**: the untimed first steps, compile time included.
"""

# %%
# The measurement
# ---------------
# Quick builds (``CONVS2S_EDU_QUICK=1``) use small budgets and, on a CPU, time
# only the eager paths (compiling takes minutes on two cores); the full build
# runs the bench as ``convs2s-edu bench`` does.

import textwrap

import matplotlib.pyplot as plt

from convs2s_edu.fast.paths import fastest_path
from convs2s_edu.lab.bench import format_bench, run_bench
from convs2s_edu.lab.site import comparison, is_quick_mode
from convs2s_edu.training import resolve_device

QUICK = is_quick_mode()
LABELS = {"convs2s": "ConvS2S", "gru": "GRU + attention"}
device = resolve_device("auto")
result = run_bench(device=str(device), quick=QUICK, profile=True)
print(format_bench(result, profile=False))

# %%
# More threads
# ------------
# On a CPU the bench also times both models, on the path the site trains with
# (printed first), at every thread count from one to the machine's cores,
# interleaved, with a verdict at each (the table's last lines; :ref:`the
# training speed page <sphx_glr_auto_examples_speed_plot_01_training_speed.py>`
# draws the same measurement for the site's models). The ratio at each count:

if "threads" in result:
    th = result["threads"]
    print(f"path: {th['path']}")
    for t in th["thread_counts"]:
        r = th["points"][str(t)]["ratio"]["gru"]
        print(
            f"{t} thread(s): GRU / ConvS2S throughput {r['median']:.2f} "
            f"(rounds {r['min']:.2f}-{r['max']:.2f})"
        )
else:
    print(f"not measured on {device.type}: thread counts are a CPU setting")

# %%
# The path the gallery trains on
# ------------------------------
# :func:`~convs2s_edu.fast.fastest_path` gives the default path of a device (its
# docstring states the rule); the bench also says which path was fastest for
# each model here, so a reader can check the rule against this very run.

print(f"default path on {device.type}: {fastest_path(device).name}")
for name, e in result["models"].items():
    print(f"fastest measured path of {name}: {e['fastest']}")

# %%
# Can ConvS2S beat the GRU here?
# ------------------------------
# An epoch costs *FLOPs per token x tokens*; at the rate a model reaches (its
# fraction of the measured peak), its time is that product over the achieved
# FLOP/s. So the ratio of the two models' speeds is the ratio of their
# fractions of peak over the ratio of their FLOPs per token: a model doing
# :math:`r` times the arithmetic per token must reach :math:`r` times the
# fraction of peak to break even. The numbers come from the table above.

conv_gru = result["models"]
conv, gru = conv_gru["convs2s"], conv_gru["gru"]
fc, fg = conv["paths"][conv["fastest"]], gru["paths"][gru["fastest"]]
flop_ratio = conv["flops_per_token"] / gru["flops_per_token"]
peak_ratio = fc["fraction_of_peak"] / fg["fraction_of_peak"]
print(f"ConvS2S does {flop_ratio:.2f}x the GRU's FLOPs per target token.")
print(
    f"On their fastest paths ConvS2S reaches {100 * fc['fraction_of_peak']:.1f}% of the "
    f"measured peak, the GRU {100 * fg['fraction_of_peak']:.1f}%: {peak_ratio:.2f}x."
)
print(
    f"So ConvS2S trains at {peak_ratio / flop_ratio:.2f}x the GRU's tokens per second "
    f"(measured directly: {fc['tokens_per_second'] / fg['tokens_per_second']:.2f}x); "
    f"it would need {flop_ratio:.2f}x the GRU's fraction of peak to break even."
)
for name, e in result["models"].items():
    bound = e["peak"]["gemm_seconds_per_token"]
    print(
        f"{name}: if every matrix product ran at its measured rate and nothing else cost "
        f"time, a token would take {1e6 * bound:.1f} us; it takes "
        f"{1e6 / e['paths'][e['fastest']]['tokens_per_second']:.1f} us."
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
# length limit, as trained ones do on this task), and ConvS2S greedy decoding
# with its incremental cache against recomputing the whole prefix at every step.

for name, e in result["models"].items():
    d = e["decoding"]
    greedy, beam = d["greedy_sentences_per_second"], d["beam5_sentences_per_second"]
    print(f"{name}: greedy {greedy:,.1f} sentences/s, beam 5 {beam:,.1f} sentences/s")
for r in conv["incremental"]:
    full, inc = r["seconds_full"], r["seconds_incremental"]
    print(
        f"T={r['target_len']:>3}: full {full:.3f} s, incremental {inc:.3f} s, {r['speedup']:.1f}x"
    )
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
# batches hold up to 128 sentences *of equal length*, so that no step is spent
# on padding. The paper does not measure which of these matters how much.

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
# * The **% peak** and **GEMM-bound %** columns say how much of a step is matrix
#   arithmetic at the machine's own rate; the rest is everything else.
# * The paper's measured speed is generation against an 8-layer LSTM (§5.3);
#   the decoding rates here are of this site's small models, on this machine.
# * ``tools/gpu_check.py`` runs the same bench on a GPU, where launch overhead
#   can limit models this small; CUDA graphs (``compile_mode="reduce-overhead"``)
#   address exactly that.
#
# Try it
# ------
# **1. Break even.** ConvS2S does the printed multiple of the GRU's arithmetic
# per target token. What fraction of the measured peak would ConvS2S have to
# reach, on its fastest path, to train as many tokens per second as the GRU
# does here?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Time per token is FLOPs per token divided by the achieved FLOP/s, so the two
# models tie when ConvS2S's fraction of peak is the GRU's times the FLOP ratio.

need = fg["fraction_of_peak"] * flop_ratio
reach = {"ConvS2S's fastest path": fc["fraction_of_peak"], "the break-even point": need}
print(textwrap.fill(comparison("fraction of peak", reach), 68))

# %%
# .. raw:: html
#
#    </details>
#
# **2. An epoch from the table.** Using only the table, how long should one
# epoch of the seed's configuration (10,000 examples) take each model here?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# An epoch is a fixed number of target tokens; divide it by the measured
# tokens per second of the fastest path.

from convs2s_edu.lab.compare import epoch_tokens  # noqa: E402
from convs2s_edu.lab.site import site_config  # noqa: E402

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
