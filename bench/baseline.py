"""Notebook-style baseline for the benchmarks (issue #6): the straightforward way to do it.

One seed at a time; an autograd training loop with the textbook softmax output
``f = v^T X^T softmax(X W z)``; one cvxpy constraint per (i, t) pair and cvxpy's default
solvers for the SVMs. It reuses only attnsvm's seeded data and initializations
(``make_dataset``, ``make_init``) so that both sides solve the very same instances.
Not used by the library; imported by ``bench/bench_compare.py``.
"""

from __future__ import annotations

import time
import warnings

import cvxpy as cp
import numpy as np
import torch

from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, make_init


def train(cell: Cell, ds=None, init=None) -> dict:
    """Normalized GD with autograd, one seed, float64; W or KQ; linear or relu head.

    Returns checkpoint iterations, W(k), softmax(k), loss(k), ||W(k)||_F.
    """
    ds = make_dataset(cell) if ds is None else ds
    init = make_init(cell) if init is None else init
    X = torch.tensor(ds.X)
    Y = torch.tensor(ds.Y)
    Z = torch.tensor(ds.Z)
    v = torch.tensor(ds.v)
    V = None if ds.V is None else torch.tensor(ds.V)
    params = {k: torch.tensor(a, requires_grad=True) for k, a in init.items()}
    checkpoints = set(cell.checkpoints())
    out = {"iterations": [], "W": [], "softmax": [], "loss": [], "wnorm": []}
    eps_r = float(np.finfo(np.float64).eps)

    def forward():
        W = params["W"] if cell.param == "W" else params["K"] @ params["Q"].T
        s = torch.softmax(torch.einsum("itd,de,ie->it", X, W, Z), dim=1)
        r = torch.einsum("it,itd->id", s, X)  # textbook attended token
        if cell.head == "relu":
            f = torch.relu(r @ V).sum(1)
        else:
            f = r @ v
        loss = torch.nn.functional.softplus(-Y * f).mean()
        return W, s, loss

    for k in range(cell.iterations + 1):
        W, s, loss = forward()
        if k in checkpoints:
            out["iterations"].append(k)
            out["W"].append(W.detach().numpy().copy())
            out["softmax"].append(s.detach().numpy().copy())
            out["loss"].append(float(loss.detach()))
            out["wnorm"].append(float(torch.linalg.norm(W)))
        if k == cell.iterations:
            break
        if cell.param == "KQ":
            loss = loss + eps_r * sum((p**2).sum() for p in params.values())
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for p, g in zip(params.values(), grads, strict=True):
                p -= cell.lr * g / (torch.linalg.norm(g) + 1e-12)
    return {k: np.array(a) for k, a in out.items()}


def _solve(prob: cp.Problem) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            prob.solve()  # cvxpy's default solver
        except cp.error.SolverError:
            pass


def svm(X: np.ndarray, Z: np.ndarray, alpha: np.ndarray, norm: str) -> np.ndarray | None:
    """Att-SVM (norm "fro") or Att-SVM_* (norm "nuc"): one cvxpy constraint per (i, t)."""
    n, T, d = X.shape
    W = cp.Variable((d, d))
    cons = []
    for i in range(n):
        for t in range(T):
            if t != alpha[i]:
                cons.append((X[i, alpha[i]] - X[i, t]) @ W @ Z[i] >= 1)
    obj = cp.norm(W, "fro") if norm == "fro" else cp.normNuc(W)
    prob = cp.Problem(cp.Minimize(obj), cons)
    _solve(prob)
    return None if W.value is None else np.asarray(W.value)


def gen_svm(X, Z, s_final, W_gd, tol: float = 1e-3) -> dict:
    """Gen-SVM W_mm_gen, W_fin and W_svmeq (SCIENCE.md section 4), one constraint per pair."""
    n, T, d = X.shape
    rel = s_final >= tol
    rel[np.arange(n), np.argmax(s_final, axis=1)] = True
    W = cp.Variable((d, d))
    cons = []
    for i in range(n):
        for t in range(T):
            for tau in range(T):
                if t == tau or not rel[i, t]:
                    continue
                e = (X[i, t] - X[i, tau]) @ W @ Z[i]
                cons.append(e == 0 if rel[i, tau] else e >= 1)
    prob = cp.Problem(cp.Minimize(cp.norm(W, "fro")), cons)
    _solve(prob)
    W_gen = None if W.value is None else np.asarray(W.value)
    F = cp.Variable((d, d))
    eqs = []
    for i in range(n):
        for t in range(T):
            for tau in range(T):
                if t != tau and rel[i, t] and rel[i, tau]:
                    lr = np.log(s_final[i, t] / s_final[i, tau])
                    eqs.append((X[i, t] - X[i, tau]) @ F @ Z[i] == lr)
    if eqs:
        _solve(cp.Problem(cp.Minimize(cp.norm(F, "fro")), eqs))
        W_fin = None if F.value is None else np.asarray(F.value)
    else:
        W_fin = np.zeros((d, d))
    W_eq = None
    if W_gen is not None and W_fin is not None:
        C = float(np.sum((W_gd - W_fin) * W_gen) / np.sum(W_gen * W_gen))
        W_eq = W_fin + C * W_gen
    return {"mm_gen": W_gen, "fin": W_fin, "svmeq": W_eq}


def corr(A, B) -> float:
    return float(np.sum(A * B) / (np.linalg.norm(A) * np.linalg.norm(B)))


def rank(W, tol: float = 1e-6) -> int:
    if W is None:
        return -1
    s = np.linalg.svd(W, compute_uv=False)
    return int(np.sum(s > tol * s[0])) if s[0] > 0 else 0


def run_seed(cell: Cell) -> dict:
    """One E2-style cell end to end: train, SVMs for alpha and opt, correlation curves."""
    ds = make_dataset(cell)
    tr = train(cell, ds)
    gamma = ds.Y[:, None] * (ds.X @ ds.v)
    opt = np.argmax(gamma, axis=1)
    alpha = np.argmax(tr["softmax"][-1], axis=1)
    out = {"alpha": alpha, "opt": opt, "curves": {}}
    for sel, a in (("alpha", alpha), ("opt", opt)):
        for norm in ("fro", "nuc"):
            if sel == "opt" and np.array_equal(alpha, opt):
                W = out[f"{norm}_alpha"]
            else:
                W = svm(ds.X, ds.Z, a, norm)
            out[f"{norm}_{sel}"] = W
            out["curves"][f"corr_{norm}_{sel}"] = (
                np.full(len(tr["W"]), np.nan)
                if W is None
                else np.array([corr(Wk, W) for Wk in tr["W"]])
            )
    out["curves"]["softmax_mass"] = tr["softmax"].max(axis=2).mean(axis=1)
    return out


def run_rank_instance(cell: Cell) -> dict:
    """One E3 instance: Frobenius and nuclear SVMs for the optimal tokens, their ranks."""
    ds = make_dataset(cell)
    opt = np.argmax(ds.Y[:, None] * (ds.X @ ds.v), axis=1)
    fro, nuc = svm(ds.X, ds.Z, opt, "fro"), svm(ds.X, ds.Z, opt, "nuc")
    return {"rank_fro": rank(fro), "rank_nuc": rank(nuc)}


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0
