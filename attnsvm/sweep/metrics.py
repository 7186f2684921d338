"""Metrics of docs/science.md §5 (Metrics): correlation, rank, softmax mass, convergence type.

The convergence types are the code tables :data:`attnsvm.codes.CONVERGENCE` (the paper's rule,
:func:`selection_type`) and :data:`attnsvm.codes.CONVERGENCE_STRICT` (:func:`convergence_type`).
"""

from __future__ import annotations

import numpy as np


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


def singular_values(W: np.ndarray) -> np.ndarray:
    """Singular values of W, descending."""
    return np.linalg.svd(np.asarray(W, dtype=np.float64), compute_uv=False)


def rank(W: np.ndarray | None, rel_tol: float = 1e-6) -> int:
    """Number of singular values with ``sigma_i / sigma_1 > rel_tol`` (docs/science.md §5).

    The tolerance is relative (docs/science.md §7: absolute tolerances are a known pitfall).
    Returns -1 for a missing matrix (an infeasible SVM has no rank, never rank 1).
    """
    if W is None or not np.all(np.isfinite(W)):
        return -1
    s = singular_values(W)
    if s.size == 0 or s[0] == 0:
        return 0
    return int(np.sum(s / s[0] > rel_tol))


def effective_rank(W: np.ndarray | None) -> float:
    """Effective rank ``exp(H(p))``, ``p = sigma / sum(sigma)`` (Roy & Vetterli 2007)."""
    if W is None or not np.all(np.isfinite(W)):
        return float("nan")
    s = singular_values(W)
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
