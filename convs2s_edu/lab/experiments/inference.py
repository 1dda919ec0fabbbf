r"""The verdict rule of the claims: paired differences over seeds, a minimum effect, Holm.

Every claim compares two arms that were trained with the *same* seeds, and a
seed fixes the data, the test set and the initialisation of both arms, so the
evidence is the per-seed difference :math:`d_s = a_s - b_s` (claimed arm minus
the other), :math:`s = 1..n`. With :math:`\bar d` their mean, :math:`s_d` their
sample standard deviation and :math:`t_{q,\nu}` the :math:`q` quantile of
Student's t with :math:`\nu = n - 1` degrees of freedom:

.. math::

    \mathrm{SE} = s_d / \sqrt{n}, \qquad
    t = \bar d / \mathrm{SE}, \qquad
    p_{>} = P(T_\nu \ge t), \qquad p_{<} = P(T_\nu \le t)

and, for a minimum effect :math:`\delta > 0` stated with the claim before any
run (two one-sided tests, TOST):

.. math::

    p_{\approx} = \max\big(P(T_\nu \ge (\bar d + \delta)/\mathrm{SE}),\;
                           P(T_\nu \le (\bar d - \delta)/\mathrm{SE})\big).

Across the :math:`m` claims of a table, each family of p-values is corrected
with Holm's step-down rule (:func:`holm`), which keeps the chance of *any*
false conclusion of that kind at :math:`\le \alpha` whatever the other claims
are. The verdict of a claim (:func:`verdicts`):

* **supported**: Holm rejects :math:`\mu \le 0` (at :math:`\alpha = 0.05`, i.e. the
  one-sided 95% bound, Holm-adjusted, clears zero) **and** :math:`\bar d \ge \delta`;
* **contradicted**: the mirror image (:math:`\mu \ge 0` rejected and
  :math:`\bar d \le -\delta`);
* **no practical difference**: Holm rejects non-equivalence: the 90% interval
  (Holm-adjusted) lies inside :math:`\pm\delta`;
* **not resolved**: none of these (too few seeds, or too much spread, for this
  budget).

With three seeds and eleven claims only large effects can be supported:
:func:`min_detectable_effect` gives the smallest true effect (in units of
:math:`s_d`, or in the claim's units given :math:`s_d`) that the rule supports
with probability 80%, and the tests check the rule by simulation (false
*supported* at most 5% with identical arms, bimodal results included; power at
least 80% at that effect).

Student's t, the normal law and the power's integral are SciPy's (``scipy.special``'s
``stdtr``/``stdtrit``, behind ``scipy.stats.t`` without its per-call overhead, which the
tests' simulations would pay a million times), imported where used: the GPU machine's image
has no SciPy. SciPy's ``false_discovery_control`` bounds the expected share of false
conclusions, not the chance of any: hence :func:`holm`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "VERDICTS",
    "PairedTest",
    "paired_test",
    "holm",
    "verdicts",
    "rule_power",
    "min_detectable_effect",
]

#: The four verdicts of :func:`verdicts`.
VERDICTS = ("supported", "contradicted", "no practical difference", "not resolved")

#: The level of every family (one-sided bounds at 95%, equivalence at 90%).
ALPHA = 0.05


# ---- One claim -----------------------------------------------------------


@dataclass(frozen=True)
class PairedTest:
    """The paired comparison of one claim (see the module's notes).

    Attributes
    ----------
    n : int
        Seeds (pairs).
    diffs : tuple of float
        :math:`d_s = a_s - b_s`, in seed order.
    mean, sd, se : float
        :math:`\\bar d`, :math:`s_d` and :math:`s_d/\\sqrt{n}`.
    min_effect : float
        :math:`\\delta`, stated with the claim.
    p_greater, p_less, p_equivalent : float
        One-sided p-values of :math:`\\mu \\le 0`, :math:`\\mu \\ge 0` and of
        non-equivalence (TOST), before any correction.
    """

    n: int
    diffs: tuple
    mean: float
    sd: float
    se: float
    min_effect: float
    p_greater: float
    p_less: float
    p_equivalent: float

    def interval(self, level: float = 0.90) -> tuple[float, float]:
        """The two-sided ``level`` confidence interval of the mean difference."""
        if self.se == 0.0:
            return (self.mean, self.mean)
        from scipy.special import stdtrit  # Student's t quantile

        half = float(stdtrit(self.n - 1, 0.5 + level / 2.0)) * self.se
        return (self.mean - half, self.mean + half)

    def lower_bound(self, level: float = 0.95) -> float:
        """The one-sided ``level`` lower confidence bound of the mean difference."""
        if self.se == 0.0:
            return self.mean
        from scipy.special import stdtrit

        return self.mean - float(stdtrit(self.n - 1, level)) * self.se


def paired_test(
    claimed: Sequence[float],
    other: Sequence[float],
    min_effect: float,
    resolution: float = 0.0,
) -> PairedTest:
    """The paired t statistics of ``claimed - other`` per seed.

    Parameters
    ----------
    claimed, other : sequence of float
        Per-seed values of the arm the claim says is larger, and of the other arm,
        seed by seed (the same seeds, in the same order).
    min_effect : float
        :math:`\\delta > 0`: the smallest difference that would matter, in the units
        of the values.
    resolution : float
        The smallest step the values can take (e.g. one test example in exact match,
        ``1 / n_test``): the standard deviation of the differences is taken as at least
        this, so that a few seeds that happen to give the same difference (a discrete
        measure, or runs that all failed against runs that all learnt) do not pass for
        a difference measured without error. With no spread at all and no resolution,
        every p-value is 1 (*not resolved*): nothing weighs the mean.

    Raises
    ------
    ValueError
        Different lengths, fewer than two seeds, NaN values, ``min_effect <= 0`` or
        ``resolution < 0``.
    """
    a, b = [float(x) for x in claimed], [float(x) for x in other]
    if len(a) != len(b):
        raise ValueError(f"paired values need the same seeds, got {len(a)} and {len(b)} values")
    if len(a) < 2:
        raise ValueError(f"a paired test needs at least 2 seeds, got {len(a)}")
    if any(math.isnan(x) for x in a + b):
        raise ValueError(f"paired_test got NaN values: {a} vs {b}")
    if not (isinstance(min_effect, (int, float)) and min_effect > 0):
        raise ValueError(f"min_effect must be a number > 0, got {min_effect!r}")
    if not (isinstance(resolution, (int, float)) and resolution >= 0):
        raise ValueError(f"resolution must be a number >= 0, got {resolution!r}")
    from scipy.special import stdtr  # Student's t CDF, P(T <= t)

    d = np.array(a) - np.array(b)
    n, df = len(d), len(d) - 1
    mean = float(d.mean())
    # s_d, floored at the measure's resolution
    sd = max(float(d.std(ddof=1)), float(resolution))
    se = sd / math.sqrt(n)
    if se == 0.0:  # every seed gave the same difference and no resolution weighs it
        p_g = p_l = p_e = 1.0
    else:
        t = mean / se
        p_g, p_l = float(stdtr(df, -t)), float(stdtr(df, t))  # P(T >= t), P(T <= t)
        # TOST: H0 mu <= -delta (rejected for large t+) and H0 mu >= delta (small t-)
        upper, lower = (mean + min_effect) / se, (mean - min_effect) / se
        p_e = float(max(stdtr(df, -upper), stdtr(df, lower)))
    return PairedTest(n, tuple(d.tolist()), mean, sd, se, float(min_effect), p_g, p_l, p_e)


# ---- Many claims ---------------------------------------------------------


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down rule: which of the hypotheses with ``pvalues`` are rejected.

    Sort the p-values, :math:`p_{(1)} \\le \\dots \\le p_{(m)}`; reject
    :math:`H_{(1)}, \\dots, H_{(k)}` for the largest :math:`k` with
    :math:`p_{(i)} \\le \\alpha / (m - i + 1)` for every :math:`i \\le k`.

    >>> holm([0.01, 0.04, 0.03], alpha=0.05)
    [True, False, False]
    >>> holm([0.001, 0.02, 0.04])
    [True, True, True]
    """
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    rejected = [False] * m
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (m - rank):
            break
        rejected[i] = True
    return rejected


def verdicts(tests: Sequence[PairedTest], alpha: float = ALPHA) -> list[str]:
    """The verdict of every claim of a table (one of ``VERDICTS``), Holm-corrected across them.

    Parameters
    ----------
    tests : sequence of PairedTest
        One per claim of the table (the family).
    alpha : float
        The level of each family: one-sided bounds at :math:`1 - \\alpha`, the
        equivalence interval at :math:`1 - 2\\alpha`.
    """
    sup = holm([t.p_greater for t in tests], alpha)
    con = holm([t.p_less for t in tests], alpha)
    eq = holm([t.p_equivalent for t in tests], alpha)
    out = []
    for t, s, c, e in zip(tests, sup, con, eq):
        if s and t.mean >= t.min_effect:
            out.append(VERDICTS[0])
        elif c and t.mean <= -t.min_effect:
            out.append(VERDICTS[1])
        elif e:
            out.append(VERDICTS[2])
        else:
            out.append(VERDICTS[3])
    return out


def rule_power(
    effect_in_sd: float,
    n: int,
    m: int = 1,
    alpha: float = ALPHA,
    min_effect_in_sd: float = 0.0,
) -> float:
    """Probability that the rule says *supported* for a true effect of ``effect_in_sd``
    standard deviations of the paired differences, with ``n`` seeds: the t statistic
    clears Holm's first step, :math:`\\alpha / m` (the hardest case: no other claim of
    the family is rejected), **and** the mean difference reaches the minimum effect
    ``min_effect_in_sd`` (in the same units).

    With :math:`\\bar d = \\mu + \\sigma Z/\\sqrt{n}` and :math:`s_d = \\sigma\\sqrt{V/\\nu}`
    independent (:math:`V \\sim \\chi^2_\\nu`), both conditions hold when
    :math:`Z > \\max(c\\sqrt{V/\\nu},\\ \\delta\\sqrt{n}/\\sigma) - \\lambda`, so

    .. math::

        P = E_V\\big[\\Phi\\big(\\lambda
            - \\max(c\\sqrt{V/\\nu},\\ \\delta\\sqrt n/\\sigma)\\big)\\big],
        \\qquad \\lambda = \\mu\\sqrt{n}/\\sigma.
    """
    from scipy import integrate
    from scipy.special import chdtr, chdtri, ndtr, stdtrit  # chi-square CDF, its inverse

    df = n - 1  # survival, Phi, Student's t quantile
    c = float(stdtrit(df, 1.0 - alpha / m))
    lam = effect_in_sd * math.sqrt(n)
    floor = min_effect_in_sd * math.sqrt(n)
    # below v0 the floor is the larger bar, above it c sqrt(V / nu)
    v0 = (floor / c) ** 2 * df if c > 0 else math.inf
    below = chdtr(df, v0) * ndtr(lam - floor)
    # E_V[. ; V > v0] as an integral over the quantile u = P(V > v) in (0, P(V > v0))
    above, _ = integrate.quad(
        lambda u: ndtr(lam - c * math.sqrt(chdtri(df, u) / df)), 0.0, 1.0 - chdtr(df, v0)
    )
    return float(below + above)


def min_detectable_effect(
    n: int,
    m: int = 1,
    power: float = 0.8,
    alpha: float = ALPHA,
    min_effect_in_sd: float = 0.0,
) -> float:
    """The smallest true effect, in standard deviations of the paired differences, that the
    rule supports with probability ``power`` with ``n`` seeds among ``m`` claims, given the
    claim's minimum effect ``min_effect_in_sd`` (:func:`rule_power`; multiply by the
    differences' standard deviation for the claim's units).

    >>> round(min_detectable_effect(5, m=1), 2)
    1.36
    """
    if n < 2:
        raise ValueError(f"need at least 2 seeds, got {n}")
    from scipy import optimize

    hi = 1.0
    while rule_power(hi, n, m, alpha, min_effect_in_sd) < power:
        hi *= 2.0
    gap = lambda e: rule_power(e, n, m, alpha, min_effect_in_sd) - power  # noqa: E731
    return 0.0 if gap(0.0) >= 0 else float(optimize.brentq(gap, 0.0, hi, xtol=1e-12))
