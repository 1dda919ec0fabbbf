r"""What the runs of an arm say together: mean and spread over seeds, and the verdict rule."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .registry import Arm

__all__ = ["VERDICTS", "summarise_runs", "verdict", "format_spread"]

#: The three verdicts of :func:`verdict`.
VERDICTS = ("supported", "not supported", "not resolved at this scale")


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
        ``arm``, ``label``, ``n_seeds``, the arm's constant ``columns``, and for every
        measured column ``c``: ``c`` (the mean), ``c_min``, ``c_max``, ``c_std`` and
        ``c_values`` (the per-seed values in seed order).

    Notes
    -----
    .. math::

        \bar x = \frac{1}{n}\sum_{s=1}^{n} x_s, \qquad
        \mathrm{std} = \sqrt{\frac{1}{n-1}\sum_{s=1}^{n} (x_s - \bar x)^2}

    (the sample standard deviation; 0 for a single seed).
    """
    rows = []
    for arm in arms:
        mine = sorted((r for r in runs if r["arm"] == arm.name), key=lambda r: r["seed"])
        if not mine:
            raise ValueError(f"no runs of arm {arm.name!r}")
        row = {"arm": arm.name, "label": arm.label, "n_seeds": len(mine), **arm.columns}
        keys = [k for k in mine[0] if k not in ("arm", "seed")]
        for key in keys:
            xs = [float(r[key]) for r in mine]
            # x̄ = (1/n) Σ x_s
            mean = sum(xs) / len(xs)
            # std = sqrt(Σ (x_s - x̄)² / (n - 1))
            std = (
                math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
            )
            row.update(
                {
                    key: mean,
                    f"{key}_min": min(xs),
                    f"{key}_max": max(xs),
                    f"{key}_std": std,
                    f"{key}_values": xs,
                }
            )
        rows.append(row)
    return rows


def verdict(claimed: Sequence[float], other: Sequence[float], *, paired: bool = False) -> str:
    r"""Is ``claimed`` larger than ``other``, beyond the spread over seeds?

    Parameters
    ----------
    claimed : sequence of float
        Per-seed values of what the claim says is larger.
    other : sequence of float
        Per-seed values of what it is compared with.
    paired : bool
        ``True`` when the two come from the same runs (e.g. one model decoded two ways):
        then the per-seed differences are judged, and both must have the same length.

    Returns
    -------
    str
        One of :data:`VERDICTS`.

    Notes
    -----
    Unpaired, with :math:`a_s` the claimed values and :math:`b_s` the others:
    *supported* when :math:`\min_s a_s > \max_s b_s`, *not supported* when
    :math:`\max_s a_s < \min_s b_s`, otherwise (the ranges overlap or touch)
    *not resolved at this scale*. Paired: *supported* when every difference
    :math:`a_s - b_s > 0`, *not supported* when every one is :math:`< 0`,
    otherwise not resolved. Fewer than two seeds on either side is never enough:
    *not resolved at this scale*. Three seeds a side that happen not to overlap
    occur by chance with probability :math:`2/\binom{6}{3} = 10\%` when the two
    are the same; this is a rule for a teaching site, not a significance test.
    """
    a, b = [float(x) for x in claimed], [float(x) for x in other]
    if not a or not b:
        raise ValueError(
            f"verdict needs at least one value on each side, got {len(a)} and {len(b)}"
        )
    if any(math.isnan(x) for x in a + b):
        raise ValueError(f"verdict got NaN values: {a} vs {b}")
    if paired and len(a) != len(b):
        raise ValueError(f"paired values must have the same length, got {len(a)} and {len(b)}")
    if len(a) < 2 or len(b) < 2:
        return VERDICTS[2]
    if paired:
        diffs = [x - y for x, y in zip(a, b)]
        if all(d > 0 for d in diffs):
            return VERDICTS[0]
        if all(d < 0 for d in diffs):
            return VERDICTS[1]
        return VERDICTS[2]
    if min(a) > max(b):
        return VERDICTS[0]
    if max(a) < min(b):
        return VERDICTS[1]
    return VERDICTS[2]


def format_spread(row: dict, key: str, fmt: str = "{:.1%}", *, one_seed: str = " (1 seed)") -> str:
    """``mean [min–max]`` of a column of a :func:`summarise_runs` row; the mean alone
    (followed by ``one_seed``) for a single seed, and for a constant column."""
    if f"{key}_min" not in row:
        return fmt.format(row[key])
    if row["n_seeds"] == 1:
        return fmt.format(row[key]) + one_seed
    mean, lo, hi = (fmt.format(row[k]) for k in (key, f"{key}_min", f"{key}_max"))
    return f"{mean} [{lo}–{hi}]"
