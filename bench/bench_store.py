"""Files per block: a block store as a folder (the format before issue 44) and as one file.

Usage: python bench/bench_store.py [--repeats 5]

For blocks of three sizes (E2's block of the paper run, an E6-like block, the .test config's
smallest), the same computed results are written both ways through
:func:`attnsvm.sweep.store.write_atomic` (``<block>.zarr`` a folder, ``<block>.zarr.zip`` one
file): files, bytes (apparent and on disk), write time, the time to verify and read the whole
store into memory (:func:`attnsvm.sweep.integrity.load_verified`, what collect does) and the
time of a quick manifest read (what ``attnsvm status`` and the repair step's plan check do).
Times are the best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from tables import Table  # bench/tables.py: BENCHMARKS.md's tables

from attnsvm.config.cell import Cell
from attnsvm.sweep.integrity import load_verified, verify_store
from attnsvm.sweep.store import results_to_dataset, write_atomic
from attnsvm.tasks import run_cells

BLOCKS = {
    "E2 paper block (W, KQ x 8 seeds, 2000 steps)": [
        Cell(n=6, T=8, d=10, param=p, iterations=2000, seed=s)
        for p in ("W", "KQ")
        for s in range(8)
    ],
    "E6-like block (d=8, 4 seeds)": [Cell(n=6, T=8, d=8, seed=s) for s in range(4)],
    "tiny untrained cell (E3-like, 1 seed)": [Cell(n=3, T=3, d=3, train=False, seed=0)],
}


def files_and_bytes(path: Path) -> tuple[int, int, int]:
    """(files, apparent bytes, bytes on disk) of a store (file or folder)."""
    paths = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return (len(paths), sum(p.stat().st_size for p in paths),
            sum(p.stat().st_blocks * 512 for p in paths))  # fmt: skip


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    table = Table(
        "store",
        "workflow",
        "Files per block: a block store as a folder and as one file",
        [
            "block",
            "format",
            "files",
            "bytes",
            "on disk",
            "write ms",
            "verify + read ms",
            "manifest ms",
        ],  # fmt: skip
        order=25,
    )
    with tempfile.TemporaryDirectory(dir=os.environ.get("ATTNSVM_BENCH_TMP")) as tmp:
        tmp = Path(tmp)
        for label, cells in BLOCKS.items():
            results = run_cells(cells, device="cpu", threads=1)
            ds = results_to_dataset(results, {"experiment": "x", "block": "b"})
            for fmt, name in (("folder (before)", "b.zarr"), ("one file", "b.zarr.zip")):
                path = tmp / name
                write = best(lambda p=path, d=ds: write_atomic(d, p), args.repeats)
                files, size, disk = files_and_bytes(path)
                read = best(lambda p=path: load_verified(p), args.repeats)
                quick = best(lambda p=path: verify_store(p, contents=False), args.repeats)
                table.add(label, fmt, files, f"{size:,}", f"{disk:,}", f"{1e3 * write:.0f}",
                          f"{1e3 * read:.0f}", f"{1e3 * quick:.2f}")  # fmt: skip
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    table.note(
        "The same Dataset written both ways by attnsvm.sweep.store.write_atomic (a folder: "
        "zarr's files plus the manifest; one file: the same files as members of a stored zip "
        "with its sealed manifest). Bytes on disk: allocated blocks (a small file takes at "
        "least one 4 KiB block here; Lustre/GPFS allocate more per file). verify + read: every "
        "file hashed against the manifest and the whole store read into memory "
        "(load_verified: what collect does per block); manifest: the manifest alone (what the "
        f"plan checks and attnsvm status read). Best of {args.repeats} each."
    )
    table.write()


if __name__ == "__main__":
    main()
