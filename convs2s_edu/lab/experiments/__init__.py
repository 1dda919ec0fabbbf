"""The site's experiments: the paper's ablations and the seed article's claims, over seeds.

Modules, bottom to top::

    registry    the experiments, their arms, the budget of every run
    statistics  mean and spread over seeds; the verdict rule
    runner      run_experiment: every arm x seed through the training cache, measured once
    claims      the claims and check_claims
    report      tables, conclusions, the claims table, figures
"""

from .claims import CLAIMS, Claim, check_claims
from .registry import (
    EXPERIMENTS,
    FULL_BUDGET,
    FULL_SEEDS,
    LONG_LENGTHS,
    QUICK_BUDGET,
    QUICK_SEEDS,
    Arm,
    Budget,
    Experiment,
    budget,
    get_experiment,
    receptive_field,
)
from .report import ClaimsTable, conclusion, format_beam, format_claims, format_result, plot_arms
from .runner import ExperimentResult, run_experiment
from .statistics import VERDICTS, format_spread, summarise_runs, verdict

__all__ = [
    "FULL_BUDGET",
    "FULL_SEEDS",
    "QUICK_BUDGET",
    "QUICK_SEEDS",
    "LONG_LENGTHS",
    "VERDICTS",
    "Arm",
    "Experiment",
    "Budget",
    "ExperimentResult",
    "Claim",
    "EXPERIMENTS",
    "CLAIMS",
    "budget",
    "get_experiment",
    "receptive_field",
    "summarise_runs",
    "run_experiment",
    "format_result",
    "format_beam",
    "format_spread",
    "verdict",
    "conclusion",
    "check_claims",
    "format_claims",
    "ClaimsTable",
    "plot_arms",
]
