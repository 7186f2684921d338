"""Benchmark of the SVM solvers (SCIENCE.md section 4, "Facts that make solving fast and exact").

Run: ``python bench/bench_svm.py``. Prints
* solve_frobenius (dual QP, Clarabel API) vs a naive cvxpy model with one constraint per
  (i, t) pair and cvxpy's default solver, at n=10, T=10, d=50: times, ratio, correlation;
* solve_nuclear (reduced SDP) at (n, T, d) = (6, 8, 10) and (20, 15, 50).
"""

from __future__ import annotations

import argparse
import time

import cvxpy as cp
import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.svm import solve_frobenius, solve_nuclear
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.sweep.metrics import corr, rank


def naive_frobenius(X: np.ndarray, Z: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, float]:
    """The slow way (SCIENCE.md section 7): one cvxpy constraint per (i, t) pair."""
    t0 = time.perf_counter()
    n, T, d = X.shape
    W = cp.Variable((d, d))
    cons = [
        (X[i, alpha[i]] - X[i, t]) @ W @ Z[i] >= 1
        for i in range(n)
        for t in range(T)
        if t != alpha[i]
    ]
    prob = cp.Problem(cp.Minimize(cp.norm(W, "fro")), cons)
    prob.solve()
    return W.value, time.perf_counter() - t0


def bench_frobenius(n: int, T: int, d: int, seeds: int) -> None:
    fast, slow, cors = [], [], []
    for seed in range(seeds):
        ds = make_dataset(Cell(n=n, T=T, d=d, seed=seed))
        alpha = optimal_tokens(ds)
        t0 = time.perf_counter()
        res = solve_frobenius(att_svm_constraints(ds.X, ds.Z, alpha))
        fast.append(time.perf_counter() - t0)
        W_ref, t_slow = naive_frobenius(ds.X, ds.Z, alpha)
        slow.append(t_slow)
        cors.append(corr(res.W, W_ref))
        assert res.status == "optimal", res.message
    f, s = float(np.median(fast)), float(np.median(slow))
    print(f"Frobenius Att-SVM n={n} T={T} d={d} ({seeds} seeds, medians)")
    print(f"  solve_frobenius ({res.solver}, incl. constraint build): {f * 1e3:9.2f} ms")
    print(f"  naive cvxpy, one constraint per (i,t), default solver:  {s * 1e3:9.2f} ms")
    print(f"  speed-up: {s / f:.0f}x (target >= 50x)   min correlation: {min(cors):.12f}")


def bench_nuclear(n: int, T: int, d: int, seeds: int) -> None:
    times, ranks, stats, solvers = [], [], set(), set()
    for seed in range(seeds):
        ds = make_dataset(Cell(n=n, T=T, d=d, seed=seed))
        t0 = time.perf_counter()
        res = solve_nuclear(att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds)))
        times.append(time.perf_counter() - t0)
        ranks.append(rank(res.W))
        stats.add(res.status)
        solvers.add(res.solver)
    print(
        f"Nuclear Att-SVM_* n={n} T={T} d={d} ({seeds} seeds): median "
        f"{np.median(times):.3f} s, max {max(times):.3f} s, solver {sorted(solvers)}, "
        f"status {sorted(stats)}, ranks {ranks}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    bench_frobenius(10, 10, 50, args.seeds)
    bench_nuclear(6, 8, 10, args.seeds)
    bench_nuclear(20, 15, 50, args.seeds)


if __name__ == "__main__":
    main()
