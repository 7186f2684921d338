"""The route tables' own benchmark (attnsvm/svm/routes.py, docs/science.md §4): each row's
first route against the others that apply there, on the instances the row holds.

Run: ``python bench/bench_svm_routes.py [--seeds 20]``. For the nuclear table's interior-point
rows (the primal-dual method at E2's and E6's 42 rows and at E3's 45-70 and 210 rows)
it solves every instance with the table's route and with ``svm_route`` set to each rival,
alternating the order per instance, and prints the median milliseconds per instance, how many
each route certifies by itself (``solver`` the route, not a fallback) and the largest relative
difference of the certified objectives. A rival that certifies the same instances within 2x
the first route's time marks the first one as a candidate for deletion (issue 45). The
table's route is timed batched too (``solve_nuclear_many``: the instances of one shape
iterate together), as E3's untrained groups run it. GD's
selections are not needed: the optimal tokens of each seed (``alpha = opt``) and, for every
other seed, a random selection (the local selections GD also reaches).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread, before numpy loads

import numpy as np  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.gd.data import make_dataset, optimal_tokens  # noqa: E402
from attnsvm.svm.constraints import att_svm_constraints  # noqa: E402
from attnsvm.svm.frobenius import solve_frobenius  # noqa: E402
from attnsvm.svm.nuclear import solve_nuclear, solve_nuclear_many  # noqa: E402

#: (label, shapes (n, T, d), the table's route, its rivals)
ROWS = (
    ("E2, E6: 42 rows", [(6, 8, d) for d in (2, 4, 6, 8, 10)], "primal-dual", ("clarabel",)),
    ("E3: 45-70 rows", [(5, 10, 5), (15, 5, 5), (5, 15, 5)], "primal-dual", ("clarabel",)),
    ("E3: 210 rows", [(15, 15, 5), (15, 15, 10), (15, 15, 20)], "primal-dual", ("clarabel",)),
)
#: the batched form of the table's route (solve_nuclear_many), as untrained groups run it
BATCHED = "primal-dual, batched"


def instances(shapes, seeds: int, rng: np.random.Generator) -> list:
    """Feasible Att-SVM rows of ``seeds`` datasets per shape (opt, then random selections)."""
    out = []
    for n, T, d in shapes:
        for seed in range(seeds):
            ds = make_dataset(Cell(n=n, T=T, d=d, train=False, seed=seed))
            alpha = optimal_tokens(ds) if seed % 2 == 0 else rng.integers(0, T, size=n)
            cons = att_svm_constraints(ds.X, ds.Z, alpha)
            fro = solve_frobenius(cons)
            if fro.solved:
                out.append((cons, fro))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="datasets per shape")
    args = parser.parse_args()
    table = Table(
        "svm_routes", "svm", "The nuclear route table's interior-point rows against their rivals",
        ["row", "instances", "route", "ms (median)", "certified by itself", "max obj. diff",
         "time / table's"], order=15,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    for label, shapes, first, rivals in ROWS:
        cases = instances(shapes, args.seeds, rng)
        names = (first, *rivals)
        ms: dict[str, list[float]] = {r: [] for r in names}
        own: dict[str, int] = dict.fromkeys(names, 0)
        obj: dict[str, list[float]] = {r: [] for r in names}
        for k, (cons, fro) in enumerate(cases):
            order = names if k % 2 == 0 else names[::-1]
            for r in order:
                t0 = time.perf_counter()
                res = solve_nuclear(cons, fro, route=r)
                ms[r].append(1e3 * (time.perf_counter() - t0))
                own[r] += res.solved and res.solver == f"direct-{r}"
                obj[r].append(res.objective if res.solved else np.nan)
        t0 = time.perf_counter()
        many = solve_nuclear_many([c for c, _ in cases], [f for _, f in cases])
        ms[BATCHED] = [1e3 * (time.perf_counter() - t0) / len(cases)] * len(cases)
        own[BATCHED] = sum(res.solved and res.solver == f"direct-{first}" for res in many)
        obj[BATCHED] = [res.objective if res.solved else np.nan for res in many]
        ref = np.array(obj[first])
        base = statistics.median(ms[first])
        for r in (*names, BATCHED):
            diff = np.nanmax(np.abs(np.array(obj[r]) - ref) / ref) if r != first else 0.0
            med = statistics.median(ms[r])
            table.add(label, len(cases), r + (" (table)" if r == first else ""), f"{med:.2f}",
                      f"{own[r]} of {len(cases)}", f"{diff:.1e}", f"{med / base:.2f}x")  # fmt: skip
    table.note(
        "Each instance solved by every route of its row through `svm_route` (attnsvm/svm/"
        "routes.py), alternating the order per instance; one BLAS thread; GD's selections "
        "replaced by the optimal tokens (even seeds) and random selections (odd seeds). "
        "'certified by itself': the route's own answer passed the certificate, no refinement "
        "or conic fallback. A rival within 2x of the table's route that certifies as many "
        "instances is the deletion test of issue 45. 'primal-dual, batched': every instance "
        "of the row at once through solve_nuclear_many (the primal-dual method iterating the "
        "instances of one shape together, as E3's untrained groups run it), its wall time "
        "divided by the instances (a mean, not a median)."
    )
    table.write()


if __name__ == "__main__":
    main()
