"""Estimates, confidence intervals and verdicts of claims (docs/science.md §13).

A claim's estimate is an aggregate of per-seed values (mean, median, a quantile, or the share
of seeds meeting a per-seed condition), or a statistic of several such aggregates along an
axis (the steps of a monotone trend, a fitted slope). The seed is the unit: seeds are
independent, the grid points a seed visits are not (a seed fixes the data of every point of
the same shapes). The intervals, each at a level L:

- a mean: the betting interval of Waudby-Smith & Ramdas (arXiv 2010.09686) on the range the
  variable declares (:mod:`attnsvm.variables`): coverage at least L for every distribution on
  that range and every number of values, deterministic (no resampling), never outside the
  range (:func:`mean_interval`);
- a median or quantile: the order-statistic (binomial) interval, exact for any continuous
  distribution and conservative with ties;
- a share: the exact binomial (Clopper-Pearson) interval of :func:`scipy.stats.binomtest`;
- several points at once: the union of their intervals at the Bonferroni level
  (:func:`union`), which holds every point's parameter, and so any average or mixture of
  them, whatever the dependence between points;
- a difference or linear combination of such intervals (:func:`difference`,
  :func:`combination`): exact for any dependence between them, by Bonferroni.

Every method is valid by construction at every number of values and level; a mean needs a
finite range (none: no interval, the verdict INCONCLUSIVE with the reason). The public
functions :func:`mean_interval`, :func:`median_interval` and :func:`share_interval` (exported
by :mod:`attnsvm.claims`, docs/claims.md) are the ones the ledger builds on.

The verdict compares the interval with the threshold: PASS when it lies entirely on the
predicted side, FAIL when it lies entirely on the other side, INCONCLUSIVE when it straddles
the threshold (or there is no calibrated interval).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

import attnsvm.claims.table as table

#: verdicts, best first
VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE")
#: the method names, as the ledger and the calibration table spell them
MEAN = "betting (Waudby-Smith & Ramdas)"
QUANTILE = "order statistics"
SHARE = "exact binomial"
#: the boundary slope's percentile bootstrap over seeds (:mod:`attnsvm.claims.boundary`)
BOUNDARY = "boundary percentile bootstrap"

#: ``(values, axis) -> aggregate``; ``values``: the per-seed values (0/1 for a share)
Aggregate = Callable[[np.ndarray, int], np.ndarray]


def aggregate_function(aggregate: str, q: float | None = None) -> Aggregate:
    """The vectorized aggregate of a claim (``share``: the mean of 0/1 indicators)."""
    if aggregate in ("mean", "share"):
        return lambda x, axis: np.mean(x, axis=axis)
    if aggregate == "median":
        return lambda x, axis: np.median(x, axis=axis)
    if aggregate == "quantile":
        return lambda x, axis: np.quantile(x, q, axis=axis)
    raise ValueError(f"unknown aggregate {aggregate!r}")


def method_of(aggregate: str) -> str:
    """The interval method of an aggregate (module docstring)."""
    return {"mean": MEAN, "median": QUANTILE, "quantile": QUANTILE, "share": SHARE}[aggregate]


@dataclass(frozen=True)
class Interval:
    """An estimate, its interval at ``confidence``, how it was computed and from how many
    values (``n``: the values, or for a paired or clustered method, the seeds)."""

    estimate: float
    lo: float
    hi: float
    confidence: float
    method: str
    n: int = 0
    #: the calibrated intervals it is built from: ``{"method", "n", "level"[, "q"]}`` each
    basis: tuple = ()

    @classmethod
    def none(cls, confidence: float, why: str, estimate: float = math.nan, n: int = 0):
        return cls(estimate, math.nan, math.nan, confidence, why, n)

    @property
    def defined(self) -> bool:
        return not (math.isnan(self.lo) or math.isnan(self.hi))


def seed_of(*parts: str) -> int:
    """A reproducible 64-bit seed of a claim's names (sha256), the same on every machine."""
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def bonferroni(confidence: float, tests: int) -> float:
    """The confidence of each of ``tests`` intervals that hold together at ``confidence``."""
    return 1.0 - (1.0 - confidence) / max(tests, 1)


