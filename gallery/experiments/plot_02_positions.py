r"""
Position embeddings where order matters, and where it does not
==============================================================

ConvS2S adds a learned position embedding :math:`p_j` to every token
embedding (§3.1), on the source and on the target side. The paper's ablation
(§5.4, Table 4) removes them from one side or both, and finds that they help a
little, and that the source's positions matter more than the target's. This
page tests both claims where the source order determines the target
(reversing) and where it carries no information about it (sorting), and
scores every arm on longer sequences than any seen in training.
"""

# %%
# What each task predicts
# -----------------------
# * **Reversing**: output :math:`i` is source token :math:`n + 1 - i`. A
#   convolution applies the same weights at every position, so without a
#   position table the model can only find "its" source token from what the
#   zero padding at the edges tells the layers near them; with the tables,
#   position :math:`i` of the target can look up position :math:`n + 1 - i`
#   of the source by content. The source positions should matter most: the
#   attention needs them to tell source tokens apart by place.
# * **Sorting**: output :math:`i` is the :math:`i`-th smallest source token,
#   wherever it stands: the source positions carry nothing the target needs,
#   and a table that can be used to tell equal tokens apart can also be used to
#   memorise where tokens stood in training examples. The paper's claim need
#   not transfer; a result against it is a finding about the task, not a bug.
#
# ``source_positions`` and ``target_positions`` of
# :class:`~convs2s_edu.ablations.AblationConfig` switch the tables off (the model then has
# no position parameters on that side). The position tables have 64 rows;
# training only ever uses rows 0-20.

import matplotlib.pyplot as plt
import numpy as np

from convs2s_edu.lab import experiments

result = experiments.experiment_result("positions")
print(result.budget.describe())
n_long = min(experiments.registry.GREEDY_EXAMPLES, result.budget.n_test)
print(f"longer test sets: lengths {experiments.LONG_LENGTHS}, {n_long} each")

# %%
# Learning curves
# ---------------
# Held-out exact match while training, reversing (left) and sorting (right).

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained", sharey=True)
reverse = ["reverse/both", "reverse/source", "reverse/target", "reverse/none"]
sort = ["sort/both", "sort/none"]
experiments.plot_curves(axes[0], result, reverse)
experiments.plot_curves(axes[1], result, sort)
axes[0].set_title("Reversing")
axes[1].set_title("Sorting")
plt.show()

# %%
# At the end of the budget
# ------------------------
# The held-out loss (the paper compares perplexity, its exponential) and
# test-set exact match, mean over seeds, whiskers min–max, dots = seeds.

fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
experiments.plot_arms(
    axes[0], result, "valid_loss", label="held-out loss", percent=False, color="C1"
)
experiments.plot_arms(axes[1], result, "exact_match", label="test exact match (%)")
for ax in axes:
    ax.tick_params(axis="x", labelrotation=25)
plt.show()

print(experiments.format_result(result))

# %%
# Computed from the numbers above, per task (the first two arms by held-out
# loss, and how precisely the seeds pin their difference down):

for task, arms in (("reverse", reverse), ("sort", sort)):
    part = experiments.ExperimentResult(
        result.experiment, result.budget, [], [result.row(a) for a in arms]
    )
    print(
        f"{task}: "
        + experiments.conclusion(
            part, "valid_loss", what="held-out loss", higher_is_better=False, fmt="{:.4f}"
        )
    )

# %%
# Longer sequences
# ----------------
# A learned table has one row per position: rows past the longest training
# sequence are never trained. Every arm is also scored on sources of 21-30 and
# 31-40 tokens (their own seeds), in its own task.

keys = [("token_accuracy", "8-20 (trained)")] + [
    (f"token_accuracy_{lo}_{hi}", f"{lo}-{hi} (longer)") for lo, hi in experiments.LONG_LENGTHS
]
n_arms = len(result.rows)
width = 0.8 / n_arms
fig, ax = plt.subplots(figsize=(10, 4), layout="constrained")
for i, row in enumerate(result.rows):
    xs = np.arange(len(keys)) + (i - (n_arms - 1) / 2) * width
    means = np.array([row[k] for k, _ in keys]) * 100
    lo = means - np.array([row[f"{k}_min"] for k, _ in keys]) * 100
    hi = np.array([row[f"{k}_max"] for k, _ in keys]) * 100 - means
    ax.bar(
        xs,
        means,
        width=width * 0.95,
        yerr=[lo, hi],
        capsize=3,
        label=row["arm"],
        color=f"C{i}",
        alpha=0.85,
    )
ax.set_xticks(range(len(keys)), [name for _, name in keys])
ax.set_ylabel("token accuracy (%)")
ax.legend(fontsize=8, ncol=3)
ax.set_title("Position embeddings: trained lengths and longer ones")
plt.show()

