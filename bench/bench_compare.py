"""attnsvm vs the notebook-style baseline (bench/baseline.py), measured side by side in one run.

Usage: python bench/bench_compare.py [--sections cells,e2,e3] [--sizes 6,8,10/20,15,50/...]
       [--official DIR]
Prints one row per comparison: attnsvm seconds, baseline seconds, ratio (baseline / attnsvm),
agreement. Both sides run with one torch thread in the same process, interleaved. Each section
writes its table to bench/tables/ (``SECTION_TABLES``; bench/tables.py assembles BENCHMARKS.md).

Sections (``--sections``, comma-separated; default cells,e2,e3)
* gen: Gen-SVM only, at each --sizes (one instance at d >= 100, where cells skips it
  unless --big-gen: the baseline's cvxpy model then takes many minutes).
* cells: per cell at each (n, T, d): training W and KQ (attnsvm: per seed of a batch of
  --batch seeds; baseline: one seed), Frobenius SVM, nuclear SVM, Gen-SVM (relu head), end
  to end (train + SVMs for alpha and opt + curves, W and KQ). The baseline is timed on
  --base-seeds instances; rows marked "extrap." are sums of measured component times
  (the baseline's end to end at the largest sizes would take ~10 minutes per seed).
* e2: E2 end to end at paper size (100 seeds x {W, KQ}) for attnsvm (run_cells), the baseline
  on --e2-base-seeds seeds x {W, KQ}, extrapolated linearly to 100 seeds.
* e3: E3 at paper size (n x T x d grid of config/paper.yaml, 100 seeds, no training):
  attnsvm on --e3-seeds seeds per grid point, the baseline on --e3-base-seeds, both
  extrapolated linearly to 100 seeds. attnsvm runs twice: "before" with the old routes
  forced (Clarabel / SCS: ``svm.routes.PD_MAX_ROWS = 0``; the dual barrier that came first up
  to 150 rows then is gone, issue 45), then as it is; the baseline
  and, with --official, the official notebook's solver run once.
* nucrows: per-solve time of the nuclear SVM at E3's n = T = 15 (210 rows; d = 5, 10, 15,
  20 of config/paper.yaml, opt tokens, --rows-seeds seeds each, feasible ones only): the old
  route (Clarabel / SCS, forced as above), the primal-dual route, the baseline's cvxpy model
  and, with --official, the official notebook's ``W_svm_solver``; with --rows-big also one
  instance at (50, 20, 100) (950 rows).

--official DIR: a directory holding ``base.py`` of the official notebooks
(umich-sota/TF-as-SVM, e.g. ``git -C <clone> show HEAD:base.py > DIR/base.py``); its
``W_svm_solver`` (one cvxpy constraint per pair, cvxpy's default solver, ranks with
``numpy.linalg.matrix_rank(tol=1e-7)`` as in svm_rank.ipynb) then runs as a second baseline.
It is imported from DIR, never copied into this repository.
"""

from __future__ import annotations

import os

# one BLAS thread for both sides (set before numpy loads): on 2 shared cores, OpenBLAS's
# default threads spin against each other (a 280 x 280 lstsq took 1.2 s instead of 0.02 s)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline as B  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

import attnsvm.svm.routes as routes  # noqa: E402
from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.gd.data import make_dataset, optimal_tokens  # noqa: E402
from attnsvm.gd.train import train_cells  # noqa: E402
from attnsvm.svm import gen_svm, solve_frobenius, solve_nuclear  # noqa: E402
from attnsvm.svm import nuclear as svm_nuclear  # noqa: E402
from attnsvm.svm.constraints import att_svm_constraints  # noqa: E402
from attnsvm.tasks import run_cells  # noqa: E402
from attnsvm.tasks.metrics import corr, rank  # noqa: E402

