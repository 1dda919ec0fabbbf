r"""The verdict rule of the claims: paired differences over seeds, a minimum effect, one
family.

One pair of arms
----------------
Every claim compares arms that were trained with the *same* seeds, and a seed
fixes the data, the test set and the initialisation of every arm, so the
evidence on a pair of arms is the per-seed difference :math:`d_s = a_s - b_s`
(the claimed arm minus the other, oriented so that a positive :math:`d_s` is
what the claim says), :math:`s = 1..n`. With :math:`\bar d` their mean,
:math:`s_d` their sample standard deviation and :math:`T_\nu` Student's t with
:math:`\nu = n - 1` degrees of freedom:

.. math::

    \mathrm{SE} = s_d / \sqrt{n}, \qquad
    t = \bar d / \mathrm{SE}, \qquad
    p_{>} = P(T_\nu \ge t), \qquad p_{<} = P(T_\nu \le t).

A pair is judged on two hypotheses about the mean difference :math:`\mu`:

* the *directional* one, :math:`H_0: \mu = 0`, with the two-sided p-value
  :math:`p_{dir} = \min(1, 2\min(p_>, p_<))`; a rejection is read in the sign
  of :math:`\bar d`;
* the *equivalence* one, :math:`H_0: |\mu| \ge \delta`, for the minimum effect
  :math:`\delta > 0` stated with the claim before any run, with the p-value of
  two one-sided tests (TOST):

  .. math::

      p_{\approx} = \max\big(P(T_\nu \ge (\bar d + \delta)/\mathrm{SE}),\;
                             P(T_\nu \le (\bar d - \delta)/\mathrm{SE})\big).

The two nulls are disjoint (:math:`\mu = 0` and :math:`|\mu| \ge \delta` cannot
both hold), so at most one of them is true.

One family for the page
-----------------------
All the judged pairs of a page, :math:`P` of them, form one family of
:math:`2P` hypotheses, corrected with Shaffer's refinement of Holm's step-down
rule (Shaffer 1986, procedure S1;
:func:`~convs2s_edu.lab.experiments.shaffer`): sort the :math:`2P` p-values,
:math:`p_{(1)} \le p_{(2)} \le \dots`; at step :math:`i` reject
:math:`H_{(i)}` when

.. math::

    p_{(i)} \le \alpha / t_i,

where :math:`t_i` is the number of pairs that still have at least one
unrejected hypothesis (the largest number of true nulls left, given that the
ones rejected so far are false: one per pair); stop at the first p-value
above its threshold. The first threshold is :math:`\alpha / P`, and
:math:`t_i` falls below :math:`P` only once both hypotheses of some pair are
rejected. The verdict of a pair
(:func:`~convs2s_edu.lab.experiments.verdicts`):

* **supported**: the directional hypothesis is rejected **and**
  :math:`\bar d \ge \delta` (the mean difference reaches the minimum effect
  in the claimed direction);
* **contradicted**: the directional hypothesis is rejected **and**
  :math:`\bar d \le -\delta`;
* **no practical difference**: the equivalence hypothesis is rejected (the
  :math:`1 - 2\alpha/t_i` interval lies inside :math:`\pm\delta`, so
  :math:`|\bar d| < \delta`);
* **not resolved**: none of these (too few seeds or too much spread; or a
  difference that is real but smaller than the minimum effect).

What the family controls: with :math:`\alpha = 5\%`, the probability of *any*
false verdict on the page, that is a *supported* or *contradicted* in the
wrong direction (where the true difference is 0 or of the other sign) or a
*no practical difference* where the true difference is :math:`\delta` or more
in size, is at most 5%.

Why: at the first false rejection of a true null every earlier rejection was
right, so every true null is still unrejected and counts in :math:`t_i`, which
is therefore at least their number; Bonferroni over them bounds the
probability by :math:`\alpha` whatever the dependence between the pairs
(Shaffer's argument). A pair with :math:`\mu \ge \delta` (or, mirrored,
:math:`\mu \le -\delta`) can err in two ways, a wrong-sign directional
rejection or an equivalence rejection, but both need
:math:`(\bar d - \delta)/\mathrm{SE}` at or below the same quantile of
:math:`T_\nu`: one event, of probability at most the threshold. A wrong sign
where :math:`0 < |\mu| < \delta` is a directional error, to which the
argument does not extend (that pair's null, :math:`\mu = 0`, is false): it
has at most half the two-sided threshold at each step, and the tests'
simulations (pages of mixed effects whose pairs share arms) keep the whole
page under 5%; a proof for every dependence is not known to us.

With five seeds and about fifteen pairs only large effects can be supported, so
the full build gives each arm the seeds its claims need (a pilot's spread and
:func:`~convs2s_edu.lab.experiments.plan_seeds`):
:func:`~convs2s_edu.lab.experiments.rule_power` gives the probability of a
verdict at the first threshold (a lower bound),
:func:`~convs2s_edu.lab.experiments.min_detectable_effect` the smallest true
effect that is supported with probability 80%, and
:func:`~convs2s_edu.lab.experiments.seeds_for_power` the fewest seeds that
reach a power.

Student's t, the normal law and the power's integral are SciPy's (``scipy.special``'s
``stdtr``/``stdtrit``, behind ``scipy.stats.t`` without its per-call overhead, which the
tests' simulations would pay a million times), imported where used: the GPU machine's
image has no SciPy. SciPy's ``false_discovery_control`` bounds the expected share of
false conclusions, not the chance of any: hence
:func:`~convs2s_edu.lab.experiments.shaffer`.
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
    "shaffer",
    "verdicts",
    "rule_power",
    "min_detectable_effect",
    "seeds_for_power",
]

#: The four verdicts of :func:`verdicts`.
VERDICTS = ("supported", "contradicted", "no practical difference", "not resolved")

#: The level of the page's family: the chance of any false verdict on it.
ALPHA = 0.05


# ---- One pair ------------------------------------------------------------


@dataclass(frozen=True)
class PairedTest:
    """The paired comparison of one pair of arms (see the module's notes).

    Attributes
    ----------
    n : int
        Seeds (pairs of runs).
    diffs : tuple of float
        :math:`d_s = a_s - b_s`, in seed order.
    mean, sd, se : float
        :math:`\\bar d`, :math:`s_d` and :math:`s_d/\\sqrt{n}`.
    min_effect : float
        :math:`\\delta`, stated with the claim.
    p_greater, p_less, p_equivalent : float
        One-sided p-values of :math:`\\mu \\le 0` and :math:`\\mu \\ge 0`, and the
        p-value of non-equivalence (TOST), before any correction.
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

    @property
    def p_directional(self) -> float:
        """The two-sided p-value of :math:`\\mu = 0`: :math:`\\min(1, 2\\min(p_>, p_<))`."""
        return float(_two_sided(self.p_greater, self.p_less))

    def interval(self, level: float = 0.90) -> tuple[float, float]:
        """The two-sided ``level`` confidence interval of the mean difference."""
        if self.se == 0.0:
            return (self.mean, self.mean)
        from scipy.special import stdtrit  # Student's t quantile

        half = float(stdtrit(self.n - 1, 0.5 + level / 2.0)) * self.se
        return (self.mean - half, self.mean + half)


def _two_sided(p_greater, p_less):
    """The two-sided p-value of :math:`\\mu = 0` from the one-sided ones."""
    return np.minimum(1.0, 2.0 * np.minimum(p_greater, p_less))


def _pvalues(d, min_effect, resolution=0.0) -> dict:
    """The statistics of :func:`paired_test` for differences ``d`` of shape
    ``(..., n)``, computed along the last axis (vectorised, for the tests' simulations
    too).

    Returns a dict of arrays of shape ``d.shape[:-1]``: ``mean``, ``sd`` (floored at
    ``resolution``), ``se``, ``p_greater``, ``p_less``, ``p_directional`` and
    ``p_equivalent`` (every p-value 1 where ``se`` is 0: nothing weighs the mean).
    """
    from scipy.special import stdtr  # Student's t CDF, P(T <= t)

    d = np.asarray(d, dtype=float)
    n = d.shape[-1]
    df = n - 1
    mean = d.mean(axis=-1)
    sd = np.maximum(d.std(axis=-1, ddof=1), resolution)
    se = sd / math.sqrt(n)
    spread = se > 0.0
    safe = np.where(spread, se, 1.0)
    t = mean / safe
    p_g = np.where(spread, stdtr(df, -t), 1.0)  # P(T >= t)
    p_l = np.where(spread, stdtr(df, t), 1.0)  # P(T <= t)
    # TOST: H0 mu <= -delta (rejected for a large t+) and H0 mu >= delta (a small t-)
    upper, lower = (mean + min_effect) / safe, (mean - min_effect) / safe
    p_e = np.where(spread, np.maximum(stdtr(df, -upper), stdtr(df, lower)), 1.0)
    return {
        "mean": mean,
        "sd": sd,
        "se": se,
        "p_greater": p_g,
        "p_less": p_l,
        "p_directional": _two_sided(p_g, p_l),
        "p_equivalent": p_e,
    }


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
    a, b = np.asarray(claimed, dtype=float), np.asarray(other, dtype=float)
    if len(a) != len(b):
        raise ValueError(
            f"paired values need the same seeds, got {len(a)} and {len(b)} values"
        )
    if len(a) < 2:
        raise ValueError(f"a paired test needs at least 2 seeds, got {len(a)}")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError(f"paired_test got NaN values: {a.tolist()} vs {b.tolist()}")
    if not min_effect > 0:
        raise ValueError(f"min_effect must be a number > 0, got {min_effect!r}")
    if not resolution >= 0:
        raise ValueError(f"resolution must be a number >= 0, got {resolution!r}")
    d = a - b
    s = _pvalues(d, float(min_effect), float(resolution))
    del s["p_directional"]  # a property of the test
    stats = {k: float(v) for k, v in s.items()}
    return PairedTest(len(d), tuple(d.tolist()), min_effect=float(min_effect), **stats)


# ---- The page's family ---------------------------------------------------


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down rule: which of the hypotheses with ``pvalues`` are rejected.

    Sort the p-values, :math:`p_{(1)} \\le \\dots \\le p_{(m)}`; reject
    :math:`H_{(1)}, \\dots, H_{(k)}` for the largest :math:`k` with
    :math:`p_{(i)} \\le \\alpha / (m - i + 1)` for every :math:`i \\le k`. The claims
    use :func:`shaffer`, which knows that at most one null of a pair is true.

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


def shaffer(
    p_directional, p_equivalent, alpha: float = ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """Shaffer's step-down rule (S1) over pairs of hypotheses with disjoint nulls.

    Pair :math:`j` holds two hypotheses, with p-values ``p_directional[..., j]`` and
    ``p_equivalent[..., j]``, of which at most one null is true. All the :math:`2P`
    p-values are sorted; at step :math:`i`, :math:`H_{(i)}` is rejected when
    :math:`p_{(i)} \\le \\alpha / t_i`, with :math:`t_i` the number of pairs that
    still have an unrejected hypothesis; the rule stops at the first p-value above its
    threshold.

    Parameters
    ----------
    p_directional, p_equivalent : array_like of shape (..., P)
        The pairs' p-values; leading axes are independent families (simulations).
    alpha : float
        The family's level.

    Returns
    -------
    (ndarray of bool, ndarray of bool)
        Which directional and which equivalence hypotheses are rejected.

    Examples
    --------
    0.001 <= 0.05 / 2 and 0.02 <= 0.05 / 2; pair 0 is done, so 0.03 <= 0.05 / 1 (Holm
    over four hypotheses would stop at 0.02 > 0.05 / 3):

    >>> d, e = shaffer([0.001, 0.03], [0.02, 0.9])
    >>> d.tolist(), e.tolist()
    ([True, True], [True, False])
    """
    p_dir = np.asarray(p_directional, dtype=float)
    p_eq = np.asarray(p_equivalent, dtype=float)
    if p_dir.shape != p_eq.shape:
        raise ValueError(
            f"one equivalence p-value per pair: {p_dir.shape} vs {p_eq.shape}"
        )
    shape, n_pairs = p_dir.shape, p_dir.shape[-1]
    p = np.concatenate([p_dir.reshape(-1, n_pairs), p_eq.reshape(-1, n_pairs)], axis=1)
    rows = np.arange(p.shape[0])
    order = np.argsort(p, axis=1, kind="stable")
    rejected = np.zeros(p.shape, dtype=bool)
    left = np.full((p.shape[0], n_pairs), 2)  # unrejected hypotheses per pair
    open_pairs = np.full(p.shape[0], n_pairs)  # t_i
    going = np.ones(p.shape[0], dtype=bool)
    for step in range(2 * n_pairs):
        h = order[:, step]
        going &= p[rows, h] <= alpha / np.maximum(open_pairs, 1)
        rejected[rows[going], h[going]] = True
        pair = h % n_pairs
        left[rows[going], pair[going]] -= 1
        open_pairs -= going & (left[rows, pair] == 0)
    return (
        rejected[:, :n_pairs].reshape(shape),
        rejected[:, n_pairs:].reshape(shape),
    )


def _verdict_codes(mean, min_effect, p_directional, p_equivalent, alpha: float = ALPHA):
    """Each pair's verdict as an index into :data:`VERDICTS` (arrays of shape (..., P),
    the page's family along the last axis): the rule of :func:`verdicts`, vectorised."""
    mean = np.asarray(mean, dtype=float)
    delta = np.asarray(min_effect, dtype=float)
    directional, equivalent = shaffer(p_directional, p_equivalent, alpha)
    return np.select(
        [directional & (mean >= delta), directional & (mean <= -delta), equivalent],
        [0, 1, 2],
        default=3,
    )


def verdicts(tests: Sequence[PairedTest], alpha: float = ALPHA) -> list[str]:
    """The verdict of every pair of a page (one of ``VERDICTS``), in one family.

    Parameters
    ----------
    tests : sequence of PairedTest
        One per judged pair of the page: the family is their directional and
        equivalence hypotheses (:func:`shaffer`).
    alpha : float
        The family's level: the chance of any false verdict among ``tests``.

    Returns
    -------
    list of str
        *supported* (directional null rejected and :math:`\\bar d \\ge \\delta`),
        *contradicted* (rejected and :math:`\\bar d \\le -\\delta`), *no practical
        difference* (equivalence null rejected) or *not resolved*.
    """
    if not tests:
        return []
    codes = _verdict_codes(
        [t.mean for t in tests],
        [t.min_effect for t in tests],
        [t.p_directional for t in tests],
        [t.p_equivalent for t in tests],
        alpha,
    )
    return [VERDICTS[c] for c in codes.tolist()]


# ---- Power ---------------------------------------------------------------


def rule_power(
    effect_in_sd: float,
    n: int,
    m: int = 1,
    alpha: float = ALPHA,
    min_effect_in_sd: float = 0.0,
    verdict: str = "supported",
) -> float:
    """Probability that the rule gives ``verdict`` to a pair with a true effect of
    ``effect_in_sd`` standard deviations of its paired differences, with ``n`` seeds,
    at the family's first threshold :math:`\\alpha / m` (``m`` pairs on the page; a
    lower bound, exact unless some other pair has both its hypotheses rejected first).

    With :math:`\\bar d = \\mu + \\sigma Z/\\sqrt{n}` and
    :math:`s_d = \\sigma\\sqrt{V/\\nu}` independent (:math:`V \\sim \\chi^2_\\nu`),
    :math:`\\lambda = \\mu\\sqrt{n}/\\sigma` and :math:`D = \\delta\\sqrt{n}/\\sigma`:

    *supported* needs the two-sided test at :math:`\\alpha/m`,
    :math:`t \\ge c = t_{\\nu, 1 - \\alpha/(2m)}`, and :math:`\\bar d \\ge \\delta`,
    that is :math:`Z \\ge \\max(c\\sqrt{V/\\nu}, D) - \\lambda`:

    .. math::

        P_{sup} = E_V\\big[\\Phi\\big(\\lambda - \\max(c\\sqrt{V/\\nu},\\ D)\\big)\\big];

    *no practical difference* needs both one-sided tests of TOST at :math:`\\alpha/m`,
    :math:`-D + q\\sqrt{V/\\nu} \\le \\lambda + Z \\le D - q\\sqrt{V/\\nu}` with
    :math:`q = t_{\\nu, 1 - \\alpha/m}`:

    .. math::

        P_{\\approx} = E_V\\big[\\big(\\Phi(D - q\\sqrt{V/\\nu} - \\lambda)
            - \\Phi(-D + q\\sqrt{V/\\nu} - \\lambda)\\big)^+\\big].

    Parameters
    ----------
    effect_in_sd : float
        :math:`\\mu / \\sigma`.
    n : int
        Seeds.
    m : int
        Judged pairs on the page (:math:`P`).
    alpha : float
        The family's level.
    min_effect_in_sd : float
        :math:`\\delta / \\sigma` (must be > 0 for *no practical difference*).
    verdict : {"supported", "no practical difference"}
    """
    from scipy import integrate
    from scipy.special import chdtr, chdtrc, chdtri, ndtr, stdtrit

    df = n - 1
    lam = effect_in_sd * math.sqrt(n)
    floor = min_effect_in_sd * math.sqrt(n)

    def s(u: float) -> float:  # sqrt(V / nu) at V's upper-tail probability u
        return math.sqrt(chdtri(df, u) / df)

    if verdict == VERDICTS[0]:
        c = float(stdtrit(df, 1.0 - alpha / (2 * m)))
        # below v0 the floor is the larger bar, above it c sqrt(V / nu)
        v0 = (floor / c) ** 2 * df
        below = chdtr(df, v0) * ndtr(lam - floor)
        # E_V[. ; V > v0] as an integral over the upper-tail probability u of V
        above, _ = integrate.quad(lambda u: ndtr(lam - c * s(u)), 0.0, chdtrc(df, v0))
        return float(below + above)
    if verdict == VERDICTS[2]:
        if min_effect_in_sd <= 0:
            raise ValueError("no practical difference needs a minimum effect > 0")
        q = float(stdtrit(df, 1.0 - alpha / m))
        v_max = (floor / q) ** 2 * df  # above it the interval cannot fit inside +-delta

        # P(-D + q s <= lambda + Z <= D - q s), at least 0
        def inside(u: float) -> float:
            return max(
                ndtr(floor - q * s(u) - lam) - ndtr(-floor + q * s(u) - lam), 0.0
            )

        value, _ = integrate.quad(inside, chdtrc(df, v_max), 1.0)
        return float(value)
    raise ValueError(
        f"verdict must be {VERDICTS[0]!r} or {VERDICTS[2]!r}, got {verdict!r}"
    )


def min_detectable_effect(
    n: int,
    m: int = 1,
    power: float = 0.8,
    alpha: float = ALPHA,
    min_effect_in_sd: float = 0.0,
) -> float:
    """The smallest true effect, in standard deviations of the paired differences, that
    the rule supports with probability ``power`` with ``n`` seeds among ``m`` judged
    pairs, given the claim's minimum effect ``min_effect_in_sd`` (:func:`rule_power`;
    multiply by the differences' standard deviation for the claim's units).

    >>> round(min_detectable_effect(5, m=1), 2)
    1.68
    """
    if n < 2:
        raise ValueError(f"need at least 2 seeds, got {n}")
    from scipy import optimize

    hi = 1.0
    while rule_power(hi, n, m, alpha, min_effect_in_sd) < power:
        hi *= 2.0
    gap = lambda e: rule_power(e, n, m, alpha, min_effect_in_sd) - power  # noqa: E731
    return 0.0 if gap(0.0) >= 0 else float(optimize.brentq(gap, 0.0, hi, xtol=1e-12))


def seeds_for_power(
    sd_in_delta_units: float,
    P: int,
    power: float = 0.8,
    effect_in_delta_units: float = 2.0,
    alpha: float = ALPHA,
    max_seeds: int = 10_000,
) -> int:
    """The fewest seeds with which the rule reaches ``power`` on a page of ``P`` pairs
    (:func:`rule_power`, at the first threshold :math:`\\alpha / P`).

    Parameters
    ----------
    sd_in_delta_units : float
        :math:`\\sigma / \\delta`: the standard deviation of a pair's per-seed differences
        in units of its minimum effect.
    P : int
        Judged pairs on the page.
    power : float
        The probability to reach.
    effect_in_delta_units : float
        The true effect :math:`\\mu / \\delta`: by default 2, the effect a claim is
        designed to find, whose power is that of *supported*; 0 asks for the power of
        *no practical difference* between equal arms.
    alpha : float
        The family's level.
    max_seeds : int
        Give up above this.

    Raises
    ------
    ValueError
        A standard deviation or ``P`` that is not positive, or ``power`` not reached
        with ``max_seeds`` seeds.

    >>> seeds_for_power(0.5, 15)
    5
    """
    if not (sd_in_delta_units > 0 and P >= 1):
        raise ValueError(f"need sd > 0 and P >= 1, got {sd_in_delta_units!r} and {P!r}")
    verdict = VERDICTS[2] if effect_in_delta_units == 0 else VERDICTS[0]
    effect, delta = effect_in_delta_units / sd_in_delta_units, 1.0 / sd_in_delta_units
    reaches = lambda n: rule_power(effect, n, P, alpha, delta, verdict) >= power  # noqa: E731
    # the power grows with the seeds: double, then bisect
    lo, hi = 1, 2
    while not reaches(hi):
        if hi >= max_seeds:
            raise ValueError(f"power {power} not reached with {max_seeds} seeds")
        lo, hi = hi, min(2 * hi, max_seeds)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi
