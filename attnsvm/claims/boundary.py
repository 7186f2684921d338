"""The boundary estimator of docs/science.md §15 ("Magen et al.'s own setting", eq. (15.14)):
where a curve crosses a level, and how that crossing moves with a second axis.

Per value ``a`` of the axis ``along`` (e.g. the sample size n) the curve is the mean over the
seeds of a per-cell value (e.g. the excess test error) at each value ``c_j`` of the axis
``across`` (e.g. the SNR); its boundary ``c*(a)`` is the first crossing of ``level`` in the
claim's direction, interpolated linearly in ``log c``. The slope of ``log c*(a)`` against
``log a`` (least squares) is the claim's estimate; its interval resamples the seeds (the
unit: one seed's cells at every grid point share its data stream, docs/science.md §13), the
same resampled seeds at every grid point.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

#: bootstrap resamples of the seeds behind a boundary's interval
BOOTSTRAP = 2000
#: fewest seeds for a percentile bootstrap interval (fewer: none, as for a mean, §13)
MIN_SEEDS = 10


def crossings(across: np.ndarray, curves: np.ndarray, level: float, decreasing: bool) -> np.ndarray:
    """:func:`crossing` of every curve of ``curves`` (..., len(across)) at once."""
    x = np.log(np.asarray(across, dtype=float))
    y = np.asarray(curves, dtype=float)
    s = (level - y) if decreasing else (y - level)  # >= 0: past the level (NaN: not)
    past = s >= 0
    j = np.argmax(past, axis=-1)[..., None]  # the first index past the level
    finite = np.take_along_axis(np.logical_and.accumulate(np.isfinite(y), axis=-1), j, -1)
    ok = past.any(axis=-1) & finite[..., 0] & (j[..., 0] > 0)
    jm = np.maximum(j - 1, 0)
    s0, s1 = np.take_along_axis(s, jm, -1)[..., 0], np.take_along_axis(s, j, -1)[..., 0]
    with np.errstate(all="ignore"):
        t = s0 / (s0 - s1)  # s0 < 0 <= s1
        out = np.exp(x[jm[..., 0]] + t * (x[j[..., 0]] - x[jm[..., 0]]))
    return np.where(ok, out, np.nan)


def crossing(across: np.ndarray, curve: np.ndarray, level: float, decreasing: bool) -> float:
    """The first ``c`` of the increasing grid ``across`` at which ``curve`` passes ``level``
    (falls to or below it when ``decreasing``, else rises to or above it), interpolated
    linearly in ``log c`` between the two grid values around it (eq. (15.14)); NaN where the
    crossing is not inside the grid (the curve starts past the level or never gets there)."""
    return float(crossings(across, np.asarray(curve, dtype=float)[None], level, decreasing)[0])


def boundaries(
    along: np.ndarray, across: np.ndarray, means: np.ndarray, level: float, decreasing: bool
) -> np.ndarray:
    """``c*(a)`` for each value of ``along`` from ``means`` (along, across)."""
    return crossings(across, means, level, decreasing)


def log_slopes(along: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """:func:`log_slope` of every row of ``bounds`` (..., len(along))."""
    x = np.log(np.asarray(along, dtype=float))
    x = x - x.mean()
    b = np.asarray(bounds, dtype=float)
    ok = np.all(np.isfinite(b) & (b > 0), axis=-1)
    with np.errstate(all="ignore"):
        y = np.log(b)
        out = ((y - y.mean(axis=-1, keepdims=True)) * x).sum(axis=-1) / (x * x).sum()
    return np.where(ok, out, np.nan)


def log_slope(along: np.ndarray, bounds: np.ndarray) -> float:
    """Least-squares slope of ``log c*`` against ``log a`` (NaN if any boundary is missing)."""
    return float(log_slopes(along, np.asarray(bounds, dtype=float)[None])[0])


def _resampled_means(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """The seeds' mean (along, across) of each of ``resamples`` resamples of the seeds (rows
    of ``values``) with replacement: (resamples, along, across)."""
    S = values.shape[0]
    picks = rng.integers(0, S, (resamples, S))  # the same stream as one draw of S per resample
    flat = values.reshape(S, -1)
    if not np.isnan(flat).any():  # each resample's counts of each seed, one product
        counts = np.zeros((resamples, S))
        np.add.at(counts, (np.arange(resamples)[:, None], picks), 1.0)
        return (counts @ flat / S).reshape(resamples, *values.shape[1:])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a point no resampled seed has
        return np.stack([np.nanmean(values[p], axis=0) for p in picks])


def bootstrap(
    along: np.ndarray, across: np.ndarray, values: np.ndarray, level: float, decreasing: bool,
    seed: int, resamples: int = BOOTSTRAP,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The boundaries (resamples, along) and slopes (resamples,) of ``resamples`` resamples
    of the seeds (rows of ``values``, (seeds, along, across)) with replacement."""
    rng = np.random.default_rng(seed)
    boot_b = crossings(across, _resampled_means(values, rng, resamples), level, decreasing)
    return boot_b, log_slopes(along, boot_b)


