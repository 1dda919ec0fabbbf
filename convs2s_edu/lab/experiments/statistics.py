r"""What the runs of an arm say together: mean and spread over seeds.

The verdicts of the claims (paired differences, a minimum effect, one family) are in
:mod:`convs2s_edu.lab.experiments.inference`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .registry import Arm

__all__ = ["summarise_runs", "format_spread"]


def summarise_runs(runs: Sequence[dict], arms: Sequence[Arm]) -> list[dict]:
    r"""One row per arm: mean, min, max and standard deviation of every measured column.

    Parameters
    ----------
    runs : sequence of dict
        One record per run with ``arm``, ``seed`` and numeric columns.
    arms : sequence of Arm
        The arms, in the order of the rows.

    Returns
    -------
    list of dict
        ``arm``, ``label``, ``task``, ``n_seeds``, ``seeds`` (in order), the arm's
        constant ``columns``, and
        for every measured column ``c``: ``c`` (the mean), ``c_min``, ``c_max``,
        ``c_std``, ``c_values`` (the per-seed values in seed order) and ``c_n`` (the
        seeds with a finite value: a run that never reached an accuracy has ``nan``
        steps to it, and the mean, min and max are over the others; ``nan`` when none).

    Notes
    -----
    .. math::

        \bar x = \frac{1}{n}\sum_{s=1}^{n} x_s, \qquad
        \mathrm{std} = \sqrt{\frac{1}{n-1}\sum_{s=1}^{n} (x_s - \bar x)^2}

    (the sample standard deviation; 0 for a single seed).
    """
    rows = []
    for arm in arms:
        mine = sorted(
            (r for r in runs if r["arm"] == arm.name), key=lambda r: r["seed"]
        )
        if not mine:
            raise ValueError(f"no runs of arm {arm.name!r}")
        row = {
            "arm": arm.name,
            "label": arm.label,
            "task": arm.task,
            "n_seeds": len(mine),
            "seeds": [r["seed"] for r in mine],
            **arm.columns,
        }
        keys = [k for k in mine[0] if k not in ("arm", "seed")]
        for key in keys:
            values = [float(r[key]) for r in mine]
            xs = np.array(values)[np.isfinite(values)]  # the seeds with a value
            some = len(xs) > 0
            row.update(
                {
                    key: float(xs.mean()) if some else math.nan,
                    f"{key}_min": float(xs.min()) if some else math.nan,
                    f"{key}_max": float(xs.max()) if some else math.nan,
                    f"{key}_std": float(xs.std(ddof=1)) if len(xs) > 1 else 0.0,
                    f"{key}_values": values,
                    f"{key}_n": len(xs),
                }
            )
        rows.append(row)
    return rows


def format_spread(
    row: dict, key: str, fmt: str = "{:.1%}", *, one_seed: str = " (1 seed)"
) -> str:
    """``mean [min–max]`` of a column of a :func:`summarise_runs` row; the mean alone
    (followed by ``one_seed``) for a single seed, and for a constant column; ``never``
    when no seed has a value (a level no run reached), and the seeds that have one when
    some lack it."""
    if f"{key}_min" not in row:
        return fmt.format(row[key])
    if not math.isfinite(row[key]):
        return "never"
    partial = ""
    if row.get(f"{key}_n", row["n_seeds"]) < row["n_seeds"]:
        partial = f" ({row[f'{key}_n']}/{row['n_seeds']} seeds)"
    if row["n_seeds"] == 1:
        return fmt.format(row[key]) + one_seed
    mean, lo, hi = (fmt.format(row[k]) for k in (key, f"{key}_min", f"{key}_max"))
    return f"{mean} [{lo}–{hi}]{partial}"
