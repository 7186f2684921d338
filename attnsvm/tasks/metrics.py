"""Metrics of docs/science.md §5 (Metrics): correlation, rank, softmax mass, convergence type,
and the convergence rates of a trajectory (§14).

The convergence types are the code tables :data:`attnsvm.codes.CONVERGENCE` (the paper's rule,
:func:`selection_type`) and :data:`attnsvm.codes.CONVERGENCE_STRICT` (:func:`convergence_type`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnsvm.variables import RATE_PARTS, RATES


def corr(A: np.ndarray | None, B: np.ndarray | None) -> float:
    """``corr(A, B) = <A, B> / (||A||_F ||B||_F)`` (docs/science.md §5); NaN if undefined."""
    if A is None or B is None:
        return float("nan")
    a, b = np.asarray(A, dtype=np.float64).ravel(), np.asarray(B, dtype=np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if not (np.isfinite(na) and np.isfinite(nb)) or na == 0 or nb == 0:
        return float("nan")
    return float(a @ b / (na * nb))


def corr_batch(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Correlation over the trailing two axes of broadcastable stacks of matrices."""
    num = np.sum(A * B, axis=(-2, -1))
    den = np.linalg.norm(A, axis=(-2, -1)) * np.linalg.norm(B, axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def corr_curve(Wk: np.ndarray, B: np.ndarray | None) -> np.ndarray:
    """``corr(W(k), B)`` at every checkpoint of ``Wk`` (C, d, d); NaN without B (an SVM not
    solved)."""
    return np.full(len(Wk), np.nan) if B is None else corr_batch(Wk, B[None])


def singular_values(W: np.ndarray) -> np.ndarray:
    """Singular values of W, descending."""
    return np.linalg.svd(np.asarray(W, dtype=np.float64), compute_uv=False)


def rank(W: np.ndarray | None, rel_tol: float = 1e-6, s: np.ndarray | None = None) -> int:
    """Number of singular values with ``sigma_i / sigma_1 > rel_tol`` (docs/science.md §5).

    The tolerance is relative (docs/science.md §7: absolute tolerances are a known pitfall).
    Returns -1 for a missing matrix (an infeasible SVM has no rank, never rank 1). ``s``:
    W's :func:`singular_values` when the caller has them (the same numbers).
    """
    if W is None or not np.all(np.isfinite(W)):
        return -1
    s = singular_values(W) if s is None else s
    if s.size == 0 or s[0] == 0:
        return 0
    return int(np.sum(s / s[0] > rel_tol))


def effective_rank(W: np.ndarray | None, s: np.ndarray | None = None) -> float:
    """Effective rank ``exp(H(p))``, ``p = sigma / sum(sigma)`` (Roy & Vetterli 2007; ``s``:
    W's :func:`singular_values` when the caller has them)."""
    if W is None or not np.all(np.isfinite(W)):
        return float("nan")
    s = singular_values(W) if s is None else s
    if s.sum() == 0:
        return 0.0
    p = s / s.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def selected_tokens(softmax: np.ndarray) -> np.ndarray:
    """GD's selection ``alpha_i = argmax_t s_it`` over the last axis."""
    return np.argmax(softmax, axis=-1)


def softmax_mass(softmax: np.ndarray) -> np.ndarray:
    """Softmax mass on the selected token, ``mean_i max_t s_it`` (reduces the last two axes)."""
    return softmax.max(axis=-1).mean(axis=-1)


def is_saturated(softmax: np.ndarray, tol: float) -> bool:
    """Whether softmax selects one token per example: ``min_i max_t s_it >= 1 - tol``."""
    return bool(softmax.max(axis=-1).min() >= 1.0 - tol)


def selection_type(*, alpha_is_opt: bool, locally_optimal: bool) -> str:
    """Convergence type by GD's selection alpha at the last iterate (docs/science.md §5).

    global if alpha = opt; local if alpha != opt and alpha is locally optimal (Att-SVM(alpha)
    feasible, every support token scores below the selected one); not-local otherwise (an
    infeasible alpha included). Whether the run has converged (saturated softmax, corr with
    SVM(alpha) >= threshold) is a separate diagnostic, not a class: this is the paper's rule.
    """
    if alpha_is_opt:
        return "global"
    return "local" if locally_optimal else "not-local"


def corr_converged(correlation: float, threshold: float) -> bool:
    """Whether ``corr(W_GD, SVM(alpha)) >= threshold`` (False for an undefined correlation)."""
    return bool(np.isfinite(correlation) and correlation >= threshold)


def convergence_type(
    *,
    saturated: bool,
    alpha_is_opt: bool,
    locally_optimal: bool,
    correlation: float,
    threshold: float,
) -> str:
    """Convergence type of a GD run by the strict rule (docs/science.md §5).

    unsaturated if the softmax does not yet select one token; global if alpha = opt and
    corr >= threshold; local if alpha != opt, alpha locally optimal and corr >= threshold;
    not-local otherwise (including an infeasible selection, whose correlation is NaN).
    """
    if not saturated:
        return "unsaturated"
    close = corr_converged(correlation, threshold)
    if close and alpha_is_opt:
        return "global"
    if close and locally_optimal:
        return "local"
    return "not-local"


# ------------------------------------------------------------------ convergence rates (§14)
#: checkpoints a rate fit needs in the tail window (docs/science.md §14)
MIN_FIT_POINTS = 5
#: confidence level of a rate's interval
RATE_CONFIDENCE = 0.95
#: values of 1 - corr at or below this are rounding, not convergence: a float64 correlation
#: carries an error of a few 1e-16 (docs/science.md §14)
CORR_GAP_FLOOR = 1e-12


def tail_window(iterations: np.ndarray) -> np.ndarray:
    """The tail of a trajectory: the checkpoints ``k >= sqrt(K)`` of the last one ``K`` (the
    last half on a log scale; docs/science.md §14)."""
    it = np.asarray(iterations, dtype=float)
    return it >= np.sqrt(it.max()) if it.size else np.zeros(0, bool)


def tail_points(iterations: Sequence[int]) -> int:
    """How many of ``iterations`` lie in the tail window (:func:`tail_window`)."""
    return int(tail_window(np.asarray(iterations)).sum())


@dataclass(frozen=True)
class RateFit:
    """A fitted decay ``y(k) ~ C k^(-rate)`` over the tail (docs/science.md §14): ``rate`` with
    its ``RATE_CONFIDENCE`` interval ``(lo, hi)``, the number of checkpoints used and the
    first and last iteration of the fit (NaN when fewer than MIN_FIT_POINTS are usable)."""

    rate: float
    lo: float
    hi: float
    points: int
    first: float
    last: float

    def scalars(self, name: str) -> dict[str, float]:
        """``rate_<name>``, ``rate_<name>_lo`` ... as stored (:data:`RATE_PARTS`)."""
        values = (self.rate, self.lo, self.hi, float(self.points), self.first, self.last)
        return {f"rate_{name}{part}": v for part, v in zip(RATE_PARTS, values, strict=True)}


def tail_rate(iterations: np.ndarray, values: np.ndarray, floor: float = 0.0) -> RateFit:
    """Least-squares fit of ``log y = a - rate log k`` over the tail window (docs/science.md
    §14; the rate of Vasudeva, Deora, Thrampoulidis, arXiv 2402.05738, measured).

    Uses the checkpoints of :func:`tail_window` whose value is finite and above ``floor``
    (and positive); the interval is the t interval of the slope
    (:func:`scipy.stats.linregress`'s standard error, ``len - 2`` degrees of freedom).
    :func:`_linregress_slope` and ``scipy.special.stdtrit`` give the numbers of
    ``scipy.stats.linregress`` and ``scipy.stats.t.ppf`` bit for bit, without their
    per-call wrapper cost (about 2 ms a fit, two fits a cell).
    """
    from scipy import special  # deferred: config checks import this module (claims), not fits

    k = np.asarray(iterations, dtype=float)
    y = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        use = tail_window(k) & np.isfinite(y) & (y > max(floor, 0.0)) & (k > 0)
    n = int(use.sum())
    if n < MIN_FIT_POINTS:
        return RateFit(np.nan, np.nan, np.nan, n, np.nan, np.nan)
    slope, stderr = _linregress_slope(np.log(k[use]), np.log(y[use]))
    half = float(special.stdtrit(n - 2, 0.5 + RATE_CONFIDENCE / 2)) * stderr
    rate = -slope
    return RateFit(rate, rate - half, rate + half, n, float(k[use][0]), float(k[use][-1]))


def _linregress_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Slope and its standard error, ``scipy.stats.linregress``'s formulas and operations
    (at least 3 points, x not constant: :func:`tail_rate`'s window)."""
    ssxm, ssxym, _, ssym = np.cov(x, y, bias=1).flat
    if ssxm == 0.0 or ssym == 0.0:
        r = np.asarray(np.nan if ssxym == 0 else 0.0)[()]
    else:
        r = min(max(ssxym / np.sqrt(ssxm * ssym), -1.0), 1.0)
    slope = ssxym / ssxm
    return float(slope), float(np.sqrt((1 - r**2) * ssym / ssxm / (len(x) - 2)))


def offselection_mass(softmax: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``mean_i sum_{t != alpha_i} s_it`` at every checkpoint (``softmax``: (C, n, T)): summed
    directly, not as ``1 - s_{i alpha_i}``, so that it stays exact far below 1e-16."""
    s = np.asarray(softmax, dtype=float)
    selected = np.arange(s.shape[-1]) == np.asarray(alpha)[:, None]  # (n, T)
    return np.where(selected, 0.0, s).sum(axis=-1).mean(axis=-1)


def trajectory_rates(
    iterations: np.ndarray, corr: np.ndarray, offmass: np.ndarray
) -> dict[str, float]:
    """The stored rate scalars of a trajectory (:data:`RATES`, :data:`RATE_PARTS`) from its
    correlation with the SVM and its :func:`offselection_mass` at every checkpoint."""
    with np.errstate(invalid="ignore"):
        gap = 1.0 - np.asarray(corr, dtype=float)
    out = tail_rate(iterations, gap, CORR_GAP_FLOOR).scalars("corr")
    out.update(tail_rate(iterations, offmass).scalars("mass"))
    return out


def rate_scalars() -> tuple[str, ...]:
    """The names of every stored rate scalar."""
    return tuple(f"rate_{name}{part}" for name in RATES for part in RATE_PARTS)
