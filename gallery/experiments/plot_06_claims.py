r"""
The claims, checked
===================

One row per claim of the paper or the seed article: the claim and where it is
made, the experiment that tests it, what was measured (mean and min–max over
the seeds) and a verdict: *supported*, *not supported*, or *not resolved at
this scale*. Everything below is filled in from the experiments' results when
the site is built (:func:`~convs2s_edu.lab.experiments.claims.check_claims`); nothing is
typed in.

Quotation marks mark the seed article's words; the paper's claims are
paraphrased, with their section. The verdict rule
(:func:`~convs2s_edu.lab.experiments.statistics.verdict`): *supported* when the seed ranges
do not overlap in the claimed direction, *not supported* when they do not
overlap the other way, otherwise not resolved; comparisons within one
trained model (beam against greedy) are made seed by seed. Accuracy claims
are judged on token accuracy.
"""

# %%
# The verdicts
# ------------
# The experiments of the previous pages, from the cache.

from convs2s_edu.lab import experiments
from convs2s_edu.lab.site import is_quick_mode

results = {
    name: experiments.run_experiment(name, progress=False) for name in experiments.EXPERIMENTS
}
budget = next(iter(results.values())).budget
print(budget.describe())
if is_quick_mode():
    print(
        "\nNOTE: quick build (CONVS2S_EDU_QUICK=1): one seed per arm, so no verdict can be "
        "more than 'not resolved at this scale'."
    )
rows = experiments.check_claims(results)

# %%
# One row per claim (the verdict in colour: green supported, red not supported, grey not
# resolved).

experiments.ClaimsTable(rows)

# %%
# Summary
# -------

counts = {
    v: sum(r["verdict"] == v for r in rows)
    for v in ("supported", "not supported", "not resolved at this scale")
}
print(
    ", ".join(f"{n} {v}" for v, n in counts.items()) + f" (of {len(rows)} claims, "
    f"{budget.seeds} seed(s) per arm)."
)

# %%
# What you saw
# ------------
# * Every claim was turned into a comparison of two measured columns, each
#   taken from an experiment of the previous pages, and judged by one rule:
#   the seed ranges must not overlap.
# * With the budgets of this site most differences are small next to the
#   spread over the seeds, so "not resolved at this scale" is a frequent and
#   honest answer: it says the experiment was too small to tell, not that
#   the claim is wrong.
#
# Try it
# ------
# Predict first, then unfold the solution; code solutions run when the site
# is built.
#
# **1. The bill.** The five experiments list many arms. How many training
# runs do they need in all, in the full build and in the quick build?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Fewer than arms × seeds: arms with the same training configuration (the
# default ConvS2S appears in four experiments, the GRU model in three) are
# one cache entry, trained once. The cell counts the distinct configurations.

for b in (experiments.budget(quick=False), experiments.budget(quick=True)):
    listed = [
        b.train_config(arm, seed)
        for exp in experiments.EXPERIMENTS.values()
        for arm in exp.arms
        for seed in range(b.seeds)
    ]
    distinct = {repr(cfg) for cfg in listed}
    kind = "quick" if b.quick else "full"
    print(f"{kind} build: {len(listed)} (arm, seed) pairs, {len(distinct)} distinct runs")

# %%
# .. raw:: html
#
#    </details>
#
# **2. A winner by chance.** Suppose two arms are in truth the same, so that
# their per-seed results are just shuffled draws. How often does the rule
# still declare one of them ahead with 2, 3 or 5 seeds a side? And with one?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# A verdict needs all :math:`n` values of one side above all :math:`n` of the
# other: 2 of the :math:`\binom{2n}{n}` equally likely ways of splitting
# :math:`2n` ranked values into two sides. That is 1 in 3 with 2 seeds, 10%
# with 3 and under 1% with 5; with one seed a side it would be every time,
# which is why the rule never gives a verdict on fewer than two seeds. The
# cell applies :func:`~convs2s_edu.lab.experiments.statistics.verdict` to every split and
# compares with the formula.

import itertools
import math

for n in (1, 2, 3, 5):
    values = range(2 * n)
    splits = list(itertools.combinations(values, n))
    called = sum(
        experiments.verdict(a, [v for v in values if v not in a]) != experiments.VERDICTS[2]
        for a in splits
    )
    formula = 2 / math.comb(2 * n, n)
    print(
        f"{n} seed(s) a side: the rule calls a winner in {called} of {len(splits)} splits "
        f"({called / len(splits):.1%}); 2 / C(2n, n) = {formula:.1%}"
        + ("; the rule refuses one seed" if n == 1 else "")
    )
    # sphinx_gallery_start_ignore
    assert called == (0 if n == 1 else 2)
    # sphinx_gallery_end_ignore

# %%
# .. raw:: html
#
#    </details>
#
# **3. Your own claim.** Past the trained lengths a model without a position
# table has no untrained rows to read. Write "the GRU model sorts 31-40-token
# sequences better than ConvS2S" as a
# :class:`~convs2s_edu.lab.experiments.claims.Claim` on the position experiment. What
# verdict do you expect from this build?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# The claim names what should be larger (the GRU model's token accuracy on
# 31-40 tokens) and what it must beat (ConvS2S with its position tables, the
# arm *both*); :func:`~convs2s_edu.lab.experiments.claims.check_claims` fills in the rest
# from the results already loaded. In the quick build one seed per arm can
# only give "not resolved"; in the full build the verdict below is computed
# from the seeds of the build.

lo, hi = experiments.LONG_LENGTHS[-1]
own = experiments.Claim(
    "The GRU model sorts 31-40-token sequences better than ConvS2S (both trained on 8-20)",
    "your own",
    "positions",
    ("gru", f"token_accuracy_{lo}_{hi}"),
    (("both", f"token_accuracy_{lo}_{hi}"),),
)
print(experiments.format_claims(experiments.check_claims(results, [own])))

# %%
# .. raw:: html
#
#    </details>
