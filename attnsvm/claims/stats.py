"""Estimates, confidence intervals and verdicts of claims (docs/science.md §13).

A claim's estimate is an aggregate of per-seed values (mean, median, a quantile, or the share
of seeds meeting a per-seed condition), or a statistic of several such aggregates along an
axis (the steps of a monotone trend, a fitted slope). The seed is the unit: seeds are
independent, the grid points a seed visits are not (a seed fixes the data of every point of
the same shapes). The intervals, each at a level L:

- a mean: the studentized bootstrap (bootstrap-t) of the values, :data:`N_RESAMPLES`
  resamples, with tail areas of ``(1 - L) / 4`` each (:data:`MEAN_TAIL_FACTOR`: half of
  the nominal ``(1 - L) / 2``, a margin that the calibration measures);
- a median or quantile: the order-statistic (binomial) interval, exact for any continuous
  distribution and conservative with ties;
- a share: the exact binomial (Clopper-Pearson) interval of :func:`scipy.stats.binomtest`;
- several points at once: the union of their intervals at the Bonferroni level
  (:func:`union`), which holds every point's parameter, and so any average or mixture of
  them, whatever the dependence between points;
- a difference or linear combination of such intervals (:func:`difference`,
  :func:`combination`): exact for any dependence between them, by Bonferroni.

A method is used only at the numbers of values and levels where its coverage is calibrated
(:mod:`attnsvm.claims.table`): outside them the interval is :meth:`Interval.none` with the
reason, and the verdict INCONCLUSIVE. The bootstrap's generator is seeded from the claim's
name, so a verdict is reproducible and independent of the other claims.

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

from attnsvm.claims import table

#: verdicts, best first
VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE")
#: resamples of the studentized bootstrap (enough for tails of 0.05 / 256 each)
N_RESAMPLES = 49999
#: the mean's tails are this share of the nominal ones (docs/science.md §13)
MEAN_TAIL_FACTOR = 0.5
#: values drawn per block of resamples (bounded memory; the blocks depend on n only)
_RESAMPLE_BLOCK = 1 << 20
#: order statistics a bootstrap tail needs: beyond, the level is past the resamples' reach
MIN_TAIL_RESAMPLES = 5

#: the method names, as the ledger and the calibration table spell them
MEAN = "studentized bootstrap"
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


def bootstrap_t_quantiles(
    t: np.ndarray, confidence: float, tail_factor: float = MEAN_TAIL_FACTOR
) -> tuple[np.ndarray, np.ndarray] | None:
    """The lower and upper ``a``-quantiles of studentized resamples ``t`` (last axis: the
    resamples), ``a = tail_factor (1 - confidence) / 2``, as order statistics (the
    ``floor((B + 1) a)``-th from each end); None when that is fewer than
    :data:`MIN_TAIL_RESAMPLES`."""
    B = t.shape[-1]
    j = tail_rank(B, confidence, tail_factor)
    if j is None:
        return None
    part = np.partition(t, (j - 1, B - j), axis=-1)
    return part[..., j - 1], part[..., B - j]


def tail_rank(B: int, confidence: float, tail_factor: float = MEAN_TAIL_FACTOR) -> int | None:
    """The rank ``floor((B + 1) a)`` of a bootstrap tail of area ``a = tail_factor (1 -
    confidence) / 2`` among B resamples; None below :data:`MIN_TAIL_RESAMPLES`."""
    j = math.floor((B + 1) * tail_factor * (1.0 - confidence) / 2.0 + 1e-9)
    return j if j >= MIN_TAIL_RESAMPLES else None


def studentized(mb: np.ndarray, m2b: np.ndarray, n: int) -> np.ndarray:
    """Studentized resamples ``(mean* - mean) / se*`` from the resamples' means ``mb`` and
    mean squares ``m2b`` of centred values (``m2b`` is overwritten); a resample of equal
    values gives +-inf (0 when its mean is the sample's)."""
    var = m2b
    var -= mb * mb  # the resample's variance with 1/n: se* = sqrt(var / (n - 1))
    np.maximum(var, 0.0, out=var)
    np.sqrt(var, out=var)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.divide(mb, var, out=var)
    t *= math.sqrt(n - 1)
    bad = np.isnan(t)
    if bad.any():  # 0 / 0: a resample of equal values at the sample's mean
        t[bad] = 0.0
    return t


def mean_interval(values: np.ndarray, confidence: float, seed: int) -> Interval:
    """The mean of ``values`` and its studentized bootstrap interval (module docstring),
    where the calibration table has it calibrated; none with the reason otherwise, or when
    the values take fewer than three distinct values (the calibration is for continuous
    data: a claim on a count or a flag is a median or a share)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    estimate = float(x.mean()) if n else math.nan
    basis = ({"method": MEAN, "n": n, "level": confidence},)
    need = table.mean_n_min(confidence)
    why = None
    if need is None:
        why = f"no calibrated mean interval at level {confidence:.6g}"
    elif n < need:
        why = f"{n} values: no calibrated mean interval at {confidence:.4g} below {need}"
    elif len(np.unique(x)) < 3:
        why = (f"the values take {len(np.unique(x))} distinct value(s): a mean's interval is "
               "calibrated for continuous data (state a median or a share)")  # fmt: skip
    if why is not None:
        return replace(Interval.none(confidence, why, estimate, n), basis=basis)
    rng = np.random.default_rng(seed)
    xc = x - estimate
    t = np.empty(N_RESAMPLES)
    step = max(1, _RESAMPLE_BLOCK // n)  # resamples drawn per block: bounded memory
    for start in range(0, N_RESAMPLES, step):
        res = xc[rng.integers(0, n, size=(min(step, N_RESAMPLES - start), n))]
        t[start : start + len(res)] = studentized(res.mean(axis=1), (res * res).mean(axis=1), n)
    tails = bootstrap_t_quantiles(t, confidence)
    if tails is None:
        why = f"level {confidence:.6g} beyond the resamples"
        return replace(Interval.none(confidence, why, estimate, n), basis=basis)
    lower_t, upper_t = tails
    se = float(x.std(ddof=1)) / math.sqrt(n)
    lo, hi = estimate - float(upper_t) * se, estimate - float(lower_t) * se
    if not (math.isfinite(lo) and math.isfinite(hi)):
        why = (f"{n} values: too few distinct resamples to bound the studentized bootstrap's "
               f"tail at {confidence:.4g}")  # fmt: skip
        return replace(Interval.none(confidence, why, estimate, n), basis=basis)
    return Interval(estimate, lo, hi, confidence, MEAN, n, basis)


def aggregate_interval(
    aggregate: str, values: np.ndarray, confidence: float, seed: int, q: float | None = None
) -> Interval:
    """The interval of one aggregate of one set of independent values (module docstring)."""
    x = np.asarray(values, dtype=float)
    if aggregate == "share":
        return binomial_interval(int(x.sum()), len(x), confidence)
    if aggregate == "mean":
        return mean_interval(x, confidence, seed)
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
