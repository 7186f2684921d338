"""Estimates, confidence intervals and verdicts of claims (docs/science.md §13).

A claim's estimate is an aggregate of per-seed values (mean, median, a quantile, or the share
of seeds meeting a per-seed condition), or a statistic of several such aggregates along an
axis (the steps of a monotone trend, a fitted slope). Its interval is

- for a share: the exact binomial (Clopper-Pearson) interval of :func:`scipy.stats.binomtest`;
- otherwise: a seeded bootstrap over seeds (:func:`scipy.stats.bootstrap`, BCa, 9999
  resamples) that resamples the seeds of every grid point separately (a stratified bootstrap:
  the grid is a design, not a sample), so that pooled and trend estimates keep each point's
  number of seeds.

Both come from scipy rather than hand-written code; the bootstrap's generator is seeded from
the claim's name, so a verdict is reproducible and independent of the other claims. A
bootstrap needs at least :data:`MIN_VALUES` values per group: fewer give INCONCLUSIVE.

The verdict compares the interval with the threshold: PASS when it lies entirely on the
predicted side, FAIL when it lies entirely on the other side, INCONCLUSIVE when it straddles
the threshold (or there is too little evidence).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: verdicts, best first
VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE")
#: values a bootstrap needs in every group (fewer: INCONCLUSIVE; docs/science.md §13)
MIN_VALUES = 5
#: bootstrap resamples
N_RESAMPLES = 9999

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


@dataclass(frozen=True)
class Interval:
    """An estimate, its interval at ``confidence`` and how the interval was computed."""

    estimate: float
    lo: float
    hi: float
    confidence: float
    method: str

    @classmethod
    def none(cls, confidence: float, why: str, estimate: float = math.nan) -> Interval:
        return cls(estimate, math.nan, math.nan, confidence, why)


def seed_of(*parts: str) -> int:
    """A reproducible 64-bit seed of a claim's names (sha256), the same on every machine."""
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def binomial_interval(successes: int, n: int, confidence: float) -> Interval:
    """Share ``successes / n`` and its exact (Clopper-Pearson) interval."""
    if n == 0:
        return Interval.none(confidence, "no values")
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence, method="exact")
    return Interval(successes / n, float(ci.low), float(ci.high), confidence, "exact binomial")


def bootstrap_interval(
    strata: Sequence[np.ndarray],
    statistic: Callable[[Sequence[np.ndarray], int], np.ndarray],
    confidence: float,
    seed: int,
) -> Interval:
    """``statistic`` of ``strata`` and its stratified bootstrap interval.

    ``statistic(samples, axis)``: vectorized over the leading axes of each sample (the
    resamples); every stratum is resampled on its own. BCa where defined; where BCa is not
    (every resample equal, e.g. all values identical) the percentile interval, which is then
    the point itself.
    """
    data = tuple(np.asarray(s, dtype=float) for s in strata)
    estimate = float(statistic(data, -1))
    if not math.isfinite(estimate):
        return Interval.none(confidence, "estimate undefined", estimate)

    def stat(*samples, axis=-1):
        return statistic(samples, axis)

    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # degenerate data: handled by the fallback
            res = stats.bootstrap(
                data,
                stat,
                n_resamples=N_RESAMPLES,
                vectorized=True,
                paired=False,
                confidence_level=confidence,
                method=method,
                rng=np.random.default_rng(seed),
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return Interval(estimate, lo, hi, confidence, f"bootstrap {method}")
    return Interval.none(confidence, "bootstrap undefined", estimate)


def verdict(lo: float, hi: float, op: str, threshold) -> str:
    """PASS, FAIL or INCONCLUSIVE of an interval ``[lo, hi]`` against ``op threshold``
    (docs/science.md §13): the whole interval on the predicted side, on the other side, or
    neither (a NaN interval is INCONCLUSIVE)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
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


def bonferroni(confidence: float, tests: int) -> float:
    """The confidence of each of ``tests`` intervals that hold together at ``confidence``."""
    return 1.0 - (1.0 - confidence) / max(tests, 1)


def ols_slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of ``y`` (last axis: the points, leading axes: resamples) on
    ``x``."""
    xc = x - x.mean()
    return (y * xc).sum(axis=-1) / (xc * xc).sum()
