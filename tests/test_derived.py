"""Every derived output is verified like a block (issue 31): sweep, summary, figures, captions
and status tables record the digests of what they were built from (attnsvm.sweep.derived).

One small finished run of the .test config (two experiments of one block each) is shared by
the module; each row of the issue's table injects its fault into a copy and runs the README
resume: the outputs end equal to the reference. Faster in-process tests check the repair step
and the consumers on results written by tests.workflow_helpers.tiny_results.
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
from workflow_helpers import (
    load_test_config,
    scratch_workflow,
    snakemake,
    write_config,
)

from attnsvm.plan import Plan
from attnsvm.sweep.derived import check_record, figure_record, record_of
from attnsvm.sweep.integrity import StoreError
from tests.test_resume import science_equal

EXP, OTHER = "e1_trajectories", "e2_local"
RESULTS = ".test/results"


def outputs(wd: Path, exp: str = EXP) -> dict[str, Path]:
    d = wd / RESULTS / exp
    fig = "e1" if exp == EXP else "e2"
    return {
        "sweep": d / "sweep.zarr",
        "summary": d / "summary.nc",
        "png": d / "figures" / f"{fig}.png",
        "pdf": d / "figures" / f"{fig}.pdf",
        "caption": d / "figures" / f"{fig}.caption.rst",
        "status": d / "status.html",
    }


def snapshot(wd: Path) -> dict:
    """What a run's derived outputs of EXP hold (the PDF has a creation date: its record)."""
    o = outputs(wd)
    with xr.open_dataset(o["summary"]) as summary:
        summary = summary.load()
    return {
        "sweep": xr.open_zarr(o["sweep"]).load(),
        "summary": summary,
        "png": o["png"].read_bytes(),
        "caption": o["caption"].read_text(),
        # pandas' Styler names each table with a random id
        "status": re.sub(r"T_[0-9a-f]{5}", "T_", o["status"].read_text()),
        "claims_csv": (wd / RESULTS / EXP / "claims.csv").read_text(),
        # the run section states when it was written: its record checks it is intact
        "run_info": check_record(record_of(wd / RESULTS / "run_info.rst"), "run_info", "")[
            "inputs"
        ],
    }