#: the table each section writes (bench/tables/<name>.md): name, BENCHMARKS.md section,
#: title, order within the section
SECTION_TABLES = {
    "nucrows": ("svm_nuclear_rows", "svm", "The nuclear SVM past the barrier's rows", 20),
    "cells": ("baseline_cells", "cost", "Per cell against a notebook-style baseline", 10),
    "e2": ("baseline_e2", "cost", "E2 against a notebook-style baseline", 11),
    "gen": ("baseline_gen", "cost", "Gen-SVM against a notebook-style baseline", 12),
    "e3": ("baseline_e3", "cost", "E3 against a notebook-style baseline", 13),
}
COLUMNS = ["comparison", "attnsvm s", "baseline s", "ratio", "notes"]
NOTE = (
    "ratio = baseline seconds / attnsvm seconds, both measured in this run, interleaved, one "
    "torch thread and one BLAS thread each. The baseline (bench/baseline.py) is the "
    "straightforward notebook-style implementation: one seed at a time, autograd normalized "
    "GD with the textbook softmax output, every SVM a cvxpy model with one constraint per "
    "(i, t) pair and cvxpy's default solver, on attnsvm's seeded data (the same instances)."
)
_tables: list[Table] = []  # the table of the section being measured


def row(what: str, fast: float, slow: float, note: str = "") -> None:
    _tables[-1].add(what, f"{fast:.4g}", f"{slow:.4g}", f"{slow / fast:.1f}x", note)


def measure(key: str, run, *args) -> None:
    """Run section ``key`` (``run(*args)``, whose rows go to its table), write its table."""
    name, section, title, order = SECTION_TABLES[key]
    _tables.append(Table(name, section, title, COLUMNS, order=order))
    run(*args)
    _tables[-1].note(NOTE)
    _tables[-1].write()


def clarabel_reference(cons) -> float:
    """Nuclear objective from the old cvxpy route forced to Clarabel (exact interior point)."""
    old = routes.CLARABEL_MAX_SIZE
    try:
        routes.CLARABEL_MAX_SIZE = 10**9
        svm_nuclear_try = svm_nuclear._try_direct
        svm_nuclear._try_direct = lambda c, t0, frobenius=None: None
        return svm_nuclear.solve_nuclear(cons).objective
    finally:
        routes.CLARABEL_MAX_SIZE = old
        svm_nuclear._try_direct = svm_nuclear_try


def gap_of(msg: str) -> str:
    m = re.search(r"certified gap ([0-9.e+-]+)", msg)
    return m.group(1) if m else "-"


def bench_cells(n: int, T: int, d: int, args) -> None:
    big = d >= 100
    k = 1 if big else args.base_seeds
    S = args.batch
    tag = f"({n},{T},{d})"
    base_train = {}
    # ---- training
    for param in ("W", "KQ"):
        cells = [Cell(n=n, T=T, d=d, param=param, seed=s) for s in range(S)]
        t0 = time.perf_counter()
        tr = train_cells(cells, device="cpu")
        fast = (time.perf_counter() - t0) / S
        slow_t, corrs = [], []
        for s in range(k):
            out, t = B.timed(B.train, cells[s])
            slow_t.append(t)
            corrs.append(corr(out["W"][-1], tr.W[s, -1]))
        base_train[param] = float(np.mean(slow_t))
        row(
            f"{tag} train {param} (per seed)", fast, base_train[param],
            f"attnsvm batch of {S}; corr(final W) attnsvm vs textbook {min(corrs):.4f}",
        )  # fmt: skip
    # ---- SVMs on the optimal tokens
    fro_f, fro_s, nuc_f, nuc_s, cors, rel, ranks, gaps = [], [], [], [], [], [], [], []
    for s in range(k):
        ds = make_dataset(Cell(n=n, T=T, d=d, seed=s))
        opt = optimal_tokens(ds)
        cons = att_svm_constraints(ds.X, ds.Z, opt)
        r, t = B.timed(solve_frobenius, cons)
        fro_f.append(t)
        W_ref, t = B.timed(B.svm, ds.X, ds.Z, opt, "fro")
        fro_s.append(t)
        cors.append(corr(r.W, W_ref))
        r, t = B.timed(solve_nuclear, cons)
        nuc_f.append(t)
        gaps.append(gap_of(r.message))
        W_b, t = B.timed(B.svm, ds.X, ds.Z, opt, "nuc")
        nuc_s.append(t)
        ref = clarabel_reference(cons) if not big else np.nan
        rel.append(abs(r.objective - ref) / ref if not big else np.nan)
        obj_b = np.linalg.svd(W_b, compute_uv=False).sum()
        ranks.append((rank(r.W), rank(W_b), abs(r.objective - obj_b) / obj_b))
    fro_t, nuc_t = float(np.mean(fro_s)), float(np.mean(nuc_s))
    row(f"{tag} Frobenius SVM", np.mean(fro_f), fro_t, f"min corr {min(cors):.10f}")
    note = (
        f"ranks attnsvm/baseline {[x[:2] for x in ranks]}; obj. rel. diff vs baseline "
        f"{max(x[2] for x in ranks):.1e}; certified gap {gaps}"
    )
    if not big:
        note += f"; obj. rel. diff vs Clarabel {max(rel):.1e}"
    row(f"{tag} nuclear SVM", np.mean(nuc_f), nuc_t, note)
    if not big or args.big_gen:
        bench_gen(n, T, d, k)
    # ---- end to end (W and KQ per seed)
    Se = 2 if big else S
    cells = [Cell(n=n, T=T, d=d, param=p, seed=s) for p in ("W", "KQ") for s in range(Se)]
    t0 = time.perf_counter()
    res = run_cells(cells, device="cpu")
    fast = (time.perf_counter() - t0) / Se
    n_solves = np.mean([4 - 2 * r.scalars.get("alpha_is_opt", 0) for r in res])
    if big:
        slow = base_train["W"] + base_train["KQ"] + n_solves * (fro_t + nuc_t)
        note = (
            f"baseline extrap.: measured train W + train KQ + {n_solves:.1f} x (fro + nuc) "
            f"solves per param (attnsvm's mean count); attnsvm {Se} seeds x 2"
        )
    else:
        ts = []
        for s in range(k):
            for p in ("W", "KQ"):
                _, t = B.timed(B.run_seed, Cell(n=n, T=T, d=d, param=p, seed=s))
                ts.append(t)
        slow = 2 * float(np.mean(ts))
        note = f"per seed (W + KQ); attnsvm {Se} seeds x 2 in one run_cells, baseline {k} seeds"
    row(f"{tag} end to end", fast, slow, note)


