"""The report tells the truth about its run: captions and run info computed from the run."""

from __future__ import annotations

import pytest
import xarray as xr
from docutils.core import publish_parts

from attnsvm import codes
from attnsvm.plan import parse_experiment
from attnsvm.report.captions import fmt
from attnsvm.report.draw import make_figure
from attnsvm.sweep.summary import summarize

CONFIGS = {
    "small": {"fixed": {"n": 3, "T": 3, "d": 3, "iterations": 30, "checkpoint_count": 5}},
    "large": {"fixed": {"n": 3, "T": 4, "d": 5, "iterations": 60, "checkpoint_count": 5}},
}


def render(rst: str) -> str:
    """HTML of an RST text as the Snakemake report renders it; any RST warning fails."""
    return publish_parts(rst, writer="html", settings_overrides={"halt_level": 2})["body"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two different experiments (configs) through the real pipeline, with their captions."""
    from attnsvm.sweep.collect import collect_sweep
    from attnsvm.sweep.worker import write_block

    out = {}
    for name, raw in CONFIGS.items():
        tmp = tmp_path_factory.mktemp(name)
        exp = parse_experiment(
            name, {**raw, "grid": {"param": ["W", "KQ"]}, "seeds": 2, "figures": ["e2"]}, 64
        )
        paths = {
            b.name: write_block(
                list(b.cells), tmp / f"{b.name}.zarr", experiment=name, block=b.name, device="cpu"
            )
            for b in exp.blocks()
        }
        sweep = collect_sweep(exp, paths)
        summary = summarize(sweep)
        make_figure("e2", sweep, summary, tmp / "e2.pdf", tmp / "e2.png", tmp / "e2.caption.rst")
        out[name] = (summary, (tmp / "e2.caption.rst").read_text())
    return out


def own_numbers(summary: xr.Dataset) -> list[str]:
    """Numbers of a run that its E2 caption must state, computed here from its summary."""
    ok = int(summary["count_status"].sel(status="ok").sum())
    return [
        f"{fmt(summary['corr_fro_alpha_mean'].sel(param='W'))}",
        f"{fmt(summary['corr_nuc_alpha_mean'].sel(param='KQ'))}",
        f"{fmt(summary['corr_nuc_alpha_mean'].sel(param='W'))}",
        f"{ok} ok",
        f"iterations = {summary.attrs['fixed_iterations']}",
        f"d = {summary.attrs['fixed_d']}",
    ]


def test_each_caption_states_its_own_runs_numbers(runs):
    small, large = (own_numbers(runs[k][0]) for k in ("small", "large"))
    assert small != large
    for name, numbers in (("small", small), ("large", large)):
        html = render(runs[name][1])
        for number in numbers:
            assert number in html, (name, number)
    # the settings of one run never appear in the other's caption
    assert "iterations = 60" not in render(runs["small"][1])
    assert "iterations = 30" not in render(runs["large"][1])


def test_caption_has_no_dict_repr_and_names_every_status(runs):
    summary, text = runs["small"]
    html = render(text)
    assert "{'" not in html and "{&quot;" not in html
    for status in codes.CELL_STATUS:
        assert f" {status}" in html
    assert "What to see" in html and "This run" in html


def test_run_info_states_versions_commit_counts_and_config(runs, tmp_path):
    from attnsvm import __version__, provenance
    from attnsvm.report.text import run_info_rst
    from attnsvm.sweep.collect import collect_sweep
    from attnsvm.sweep.store import write_atomic

    exp = parse_experiment(
        "tiny", {**CONFIGS["small"], "grid": {"param": ["W"]}, "seeds": 1, "figures": ["e2"]}, 64
    )
    sweep = collect_sweep(exp, {})  # nothing computed yet: every cell missing
    write_atomic(sweep, tmp_path / "sweep.zarr", consolidated=True)
    config = {"results": "results", "experiments": {"tiny": CONFIGS["small"]}}
    html = render(run_info_rst(config, {"tiny": tmp_path / "sweep.zarr"}))
    assert f"attnsvm {__version__}" in html
    assert (provenance.git_commit() or "unknown") in html
    assert "checkpoint_count: 5" in html  # the configuration, as YAML
    assert "<td>1</td>" in html  # one missing cell in the table of cells per status


def test_status_table_is_styled_and_counts_every_cell(runs, tmp_path):
    from attnsvm.report.status_table import write_status_table
    from attnsvm.sweep.derived import record_of, write_record

    summary, _ = runs["small"]
    from attnsvm.sweep.summary import CHECKSUM_ATTR, data_checksum

    summary.attrs[CHECKSUM_ATTR] = data_checksum(summary)  # as write_summary does
    summary.to_netcdf(tmp_path / "summary.nc")
    # the summary's digest record, as summarize writes it (the table checks it)
    write_record(record_of(tmp_path / "summary.nc"), "summary", "", [tmp_path / "summary.nc"], {})
    html = write_status_table(tmp_path / "summary.nc", tmp_path / "status.html").read_text()
    assert "border='1'" not in html and "<style>" in html and 'class="attnsvm"' in html
    ok = int(summary["count_status"].sel(status="ok").sum())
    assert f"Totals: ok: {ok}, nonfinite: 0, failed: 0, missing: 0" in html
    assert "SVM solves per status" in html


def test_report_lists_paper_experiments_first(repo):
    import yaml

    from attnsvm.plan import Plan

    plan = Plan.from_config(yaml.safe_load((repo / "config/config.yaml").read_text()))
    cats = {exp: plan.report_category(exp) for exp in plan.experiments}
    paper = [
        e
        for e, c in cats.items()
        if set(plan.experiments[e].figures) <= {f"e{i}" for i in range(1, 7)}
    ]
    assert len(paper) == 6
    # the report sorts categories by name: every paper category before every other one
    assert max(cats[e] for e in paper) < min(c for e, c in cats.items() if e not in paper)
    assert plan.figure_labels("e2_local", "e2") == {"result": "figure E2", "experiment": "e2_local"}


def test_every_caption_text_is_valid_rst():
    from attnsvm.report.figures import FIGURES, figure

    TEXT = {fig.name: (fig.what, fig.look) for fig in map(figure, FIGURES)}

    assert set(TEXT) == set(FIGURES)
    for name, (what, look) in TEXT.items():
        html = render(f"{what}\n\n{look}\n")  # an RST warning raises
        assert "system-message" not in html and "`" not in html, name
    assert "<sub>mm</sub>(α)" in render(TEXT["rank_gd"][0])


def test_per_point_states_every_number_whatever_the_grid():
    """A caption line lists every grid point, also of axes the figure does not expect (a
    config may add one), instead of failing or averaging them silently."""
    import numpy as np

    from attnsvm.report.captions import per_point

    ds = xr.Dataset(
        {"a": (("d", "param"), np.array([[0.5, 0.25], [1.0, 2.0]]))},
        coords={"d": [3, 4], "param": ["W", "KQ"]},
    )
    assert per_point(ds, "a", [], param="W") == "d = 3: 0.5; d = 4: 1"
    assert per_point(ds, "a", ["param"]).count(":") == 4
    assert per_point(ds, "a", ["d"], lambda x: x.mean()) == "d = 3: 0.375; d = 4: 1.5"
    assert per_point(ds, "a", [], lambda x: x.sel(param="KQ")) == "d = 3: 0.25; d = 4: 2"
    assert per_point(ds, "missing", ["d"]) == "n/a"


@pytest.mark.parametrize("name", ["e1", "e2", "e3", "e4", "e5", "e6"])
def test_paper_figure_captions_render_from_damaged_sweeps(name):
    """Every E1-E6 caption renders (valid RST) from a sweep with missing, failed and
    infeasible cells, and states its cell counts."""
    from attnsvm.report.captions import figure_caption, status_text
    from tests.test_figures import synthetic_sweep

    summary = summarize(synthetic_sweep(name))
    html = render(figure_caption(name, summary, ["a note with W_mm and ||W||"]))
    assert status_text(summary) in html and "1 missing" in html
    assert "This run" in html and "a note with W_mm and ||W||" in html
