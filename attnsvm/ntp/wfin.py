"""W_fin of docs/science.md §8: the minimizer of the loss on the reduced dataset over the
cyclic subspace S_fin, by Newton's method, certified by its optimality equations."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from attnsvm.ntp.data import NTPData
from attnsvm.ntp.graph import PriorityGraphs
from attnsvm.svm import SVMResult

#: certificate: ||Pi_{S_fin} grad L_bar(W_fin)||_F at most this
GRAD_TOL = 1e-10
MAX_NEWTON = 100


@dataclass(frozen=True)
class Reduced:
    """The reduced dataset: ``F[i, t, b] = x_it^T B_b z_i`` of the kept sequences, ``keep``
    (m, T) the positions in the label's SCC, ``label`` (m, T) the label positions, ``n`` the
    size of the full dataset (the loss is divided by it)."""

    F: np.ndarray
    keep: np.ndarray
    label: np.ndarray
    n: int


def reduced_dataset(data: NTPData, graphs: PriorityGraphs, basis: np.ndarray) -> Reduced:
    """Positions whose token shares the label's SCC in G^(last token); sequences where only
    label positions remain are dropped (docs/science.md §8, "W_fin")."""
    k = data.tokens[:, -1]
    comp = graphs.scc[k[:, None], data.tokens]  # (n, T)
    keep = comp == graphs.scc[k, data.labels][:, None]
    label = data.label_mask
    rows = (keep & ~label).any(axis=1)
    X, Z = data.X[rows], data.Z[rows]
    F = np.einsum("ntd,bde,ne->ntb", X, basis, Z)
    return Reduced(F, keep[rows], label[rows], len(data.labels))


def _loss_grad_hess(red: Reduced, theta: np.ndarray, hessian: bool = True):
    a = red.F @ theta  # (m, T)
    a_keep = np.where(red.keep, a, -np.inf)
    lse = logsumexp(a_keep, axis=1)
    lse_y = logsumexp(np.where(red.label, a, -np.inf), axis=1)
    loss = float(np.sum(lse - lse_y)) / red.n
    if not hessian:
        return loss, None, None
    p = np.exp(a_keep - lse[:, None])
    q = np.where(red.label, np.exp(np.where(red.label, a, 0.0) - lse_y[:, None]), 0.0)
    g = np.einsum("mtb,mt->b", red.F, p - q) / red.n
    Fp = np.einsum("mtb,mt->mb", red.F, p)
    # label positions share one score, so the -LSE over them is linear: no Hessian term
    H = (np.einsum("mtb,mt,mtc->bc", red.F, p, red.F) - Fp.T @ Fp) / red.n
    return loss, g, H


def solve_wfin(data: NTPData, graphs: PriorityGraphs, basis: np.ndarray) -> SVMResult:
    """``W_fin = argmin_{W in S_fin} L_bar(W)`` (docs/science.md §8) as an :class:`SVMResult`:
    status ``optimal`` when the projected gradient norm is at most ``GRAD_TOL`` (the
    optimality equations), ``solver_error`` otherwise; ``objective`` is ``||W_fin||_F``."""
    t0 = time.perf_counter()
    d = data.E.shape[1]
    if basis.shape[0] == 0:
        return SVMResult(np.zeros((d, d)), "optimal", 0.0, "trivial", time.perf_counter() - t0)
    red = reduced_dataset(data, graphs, basis)
    theta = np.zeros(basis.shape[0])
    gnorm, steps = np.inf, 0
    for steps in range(1, MAX_NEWTON + 1):  # noqa: B007 - reported below
        loss, g, H = _loss_grad_hess(red, theta)
        gnorm = float(np.linalg.norm(g))
        if gnorm <= GRAD_TOL:
            break
        step = -np.linalg.lstsq(H, g, rcond=None)[0]
        if not g @ step < 0:  # not a descent direction (singular H): gradient step
            step = -g
        t = 1.0
        l1, g1, _ = _loss_grad_hess(red, theta + step)
        # near the minimizer the loss stops resolving decreases (rounding): a full Newton step
        # that halves the gradient without raising the loss beyond rounding is taken
        if not (np.linalg.norm(g1) <= 0.5 * gnorm and l1 <= loss + 1e-12 * max(1.0, loss)):
            while _loss_grad_hess(red, theta + t * step, False)[0] > loss + 1e-4 * t * (g @ step):
                t /= 2
                if t < 1e-12:
                    break
        theta = theta + t * step
    gnorm = float(np.linalg.norm(_loss_grad_hess(red, theta)[1]))  # the answer's certificate
    W = np.einsum("b,bij->ij", theta, basis)
    status = "optimal" if gnorm <= GRAD_TOL else "solver_error"
    msg = f"Newton: {steps} iteration(s), projected gradient norm {gnorm:.1e}"
    return SVMResult(W, status, float(np.linalg.norm(W)), "newton", time.perf_counter() - t0, msg)


def projected_gradient_norm(data: NTPData, graphs: PriorityGraphs, basis, W) -> float:
    """``||Pi_{S_fin} grad L_bar(W)||_F`` for W in S_fin (the optimality equations)."""
    red = reduced_dataset(data, graphs, basis)
    theta = np.einsum("ij,bij->b", W, basis)
    return float(np.linalg.norm(_loss_grad_hess(red, theta)[1]))
