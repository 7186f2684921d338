"""Integrity (issue 18): a damaged, stale or foreign block is detected and recomputed.

One tiny finished sweep is shared by the module; each case copies it, injects one fault of
the issue's table, then runs the README resume (``--unlock``, then the same command). The
outcome is a sweep equal to the reference, or a run that fails naming the damaged store.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml

from attnsvm import codes
from attnsvm.plan import parse_config
from attnsvm.sweep.collect import collect_sweep
from attnsvm.sweep.integrity import (
    MANIFEST,
    StoreError,
    check_block,
    clean_stale_partials,
    verify_store,
)
from attnsvm.sweep.store import open_block
from attnsvm.sweep.worker import write_block
from tests.test_resume import science_equal
from tests.workflow_helpers import (
    REPO,
    executed_jobs,
    scratch_workflow,
    snakemake,
    write_config,
)

EXP = "integ"
CONFIG = {
    "experiments": {
        EXP: {
            "figures": [],
            "fixed": {"n": 3, "T": 3, "iterations": 40, "checkpoint_count": 5},
            "grid": {"param": ["W", "KQ"]},
            "seeds": 4,
            "block_size": 2,
        }
    }
}
N_BLOCKS = 4
N_CELLS = 8


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished sweep (work dir with .snakemake) and its sweep read into memory."""
    wd = scratch_workflow(tmp_path_factory.mktemp("finished"))
    write_config(wd / "c.yaml", CONFIG)
    proc = snakemake(wd, "--configfile", "c.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return wd, xr.open_zarr(wd / f"results/{EXP}/sweep.zarr").load()


@pytest.fixture
def clone(finished, tmp_path):
    """A copy of the finished sweep to break."""
    wd = tmp_path / "wd"
    shutil.copytree(finished[0], wd, symlinks=True)
    return wd


def blocks(wd: Path) -> Path:
    return wd / "results" / EXP / "blocks"


def a_block(wd: Path, which: str = "param=KQ_seeds=2-3") -> Path:
    return blocks(wd) / f"{which}.zarr"


def resume(wd: Path, *extra: str) -> subprocess.CompletedProcess:
    """The README's resume: unlock, then the same command again (output of both)."""
    unlock = snakemake(wd, "--configfile", "c.yaml", "--unlock")
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    proc = snakemake(wd, "--configfile", "c.yaml", *extra)
    proc.stderr = unlock.stderr + proc.stderr  # the repair warnings come from the first
    return proc


def sweep_of(wd: Path) -> xr.Dataset:
    return xr.open_zarr(wd / f"results/{EXP}/sweep.zarr").load()


def status(wd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "status", "--configfile", "c.yaml", *args],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_repaired(wd: Path, ref: xr.Dataset, recomputed: int = 1) -> subprocess.CompletedProcess:
    """The README resume recomputes the broken block(s) and gives the reference sweep."""
    proc = resume(wd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert executed_jobs(proc, "block") == recomputed
    science_equal(sweep_of(wd), ref)
    assert json.loads(sweep_of(wd).attrs["status_counts"])["ok"] == N_CELLS
    for path in blocks(wd).iterdir():
        assert check_block(path, EXP, path.name.removesuffix(".zarr")).finished, path
    return proc


def chunk_of(store: Path, var: str) -> Path:
    return next(p for p in sorted((store / var).rglob("*")) if p.is_file() and "c" in p.parts)


# --- one test per row of the table -------------------------------------------------


@pytest.mark.slow
def test_flipped_byte_is_detected_reported_and_recomputed(clone, finished):
    store = a_block(clone)
    chunk = chunk_of(store, "W")
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x10
    chunk.write_bytes(bytes(data))
    quick = status(clone)  # reads manifests only: the flipped byte is for --verify and runs
    assert "ok 8" in quick.stdout and "--verify checks every file" in quick.stdout, quick.stdout
    st = status(clone, "--verify")
    assert "damaged block store" in st.stdout, st.stdout
    assert str(store.relative_to(clone)) in st.stdout
    assert "does not match its checksum" in st.stdout
    assert "ok 6" in st.stdout and "missing 2" in st.stdout  # its cells are not counted ok
    proc = assert_repaired(clone, finished[1])
    assert "damaged block store" in proc.stderr and "moved to" in proc.stderr
    assert len(list((clone / f"results/{EXP}/quarantine").iterdir())) == 1  # kept, not lost


ALL_BLOCKS = ("param=W_seeds=0-1", "param=W_seeds=2-3", "param=KQ_seeds=0-1", "param=KQ_seeds=2-3")


@pytest.mark.slow
def test_deleted_file_of_a_block_is_recomputed(clone, finished):
    """Rows 2-4 at once, one block each: a chunk of `convergence`, of `corr_fro_alpha`, and
    `W/zarr.json` deleted (zarr would read fill values, NaN or the wrong convergence type)."""
    for var, name in zip(
        ("convergence", "corr_fro_alpha", "W/zarr.json"), ALL_BLOCKS, strict=False
    ):
        target = a_block(clone, name) / var
        (target if target.is_file() else chunk_of(a_block(clone, name), var)).unlink()
    assert_repaired(clone, finished[1], recomputed=3)


@pytest.mark.slow
def test_truncated_or_garbage_chunk_is_recomputed(clone, finished):
    truncated = chunk_of(a_block(clone, ALL_BLOCKS[0]), "softmax")
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    chunk_of(a_block(clone, ALL_BLOCKS[1]), "X").write_bytes(b"\x00garbage" * 9)
    assert_repaired(clone, finished[1], recomputed=2)


@pytest.mark.slow
def test_deleted_or_emptied_block_store_is_recomputed(clone, finished):
    deleted, no_meta, emptied = (a_block(clone, name) for name in ALL_BLOCKS[:3])
    shutil.rmtree(deleted)
    (no_meta / "zarr.json").unlink()
    shutil.rmtree(emptied)
    emptied.mkdir()
    st = status(clone)
    assert "missing 6" in st.stdout and "ok 2" in st.stdout, st.stdout
    assert st.stdout.count("damaged block store") == 2
    assert_repaired(clone, finished[1], recomputed=3)


@pytest.mark.slow
def test_stray_copy_in_blocks_is_ignored_with_a_warning(clone, finished):
    shutil.copytree(a_block(clone), blocks(clone) / "param=KQ_seeds=2-3 copy.zarr")
    (blocks(clone) / "notes.txt").write_text("mine")
    st = status(clone)
    assert f"ok {N_CELLS}," in st.stdout and "missing 0" in st.stdout, st.stdout
    assert "ignored, no block of the plan" in st.stdout and "copy.zarr" in st.stdout
    proc = resume(clone)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert executed_jobs(proc, "block") == 0
    assert "no block of the plan, ignored" in proc.stderr
    science_equal(sweep_of(clone), finished[1])


@pytest.mark.slow
def test_foreign_copy_under_a_planned_name_is_recomputed(clone, finished):
    store = a_block(clone)
    shutil.rmtree(store)
    shutil.copytree(a_block(clone, "param=KQ_seeds=0-1"), store)
    st = status(clone)
    assert "foreign block store" in st.stdout, st.stdout
    assert str(store.relative_to(clone)) in st.stdout
    assert_repaired(clone, finished[1])


@pytest.mark.slow
def test_results_of_another_clone_with_other_iterations_are_recomputed(finished, tmp_path):
    """Results copied without .snakemake: the cells' digests, not Snakemake's records, decide."""
    wd = scratch_workflow(tmp_path)
    shutil.copytree(finished[0] / "results", wd / "results")
    cfg = json.loads(json.dumps(CONFIG))
    cfg["experiments"][EXP]["fixed"]["iterations"] = 30
    write_config(wd / "c.yaml", cfg)
    st = status(wd)
    assert st.stdout.count("stale block store") == N_BLOCKS, st.stdout
    assert "cells differ from the plan" in st.stdout
    dry = snakemake(wd, "--configfile", "c.yaml", "-n")  # says so and changes nothing
    assert dry.returncode == 0 and dry.stderr.count("will be recomputed") == N_BLOCKS
    assert all(check_block(p, EXP, p.name[:-5]).finished for p in blocks(wd).iterdir())
    proc = resume(wd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert executed_jobs(proc, "block") == N_BLOCKS
    sweep = sweep_of(wd)
    assert int(sweep["iteration"].values[-1]) == 30
    assert json.loads(sweep.attrs["status_counts"])["ok"] == N_CELLS
    exp = parse_config(cfg)[EXP]
    from attnsvm.config.cell import cells_digest

    recorded = json.loads(sweep.attrs["blocks"])
    assert {b.name: cells_digest(b.cells) for b in exp.blocks()} == {
        k: v["cells_digest"] for k, v in recorded.items()
    }


@pytest.mark.slow
def test_changed_workflow_script_does_not_rerun_finished_blocks(clone, finished):
    script = clone / "workflow/scripts/block.py"
    script.write_text(script.read_text() + "# a git pull changed this comment\n")
    script.touch()
    proc = resume(clone)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert executed_jobs(proc, "block") == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_disk_full_block_is_retried_by_a_plain_resume(clone, finished, monkeypatch):
    """An environmental failure (a full disk): nothing stored for the block, the run exits
    non-zero counting it, status lists it, and the README resume computes it once the disk
    has room."""
    from attnsvm.sweep.worker import FAULT_ENV

    store = a_block(clone)
    shutil.rmtree(store)
    monkeypatch.setenv(FAULT_ENV, "enospc:param=KQ_seeds=2-3")
    first = resume(clone)
    assert first.returncode != 0
    assert "attnsvm: 1 block job(s) failed: 1 environment" in first.stderr, first.stderr[-3000:]
    assert "No space left on device" in first.stderr
    assert not store.exists() and not (clone / f"results/{EXP}/sweep.zarr").exists()
    assert "failed for an environmental reason" in status(clone).stdout
    monkeypatch.delenv(FAULT_ENV)  # space freed
    assert_repaired(clone, finished[1])
    assert "failed for an environmental reason" not in status(clone).stdout


@pytest.mark.slow
def test_reproducible_crash_stays_failed_until_forced(clone, finished, monkeypatch):
    """A failure of the code (an uncaught error): its cells are stored failed, the run exits
    non-zero counting it; a plain resume keeps it, --forcerun on its path recomputes it."""
    from attnsvm.sweep.worker import FAULT_ENV

    shutil.rmtree(a_block(clone))
    monkeypatch.setenv(FAULT_ENV, "raise:param=KQ_seeds=2-3")
    first = resume(clone)
    assert first.returncode != 0 and "1 block job(s) failed: 1 reproducible" in first.stderr
    monkeypatch.delenv(FAULT_ENV)
    again = resume(clone)
    assert again.returncode == 0 and executed_jobs(again, "block") == 0
    assert json.loads(sweep_of(clone).attrs["status_counts"])["failed"] == 2
    paths = status(clone, "--failed-paths").stdout.split()
    forced = snakemake(clone, "--configfile", "c.yaml", "--forcerun", *paths)
    assert forced.returncode == 0 and executed_jobs(forced, "block") == 1
    science_equal(sweep_of(clone), finished[1])


@pytest.mark.slow
def test_a_block_refused_by_collect_is_recomputed_by_the_next_resume(clone, finished):
    """A file added to a block store (the repair step's stat rows do not list folders):
    collect refuses the store and drops it from the repair step's cache, so the next README
    resume hashes it, quarantines it and recomputes it (never the same failure forever)."""
    assert resume(clone).returncode == 0  # the clone's stores verified: the cache vouches
    (a_block(clone) / "stray.bin").write_bytes(b"added")
    (clone / f"results/{EXP}/sweep.zarr" / "zarr.json").unlink()  # collect must run again
    first = resume(clone)
    assert first.returncode != 0 and "file not in the manifest: stray.bin" in first.stderr
    proc = assert_repaired(clone, finished[1])
    assert "moved to" in proc.stderr


@pytest.mark.slow
def test_partial_files_of_killed_attempts_are_cleaned(clone, finished):
    exp_dir = clone / "results" / EXP
    # a summarize, a collect and a block job killed mid-write: outputs gone, partials left
    (exp_dir / "summary.nc").unlink()
    (exp_dir / f".summary.nc{codes.PARTIAL_MARK}4242").write_bytes(b"half a netcdf")
    (exp_dir / f".sweep.zarr{codes.PARTIAL_MARK}4242-abcd").mkdir()
    shutil.rmtree(a_block(clone))
    (blocks(clone) / f".{a_block(clone).name}{codes.PARTIAL_MARK}4242-abcd").mkdir()
    assert_repaired(clone, finished[1])
    leftovers = [p.name for p in exp_dir.rglob(f"*{codes.PARTIAL_MARK}*")]
    assert leftovers == []


@pytest.mark.slow
def test_damaged_block_read_by_collect_fails_naming_the_store(clone):
    """Damage after planning (no repair step ran): collect stops, naming the store."""
    chunk = chunk_of(a_block(clone), "corr_fro_alpha")
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0x01
    chunk.write_bytes(bytes(data))
    code = (
        "from attnsvm.plan import Plan; import yaml; "
        "p = Plan.from_config(yaml.safe_load(open('c.yaml'))); "
        f"from attnsvm.sweep.collect import collect_experiment as c; "
        f"c(p.experiment_config('{EXP}'), p.block_paths('{EXP}'), 'out.zarr')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=clone, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode != 0
    assert "damaged store" in proc.stderr and str(a_block(clone).relative_to(clone)) in proc.stderr
    assert not (clone / "out.zarr").exists()


def test_slurm_test_command_fits_a_two_cpu_node(tmp_path):
    """The README's SLURM test command asks no job for more than 2 CPUs, and it plans."""
    text = (REPO / "workflow/profiles/README.md").read_text()
    cmd = text[text.index("snakemake --workflow-profile workflow/profiles/slurm --slurm-no") :]
    cmd = cmd[: cmd.index("...")].replace("\\\n", " ").split()[1:]
    opts: dict[str, list[str]] = {}
    for arg in cmd:
        if arg.startswith("--"):
            key = opts.setdefault(arg, [])
        else:
            key.append(arg)
    threads = dict(v.split("=") for v in opts["--set-threads"])
    assert set(threads) == {"block", "collect"} and max(map(int, threads.values())) <= 2
    cpus = [v for v in opts["--set-resources"] if "cpus_per_task" in v]
    assert all(int(v.split("=")[1]) <= 2 for v in cpus)
    # rules whose threads the command does not set ask for at most 2 by themselves
    for smk in (REPO / "workflow/rules").glob("*.smk"):
        assert all(int(t) <= 2 for t in re.findall(r"threads: (\d+)", smk.read_text())), smk
    prof = yaml.safe_load((REPO / "workflow/profiles/slurm/profile.yaml").read_text())
    assert prof["set-threads"]["collect"] <= 2
    assert "cpus_per_task" not in prof["set-resources"]["collect"]  # follows the threads
    for name in ("default", "slurm"):
        p = yaml.safe_load((REPO / f"workflow/profiles/{name}/profile.yaml").read_text())
        assert "code" not in p["rerun-triggers"] and "params" in p["rerun-triggers"]
    wd = scratch_workflow(tmp_path)
    write_config(wd / "c.yaml", CONFIG)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *cmd, "--configfile", "c.yaml", "-n"],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rule collect:" in proc.stdout + proc.stderr


# --- unit tests of the manifest and its checks (fast) --------------------------------------


@pytest.fixture(scope="module")
def one_block(tmp_path_factory):
    exp = parse_config(CONFIG)[EXP]
    b = exp.blocks()[0]
    root = tmp_path_factory.mktemp("one")
    path = write_block(list(b.cells), root / f"{b.name}.zarr", experiment=EXP, block=b.name)
    return exp, b, path


@pytest.fixture
def block_copy(one_block, tmp_path):
    exp, b, path = one_block
    dest = tmp_path / "blocks" / path.name
    shutil.copytree(path, dest)
    return exp, b, dest


def test_every_chunk_has_a_crc32c_and_the_manifest_lists_every_file(one_block):
    _, b, path = one_block
    for meta in path.glob("*/zarr.json"):
        names = [c["name"] for c in json.loads(meta.read_text())["codecs"]]
        assert names[-1] == "crc32c", meta
    m = verify_store(path)
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import attnsvm_version

    assert m["cells_digest"] == cells_digest(b.cells) and m["attnsvm"] == attnsvm_version()
    assert (m["kind"], m["experiment"], m["block"]) == ("block", EXP, b.name)
    files = {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()} - {MANIFEST}
    assert set(m["files"]) == files


def test_a_flipped_bit_is_caught_by_the_manifest_and_by_the_chunk_checksum(block_copy):
    exp, b, path = block_copy
    chunk = chunk_of(path, "corr_fro_alpha")
    data = bytearray(chunk.read_bytes())
    data[-3] ^= 0x04
    chunk.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="corr_fro_alpha/c/0 does not match its checksum"):
        verify_store(path)
    with pytest.raises(ValueError, match="checksum"):  # zarr's crc32c, without the manifest
        open_block(path)["corr_fro_alpha"].values  # noqa: B018
    with pytest.raises(StoreError, match=str(path)):
        collect_sweep(exp, {b.name: path})


def test_collect_refuses_a_stale_block_and_names_it(block_copy):
    exp, b, path = block_copy
    other = parse_config(
        {"experiments": {EXP: {**CONFIG["experiments"][EXP], "fixed": {"n": 3, "T": 3}}}}
    )[EXP]
    with pytest.raises(StoreError, match=f"stale store {path}"):
        collect_sweep(other, {b.name: path})
    assert check_block(path, EXP, b.name, "0" * 64).state == "stale"
    with pytest.raises(StoreError, match="foreign"):
        collect_sweep(exp, {exp.blocks()[1].name: path})


def test_store_without_manifest_is_not_finished(block_copy):
    exp, b, path = block_copy
    (path / MANIFEST).unlink()
    chk = check_block(path, EXP, b.name)
    assert chk.state == "damaged" and "no attnsvm-manifest.json" in chk.reason
    with pytest.raises(StoreError, match="incomplete"):
        collect_sweep(exp, {b.name: path})


def test_repair_moves_damaged_stores_aside_and_a_dry_run_changes_nothing(block_copy):
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    (path / "W" / "zarr.json").unlink()
    planned = {b.name: cells_digest(b.cells)}
    dry, redo = repair_blocks(path.parent, EXP, planned, dry_run=True)
    assert path.exists() and "will be recomputed" in dry[0] and str(path) in dry[0]
    assert redo == [str(path)]
    msgs, _ = repair_blocks(path.parent, EXP, planned)
    assert not path.exists() and "file missing: W/zarr.json" in msgs[0]
    assert len(list((path.parent.parent / "quarantine").iterdir())) == 1


def test_clean_stale_partials_removes_files_and_dirs_of_this_output_only(tmp_path):
    out = tmp_path / "summary.nc"
    (tmp_path / f".summary.nc{codes.PARTIAL_MARK}1").write_text("x")
    (tmp_path / f".summary.nc{codes.PARTIAL_MARK}2-ab").mkdir()
    (tmp_path / ".summary.nc.old-ab").mkdir()
    keep = tmp_path / f".other.nc{codes.PARTIAL_MARK}1"
    keep.write_text("y")
    clean_stale_partials(out)
    assert [p.name for p in tmp_path.iterdir()] == [keep.name]


def test_clean_stale_partials_matches_the_names_of_the_atomic_helper(tmp_path):
    """What a killed attnsvm.atomic writer leaves (partial and moved-aside names) is cleaned."""
    from attnsvm.atomic import atomic_path, partial_path

    out = tmp_path / "sweep.zarr"
    partial_path(out).mkdir()
    partial_path(out).write_text("half a file")
    (tmp_path / f".sweep.zarr{codes.OLD_MARK}ab12").mkdir()
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        tmp.mkdir()
        raise RuntimeError("killed")
    assert len(list(tmp_path.iterdir())) == 3
    clean_stale_partials(out)
    assert list(tmp_path.iterdir()) == []


def test_figure_save_cleans_partials_of_a_killed_attempt(tmp_path):
    import matplotlib.pyplot as plt

    from attnsvm.report.draw import save

    stale = tmp_path / f".f.png{codes.PARTIAL_MARK}999"
    stale.write_bytes(b"half a png")
    fig = plt.figure()
    save(fig, tmp_path / "f.pdf", tmp_path / "f.png")
    plt.close(fig)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pdf", "f.png"]


def test_environmental_failures_are_told_from_reproducible_ones():
    import errno

    from attnsvm.failures import EnvironmentFailure, is_environmental

    assert is_environmental(OSError(errno.ENOSPC, "No space left on device"))
    assert is_environmental(EnvironmentFailure("device 'cuda' requested but CUDA is not"))
    assert not is_environmental(OSError(errno.ENOENT, "No such file"))
    assert not is_environmental(ValueError("a bug"))
    assert codes.FAILURE_KINDS == ("environment", "reproducible")


def test_sweep_store_has_a_manifest_and_summarize_names_a_damaged_sweep(one_block, tmp_path):
    from attnsvm.sweep.store import write_atomic
    from attnsvm.sweep.summary import write_summary

    exp, b, path = one_block
    sweep = write_atomic(collect_sweep(exp, {b.name: path}), tmp_path / "sweep.zarr", True)
    assert verify_store(sweep)["kind"] == "sweep"
    assert xr.open_zarr(sweep)["status"].shape == (2, 4)  # consolidated, xarray alone
    chunk = chunk_of(sweep, "W")
    data = bytearray(chunk.read_bytes())
    data[10] ^= 0xFF
    chunk.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=f"damaged store {sweep}"):
        write_summary(sweep, tmp_path / "summary.nc")
    assert np.all([not p.name.startswith(".") for p in tmp_path.iterdir()])


def test_repair_hashes_a_store_again_only_when_its_files_changed(block_copy, monkeypatch):
    """Repair that scales (issue 31): a store verified once is not hashed again while its
    files are unchanged (the verification cache); any write to a file, even one that keeps
    its size and sets its modification time back, makes the next start hash it again."""
    import os

    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep import integrity
    from attnsvm.sweep.integrity import VERIFY_CACHE, repair_blocks

    exp, b, path = block_copy
    planned = {b.name: cells_digest(b.cells)}
    hashed: list[str] = []
    real = integrity._file_sha256
    monkeypatch.setattr(integrity, "_file_sha256", lambda p: hashed.append(str(p)) or real(p))
    n_files = len(verify_store(path)["files"])
    hashed.clear()
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    assert len(hashed) == n_files and (path.parent.parent / VERIFY_CACHE).exists()
    hashed.clear()
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    assert hashed == []  # a later start hashes nothing
    chunk = chunk_of(path, "corr_fro_alpha")
    st = chunk.stat()
    data = bytearray(chunk.read_bytes())
    data[-3] ^= 0x04
    chunk.write_bytes(bytes(data))
    os.utime(chunk, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime
    msgs, redo = repair_blocks(path.parent, EXP, planned)
    assert redo == [str(path)] and "does not match its checksum" in msgs[0]
    assert not path.exists()


def test_copied_store_is_hashed_and_a_stale_plan_is_seen_through_the_cache(block_copy):
    import shutil

    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    planned = {b.name: cells_digest(b.cells)}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    # the cache vouches for the files only: another plan's cells still make the store stale
    msgs, redo = repair_blocks(path.parent, EXP, {b.name: "0" * 64}, dry_run=True)
    assert redo == [str(path)] and "stale" in msgs[0]
    # a copy put in its place (new inodes) is hashed again, and verifies
    copy = path.parent / ".copy"
    shutil.copytree(path, copy)
    shutil.rmtree(path)
    copy.rename(path)
    assert repair_blocks(path.parent, EXP, planned) == ([], [])


def _hash_counter(monkeypatch) -> list[str]:
    from attnsvm.sweep import integrity

    hashed: list[str] = []
    real = integrity._file_sha256
    monkeypatch.setattr(integrity, "_file_sha256", lambda p: hashed.append(str(p)) or real(p))
    return hashed


def _rewrite_keeping_times(path: Path, data: bytes) -> None:
    """Write ``data`` into ``path`` in place (same inode), setting its times back."""
    import os

    st = path.stat()
    with open(path, "r+b") as fh:
        fh.write(data)
        fh.truncate()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_an_edited_manifest_is_read_again_not_taken_from_the_cache(block_copy, monkeypatch):
    """The verify cache keeps the manifest's entries under the manifest's stat row: an edit
    of the manifest in place (same size, modification time set back) is seen at the next
    start (here: other cells, so the store is stale)."""
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    digest = cells_digest(b.cells)
    planned = {b.name: digest}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    hashed = _hash_counter(monkeypatch)
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    assert hashed == []
    text = (path / MANIFEST).read_text()
    other = ("0" if digest[0] != "0" else "1") + digest[1:]
    _rewrite_keeping_times(path / MANIFEST, text.replace(digest, other).encode())
    msgs, redo = repair_blocks(path.parent, EXP, planned)
    assert redo == [str(path)] and "stale" in msgs[0] and not path.exists()


def test_a_touched_or_deleted_file_makes_the_store_hashed_or_missing(block_copy, monkeypatch):
    import os

    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    planned = {b.name: cells_digest(b.cells)}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    hashed = _hash_counter(monkeypatch)
    chunk = chunk_of(path, "W")
    os.utime(chunk)  # content unchanged: hashed again, still finished, then vouched again
    assert repair_blocks(path.parent, EXP, planned) == ([], []) and len(hashed) > 1
    hashed.clear()
    assert repair_blocks(path.parent, EXP, planned) == ([], []) and hashed == []
    chunk.unlink()
    msgs, redo = repair_blocks(path.parent, EXP, planned)
    assert redo == [str(path)] and "file missing: W/c/0" in msgs[0]


def test_a_store_swapped_for_another_blocks_store_is_foreign_despite_the_cache(block_copy):
    import shutil

    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    planned = {b.name: cells_digest(b.cells)}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    other = path.parent / ".other"
    shutil.copytree(path, other)
    m = json.loads((other / MANIFEST).read_text())
    (other / MANIFEST).write_text(json.dumps({**m, "block": "another"}))
    shutil.rmtree(path)
    other.rename(path)
    msgs, redo = repair_blocks(path.parent, EXP, planned, dry_run=True)
    assert redo == [str(path)] and "foreign" in msgs[0] and "'another'" in msgs[0]


@pytest.mark.parametrize("cache", ["garbage", "old format", "bad entry", "stale", "foreign"])
def test_a_corrupt_stale_or_foreign_verify_cache_ends_correct(block_copy, monkeypatch, cache):
    """Whatever the cache file holds, a damaged store is found and a good one verifies."""
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import VERIFY_CACHE, repair_blocks

    exp, b, path = block_copy
    planned = {b.name: cells_digest(b.cells)}
    cache_file = path.parent.parent / VERIFY_CACHE
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    good = cache_file.read_text()
    body = json.loads(good)
    chunk = chunk_of(path, "corr_fro_alpha")
    data = bytearray(chunk.read_bytes())
    data[-3] ^= 0x04
    if cache == "garbage":
        cache_file.write_bytes(b"\x00{not json")
    elif cache == "old format":
        cache_file.write_text(json.dumps({**body, "format": "attnsvm-verify-cache/1"}))
    elif cache == "bad entry":
        cache_file.write_text(json.dumps({**body, "stores": {b.name: [1, 2]}}))
    elif cache == "foreign":  # another copy of the store, its cache copied along
        copy = path.parent.parent.parent / "copy"
        shutil.copytree(path.parent.parent, copy)
        path, cache_file = copy / "blocks" / path.name, copy / VERIFY_CACHE
        chunk = chunk_of(path, "corr_fro_alpha")
    hashed = _hash_counter(monkeypatch)
    if cache != "stale":  # a good store verifies, every file hashed once
        assert repair_blocks(path.parent, EXP, planned) == ([], [])
        assert len(hashed) == len(verify_store(path)["files"])
    _rewrite_keeping_times(chunk, bytes(data))
    if cache == "stale":  # the cache of before the write is put back
        cache_file.write_text(good)
    msgs, redo = repair_blocks(path.parent, EXP, planned)
    assert redo == [str(path)] and "does not match its checksum" in msgs[0]


def test_the_verify_cache_writes_each_file_list_once(block_copy):
    """10^4 stores of one experiment list the same files: the cache holds the list once."""
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import VERIFY_CACHE, repair_blocks

    exp, b, path = block_copy
    twin = path.parent / "twin.zarr"
    shutil.copytree(path, twin)
    m = json.loads((twin / MANIFEST).read_text())
    (twin / MANIFEST).write_text(json.dumps({**m, "block": "twin"}))
    planned = {b.name: cells_digest(b.cells), "twin": cells_digest(b.cells)}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    body = json.loads((path.parent.parent / VERIFY_CACHE).read_text())
    assert len(body["lists"]) == 1 and sorted(body["stores"]) == sorted(planned)
    assert body["stores"]["twin"][3]["block"] == "twin"