# --------------------------------------------------------------------------- the methods
def binomial_interval(successes: int, n: int, confidence: float) -> Interval:
    """Share ``successes / n`` and its exact (Clopper-Pearson) interval: coverage at least
    ``confidence`` for every true share and every n."""
    basis = ({"method": SHARE, "n": int(n), "level": confidence},)
    if n == 0:
        return replace(Interval.none(confidence, "no values"), basis=basis)
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence, method="exact")
    return Interval(successes / n, float(ci.low), float(ci.high), confidence, SHARE, int(n), basis)


def order_statistic_ranks(n: int, q: float, confidence: float) -> tuple[int, int] | None:
    """1-based ranks ``(r, s)`` of the equal-tailed order-statistic interval
    ``[x_(r), x_(s)]`` of the q-quantile of n values: ``P(Bin(n, q) <= r - 1) <= a`` and
    ``P(Bin(n, q) >= s) <= a`` with ``a = (1 - confidence) / 2``, the innermost such ranks;
    None when no rank meets a tail (too few values for the level)."""
    a = (1.0 - confidence) / 2.0
    k = np.arange(n + 1)
    below = stats.binom.cdf(k, n, q)  # P(Bin <= k)
    above = stats.binom.sf(k - 1, n, q)  # P(Bin >= k)
    low = np.flatnonzero(below[:n] <= a + 1e-15)  # r - 1 with P(Bin <= r - 1) <= a
    high = np.flatnonzero(above[1:] <= a + 1e-15) + 1  # s with P(Bin >= s) <= a
    if not len(low) or not len(high):
        return None
    r, s = int(low[-1]) + 1, int(high[0])
    return (r, s) if r <= s else None


def order_statistic_coverage(n: int, q: float, ranks: tuple[int, int]) -> float:
    """Exact coverage ``P(x_(r) <= xi_q <= x_(s))`` for continuous data (a binomial sum)."""
    r, s = ranks
    return float(stats.binom.cdf(s - 1, n, q) - stats.binom.cdf(r - 1, n, q))


