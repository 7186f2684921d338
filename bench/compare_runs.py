"""Compare the stored values of two finished runs of the same config (issue #13's check).

``python bench/compare_runs.py RESULTS_A RESULTS_B`` opens every ``<experiment>/sweep.zarr``
and ``summary.nc`` under both results folders and compares each variable that both hold,
except timings (``seconds_*``, ``svm_seconds`` and their summary statistics) and provenance
attributes. Floats must agree to the last bit (NaN equal to NaN). A variable the first run
has and the second lacks is a difference; variables only the second run has (added by newer
code) are counted on one line. Exit status 1 when anything differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import xarray as xr

TIMINGS = ("seconds_", "svm_seconds")


def _is_timing(name: str) -> bool:
    return name.startswith(TIMINGS)


def compare_datasets(a: xr.Dataset, b: xr.Dataset, label: str) -> list[str]:
    """Lines naming every difference between ``a`` and ``b`` (timings aside)."""
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
                n = int(np.sum(~((va == vb) | (np.isnan(va) & np.isnan(vb)))))
                out.append(f"{label}: {name} differs in {n} of {va.size} values")
        elif not np.array_equal(va, vb):
            out.append(f"{label}: {name} differs")
    return out


def added_variables(a: xr.Dataset, b: xr.Dataset) -> list[str]:
    """Variables of ``b`` that ``a`` does not have."""
    return sorted(str(v) for v in set(b.variables) - set(a.variables))


def compare_runs(results_a: Path, results_b: Path) -> list[str]:
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
                out += compare_datasets(a, b, f"{exp}/{name}")
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
    args = ap.parse_args(argv)
    diffs = compare_runs(args.results_a, args.results_b)
    for line in diffs:
        print(line)
    n = len(list(args.results_a.glob("*/sweep.zarr")))
    print(f"{n} experiments compared: {'identical' if not diffs else f'{len(diffs)} differences'}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