# %%
# What you saw
# ------------
# * Each arm switched the learned position table off on one side, on both, or
#   on neither, on a task where positions determine the target and on one
#   where they carry nothing; :ref:`the claims page
#   <sphx_glr_auto_examples_experiments_plot_06_claims.py>` judges the paper's
#   two claims on them.
# * Every arm was scored on the trained lengths and on two sets of longer
#   sequences, made with their own seeds; the figure and the table give the
#   mean and the spread over the seeds for each.
# * A position table has one row per position. Training only ever reads the
#   rows of the positions its sequences reach; the longer test sets read rows
#   that training never touched (exercise 1).
#
# Try it
# ------
# Predict first, then unfold the solution; code solutions run when the site
# is built.
#
# **1. Which rows learn?** One training step on a batch of the longest
# training sequences: which rows of the source and of the target position
# tables receive a gradient?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Only the rows of positions that occur: :math:`0..S-1` for a source of
# :math:`S` tokens, :math:`0..S` for the decoder input (``<sos>`` and the
# :math:`S` sorted tokens). No batch of the task is longer, so the rows past
# them never get a gradient and keep their random initial values (the
# optimiser is Adam without weight decay); a 31-40-token test sequence adds
# those random vectors to its embeddings. The cell measures it on a fresh
# model.

import torch
import torch.nn.functional as F

from convs2s_edu import ConvS2S, ConvS2SConfig, eos_index, sos_index
from convs2s_edu.ablations import AblatedConvS2S, AblationConfig

S = result.budget.train_config(result.experiment.arms[0], 0).max_len
conv_cfg = ConvS2SConfig()
V = conv_cfg.vocab_size
torch.manual_seed(0)
fresh = ConvS2S(conv_cfg).eval()
src = torch.randint(1, V + 1, (4, S))  # (B, S)
ordered = src.sort(dim=1).values  # (B, S)
tgt_in = torch.cat([torch.full((4, 1), sos_index(V)), ordered], dim=1)  # (B, S + 1)
tgt_out = torch.cat([ordered, torch.full((4, 1), eos_index(V))], dim=1)  # (B, S + 1)
logits = fresh(src, tgt_in)  # (B, S + 1, V + 3)
F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten()).backward()
for side, module in (("source", fresh.encoder), ("target", fresh.decoder)):
    table = module.embed.position.weight  # (max_positions, f)
    rows = (table.grad.abs().sum(dim=1) > 0).nonzero().flatten().tolist()
    print(
        f"{side}: {len(rows)} of {table.shape[0]} rows have a gradient, rows {rows[0]}-{rows[-1]}"
    )

# sphinx_gallery_start_ignore
assert (fresh.encoder.embed.position.weight.grad.abs().sum(1) > 0).sum() == S
assert (fresh.decoder.embed.position.weight.grad.abs().sum(1) > 0).sum() == S + 1
# sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
#
# **2. Too long.** The tables have 64 rows. What happens when the model is
# given a source of 70 tokens: a wrong output, or an error? And the arm
# without any position table?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# An error that says why: there is no row 64 to add. The arm without tables
# could compute an output, but it keeps the same limit (``max_positions``
# bounds the input either way), so all arms accept the same sequences.

long_src = torch.randint(1, V + 1, (1, 70))  # (B, S)
no_tables = AblatedConvS2S(AblationConfig(source_positions=False, target_positions=False))
no_tables.eval()
for name, model in (("both tables", fresh), ("no tables", no_tables)):
    try:
        model.encoder(long_src)
    except ValueError as err:
        print(f"{name}: ValueError: {err}")

# %%
# .. raw:: html
#
#    </details>
#
# **3. What is kept.** Which arms should keep the largest share of their
# accuracy on 31-40 tokens? Reason from which untrained rows each arm reads.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# *both* reads untrained rows on both sides, *source* and *target* on one
# side; *none* reads no untrained parameter at all (a convolution
# applies the same weights at every position). Reading no random row is not
# the same as having learnt to sort long sequences, though: the cell prints
# each arm's accuracy on 31-40 tokens as a share of its accuracy on the
# trained lengths, from the table above (two seeds and a tiny budget in the
# quick build, so differences there mean nothing).

lo, hi = experiments.LONG_LENGTHS[-1]
for row in result.rows:
    kept = row[f"token_accuracy_{lo}_{hi}"] / max(row["token_accuracy"], 1e-9)
    print(
        f"{row['arm']:>14}: {row['token_accuracy']:.1%} on 8-20, "
        f"{row[f'token_accuracy_{lo}_{hi}']:.1%} on {lo}-{hi}: {kept:.0%} kept"
    )

# %%
# .. raw:: html
#
#    </details>