def quantile_interval(values: np.ndarray, q: float, confidence: float) -> Interval:
    """The q-quantile of ``values`` and its order-statistic interval (exact for continuous
    data, conservative with ties); none when n is too small for the level."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    estimate = float(np.quantile(x, q)) if n else math.nan
    ranks = order_statistic_ranks(n, q, confidence) if n else None
    basis = ({"method": QUANTILE, "n": n, "level": confidence, "q": q},)
    if ranks is None:
        need = table.quantile_n_min(q, confidence)
        why = f"{n} values: no order-statistic interval at {confidence:.4g} below {need} values"
        return replace(Interval.none(confidence, why, estimate, n), basis=basis)
    return Interval(estimate, float(x[ranks[0] - 1]), float(x[ranks[1] - 1]), confidence,
                    QUANTILE, n, basis)  # fmt: skip


#: the fractions of its capital each constant bet stakes on the worst value of the range: a
#: geometric grid, so that the mixture adapts to tiny spreads (a correlation near 1) and to
#: wide ones (a two-point variable) alike; fixed, so the capital does not depend on the level
BET_FRACTIONS = tuple(0.9 * 2.0**-j for j in range(8))
#: candidate means per round of the search for an end, and the rounds: 16^9 > 2^36, so the
#: ends are found to 1e-10 of the range and rounded outwards
_GRID, _ROUNDS = 16, 9


def _log_capital(x: np.ndarray, m: np.ndarray, up: bool) -> np.ndarray:
    """``log K_n(m)`` of the capital betting that the mean of ``x`` (last axis, in [0, 1]) is
    above m (``up``) or below it: the average over :data:`BET_FRACTIONS` f of
    ``prod_i (1 +- lambda (x_i - m))`` with ``lambda = f / m`` (``f / (1 - m)`` below), a bet
    that loses at most the fraction f of the capital on any value of the range (the
    diversified constant bets of Waudby-Smith & Ramdas, arXiv 2010.09686, §5.6, on a geometric
    grid). ``m`` has the leading shape of ``x``. Each factor is monotone in m and in every
    value: the capital is non-increasing in m and in the values' fall when ``up``, and the
    other way round otherwise."""
    m = np.clip(m, 1e-300, 1.0 - 1e-16)[..., None, None]
    f = np.asarray(BET_FRACTIONS)[:, None]
    xx = x[..., None, :]
    with np.errstate(divide="ignore"):
        if up:
            logs = np.log1p(f / m * (xx - m)).sum(axis=-1)
        else:
            logs = np.log1p(-f / (1.0 - m) * (xx - m)).sum(axis=-1)
    top = logs.max(axis=-1)
    return top + np.log(np.exp(logs - top[..., None]).mean(axis=-1))


def betting_bounds(x: np.ndarray, confidence: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The hedged betting interval of the mean of values in [0, 1] (last axis, in the order
    drawn): ``{m : max(K+_n(m), K-_n(m)) / 2 < 1 / (1 - confidence)}`` with the capitals of
    :func:`_log_capital` (Waudby-Smith & Ramdas, arXiv 2010.09686, Theorem 3 and §5): its
    coverage is at least ``confidence`` for every distribution on [0, 1] and every n, by
    Ville's inequality. The ends are found by bisection and rounded outwards."""
    x = np.asarray(x, dtype=float)
    crit = np.log(2.0 / (1.0 - np.asarray(confidence, dtype=float)))
    crit = np.broadcast_to(crit, x.shape[:-1])[..., None]
    ends = []
    for up in (True, False):
        # [a, b]: a end of the interval lies in it; a: rejected (up) or not, b the other way
        a, b = np.zeros(x.shape[:-1]), np.ones(x.shape[:-1])
        for _ in range(_ROUNDS):
            m = a[..., None] + (b - a)[..., None] * np.linspace(0.0, 1.0, _GRID + 1)
            rej = _log_capital(x[..., None, :], m, up) >= crit
            # up: rejected below the end (K+ non-increasing in m); below: rejected above it
            k = (rej.sum(axis=-1) if up else _GRID + 1 - rej.sum(axis=-1)) - 1
            k = np.clip(k, 0, _GRID - 1)
            a, b = np.take_along_axis(m, k[..., None], -1)[..., 0], np.take_along_axis(
                m, k[..., None] + 1, -1)[..., 0]  # fmt: skip
        ends.append(a if up else b)  # rounded outwards: the interval only widens
    lo, hi = ends
    return lo, hi


def betting_p(x: np.ndarray, m: float, up: bool) -> float:
    """The p-value ``min(1, 2 / K_n(m))`` of the capital of :func:`betting_bounds` at m (``up``:
    betting that the mean is above m): the smallest ``1 - confidence`` whose interval
    excludes m on that side."""
    x = np.asarray(x, dtype=float)
    logk = float(_log_capital(x, np.asarray(float(m)), up))
    return float(min(1.0, 2.0 * math.exp(-logk))) if logk > -700 else 1.0


def mean_interval(values, level: float, lower: float, upper: float) -> tuple[float, float] | None:
    """The mean of ``values`` (independent draws of one variable on ``[lower, upper]``, in
    an order that does not depend on them, e.g. by seed) and its interval at ``level``: the
    betting interval of Waudby-Smith & Ramdas (:func:`betting_bounds`), valid for every
    distribution on the range at every number of values, deterministic, never outside the
    range (docs/science.md §13). None without values or without a finite range; a
    ValueError for a value outside the range."""
    x = np.asarray(values, dtype=float).ravel()
    if not len(x) or not (math.isfinite(lower) and math.isfinite(upper)) or upper <= lower:
        return None
    if not np.all(np.isfinite(x)) or x.min() < lower or x.max() > upper:
        bad = x[~((x >= lower) & (x <= upper))][:3]
        raise ValueError(f"values {bad.tolist()} outside the range [{lower:g}, {upper:g}]")
    lo, hi = betting_bounds((x - lower) / (upper - lower), level)
    span = upper - lower
    return max(lower, lower + float(lo) * span), min(upper, lower + float(hi) * span)