def assert_equal_to(ref: dict, wd: Path) -> None:
    now = snapshot(wd)
    science_equal(now["sweep"], ref["sweep"])
    xr.testing.assert_identical(now["summary"], ref["summary"])
    for key in ("png", "caption", "status", "claims_csv", "run_info"):
        assert now[key] == ref[key], key
    check_record(figure_record(outputs(wd)["png"]), "figure", EXP)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    wd = scratch_workflow(tmp_path_factory.mktemp("derived"))
    write_config(wd / "c.yaml", load_test_config(EXP, OTHER))
    proc = snakemake(wd, "--configfile", "c.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return wd, snapshot(wd)


@pytest.fixture
def clone(finished, tmp_path):
    wd = tmp_path / "wd"
    shutil.copytree(finished[0], wd, symlinks=True)
    return wd


def resume(wd: Path) -> subprocess.CompletedProcess:
    """The README's resume: unlock, then the same command again (output of both)."""
    unlock = snakemake(wd, "--configfile", "c.yaml", "--unlock")
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    proc = snakemake(wd, "--configfile", "c.yaml")
    proc.stderr = unlock.stderr + proc.stderr
    return proc


def verify_status(wd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "status", "--configfile", "c.yaml", "--verify"],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _swap_sweep(wd: Path) -> Path:
    sweep = outputs(wd)["sweep"]
    shutil.rmtree(sweep)
    shutil.copytree(outputs(wd, OTHER)["sweep"], sweep)  # a newer copy of the other's
    return sweep


def _change_a_value(wd: Path) -> Path:
    summary = outputs(wd)["summary"]
    with xr.open_dataset(summary) as ds:
        ds = ds.load()
    name = next(v for v in ds.data_vars if v.endswith("_mean") and ds[v].dtype.kind == "f")
    ds[name].values[(0,) * ds[name].ndim] += 0.125
    ds.to_netcdf(summary)  # the file still opens
    return summary


def _truncate_summary(wd: Path) -> Path:
    summary = outputs(wd)["summary"]
    data = summary.read_bytes()
    summary.write_bytes(data[: len(data) // 2])
    return summary


def _other_summary(wd: Path) -> Path:
    summary = outputs(wd)["summary"]
    shutil.copy(outputs(wd, OTHER)["summary"], summary)
    return summary


def _other_summary_and_record(wd: Path) -> Path:
    summary = _other_summary(wd)
    shutil.copy(record_of(outputs(wd, OTHER)["summary"]), record_of(summary))
    return summary


def _empty_png(wd: Path) -> Path:
    png = outputs(wd)["png"]
    png.write_bytes(b"")
    return png


def _edit_caption(wd: Path) -> Path:
    caption = outputs(wd)["caption"]
    caption.write_text(caption.read_text().replace("0", "1"))
    return caption


def _edit_status(wd: Path) -> Path:
    status = outputs(wd)["status"]
    status.write_text(status.read_text() + "<p>edited</p>")
    return status


def _edit_claims_csv(wd: Path) -> Path:
    csv = wd / RESULTS / EXP / "claims.csv"
    csv.write_text(csv.read_text() + "edited\n")
    return csv


def _edit_run_info(wd: Path) -> Path:
    rst = wd / RESULTS / "run_info.rst"
    rst.write_text(rst.read_text().replace("1", "7"))
    return rst


#: one row of the issue's table each (and the captions and status table beside them)
ROWS = {
    "sweep_replaced_by_another_experiments": _swap_sweep,
    "one_summary_value_changed": _change_a_value,
    "summary_truncated": _truncate_summary,
    "summary_replaced_by_another_experiments": _other_summary,
    "summary_and_record_replaced_by_another_experiments": _other_summary_and_record,
    "figure_png_emptied": _empty_png,
    "caption_edited": _edit_caption,
    "status_table_edited": _edit_status,
    "claims_csv_edited": _edit_claims_csv,
    "run_info_edited": _edit_run_info,
}


@pytest.mark.slow
@pytest.mark.parametrize("row", ROWS)
def test_damaged_derived_output_is_reported_and_rebuilt_by_the_resume(row, finished, clone):
    damaged = ROWS[row](clone)
    report = verify_status(clone)
    assert "derived output (rebuilt by the next run)" in report and str(damaged.name) in report
    proc = resume(clone)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "attnsvm: warning:" in proc.stderr and damaged.name in proc.stderr
    assert_equal_to(finished[1], clone)
    assert "derived output (rebuilt" not in verify_status(clone)


# ------------------------------------------------------------------ in process, no Snakemake


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Results of EXP and OTHER as the workflow writes them (blocks, sweep, summary; no
    figures), computed in-process."""
    from attnsvm.sweep.collect import write_sweep
    from attnsvm.sweep.summary import write_summary
    from attnsvm.sweep.worker import write_block

    root = tmp_path_factory.mktemp("tiny") / "results"
    plan = Plan.from_config({**load_test_config(EXP, OTHER), "results": str(root)})
    for exp, e in plan.experiments.items():
        for name, b in plan.blocks(exp).items():
            write_block(b.cells, plan.paths.block(exp, name), experiment=exp, block=name,
                        device="cpu")  # fmt: skip
        write_sweep(e, plan.paths.blocks_dir(exp), plan.paths.sweep(exp))
        write_summary(plan.paths.sweep(exp), plan.paths.summary(exp))
    return root, plan


@pytest.fixture
def tiny_copy(tiny, tmp_path):
    root, plan = tiny
    shutil.copytree(root, tmp_path / "results", symlinks=True)
    config = {**load_test_config(EXP, OTHER), "results": str(tmp_path / "results")}
    return tmp_path / "results", Plan.from_config(config)


def test_intact_derived_outputs_are_kept(tiny_copy):
    root, plan = tiny_copy
    assert plan.repair() == []
    assert (root / EXP / "summary.nc").exists() and (root / EXP / "sweep.zarr").exists()


@pytest.mark.parametrize(
    ("fault", "gone"),
    [
        ("swap_sweep", ("sweep.zarr", "summary.nc")),
        ("truncate_summary", ("summary.nc",)),
        ("other_summary", ("summary.nc",)),
        ("no_record", ("summary.nc",)),
    ],
)
def test_repair_removes_what_does_not_check_out_and_a_dry_run_changes_nothing(
    fault, gone, tiny_copy
):
    root, plan = tiny_copy
    d, other = root / EXP, root / OTHER
    if fault == "swap_sweep":
        shutil.rmtree(d / "sweep.zarr")
        shutil.copytree(other / "sweep.zarr", d / "sweep.zarr")
    elif fault == "truncate_summary":
        (d / "summary.nc").write_bytes((d / "summary.nc").read_bytes()[:100])
    elif fault == "other_summary":
        shutil.copy(other / "summary.nc", d / "summary.nc")
        shutil.copy(record_of(other / "summary.nc"), record_of(d / "summary.nc"))
    else:
        record_of(d / "summary.nc").unlink()
    dry = plan.repair(dry_run=True)
    assert len(dry) == 1 and gone[0] in dry[0] and "will be rebuilt" in dry[0], dry
    assert all((d / name).exists() for name in gone)
    warnings = plan.repair()
    assert len(warnings) == 1 and str(d / gone[0]) in warnings[0], warnings
    assert not any((d / name).exists() for name in gone)
    assert (other / "summary.nc").exists()  # the other experiment is left alone


def test_consumers_refuse_a_summary_that_does_not_check_out_naming_it(tiny_copy, tmp_path):
    from attnsvm.report.draw import make_figure
    from attnsvm.report.status_table import write_status_table
    from attnsvm.sweep.summary import write_summary

    root, _ = tiny_copy
    d = root / EXP
    data = bytearray((d / "summary.nc").read_bytes())
    data[-1] ^= 0xFF
    (d / "summary.nc").write_bytes(bytes(data))
    with pytest.raises(StoreError, match=f"{d / 'summary.nc'}.*SHA-256"):
        make_figure(
            "e1", d / "sweep.zarr", d / "summary.nc", tmp_path / "f.pdf", tmp_path / "f.png"
        )
    with pytest.raises(StoreError, match=f"{d / 'summary.nc'}.*SHA-256"):
        write_status_table(d / "summary.nc", tmp_path / "status.html")
    assert not (tmp_path / "f.png").exists() and not (tmp_path / "status.html").exists()
    # the other experiment's summary (with its record) is refused for this sweep
    shutil.copy(root / OTHER / "summary.nc", d / "summary.nc")
    shutil.copy(record_of(root / OTHER / "summary.nc"), record_of(d / "summary.nc"))
    with pytest.raises(StoreError, match="built from another sweep"):
        make_figure(
            "e1", d / "sweep.zarr", d / "summary.nc", tmp_path / "f.pdf", tmp_path / "f.png"
        )
    # rebuilt, it checks out and the figure gets its record
    write_summary(d / "sweep.zarr", d / "summary.nc")
    make_figure("e1", d / "sweep.zarr", d / "summary.nc", tmp_path / "f.pdf", tmp_path / "f.png")
    record = json.loads(figure_record(tmp_path / "f.png").read_text())
    assert set(record["inputs"]) == {"summary", "sweep", "code"}
    assert sorted(record["files"]) == ["f.pdf", "f.png"]
    assert np.all([len(sha) == 64 for _, sha in record["files"].values()])


def test_claims_ledger_and_run_level_outputs_are_checked_by_repair_and_consumers(tiny_copy):
    """claims.json / claims.csv, run_info.rst and the claims page record what they were built
    from; a damaged, foreign or stale one is removed by the repair step (a dry run only names
    it) and refused by its consumer with one error naming the file (issue 31)."""
    from attnsvm.claims.ledger import read_ledger, write_ledger
    from attnsvm.report.claims_page import write_claims_page
    from attnsvm.report.text import write_run_info

    root, plan = tiny_copy
    ledgers = {exp: plan.paths.claims(exp) for exp in plan.experiments}
    sweeps = {exp: plan.paths.sweep(exp) for exp in plan.experiments}

    def build():
        for exp in plan.experiments:
            write_ledger(sweeps[exp], plan.claims_config(exp), exp, ledgers[exp],
                         plan.paths.claims_table(exp))  # fmt: skip
        write_run_info({"results": str(root)}, sweeps, plan.paths.run_info())
        write_claims_page(ledgers, {}, plan.paths.claims_rst(), plan.paths.claims_page())

    build()
    assert plan.repair() == []
    d = root / EXP
    record = json.loads(record_of(d / "claims.json").read_text())
    assert sorted(record["files"]) == ["claims.csv", "claims.json"]
    assert set(record["inputs"]) == {"sweep", "claims"}
    run_record = json.loads(record_of(root / "run_info.rst").read_text())
    assert set(run_record["inputs"]) == {f"sweep:{exp}" for exp in plan.experiments}

    # a damaged csv: the consumer refuses it naming the file, the repair removes the ledger
    (d / "claims.csv").write_text((d / "claims.csv").read_text() + "x\n")
    with pytest.raises(StoreError, match=f"{d / 'claims.csv'}: has"):
        read_ledger(d / "claims.json", EXP)
    with pytest.raises(StoreError, match="claims.csv"):
        write_claims_page(ledgers, {}, root / "c.rst", root / "c.html")
    assert not (root / "c.html").exists()
    dry = plan.repair(dry_run=True)
    assert len(dry) == 1 and "claims.csv" in dry[0] and "will be rebuilt" in dry[0], dry
    warnings = plan.repair()  # the page built from the removed ledger goes with it
    assert str(d / "claims.json") in warnings[0], warnings
    assert warnings[1:] == [w for w in warnings[1:] if str(root / "claims.html") in w]
    assert not (d / "claims.json").exists() and not (d / "claims.csv").exists()
    build()
    assert plan.repair() == []

    # another experiment's ledger with its record: foreign
    for name in ("claims.json", "claims.csv", "claims.json.digest.json"):
        shutil.copy(root / OTHER / name, d / name)
    with pytest.raises(StoreError, match="experiment 'e2_local'"):
        read_ledger(d / "claims.json", EXP)
    warnings = plan.repair()
    assert any(str(d / "claims.json") in w for w in warnings), warnings
    build()

    # the run section and the claims page: edited, or built from another sweep / ledger
    rst = root / "run_info.rst"
    rst.write_text(rst.read_text() + "edited")
    warnings = plan.repair()
    assert len(warnings) == 1 and str(rst) in warnings[0] and not rst.exists(), warnings
    build()
    shutil.copy(record_of(root / OTHER / "claims.json"), record_of(d / "claims.json"))
    shutil.copy(root / OTHER / "claims.json", d / "claims.json")
    shutil.copy(root / OTHER / "claims.csv", d / "claims.csv")
    warnings = plan.repair(dry_run=True)
    page = root / "claims.html"
    assert any(str(page) in w and "ledger" in w for w in warnings), warnings
    assert page.exists()


def test_summary_carries_its_own_checksum_checked_by_its_consumers(tiny_copy, tmp_path):
    """summary.nc holds ``data_sha256`` over its data; a changed value is refused even when
    the sidecar record was rewritten to match the changed file (issue 31)."""
    from attnsvm.report.status_table import write_status_table
    from attnsvm.sweep.derived import write_record
    from attnsvm.sweep.summary import CHECKSUM_ATTR, data_checksum, verified_summary

    root, plan = tiny_copy
    summary = root / EXP / "summary.nc"
    with xr.open_dataset(summary) as ds:
        ds = ds.load()
    assert ds.attrs[CHECKSUM_ATTR] == data_checksum(ds)  # survives the NetCDF round trip
    name = next(v for v in ds.data_vars if v.endswith("_mean") and ds[v].dtype.kind == "f")
    ds[name].values[(0,) * ds[name].ndim] += 0.125
    ds.to_netcdf(summary)  # the old checksum, new data
    record = json.loads(record_of(summary).read_text())
    write_record(record_of(summary), "summary", EXP, [summary], record["inputs"])
    with pytest.raises(StoreError, match=f"{summary}: its data do not match its own checksum"):
        verified_summary(summary, root / EXP / "sweep.zarr")
    with pytest.raises(StoreError, match=f"{summary}: its data"):
        write_status_table(summary, tmp_path / "status.html")
    warnings = plan.repair()
    assert len(warnings) == 1 and str(summary) in warnings[0] and "own checksum" in warnings[0]
    assert not summary.exists()
    # without the attribute: refused too
    from attnsvm.sweep.summary import write_summary

    write_summary(root / EXP / "sweep.zarr", summary)
    verified_summary(summary, root / EXP / "sweep.zarr")
    with xr.open_dataset(summary) as ds:
        ds = ds.load()
    del ds.attrs[CHECKSUM_ATTR]
    ds.to_netcdf(summary)
    write_record(record_of(summary), "summary", EXP, [summary], record["inputs"])
    with pytest.raises(StoreError, match="carries no checksum"):
        verified_summary(summary)


def _derive(plan: Plan, exp: str) -> None:
    """What the derive rule runs for ``exp`` (workflow/scripts/derive.py)."""
    from attnsvm.report.derive import write_derived

    p = plan.paths
    write_derived(p.sweep(exp), exp, plan.claims_config(exp), list(plan.figure_captions(exp)),
                  p.summary(exp), p.figures(exp), p.status_table(exp), p.claims(exp),
                  p.claims_table(exp))  # fmt: skip


def test_derive_writes_every_output_as_its_own_function_does(tiny_copy, tmp_path):
    """One process per experiment (the derive rule) writes the summary, every figure and its
    caption, the status table and the claims ledger as each library function writes it alone,
    each with a digest record that checks out (the repair step keeps them all)."""
    from attnsvm.claims.ledger import write_ledger
    from attnsvm.report.draw import make_figure
    from attnsvm.report.status_table import write_status_table
    from attnsvm.sweep.summary import write_summary

    _, plan = tiny_copy
    p = plan.paths
    for exp in plan.experiments:
        _derive(plan, exp)
        alone = tmp_path / exp
        alone.mkdir()
        write_summary(p.sweep(exp), alone / "summary.nc")
        write_status_table(alone / "summary.nc", alone / "status.html")
        write_ledger(p.sweep(exp), plan.claims_config(exp), exp, alone / "c.json", alone / "c.csv")
        with xr.open_dataset(p.summary(exp)) as a, xr.open_dataset(alone / "summary.nc") as b:
            xr.testing.assert_identical(a.load(), b.load())
        figures = list(plan.figure_captions(exp))
        kinds = ("pdf", "png", "caption.rst", "digest.json", "html")  # html: its report page
        files = sorted(f.name for f in Path(p.figures(exp)).iterdir())
        assert figures and files == sorted(f"{fig}.{ext}" for fig in figures for ext in kinds)
        for fig in figures:
            make_figure(fig, p.sweep(exp), alone / "summary.nc", alone / "f.pdf",
                        alone / "f.png", alone / "f.rst")  # fmt: skip
            assert Path(p.figure(exp, fig, "png")).read_bytes() == (alone / "f.png").read_bytes()
            assert Path(plan.figure_captions(exp)[fig]).read_text() == (alone / "f.rst").read_text()

        def html(path):
            return re.sub(r"T_[0-9a-f]{5}", "T_", Path(path).read_text())

        assert html(p.status_table(exp)) == html(alone / "status.html")
        assert Path(p.claims(exp)).read_text() == (alone / "c.json").read_text()
        assert Path(p.claims_table(exp)).read_text() == (alone / "c.csv").read_text()
    assert plan.repair() == []


def test_a_figure_that_does_not_check_out_takes_its_folder(tiny_copy):
    """The figures folder is one output of the derive job: Snakemake reruns the job only when
    an output is missing, so a figure that does not check out, or is absent from the folder,
    removes the whole folder (a dry run only names it); the other outputs and the other
    experiment stay."""
    _, plan = tiny_copy
    for exp in plan.experiments:
        _derive(plan, exp)
    folder = Path(plan.paths.figures(EXP))
    png = Path(plan.paths.figure(EXP, "e1", "png"))
    for name in ("e1.pdf", "e1.png", "e1.caption.rst", "e1.digest.json", "e1.html"):
        (folder / name).unlink()  # the figure is gone, its folder is not
    dry = plan.repair(dry_run=True)
    assert len(dry) == 1 and str(png) in dry[0] and str(folder) in dry[0], dry
    assert "missing" in dry[0] and "will be rebuilt" in dry[0] and folder.is_dir()
    warnings = plan.repair()
    assert len(warnings) == 1 and str(folder) in warnings[0] and not folder.exists(), warnings
    assert Path(plan.paths.summary(EXP)).exists() and Path(plan.paths.claims(EXP)).exists()
    assert Path(plan.paths.figures(OTHER)).is_dir()
    _derive(plan, EXP)
    assert plan.repair() == []
    # an edited caption: its figure does not check out, the folder goes
    caption = Path(plan.figure_captions(EXP)["e1"])
    caption.write_text(caption.read_text() + "edited\n")
    warnings = plan.repair()
    assert len(warnings) == 1 and caption.name in warnings[0] and not folder.exists(), warnings
