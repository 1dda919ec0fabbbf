r"""
The claims, checked
===================

One row per claim of the paper or the seed article: the claim and where it is
made, the experiment that tests it, what was measured (mean and min–max over
the seeds) and a verdict: *supported*, *not supported*, or *not resolved at
this scale*. Everything below is filled in from the experiments' results when
the site is built (:func:`~convs2s_edu.experiments.check_claims`); nothing is
typed in.

Quotation marks mark the seed article's words; the paper's claims are
paraphrased, with their section. The verdict rule
(:func:`~convs2s_edu.experiments.verdict`): *supported* when the seed ranges
do not overlap in the claimed direction, *not supported* when they do not
overlap the other way, otherwise not resolved; comparisons within one
trained model (beam against greedy) are made seed by seed. Accuracy claims
are judged on token accuracy.
"""

# %%
# The verdicts
# ------------
# The experiments of the previous pages, from the cache.

from convs2s_edu import experiments, is_quick_mode

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
