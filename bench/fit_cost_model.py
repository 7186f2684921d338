"""Fit the cost model of :func:`attnsvm.config.cost.predicted_seconds` to measured blocks.

``python bench/fit_cost_model.py RESULTS [RESULTS ...]`` reads every finished block store
under the results folders (its cells and the per-stage timings it records), fits the six
constants of ``predicted_seconds`` (attnsvm/config/cost.py) by non-negative least
squares (training stage and solve + metrics stages separately), and prints them with the
measured / predicted ratio per experiment, for the fitted constants and for those in
attnsvm/config/cost.py. The constants in cost.py are this script's fit to a paper-size run
(config/paper.yaml) and a default sweep (config/config.yaml) together, measured 2026-11-23 on
the 2-core development machine.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
from pathlib import Path

import numpy as np
import zarr
from scipy.optimize import nnls

from attnsvm.config import cost as C
from attnsvm.config.cell import Cell


def _groups(cells: list[Cell]) -> list[tuple[Cell, int]]:
    """(first cell, seeds) per grid point of a block: its cells that differ only in seed."""
    counts: dict[str, list] = collections.OrderedDict()
    for c in cells:
        key = json.dumps({k: v for k, v in c.to_dict().items() if k != "seed"}, sort_keys=True)
        counts.setdefault(key, [c, 0])[1] += 1
    return [(c, k) for c, k in counts.values()]


def features(cells: list[Cell]) -> tuple[list[float], list[float]]:
    """Training features (GD steps, regularization-path steps, multiply-adds) and solve
    features (cells, SVM size, rank-constrained SVM size), as in ``predicted_seconds``."""
    steps = path_steps = flops = ncell = size = lowrank = 0.0
    for c, k in _groups(cells):
        s = C.train_steps(c)
        inner = c.d if c.param == "W" else c.inner_dim
        if c.task == "regpath":
            path_steps += s
        else:
            steps += s
        flops += k * s * c.n * c.T * c.d * inner
        ncell += k
        size += k * C.svm_size(c)
        lowrank += k * C.svm_size(c) * C.solves_low_rank(c)
    return [steps, path_steps, flops], [ncell, size, lowrank]


def _stages(attrs: dict) -> dict:
    st = attrs.get("seconds_stages", {})
    return ast.literal_eval(st) if isinstance(st, str) else st


def read_blocks(results: list[Path]) -> list[tuple[str, list, list, float, float]]:
    """(experiment, train features, solve features, train s, solve + metrics s) per block."""
    rows = []
    for res in results:
        for p in sorted(res.glob("*/blocks/*.zarr")):
            attrs = dict(zarr.open_group(str(p), mode="r").attrs)
            if attrs.get("failure_kind") or "cells" not in attrs:
                continue
            cells = [Cell.from_dict(d) for d in json.loads(attrs["cells"])]
            ft, fs = features(cells)
            st = _stages(attrs)
            rows.append(
                (
                    attrs["experiment"],
                    ft,
                    fs,
                    st.get("train", 0.0),
                    st.get("solve", 0.0) + st.get("metrics", 0.0),
                )
            )
    return rows


def report(rows, coef_train, coef_solve, title: str) -> None:
    agg = collections.defaultdict(lambda: [0.0, 0.0])
    for exp, ft, fs, tr, so in rows:
        agg[exp][0] += float(np.dot(ft, coef_train) + np.dot(fs, coef_solve))
        agg[exp][1] += tr + so
    print(title)
    for exp, (pred, meas) in agg.items():
        print(
            f"  {exp:24s} predicted {pred:9.1f} s  measured {meas:9.1f} s  "
            f"ratio {meas / pred if pred else float('nan'):6.2f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    args = ap.parse_args()
    rows = read_blocks(args.results)
    if not rows:
        raise SystemExit("no finished block stores under " + ", ".join(map(str, args.results)))
    ft = np.array([r[1] for r in rows])
    fs = np.array([r[2] for r in rows])
    ct, _ = nnls(ft, np.array([r[3] for r in rows]))
    cs, _ = nnls(fs, np.array([r[4] for r in rows]))
    names = ("STEP", "PATH_STEP", "FLOP", "CELL", "SOLVE", "LOWRANK")
    fitted = ", ".join(f"{n}_SECONDS={v:.2g}" for n, v in zip(names, [*ct, *cs], strict=True))
    print(f"{len(rows)} blocks; fitted {fitted}")
    report(rows, ct, cs, "with the fitted constants:")
    current = (
        [C.STEP_SECONDS, C.PATH_STEP_SECONDS, C.FLOP_SECONDS],
        [C.CELL_SECONDS, C.SOLVE_SECONDS, C.LOWRANK_SECONDS],
    )
    report(rows, *current, "with the constants in attnsvm/config/cost.py:")


if __name__ == "__main__":
    main()
