"""Integrity (issue 18): a damaged, stale or foreign block is detected and recomputed.

One tiny finished sweep is shared by the module; each case copies it, injects one fault of
the issue's table, then runs the README resume (``--unlock``, then the same command). The
outcome is a sweep equal to the reference, or a run that fails naming the damaged store.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
import zipfile
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
    load_verified,
    verify_store,
)
from attnsvm.sweep.onefile import block_of
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
    return blocks(wd) / f"{which}.zarr.zip"


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
        assert check_block(path, EXP, block_of(path)).finished, path
    return proc


def chunk_of(store: Path, var: str) -> Path:
    """A chunk file of ``var`` in a directory store (the sweep store)."""
    return next(p for p in sorted((store / var).rglob("*")) if p.is_file() and "c" in p.parts)


# --- damaging a one-file store (attnsvm.sweep.onefile: a zip of the Zarr store's files) -----


def chunk_member(store: Path, var: str) -> str:
    """The name of the first chunk of ``var`` in the one-file store ``store``."""
    with zipfile.ZipFile(store) as zf:
        return sorted(n for n in zf.namelist() if n.startswith(f"{var}/c/"))[0]


def member_span(store: Path, name: str) -> tuple[int, int]:
    """(offset, size) of member ``name``'s bytes in the file (stored, not compressed)."""
    with zipfile.ZipFile(store) as zf:
        info = zf.getinfo(name)
    with open(store, "rb") as fh:
        fh.seek(info.header_offset)
        header = fh.read(30)
    n, m = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + n + m, info.compress_size


def flip(store: Path, name: str, at: int = -1, bit: int = 0x10) -> None:
    """Flip a bit of member ``name``'s bytes in place (the file keeps its size)."""
    start, size = member_span(store, name)
    with open(store, "r+b") as fh:
        fh.seek(start + (at % size))
        byte = fh.read(1)[0]
        fh.seek(start + (at % size))
        fh.write(bytes([byte ^ bit]))


