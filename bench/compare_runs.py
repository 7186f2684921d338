"""Compare the stored values of two finished runs of the same config (issue #13's check).

``python bench/compare_runs.py RESULTS_A RESULTS_B`` opens every ``<experiment>/sweep.zarr``
and ``summary.nc`` under both results folders and compares each variable that both hold,
except timings (``seconds_*``, ``svm_seconds`` and their summary statistics), where each cell
ran (``device``: cpu or cuda:0 (...), so a CPU and a GPU run of one config compare) and
provenance attributes. Floats must agree to the last bit (NaN equal to NaN), unless ``--rtol`` /
``--atol`` allow a tolerance (``|a - b| <= atol + rtol |a|``, NaN where the other is NaN): a
float variable within it is listed with its largest differences but is not a difference, so
a change of method can be measured and stated with the tolerance it meets. Every differing
float variable is listed with its largest absolute and relative difference. Integers,
strings and codes must be equal. A variable the first run has and the second lacks is a
difference; variables only the second run has (added by newer code) are counted on one line.
Exit status 1 when anything differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import xarray as xr

TIMINGS = ("seconds_", "svm_seconds")
#: where a cell ran, not what it computed
WHERE = ("device",)


def _is_timing(name: str) -> bool:
    return name.startswith(TIMINGS) or name in WHERE


def _float_difference(va: np.ndarray, vb: np.ndarray, rtol: float, atol: float) -> tuple:
    """``(values that differ, within the tolerance, largest |a - b|, largest relative)``."""
    nan_a, nan_b = np.isnan(va), np.isnan(vb)
    differ = ~((va == vb) | (nan_a & nan_b))
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.abs(va - vb)
        close = (gap <= atol + rtol * np.abs(va)) & (nan_a == nan_b)
        rel = gap / np.where(np.abs(va) > 0, np.abs(va), np.inf)
    both = differ & ~nan_a & ~nan_b
    biggest = float(gap[both].max()) if both.any() else float("nan")
    biggest_rel = float(rel[both].max()) if both.any() else float("nan")
    return int(differ.sum()), bool(np.all(close | ~differ)), biggest, biggest_rel


def compare_datasets(
    a: xr.Dataset, b: xr.Dataset, label: str, rtol: float = 0.0, atol: float = 0.0
) -> list[str]:
    """Lines naming every difference between ``a`` and ``b`` (timings aside); float variables
    within ``rtol`` / ``atol`` are printed, not returned."""
    out = []
    names_a = {v for v in a.variables if not _is_timing(str(v))}
    names_b = {v for v in b.variables if not _is_timing(str(v))}
    for name in sorted(names_a - names_b):
        out.append(f"{label}: {name} missing in the second run")
    for name in sorted(names_a & names_b):
        va, vb = a[name].values, b[name].values
        if va.shape != vb.shape:
            out.append(f"{label}: {name} shape {va.shape} != {vb.shape}")
        elif va.dtype.kind == "f":
            if not np.array_equal(va, vb, equal_nan=True):
                n, close, gap, rel = _float_difference(va, vb, rtol, atol)
                line = (
                    f"{label}: {name} differs in {n} of {va.size} values "
                    f"(largest |a - b| {gap:.3g}, relative {rel:.3g})"
                )
                if close and (rtol or atol):
                    print(line + ": within the tolerance")
                else:
                    out.append(line)
        elif not np.array_equal(va, vb):
            out.append(f"{label}: {name} differs")
    return out


def added_variables(a: xr.Dataset, b: xr.Dataset) -> list[str]:
    """Variables of ``b`` that ``a`` does not have."""
    return sorted(str(v) for v in set(b.variables) - set(a.variables))


def compare_runs(
    results_a: Path, results_b: Path, rtol: float = 0.0, atol: float = 0.0
) -> list[str]:
    """Differences between the sweep stores and summaries of two results folders."""
    out = []
    sweeps = sorted(p.parent.name for p in results_a.glob("*/sweep.zarr"))
    if not sweeps:
        return [f"no sweep stores under {results_a}"]
    for exp in sweeps:
        for name, open_ in (("sweep.zarr", xr.open_zarr), ("summary.nc", xr.open_dataset)):
            pa, pb = results_a / exp / name, results_b / exp / name
            if not pb.exists():
                out.append(f"{exp}/{name}: missing in {results_b}")
                continue
            with open_(pa) as a, open_(pb) as b:
                out += compare_datasets(a, b, f"{exp}/{name}", rtol, atol)
                added = added_variables(a, b)
                if added:
                    print(
                        f"{exp}/{name}: {len(added)} variables only in the second run "
                        f"({', '.join(added[:3])}, ...)"
                    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results_a", type=Path)
    ap.add_argument("results_b", type=Path)
    ap.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0)")
    ap.add_argument("--atol", type=float, default=0.0, help="absolute tolerance (default 0)")
    args = ap.parse_args(argv)
    diffs = compare_runs(args.results_a, args.results_b, args.rtol, args.atol)
    for line in diffs:
        print(line)
    n = len(list(args.results_a.glob("*/sweep.zarr")))
    tol = f" (rtol {args.rtol:g}, atol {args.atol:g})" if args.rtol or args.atol else ""
    verdict = "identical" if not diffs else f"{len(diffs)} differences"
    if not diffs and tol:
        verdict = "equal within the tolerance"
    print(f"{n} experiments compared{tol}: {verdict}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