def bench_gen(n: int, T: int, d: int, k: int) -> None:
    """Gen-SVM (relu head): W trained by attnsvm, both sides get the same softmax and W."""
    rc = [Cell(n=n, T=T, d=d, head="relu", generator="relu", seed=s) for s in range(k)]
    tr = train_cells(rc, device="cpu")
    gf, gs, gc = [], [], []
    for s, c in enumerate(rc):
        ds = make_dataset(c)
        sm, W = tr.softmax[s, -1], tr.W[s, -1]
        g, t = B.timed(gen_svm, ds.X, ds.Z, sm, W)
        gf.append(t)
        gb, t = B.timed(B.gen_svm, ds.X, ds.Z, sm, W)
        gs.append(t)
        if g.svmeq is not None and gb["svmeq"] is not None:
            gc.append(corr(g.svmeq, gb["svmeq"]))
    row(
        f"({n},{T},{d}) Gen-SVM (relu head)", np.mean(gf), np.mean(gs),
        f"mean of {k}; min corr W_svmeq {min(gc) if gc else float('nan'):.8f}",
    )  # fmt: skip


def bench_e2(args) -> None:
    seeds = 100
    cells = [Cell(n=6, T=8, d=10, param=p, seed=s) for p in ("W", "KQ") for s in range(seeds)]
    t0 = time.perf_counter()
    res = run_cells(cells, device="cpu")
    fast = time.perf_counter() - t0
    k = args.e2_base_seeds
    t0 = time.perf_counter()
    base = {
        p: [B.run_seed(Cell(n=6, T=8, d=10, param=p, seed=s)) for s in range(k)]
        for p in "W KQ".split()
    }
    slow = (time.perf_counter() - t0) * seeds / k
    a_w = np.mean([r.scalars["corr_fro_alpha"] for r in res if r.cell.param == "W"])
    a_kq = np.mean([r.scalars["corr_nuc_alpha"] for r in res if r.cell.param == "KQ"])
    b_w = np.mean([o["curves"]["corr_fro_alpha"][-1] for o in base["W"]])
    b_kq = np.mean([o["curves"]["corr_nuc_alpha"][-1] for o in base["KQ"]])
    row(
        "E2 end to end (100 seeds x {W, KQ})", fast, slow,
        f"baseline timed on {k} seeds x 2, extrap. x{seeds / k:g}; mean final corr W/fro "
        f"{a_w:.4f} vs {b_w:.4f} (baseline), KQ/nuc {a_kq:.4f} vs {b_kq:.4f}",
    )  # fmt: skip