def median_interval(values, level: float) -> tuple[float, float] | None:
    """The order-statistic interval of the median of ``values`` at ``level`` (exact for any
    continuous distribution, conservative with ties); None when there are too few values
    for the level (docs/science.md §13)."""
    iv = quantile_interval(np.asarray(values, dtype=float), 0.5, level)
    return (iv.lo, iv.hi) if iv.defined else None


def share_interval(successes: int, n: int, level: float) -> tuple[float, float] | None:
    """The exact binomial (Clopper-Pearson) interval of a share of ``successes`` of ``n`` at
    ``level``: coverage at least ``level`` for every true share; None for n = 0."""
    iv = binomial_interval(successes, n, level)
    return (iv.lo, iv.hi) if iv.defined else None


def mean_iv(values: np.ndarray, confidence: float, bounds: tuple[float, float] | None) -> Interval:
    """The mean of ``values`` and its betting interval on the range ``bounds``
    (:func:`mean_interval`) as an :class:`Interval`; none with the reason where the variable
    has no finite range or a value leaves it."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    estimate = float(x.mean()) if n else math.nan
    basis = ({"method": MEAN, "n": n, "level": confidence},)
    if bounds is None:
        why = "no finite range declared for the variable: no mean interval (attnsvm.variables)"
        return replace(Interval.none(confidence, why, estimate, n), basis=basis)
    if not n:
        return replace(Interval.none(confidence, "no values"), basis=basis)
    try:
        iv = mean_interval(x, confidence, *bounds)
    except ValueError as e:
        return replace(Interval.none(confidence, str(e), estimate, n), basis=basis)
    return Interval(estimate, iv[0], iv[1], confidence, MEAN, n, basis)


def aggregate_interval(
    aggregate: str, values: np.ndarray, confidence: float, q: float | None = None,
    bounds: tuple[float, float] | None = None,
) -> Interval:  # fmt: skip
    """The interval of one aggregate of one set of independent values (module docstring);
    ``bounds``: the range of a mean's values."""
    x = np.asarray(values, dtype=float)
    if aggregate == "share":
        return binomial_interval(int(x.sum()), len(x), confidence)
    if aggregate == "mean":
        return mean_iv(x, confidence, bounds)
    return quantile_interval(x, 0.5 if aggregate == "median" else float(q), confidence)


# --------------------------------------------------------------------------- combinations
def _bases(intervals: Sequence[Interval]) -> tuple:
    return tuple(b for iv in intervals for b in iv.basis)


def _first_missing(intervals: Sequence[Interval]) -> Interval | None:
    return next((iv for iv in intervals if not iv.defined), None)


def union(intervals: Sequence[Interval], estimate: float, confidence: float) -> Interval:
    """``[min lo, max hi]`` of intervals that hold together at ``confidence`` (each at its
    Bonferroni level): it holds every one of their parameters, so any average of them (a
    pooled mean or share) or mixture quantile; none if one of them is."""
    if not intervals:
        return Interval.none(confidence, "no grid point", estimate)
    missing = _first_missing(intervals)
    if missing is not None:
        return replace(missing, estimate=estimate, confidence=confidence,
                       basis=_bases(intervals))  # fmt: skip
    lo, hi = min(iv.lo for iv in intervals), max(iv.hi for iv in intervals)
    method = intervals[0].method if len({iv.method for iv in intervals}) == 1 else "mixed"
    return Interval(estimate, lo, hi, confidence, f"{method}, union of {len(intervals)} points",
                    sum(iv.n for iv in intervals), _bases(intervals))  # fmt: skip


