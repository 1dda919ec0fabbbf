"""The site's experiments: the paper's ablations and Shi's claims, over
seeds.

Modules, bottom to top::

    registry    the experiments, their arms, the budget of every run
    statistics  mean and spread over seeds
    inference   the verdict rule: paired differences, a minimum effect, one family (Shaffer)
    runner      run_experiment: every arm x seed trained and scored concurrently, cached
    record      the experiment record: every run trained once, kept with the code, checked
    timings     generation speed and seconds per step, timed alone
    claims      the claims and check_claims
    report      tables, conclusions, the claims table, figures
"""

from .claims import (
    CLAIMS,
    DERIVED,
    KINDS,
    NOT_JUDGED,
    CheckedClaims,
    Claim,
    check_claims,
    checked_claims,
    plan_seeds,
)
from .inference import (
    VERDICTS,
    holm,
    min_detectable_effect,
    paired_test,
    rule_power,
    seeds_for_power,
    shaffer,
    verdicts,
)
from .record import (
    Record,
    experiment_result,
    load_record,
    make_record,
    spot_check,
    spot_check_rate,
    spot_range_factor,
)
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
    matched_gru_width,
    receptive_field,
)
from .report import (
    ClaimsTable,
    conclusion,
    format_beam,
    format_claims,
    format_result,
    plot_arms,
    plot_curves,
)
from .runner import ExperimentResult, run_experiment
from .statistics import format_spread, summarise_runs
from .timings import generation_speed, step_seconds

__all__ = [
    "FULL_BUDGET",
    "FULL_SEEDS",
    "QUICK_BUDGET",
    "QUICK_SEEDS",
    "LONG_LENGTHS",
    "VERDICTS",
    "KINDS",
    "NOT_JUDGED",
    "DERIVED",
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
    "matched_gru_width",
    "summarise_runs",
    "run_experiment",
    "Record",
    "experiment_result",
    "load_record",
    "make_record",
    "spot_check",
    "spot_check_rate",
    "spot_range_factor",
    "generation_speed",
    "step_seconds",
    "format_result",
    "format_beam",
    "format_spread",
    "paired_test",
    "holm",
    "shaffer",
    "verdicts",
    "rule_power",
    "min_detectable_effect",
    "seeds_for_power",
    "conclusion",
    "check_claims",
    "plan_seeds",
    "CheckedClaims",
    "checked_claims",
    "format_claims",
    "ClaimsTable",
    "plot_arms",
    "plot_curves",
]