def load_official(path: str | None):
    """The official notebooks' ``base`` module from DIR/base.py (see --official), or None."""
    if not path:
        return None
    spec = importlib.util.spec_from_file_location("tf_as_svm_base", Path(path) / "base.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def official_nuclear(mod, X, Z, alpha, fro: bool = False):
    """svm_rank.ipynb's call: ``W_svm_solver`` on float64 tensors, cross attention."""
    Xt, Zt = torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(Z, dtype=torch.float64)
    try:
        W = mod.W_svm_solver(Xt, torch.as_tensor(alpha), cross_input=Zt, cross_attn=True, fro=fro)
    except Exception:  # noqa: BLE001 - the notebook skips any failing seed the same way
        return None
    return None if W is None else np.asarray(W)


def official_rank_instance(mod, cell: Cell) -> dict:
    """One E3 instance the notebook's way: both SVMs, ranks with matrix_rank(tol=1e-7)."""
    ds = make_dataset(cell)
    opt = optimal_tokens(ds)
    fro = official_nuclear(mod, ds.X, ds.Z, opt, fro=True)
    nuc = official_nuclear(mod, ds.X, ds.Z, opt)
    rk = [-1 if W is None else int(np.linalg.matrix_rank(W, tol=1e-7)) for W in (fro, nuc)]
    return {"rank_fro": rk[0], "rank_nuc": rk[1]}


def force_old_route():
    """Context: the routes without the primal-dual method (Clarabel / SCS; the dual barrier
    that once came first up to 150 rows is gone, issue 45)."""
    import contextlib

    @contextlib.contextmanager
    def ctx():
        old = routes.PD_MAX_ROWS
        routes.PD_MAX_ROWS = 0
        try:
            yield
        finally:
            routes.PD_MAX_ROWS = old

    return ctx()


def bench_nucrows(args, official) -> None:
    """Per-solve nuclear SVM at E3's n = T = 15 (210 rows): old route, new route, baselines."""
    shapes = [(15, 15, d) for d in (5, 10, 15, 20)]
    if args.rows_big:
        shapes.append((50, 20, 100))
    tot = {"old": [], "new": [], "base": [], "off": []}
    for n, T, d in shapes:
        seeds = 1 if d >= 100 else args.rows_seeds
        t = {k: [] for k in tot}
        agree, diffs, solvers, used = 0, [], set(), 0
        for s in range(seeds * (10 if d == 5 else 1)):  # d = 5: few seeds are feasible
            ds = make_dataset(Cell(n=n, T=T, d=d, train=False, seed=s))
            opt = optimal_tokens(ds)
            cons = att_svm_constraints(ds.X, ds.Z, opt)
            if not solve_frobenius(cons).feasible:
                continue
            used += 1
            with force_old_route():
                old, dt = B.timed(solve_nuclear, cons)
            t["old"].append(dt)
            new, dt = B.timed(solve_nuclear, cons)
            t["new"].append(dt)
            solvers.add((old.solver, new.solver))
            agree += int(rank(old.W) == rank(new.W))
            diffs.append(abs(new.objective - old.objective) / old.objective)
            _, dt = B.timed(B.svm, ds.X, ds.Z, opt, "nuc")
            t["base"].append(dt)
            if official is not None:
                _, dt = B.timed(official_nuclear, official, ds.X, ds.Z, opt)
                t["off"].append(dt)
            if used >= seeds:
                break
        for k in tot:
            tot[k] += t[k]
        tag = f"({n},{T},{d}) nuclear SVM, {n * (T - 1)} rows"
        note = (
            f"{used} instances; routes old/new {sorted(solvers)}; rank old = new on "
            f"{agree}/{used}; obj. rel. diff max {max(diffs):.1e}"
        )
        row(f"{tag}: new route vs old route", np.median(t["new"]), np.median(t["old"]), note)
        if t["base"]:
            row(f"{tag}: new route vs baseline", np.median(t["new"]), np.median(t["base"]))
        if t["off"]:
            row(f"{tag}: new route vs official", np.median(t["new"]), np.median(t["off"]))
    e3 = [k for k in tot if tot[k]]
    print("medians over every instance above, s per solve: " + ", ".join(
        f"{k} {np.median(tot[k]):.4g}" for k in e3
    ))  # fmt: skip


def bench_e3(args, official) -> None:
    seeds = 100
    grid = [
        (n, T, d) for n in (5, 10, 15) for T in (5, 10, 15) for d in (1, 2, 3, 4, 5, 10, 15, 20)
    ]
    ka, kb = args.e3_seeds, args.e3_base_seeds
    cells = [Cell(n=n, T=T, d=d, train=False, seed=s) for n, T, d in grid for s in range(ka)]
    with force_old_route():
        t0 = time.perf_counter()
        res_old = run_cells(cells, device="cpu")
        fast_old = (time.perf_counter() - t0) * seeds / ka
    t0 = time.perf_counter()
    res = run_cells(cells, device="cpu")
    fast = (time.perf_counter() - t0) * seeds / ka
    same = sum(
        int(a.scalars["rank_nuc_opt"] == b.scalars["rank_nuc_opt"])
        for a, b in zip(res_old, res, strict=True)
    )
    by = {(r.cell.n, r.cell.T, r.cell.d, r.cell.seed): r for r in res}
    sides = {"baseline": lambda cell: B.run_rank_instance(cell)}
    if official is not None:
        sides["official"] = lambda cell: official_rank_instance(official, cell)
    for name, run_one in sides.items():
        t0 = time.perf_counter()
        agree = total = 0
        for n, T, d in grid:
            for s in range(kb):
                out = run_one(Cell(n=n, T=T, d=d, train=False, seed=s))
                r = by.get((n, T, d, s))
                if r is not None:
                    total += 1
                    agree += int(out["rank_nuc"] == r.scalars["rank_nuc_opt"])
        slow = (time.perf_counter() - t0) * seeds / kb
        what = f"E3 whole ({len(grid)} grid points x 100 seeds) vs {name}"
        row(
            f"{what}, before (Clarabel / SCS)", fast_old, slow,
            f"attnsvm timed on {ka}, {name} on {kb} seeds per point, both extrap. to 100",
        )  # fmt: skip
        row(
            f"{what}, after (primal-dual past 80 rows)", fast, slow,
            f"nuclear rank equal on {agree}/{total} shared instances; attnsvm before = after "
            f"on {same}/{len(res)}",
        )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="cells,e2,e3")
    ap.add_argument("--sizes", default="6,8,10/20,15,50/50,20,100")
    ap.add_argument("--batch", type=int, default=16, help="attnsvm seeds per batch (cells)")
    ap.add_argument("--base-seeds", type=int, default=2, help="baseline instances per size")
    ap.add_argument("--big-gen", action="store_true", help="Gen-SVM baseline also at d >= 100")
    ap.add_argument("--e2-base-seeds", type=int, default=10)
    ap.add_argument("--e3-seeds", type=int, default=10)
    ap.add_argument("--e3-base-seeds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--official", default=None, help="directory with the official base.py")
    ap.add_argument("--rows-seeds", type=int, default=5, help="instances per d (nucrows)")
    ap.add_argument("--rows-big", action="store_true", help="nucrows also at (50, 20, 100)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads {torch.get_num_threads()}; seconds; ratio = baseline / attnsvm")
    sections = args.sections.split(",")
    official = load_official(args.official)
    sizes = [tuple(map(int, size.split(","))) for size in args.sizes.split("/")]
    if "nucrows" in sections:
        measure("nucrows", bench_nucrows, args, official)
    if "cells" in sections:
        measure("cells", lambda: [bench_cells(*size, args) for size in sizes])
    if "gen" in sections:  # Gen-SVM alone, e.g. at d = 100 (the cells section skips it)
        measure(
            "gen", lambda: [bench_gen(*s, 1 if s[2] >= 100 else args.base_seeds) for s in sizes]
        )
    if "e2" in sections:
        measure("e2", bench_e2, args)
    if "e3" in sections:
        measure("e3", bench_e3, args, official)


if __name__ == "__main__":
    main()