def difference(a: Interval, b: Interval, sign: float, confidence: float, estimate: float):
    """``sign * (b - a)`` from two intervals that hold together at ``confidence`` (each at
    ``bonferroni(confidence, 2)``): exact for any dependence between them."""
    missing = _first_missing([a, b])
    if missing is not None:
        why = Interval.none(confidence, missing.method, estimate, missing.n)
        return replace(why, basis=_bases([a, b]))
    lo, hi = (b.lo - a.hi, b.hi - a.lo) if sign > 0 else (a.lo - b.hi, a.hi - b.lo)
    return Interval(estimate, lo, hi, confidence, f"difference of {a.method} intervals",
                    min(a.n, b.n), _bases([a, b]))  # fmt: skip


def combination(
    weights: Sequence[float], intervals: Sequence[Interval], confidence: float, estimate: float,
    log: bool = False,
) -> Interval:  # fmt: skip
    """``sum_j w_j theta_j`` (``log theta_j`` with ``log``) from intervals that hold together
    at ``confidence`` (each at its Bonferroni level): its extremes over the box of
    intervals, exact for any dependence; a non-positive end under ``log`` is ``-inf``."""
    missing = _first_missing(intervals)
    if missing is not None:
        why = Interval.none(confidence, missing.method, estimate, missing.n)
        return replace(why, basis=_bases(intervals))

    def f(v: float) -> float:
        if not log:
            return v
        return math.log(v) if v > 0 else -math.inf

    lo = hi = 0.0
    with np.errstate(invalid="ignore"):
        for w, iv in zip(weights, intervals, strict=True):
            a, b = f(iv.lo), f(iv.hi)
            lo += w * (a if w > 0 else b)
            hi += w * (b if w > 0 else a)
    if math.isnan(lo) or math.isnan(hi):
        lo, hi = -math.inf, math.inf
    return Interval(estimate, lo, hi, confidence,
                    f"combination of {len(intervals)} {intervals[0].method} intervals",
                    min(iv.n for iv in intervals), _bases(intervals))  # fmt: skip


def widen(iv: Interval, lo: float, hi: float, why: str) -> Interval:
    """``iv`` widened to contain ``[lo, hi]`` (the spread of the points it pools)."""
    if not iv.defined or (iv.lo <= lo and hi <= iv.hi):
        return iv
    return replace(iv, lo=min(iv.lo, lo), hi=max(iv.hi, hi), method=f"{iv.method}, {why}")


# --------------------------------------------------------------------------- verdicts
def verdict(lo: float, hi: float, op: str, threshold) -> str:
    """PASS, FAIL or INCONCLUSIVE of an interval ``[lo, hi]`` against ``op threshold``
    (docs/science.md §13): the whole interval on the predicted side, on the other side, or
    neither (a NaN interval is INCONCLUSIVE)."""
    if math.isnan(lo) or math.isnan(hi):
        return "INCONCLUSIVE"
    if op == "between":
        a, b = threshold
        if a <= lo and hi <= b:
            return "PASS"
        return "FAIL" if hi < a or lo > b else "INCONCLUSIVE"
    t = float(threshold)
    passes, fails = {
        ">=": (lo >= t, hi < t),
        ">": (lo > t, hi <= t),
        "<=": (hi <= t, lo > t),
        "<": (hi < t, lo >= t),
    }[op]
    return "PASS" if passes else "FAIL" if fails else "INCONCLUSIVE"


def combine(verdicts: Sequence[str]) -> str:
    """The verdict of claims that must all hold: FAIL if one fails, PASS if all pass."""
    if not verdicts or "INCONCLUSIVE" in verdicts and "FAIL" not in verdicts:
        return "INCONCLUSIVE"
    return "FAIL" if "FAIL" in verdicts else "PASS"


def ols_weights(x: Sequence[float]) -> np.ndarray:
    """``w`` with ``sum_j w_j y_j`` the least-squares slope of ``y`` on ``x``."""
    xa = np.asarray(x, dtype=float)
    xc = xa - xa.mean()
    return xc / (xc * xc).sum()