def rezip(store: Path, drop: tuple[str, ...] = (), replace: dict | None = None,
          add: dict | None = None) -> None:  # fmt: skip
    """Rewrite the zip without the members ``drop``, with other bytes for ``replace`` and with
    the members ``add`` (its manifest as it was: it no longer matches)."""
    with zipfile.ZipFile(store) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist() if i.filename not in drop}
    members.update(replace or {})
    members.update(add or {})
    with zipfile.ZipFile(store, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


# --- one test per row of the table -------------------------------------------------


ALL_BLOCKS = ("param=W_seeds=0-1", "param=W_seeds=2-3", "param=KQ_seeds=0-1", "param=KQ_seeds=2-3")


@pytest.mark.slow
def test_every_kind_of_damage_is_reported_and_recomputed_by_one_resume(clone, finished):
    """The issue's table at once, one block each (one README resume for all; each kind on its
    own: the unit tests below): a flipped byte of a chunk (seen by --verify and every run,
    not by status's quick check), a deleted member (`W/zarr.json`: zarr would read fill
    values), a store cut short (an interrupted copy) and a foreign copy under a planned
    name; a stray copy under another name is ignored with a warning, never counted."""
    flipped, deleted, truncated, foreign = (a_block(clone, name) for name in ALL_BLOCKS)
    stray = blocks(clone) / "stray copy.zarr.zip"
    shutil.copy(deleted, stray)  # an intact copy under a name of no block
    foreign.unlink()
    shutil.copy(stray, foreign)  # another block's store under this block's name
    (blocks(clone) / "notes.txt").write_text("mine")
    member = chunk_member(flipped, "W")
    flip(flipped, member, at=member_span(flipped, member)[1] // 2)
    rezip(deleted, drop=("W/zarr.json",))
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    quick = status(clone)  # manifests only: the flipped byte is for --verify and runs
    assert "ok 4" in quick.stdout and "--verify checks every file" in quick.stdout, quick.stdout
    assert "foreign block store" in quick.stdout and "ignored, no block of the plan" in quick.stdout
    st = status(clone, "--verify")
    assert st.stdout.count("damaged block store") == 3, st.stdout
    assert (
        str(flipped.relative_to(clone)) in st.stdout and "does not match its checksum" in st.stdout
    )
    assert "ok 0" in st.stdout and "missing 8" in st.stdout  # their cells are not counted ok
    proc = resume(clone)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert executed_jobs(proc, "block") == 4
    assert proc.stderr.count("moved to") == 4 and "no block of the plan, ignored" in proc.stderr
    science_equal(sweep_of(clone), finished[1])
    assert all(check_block(a_block(clone, name), EXP, name).finished for name in ALL_BLOCKS)
    assert len(list((clone / f"results/{EXP}/quarantine").iterdir())) == 4  # kept, not lost
    assert stray.exists()  # ignored, never moved or counted


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
    assert all(check_block(p, EXP, block_of(p)).finished for p in blocks(wd).iterdir())
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
    # no job of any rule ran (the quiet profile does not print "Nothing to be done")
    assert not re.search(r"^\s*(local)?rule \w+:", proc.stdout + proc.stderr, re.M), proc.stderr


@pytest.mark.slow
def test_disk_full_block_is_retried_by_a_plain_resume(clone, finished, monkeypatch):
    """An environmental failure (a full disk): nothing stored for the block, the run exits
    non-zero counting it, status lists it, and the README resume computes it once the disk
    has room."""
    from attnsvm.sweep.worker import FAULT_ENV

    store = a_block(clone)
    store.unlink()
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

    a_block(clone).unlink()
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
    """A store that the repair step's cache vouches for but collect refuses (here a member
    added and the cache entry forged to its new stat row, as no ordinary write can do):
    collect drops it from the cache, so the next README resume hashes it, quarantines it and
    recomputes it (never the same failure forever)."""
    from attnsvm.sweep.integrity import VERIFY_CACHE

    assert resume(clone).returncode == 0  # the clone's stores verified: the cache vouches
    store = a_block(clone)
    rezip(store, add={"stray.bin": b"added"})
    cache = clone / "results" / EXP / VERIFY_CACHE
    body = json.loads(cache.read_text())
    st = store.stat()
    body["stores"][block_of(store)][0] = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    cache.write_text(json.dumps(body))
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
    a_block(clone).unlink()
    (blocks(clone) / f".{a_block(clone).name}{codes.PARTIAL_MARK}4242-abcd").write_bytes(b"x")
    assert_repaired(clone, finished[1])
    leftovers = [p.name for p in exp_dir.rglob(f"*{codes.PARTIAL_MARK}*")]
    assert leftovers == []


@pytest.mark.slow
def test_damaged_block_read_by_collect_fails_naming_the_store(clone):
    """Damage after planning (no repair step ran): collect stops, naming the store."""
    flip(a_block(clone), chunk_member(a_block(clone), "corr_fro_alpha"), bit=0x01)
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
    # the dry run plans the collect job (its job table; the quiet profile names no rule)
    assert re.search(r"^collect\s+\d+\s*$", proc.stdout + proc.stderr, re.M)


# --- unit tests of the manifest and its checks (fast) --------------------------------------


@pytest.fixture(scope="module")
def one_block(tmp_path_factory):
    exp = parse_config(CONFIG)[EXP]
    b = exp.blocks()[0]
    root = tmp_path_factory.mktemp("one")
    path = write_block(list(b.cells), root / f"{b.name}.zarr.zip", experiment=EXP, block=b.name)
    return exp, b, path


@pytest.fixture
def block_copy(one_block, tmp_path):
    exp, b, path = one_block
    dest = tmp_path / "blocks" / path.name
    dest.parent.mkdir()
    shutil.copy(path, dest)
    return exp, b, dest


def test_a_block_is_one_file_every_chunk_has_a_crc32c_and_the_manifest_lists_it(one_block):
    """Files per block (issue 44): the block's results are one zip whose members are the
    Zarr store's files, each chunk with its CRC-32C, listed by the sealed manifest."""
    from attnsvm.sweep import onefile

    _, b, path = one_block
    assert path.is_file() and path.name == f"{b.name}.zarr.zip"
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        for meta in (n for n in names if n.endswith("/zarr.json")):
            codecs = [c["name"] for c in json.loads(zf.read(meta))["codecs"]]
            assert codecs[-1] == "crc32c", meta
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
    m = verify_store(path)
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import attnsvm_version

    assert m["cells_digest"] == cells_digest(b.cells) and m["attnsvm"] == attnsvm_version()
    assert (m["kind"], m["experiment"], m["block"]) == ("block", EXP, b.name)
    assert set(m["files"]) == names - {MANIFEST}
    assert m["manifest_sha256"] == onefile.body_sha256(m) and m["format"] == onefile.FORMAT
    # zarr reads it without attnsvm, lazily
    import zarr

    lazy = xr.open_zarr(zarr.storage.ZipStore(path, mode="r"), consolidated=False)
    assert lazy["status"].values.tolist() == open_block(path)["status"].values.tolist()


def test_a_flipped_bit_is_caught_by_the_manifest_and_by_the_chunk_checksums(block_copy):
    exp, b, path = block_copy
    member = chunk_member(path, "corr_fro_alpha")
    flip(path, member, at=-3, bit=0x04)
    with pytest.raises(StoreError, match=f"{member} does not match its checksum"):
        verify_store(path)
    with pytest.raises((ValueError, zipfile.BadZipFile), match="CRC|checksum"):
        open_block(path)["corr_fro_alpha"].values  # noqa: B018  (zip's CRC-32, zarr's CRC-32C)
    with pytest.raises(StoreError, match=str(path)):
        collect_sweep(exp, {b.name: path})


@pytest.mark.parametrize("where", ["manifest", "central directory", "local header"])
def test_a_flipped_bit_anywhere_in_the_file_is_caught(block_copy, where):
    """The manifest is sealed by its own SHA-256; the zip's directory and headers are checked
    by reading every member against the manifest."""
    _, b, path = block_copy
    data = bytearray(path.read_bytes())
    if where == "manifest":
        start, size = member_span(path, MANIFEST)
        text = data[start : start + size].decode()
        k = start + text.index('"block"') + 12
    elif where == "central directory":
        k = data.rindex(b"PK\x01\x02") + 20  # a member's size in the directory
    else:
        k = data.index(b"PK\x03\x04") + 14  # a member's CRC-32 in its local header
    data[k] ^= 0x02
    path.write_bytes(bytes(data))
    assert check_block(path, EXP, b.name).state == "damaged"


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


@pytest.mark.parametrize("damage", ["garbage", "empty", "no zarr.json", "a chunk replaced"])
def test_a_garbage_empty_or_gutted_store_is_quarantined(block_copy, damage):
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    if damage == "garbage":
        path.write_bytes(b"\x00garbage" * 999)
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "no zarr.json":
        rezip(path, drop=("zarr.json",))
    else:
        rezip(path, replace={chunk_member(path, "X"): b"\x00garbage" * 9})
    msgs, redo = repair_blocks(path.parent, EXP, {b.name: cells_digest(b.cells)})
    assert redo == [str(path)] and "damaged block store" in msgs[0] and "moved to" in msgs[0]
    assert not path.exists()


def test_store_without_manifest_is_not_finished(block_copy):
    exp, b, path = block_copy
    rezip(path, drop=(MANIFEST,))
    chk = check_block(path, EXP, b.name)
    assert chk.state == "damaged" and "no attnsvm-manifest.json member" in chk.reason
    with pytest.raises(StoreError, match="incomplete"):
        collect_sweep(exp, {b.name: path})


def test_repair_moves_damaged_stores_aside_and_a_dry_run_changes_nothing(block_copy):
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    rezip(path, drop=("W/zarr.json",))
    planned = {b.name: cells_digest(b.cells)}
    dry, redo = repair_blocks(path.parent, EXP, planned, dry_run=True)
    assert path.exists() and "will be recomputed" in dry[0] and str(path) in dry[0]
    assert redo == [str(path)]
    msgs, _ = repair_blocks(path.parent, EXP, planned)
    assert not path.exists() and "file missing: W/zarr.json" in msgs[0]
    assert len(list((path.parent.parent / "quarantine").iterdir())) == 1


def test_an_earlier_attnsvms_block_store_is_converted_once_with_a_message(one_block, tmp_path):
    """Results directories of earlier versions (a folder per block store) are converted to one
    file each by the first run: the same files and content_sha256 (what the sweep recorded),
    the modification time kept (nothing built from it is rebuilt); a damaged one is
    quarantined."""
    import os

    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, _, _ = one_block
    blocks_dir = tmp_path / "blocks"
    good, bad = exp.blocks()[:2]
    old = {}
    for b in (good, bad):
        old[b.name] = write_block(list(b.cells), blocks_dir / f"{b.name}.zarr", experiment=EXP,
                                  block=b.name)  # fmt: skip
    before = verify_store(old[good.name])
    ref = load_verified(old[good.name])
    (old[bad.name] / "W" / "zarr.json").unlink()
    mtime = (old[good.name] / MANIFEST).stat().st_mtime_ns
    planned = {b.name: cells_digest(b.cells) for b in (good, bad)}
    dry, _ = repair_blocks(blocks_dir, EXP, planned, dry_run=True)
    assert "2 block store(s) of an earlier attnsvm" in dry[0] and old[good.name].is_dir()
    msgs, redo = repair_blocks(blocks_dir, EXP, planned)
    assert any("converted 1 block store(s)" in m for m in msgs), msgs
    assert any("damaged block store" in m and "moved to" in m for m in msgs), msgs
    new = blocks_dir / f"{good.name}.zarr.zip"
    assert not old[good.name].exists() and not old[bad.name].exists()
    after = verify_store(new)
    assert after["content_sha256"] == before["content_sha256"]
    assert new.stat().st_mtime_ns == mtime
    xr.testing.assert_identical(load_verified(new), ref)
    assert repair_blocks(blocks_dir, EXP, planned) == ([], [])
    assert sorted(os.listdir(blocks_dir)) == [new.name]


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


def _read_counter(monkeypatch) -> list[str]:
    """Count the one-file stores read whole (hashed) by the repair step."""
    from attnsvm.sweep import onefile

    read: list[str] = []
    real = onefile.read
    monkeypatch.setattr(onefile, "read", lambda p, full=True: read.append(str(p)) or real(p, full))
    return read


def _rewrite_keeping_times(path: Path, data: bytes) -> None:
    """Write ``data`` into ``path`` in place (same inode), setting its times back."""
    import os

    st = path.stat()
    with open(path, "r+b") as fh:
        fh.write(data)
        fh.truncate()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_repair_reads_a_store_again_only_when_its_file_changed(block_copy, monkeypatch):
    """Repair that scales (issues 31, 44): a store verified once is not read again while its
    file is unchanged (one stat per block: the verification cache); any write to it, even
    one that keeps its size and sets its modification time back, makes the next start hash
    it again."""
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import VERIFY_CACHE, repair_blocks

    exp, b, path = block_copy
    planned = {b.name: cells_digest(b.cells)}
    read = _read_counter(monkeypatch)
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    assert read == [str(path)] and (path.parent.parent / VERIFY_CACHE).exists()
    read.clear()
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    assert read == []  # a later start reads nothing
    data = bytearray(path.read_bytes())
    start, size = member_span(path, chunk_member(path, "corr_fro_alpha"))
    data[start + size - 3] ^= 0x04
    _rewrite_keeping_times(path, bytes(data))  # same size, same mtime
    msgs, redo = repair_blocks(path.parent, EXP, planned)
    assert redo == [str(path)] and "does not match its checksum" in msgs[0]
    assert not path.exists()


def test_copied_store_is_read_and_a_stale_plan_is_seen_through_the_cache(block_copy):
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    planned = {b.name: cells_digest(b.cells)}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    # the cache vouches for the file only: another plan's cells still make the store stale
    msgs, redo = repair_blocks(path.parent, EXP, {b.name: "0" * 64}, dry_run=True)
    assert redo == [str(path)] and "stale" in msgs[0]
    # a copy put in its place (a new inode) is read again, and verifies
    copy = path.parent / ".copy"
    shutil.copy(path, copy)
    copy.replace(path)
    assert repair_blocks(path.parent, EXP, planned) == ([], [])


def test_a_store_rewritten_in_place_is_read_again_not_taken_from_the_cache(block_copy, monkeypatch):
    """The verify cache keeps the manifest's entries under the file's stat row: a store
    rewritten in place (same size, modification time set back; here its manifest names
    other cells) is read again at the next start and found stale."""
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep import onefile
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    digest = cells_digest(b.cells)
    planned = {b.name: digest}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    read = _read_counter(monkeypatch)
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    assert read == []
    other = ("0" if digest[0] != "0" else "1") + digest[1:]
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if n != MANIFEST}
        m = json.loads(zf.read(MANIFEST))
    forged = onefile.zip_bytes(members, onefile.sealed({**m, "cells_digest": other}))
    assert len(forged) == path.stat().st_size
    _rewrite_keeping_times(path, forged)
    msgs, redo = repair_blocks(path.parent, EXP, planned)
    assert redo == [str(path)] and "stale" in msgs[0] and not path.exists()


def test_a_touched_or_deleted_store_is_read_again_or_missing(block_copy, monkeypatch):
    import os

    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    planned = {b.name: cells_digest(b.cells)}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    read = _read_counter(monkeypatch)
    os.utime(path)  # content unchanged: read again, still finished, then vouched again
    assert repair_blocks(path.parent, EXP, planned) == ([], []) and read == [str(path)]
    read.clear()
    assert repair_blocks(path.parent, EXP, planned) == ([], []) and read == []
    path.unlink()
    assert repair_blocks(path.parent, EXP, planned) == ([], [])  # missing: Snakemake runs it


def test_a_store_swapped_for_another_blocks_store_is_foreign_despite_the_cache(block_copy):
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep import onefile
    from attnsvm.sweep.integrity import repair_blocks

    exp, b, path = block_copy
    planned = {b.name: cells_digest(b.cells)}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if n != MANIFEST}
        m = json.loads(zf.read(MANIFEST))
    other = path.parent / ".other"
    other.write_bytes(onefile.zip_bytes(members, onefile.sealed({**m, "block": "another"})))
    other.replace(path)
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
    read = _read_counter(monkeypatch)
    if cache != "stale":  # a good store verifies, read once
        assert repair_blocks(path.parent, EXP, planned) == ([], [])
        assert read == [str(path)]
    data = bytearray(path.read_bytes())
    start, size = member_span(path, chunk_member(path, "corr_fro_alpha"))
    data[start + size - 3] ^= 0x04
    _rewrite_keeping_times(path, bytes(data))
    if cache == "stale":  # the cache of before the write is put back
        cache_file.write_text(good)
    msgs, redo = repair_blocks(path.parent, EXP, planned)
    assert redo == [str(path)] and "does not match its checksum" in msgs[0]


def test_the_verify_cache_holds_one_stat_row_per_one_file_store(block_copy):
    """10^4 one-file stores: one stat row each, no file lists."""
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep import onefile
    from attnsvm.sweep.integrity import VERIFY_CACHE, repair_blocks

    exp, b, path = block_copy
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if n != MANIFEST}
        m = json.loads(zf.read(MANIFEST))
    twin = path.parent / "twin.zarr.zip"
    twin.write_bytes(onefile.zip_bytes(members, onefile.sealed({**m, "block": "twin"})))
    planned = {b.name: cells_digest(b.cells), "twin": cells_digest(b.cells)}
    assert repair_blocks(path.parent, EXP, planned) == ([], [])
    body = json.loads((path.parent.parent / VERIFY_CACHE).read_text())
    assert body["lists"] == [[]] and sorted(body["stores"]) == sorted(planned)
    assert body["stores"]["twin"][3]["block"] == "twin"
