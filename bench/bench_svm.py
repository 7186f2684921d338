"""Benchmark of the SVM solvers (SCIENCE.md section 4, "Facts that make solving fast and exact").

Run: ``python bench/bench_svm.py``. Prints
* solve_frobenius (dual QP, Clarabel API) vs a naive cvxpy model with one constraint per
  (i, t) pair and cvxpy's default solver, at n=10, T=10, d=50: times, ratio, correlation;
* solve_nuclear (reduced SDP) at (n, T, d) = (6, 8, 10) and (20, 15, 50).

``--routes`` prints instead, per E3 shape whose dual Gram matrix is singular, the Frobenius
SVM through the least-distance route (one NNLS; issue 19) against the same solve with that
route switched off (Clarabel's dual QP, or at small d Clarabel's reduced primal): median
milliseconds per instance, verdicts and objectives compared.
"""

from __future__ import annotations

import argparse
import os
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread, before numpy loads

import cvxpy as cp  # noqa: E402
import numpy as np  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.gd.data import make_dataset, optimal_tokens  # noqa: E402
from attnsvm.svm import solve_frobenius, solve_nuclear  # noqa: E402
from attnsvm.svm.constraints import att_svm_constraints  # noqa: E402
from attnsvm.tasks.metrics import corr, rank  # noqa: E402


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


def bench_routes(n: int, T: int, d: int, seeds: int, table: Table) -> None:
    """Least-distance route vs the conic route it replaced, at one E3 shape (opt tokens)."""
    import attnsvm.svm.frobenius as F

    conss = []
    for seed in range(seeds):
        ds = make_dataset(Cell(n=n, T=T, d=d, seed=seed, train=False))
        conss.append(att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds)))
    timed = {}
    real = F._least_distance
    for side, ldp in (("ldp", real), ("conic", lambda A, h: (None, 0.0, None))):
        F._least_distance = ldp
        try:
            times, out = [], []
            for cons in conss:
                t0 = time.perf_counter()
                out.append(solve_frobenius(cons))
                times.append(time.perf_counter() - t0)
        finally:
            F._least_distance = real
        timed[side] = (float(np.median(times)), out)
    (t_new, new), (t_old, old) = timed["ldp"], timed["conic"]
    same = sum(a.status == b.status for a, b in zip(new, old, strict=True))
    rel = max(
        (abs(a.objective - b.objective) / b.objective for a, b in zip(new, old, strict=True)
         if a.feasible and b.feasible),
        default=0.0,
    )  # fmt: skip
    routes = sorted({r.solver for r in new}), sorted({r.solver for r in old})
    table.add(
        f"({n}, {T}, {d}), {conss[0].n_rows}",
        f"{t_new * 1e3:.2f} ({', '.join(routes[0])})",
        f"{t_old * 1e3:.2f} ({', '.join(routes[1])})",
        f"{t_old / t_new:.1f}x",
        f"{same}/{seeds} ({sum(r.feasible for r in new)} feasible)",
        "equal" if rel == 0 else f"within {rel:.1e}",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--routes", action="store_true", help="least-distance route vs conic")
    args = ap.parse_args()
    if args.routes:
        table = Table(
            "svm_frobenius_routes",
            "svm",
            "The Frobenius SVM: least distance against the conic routes it replaced",
            ["(n, T, d), rows", "least distance ms (route)", "replaced route ms (route)",
             "speed-up", "same verdict", "objectives"],
            order=10,
        )  # fmt: skip
        for shape in [(15, 15, 10), (15, 15, 5), (10, 15, 10), (15, 10, 10), (15, 15, 4),
                      (10, 15, 3)]:  # fmt: skip
            bench_routes(*shape, max(args.seeds, 10), table)
        table.note(
            "E3 shapes whose dual Gram matrix is singular; opt tokens; medians per instance. The "
            "replaced route is the same solve with the least-distance route switched off "
            "(Clarabel's dual QP, or at small d Clarabel's reduced primal); objectives: the "
            "largest relative difference over the instances both call feasible."
        )
        table.write()
        return
    bench_frobenius(10, 10, 50, args.seeds)
    bench_nuclear(6, 8, 10, args.seeds)
    bench_nuclear(20, 15, 50, args.seeds)


if __name__ == "__main__":
    main()
