"""attnsvm vs the notebook-style baseline (bench/baseline.py), measured side by side in one run.

Usage: python bench/bench_compare.py [--sections cells,e2,e3] [--sizes 6,8,10/20,15,50/...]
Prints one row per comparison: attnsvm seconds, baseline seconds, ratio (baseline / attnsvm),
agreement. Both sides run with one torch thread in the same process, interleaved.

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
  extrapolated linearly to 100 seeds.
"""

from __future__ import annotations

import os

# one BLAS thread for both sides (set before numpy loads): on 2 shared cores, OpenBLAS's
# default threads spin against each other (a 280 x 280 lstsq took 1.2 s instead of 0.02 s)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline as B  # noqa: E402

from attnsvm import svm_nuclear  # noqa: E402
from attnsvm.cell import Cell  # noqa: E402
from attnsvm.constraints import att_svm_constraints  # noqa: E402
from attnsvm.data import make_dataset, optimal_tokens  # noqa: E402
from attnsvm.metrics import corr, rank  # noqa: E402
from attnsvm.run import run_cells  # noqa: E402
from attnsvm.svm import gen_svm, solve_frobenius, solve_nuclear  # noqa: E402
from attnsvm.train import train_cells  # noqa: E402

ROWS: list[tuple] = []


def row(what: str, fast: float, slow: float, note: str = "") -> None:
    ROWS.append((what, fast, slow, note))
    print(f"| {what} | {fast:.4g} | {slow:.4g} | {slow / fast:.1f}x | {note} |", flush=True)


def clarabel_reference(cons) -> float:
    """Nuclear objective from the old cvxpy route forced to Clarabel (exact interior point)."""
    old = svm_nuclear.CLARABEL_MAX_SIZE
    try:
        svm_nuclear.CLARABEL_MAX_SIZE = 10**9
        svm_nuclear_try = svm_nuclear._try_direct
        svm_nuclear._try_direct = lambda c, t0: None
        return svm_nuclear.solve_nuclear(cons).objective
    finally:
        svm_nuclear.CLARABEL_MAX_SIZE = old
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


def bench_e3(args) -> None:
    seeds = 100
    grid = [
        (n, T, d) for n in (5, 10, 15) for T in (5, 10, 15) for d in (1, 2, 3, 4, 5, 10, 15, 20)
    ]
    ka, kb = args.e3_seeds, args.e3_base_seeds
    cells = [Cell(n=n, T=T, d=d, train=False, seed=s) for n, T, d in grid for s in range(ka)]
    t0 = time.perf_counter()
    res = run_cells(cells, device="cpu")
    fast = (time.perf_counter() - t0) * seeds / ka
    t0 = time.perf_counter()
    agree = total = 0
    by = {(r.cell.n, r.cell.T, r.cell.d, r.cell.seed): r for r in res}
    for n, T, d in grid:
        for s in range(kb):
            out = B.run_rank_instance(Cell(n=n, T=T, d=d, train=False, seed=s))
            r = by.get((n, T, d, s))
            if r is not None:
                total += 1
                agree += int(out["rank_nuc"] == r.scalars["rank_nuc_opt"])
    slow = (time.perf_counter() - t0) * seeds / kb
    row(
        f"E3 whole ({len(grid)} grid points x 100 seeds)", fast, slow,
        f"attnsvm timed on {ka}, baseline on {kb} seeds per point, both extrap. to 100; "
        f"nuclear rank equal (rel. tol 1e-6) on {agree}/{total} shared instances",
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
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads {torch.get_num_threads()}; seconds; ratio = baseline / attnsvm")
    print("| comparison | attnsvm s | baseline s | ratio | notes |\n|---|---|---|---|---|")
    sections = args.sections.split(",")
    if "cells" in sections:
        for size in args.sizes.split("/"):
            bench_cells(*map(int, size.split(",")), args)
    if "gen" in sections:  # Gen-SVM alone, e.g. at d = 100 (the cells section skips it)
        for size in args.sizes.split("/"):
            n, T, d = map(int, size.split(","))
            bench_gen(n, T, d, 1 if d >= 100 else args.base_seeds)
    if "e2" in sections:
        bench_e2(args)
    if "e3" in sections:
        bench_e3(args)


if __name__ == "__main__":
    main()
