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

import numpy as np

#: bootstrap resamples of the seeds behind a boundary's interval
BOOTSTRAP = 2000
#: fewest seeds for a percentile bootstrap interval (fewer: none, as for a mean, §13)
MIN_SEEDS = 10


def crossing(across: np.ndarray, curve: np.ndarray, level: float, decreasing: bool) -> float:
    """The first ``c`` of the increasing grid ``across`` at which ``curve`` passes ``level``
    (falls to or below it when ``decreasing``, else rises to or above it), interpolated
    linearly in ``log c`` between the two grid values around it (eq. (15.14)); NaN where the
    crossing is not inside the grid (the curve starts past the level or never gets there)."""
    x = np.log(np.asarray(across, dtype=float))
    y = np.asarray(curve, dtype=float)
    s = (level - y) if decreasing else (y - level)  # >= 0: past the level
    past = np.flatnonzero(s >= 0)
    if not len(past) or not np.all(np.isfinite(y[: past[0] + 1])):
        return math.nan
    j = int(past[0])
    if j == 0:
        return math.nan
    t = s[j - 1] / (s[j - 1] - s[j])  # s[j-1] < 0 <= s[j]
    return float(np.exp(x[j - 1] + t * (x[j] - x[j - 1])))


def boundaries(
    along: np.ndarray, across: np.ndarray, means: np.ndarray, level: float, decreasing: bool
) -> np.ndarray:
    """``c*(a)`` for each value of ``along`` from ``means`` (along, across)."""
    return np.array([crossing(across, m, level, decreasing) for m in means])


def log_slope(along: np.ndarray, bounds: np.ndarray) -> float:
    """Least-squares slope of ``log c*`` against ``log a`` (NaN if any boundary is missing)."""
    if not np.all(np.isfinite(bounds)) or np.any(bounds <= 0):
        return math.nan
    x, y = np.log(np.asarray(along, dtype=float)), np.log(bounds)
    x = x - x.mean()
    return float(x @ (y - y.mean()) / (x @ x))


def boundary_fit(
    along: np.ndarray, across: np.ndarray, values: np.ndarray, level: float, decreasing: bool,
    confidence: float, seed: int, resamples: int = BOOTSTRAP,
) -> dict:  # fmt: skip
    """The boundaries and their slope from ``values`` (seeds, along, across) with percentile
    intervals from resampling the seeds (rows) with replacement: ``{"bounds", "bounds_lo",
    "bounds_hi", "slope", "slope_lo", "slope_hi", "undefined"}``. ``undefined``: the share of
    resamples in which a boundary is missing (outside the grid); the slope's interval is NaN
    when it exceeds the interval's tail ``(1 - confidence) / 2``, as it then depends on
    where the grid ends, and below :data:`MIN_SEEDS` seeds."""
    values = np.asarray(values, dtype=float)
    S = values.shape[0]
    bounds = boundaries(along, across, np.nanmean(values, axis=0), level, decreasing)
    rng = np.random.default_rng(seed)
    boot_b = np.empty((resamples, len(along)))
    for b in range(resamples):
        pick = rng.integers(0, S, S)
        boot_b[b] = boundaries(along, across, np.nanmean(values[pick], axis=0), level, decreasing)
    slopes = np.array([log_slope(along, bb) for bb in boot_b])
    tail = (1.0 - confidence) / 2.0
    undefined = float(np.mean(~np.isfinite(slopes)))
    out = {"bounds": bounds, "slope": log_slope(along, bounds), "undefined": undefined}
    with np.errstate(all="ignore"):
        lo_b = np.nanquantile(np.where(np.isfinite(boot_b), boot_b, np.inf), tail, axis=0)
        hi_b = np.nanquantile(np.where(np.isfinite(boot_b), boot_b, np.inf), 1 - tail, axis=0)
    out["bounds_lo"], out["bounds_hi"] = lo_b, hi_b
    if undefined > tail or S < MIN_SEEDS:
        out["slope_lo"] = out["slope_hi"] = math.nan
    else:  # the missing ones count on both sides: the interval can only widen
        fin = np.sort(slopes[np.isfinite(slopes)])
        k = len(slopes) - len(fin)
        out["slope_lo"] = float(np.quantile(np.r_[np.full(k, -np.inf), fin], tail))
        out["slope_hi"] = float(np.quantile(np.r_[fin, np.full(k, np.inf)], 1 - tail))
    return out