def slope_interval(slopes: np.ndarray, confidence: float, seeds: int) -> tuple[float, float]:
    """The percentile interval of the bootstrap ``slopes`` at ``confidence``; NaN when more
    resamples than its tail ``(1 - confidence) / 2`` have no slope (a boundary outside the
    grid: the interval would depend on where the grid ends) and below :data:`MIN_SEEDS`
    seeds. The resamples without a slope count on both sides: the interval only widens."""
    tail = (1.0 - confidence) / 2.0
    if np.mean(~np.isfinite(slopes)) > tail or seeds < MIN_SEEDS:
        return math.nan, math.nan
    fin = np.sort(slopes[np.isfinite(slopes)])
    k = len(slopes) - len(fin)
    with np.errstate(invalid="ignore"):  # -inf next to -inf: the interval is unbounded there
        lo = float(np.quantile(np.r_[np.full(k, -np.inf), fin], tail))
        hi = float(np.quantile(np.r_[fin, np.full(k, np.inf)], 1 - tail))
    return (-math.inf if math.isnan(lo) else lo), (math.inf if math.isnan(hi) else hi)


def boundary_fit(
    along: np.ndarray, across: np.ndarray, values: np.ndarray, level: float, decreasing: bool,
    confidence: float, seed: int, resamples: int = BOOTSTRAP,
) -> dict:  # fmt: skip
    """The boundaries and their slope from ``values`` (seeds, along, across) with percentile
    intervals from resampling the seeds (rows) with replacement (:func:`bootstrap`):
    ``{"bounds", "bounds_lo", "bounds_hi", "slope", "slope_lo", "slope_hi", "undefined"}``.
    ``undefined``: the share of resamples in which a boundary is missing (outside the grid);
    the slope's interval as :func:`slope_interval`."""
    values = np.asarray(values, dtype=float)
    bounds = boundaries(along, across, np.nanmean(values, axis=0), level, decreasing)
    boot_b, slopes = bootstrap(along, across, values, level, decreasing, seed, resamples)
    tail = (1.0 - confidence) / 2.0
    out = {"bounds": bounds, "slope": log_slope(along, bounds),
           "undefined": float(np.mean(~np.isfinite(slopes)))}  # fmt: skip
    with np.errstate(all="ignore"):
        lo_b = np.nanquantile(np.where(np.isfinite(boot_b), boot_b, np.inf), tail, axis=0)
        hi_b = np.nanquantile(np.where(np.isfinite(boot_b), boot_b, np.inf), 1 - tail, axis=0)
    out["bounds_lo"], out["bounds_hi"] = lo_b, hi_b
    out["slope_lo"], out["slope_hi"] = slope_interval(slopes, confidence, values.shape[0])
    return out
