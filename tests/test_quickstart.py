"""The Quickstart as a new user meets it, checked the way they read it.

One module fixture runs the README Quickstart's first line (``snakemake && snakemake --report
results/report.html``, the default profile) in a scratch copy of the repository whose
``config/config.yaml`` is the default sweep shrunk as the ``.test`` config is
(tests/workflow_helpers.py), results in ``results/`` as the README says. On that one run:

- the run's outputs, its report and its notebook object (the whole workflow end to end);
- the console: quiet (no per-job boilerplate), ending on the verdicts;
- the report in headless Chromium (Debian's package, installed here when missing and root):
  the title and the verdict summary within the first screen of a 1,400 x 900 window, every
  figure page showing its image with this run's numbers under it, the claims page no wider
  than the window; a screenshot of the landing page is kept (:data:`ARTIFACTS`);
- every command of README.md and docs/*.md (:data:`COVERAGE` says how each runs here), its
  output checked for a traceback and its exit status.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import xarray as xr
import yaml

from tests.workflow_helpers import REPO, load_test_config, opened_stores, scratch_workflow

pytestmark = pytest.mark.slow

#: where the landing page's screenshot is kept (git-ignored; CI keeps the work tree)
ARTIFACTS = REPO / ".test" / "artifacts"
WINDOW = {"width": 1400, "height": 900}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def env() -> dict[str, str]:
    """The environment of a documented command: this interpreter's scripts first on PATH."""
    bindir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}


def sh(wd: Path, command: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=wd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    """The scratch clone after the Quickstart's first line, and the two processes."""
    wd = scratch_workflow(tmp_path_factory.mktemp("quickstart"))
    config = load_test_config()
    config["results"] = "results"
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=100)
    (wd / "config" / "config.yaml").write_text(text)
    sweep = sh(wd, "snakemake", timeout=2400)
    assert sweep.returncode == 0, sweep.stderr[-5000:]
    report = sh(wd, "snakemake --report results/report.html", timeout=900)
    assert report.returncode == 0, report.stderr[-5000:]
    for proc in (sweep, report):
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-5000:]
    return wd, config, sweep, report


# ----------------------------------------------------------------------------- the run
def test_the_run_writes_every_output_and_the_report_states_it(quickstart):
    wd, config, _, _ = quickstart
    from attnsvm import __version__
    from attnsvm.plan import parse_config
    from attnsvm.report.captions import fmt, status_text

    exps = parse_config(config)
    assert (wd / "results/report.html").stat().st_size > 100_000
    report = (wd / "results/report.html").read_text()
    for name, exp in exps.items():
        sweep = xr.open_zarr(wd / f"results/{name}/sweep.zarr")
        assert list(sweep["status"].dims) == list(exp.axes) + ["seed"]
        for axis, values in exp.axes.items():
            assert list(sweep[axis].values) == values
        counts = json.loads(sweep.attrs["status_counts"])
        assert sum(counts.values()) == exp.n_cells
        assert counts["missing"] == 0 and counts["failed"] == 0
        summary = xr.open_dataset(wd / f"results/{name}/summary.nc")
        assert int(summary["count_status"].sum()) == exp.n_cells
        assert status_text(summary) in report, name
        for fig in exp.figures:
            for ext in ("pdf", "png", "html"):
                f = wd / f"results/{name}/figures/{fig}.{ext}"
                assert f.stat().st_size > 5_000, f
    # every figure of the run passes a reviewer's checks (issue 41; attnsvm.report.figure_check)
    from attnsvm.report.figure_check import check_experiment

    res = wd / "results"
    defects = {
        f"{name}/{fig}": [str(d) for d in found]
        for name, exp in exps.items()
        for fig, found in check_experiment(
            res / name / "sweep.zarr", res / name / "summary.nc", exp.figures
        ).items()
        if found
    }
    assert not defects, defects
    assert f"attnsvm {__version__}" in report
    e2 = config["experiments"]["e2_local"]["fixed"]
    assert f"iterations: {e2['iterations']}" in report  # the configuration, as run
    # this run's numbers (tests/test_report.py checks two configs at the level of captions;
    # tests/test_acceptance.py that E2 at the default sweep's size reaches >= 0.99)
    with xr.open_dataset(wd / "results/e2_local/summary.nc") as summary:
        assert fmt(summary["corr_fro_alpha_mean"].sel(param="W")) in report


def test_the_run_opens_as_one_object(quickstart, monkeypatch):
    """The whole run as one object, built from the skeletons its derive jobs kept: no store
    is decoded until a variable is read (tests/test_results.py checks the skeletons)."""
    wd, config, _, _ = quickstart
    import attnsvm
    from attnsvm.plan import parse_config
    from attnsvm.results import by_iteration

    exps = parse_config(config)
    opened = opened_stores(monkeypatch)
    tree = attnsvm.open_results(wd / "results")
    assert opened == []
    assert sorted(tree.children) == sorted(exps)
    assert tree.attrs["blocks"] == sum(exp.n_blocks for exp in exps.values())
    assert tree.attrs["attnsvm_versions"] == [attnsvm.__version__]
    for name, exp in exps.items():
        # every experiment's derive job writes a ledger (empty where it states none); its
        # rows (a claim's verdict, then its pooled and per-point evidence) name each claim
        assert sorted(tree[name].children) == ["claims", "summary", "sweep"], name
        assert set(tree[f"{name}/claims"]["claim"].values) == {c.name for c in exp.claims}
        assert tree[name].attrs["n_cells"] == exp.n_cells
        status = tree[f"{name}/sweep"]["status"]
        assert not status.variable._in_memory  # lazy until used
        assert int((status == 0).sum()) == json.loads(tree[name].attrs["status_counts"])["ok"]
    with xr.open_dataset(wd / "results/e2_local/summary.nc") as e2:
        want = by_iteration(e2.load())
    xr.testing.assert_identical(tree["e2_local/summary"].to_dataset().load(), want)


# ----------------------------------------------------------------------------- the console
def test_the_console_is_quiet_and_ends_on_the_verdicts(quickstart):
    wd, config, sweep, _ = quickstart
    from attnsvm.claims.ledger import counts, read_ledger

    text = sweep.stdout + sweep.stderr
    lines = text.splitlines()
    assert "Shell command" not in text and "resources:" not in text
    jobs = text.count("Finished jobid")
    assert jobs > len(config["experiments"])
    assert len(lines) < 6 * jobs + 40, f"{len(lines)} lines for {jobs} jobs"  # ~4 per job
    entries = [
        e
        for name in config["experiments"]
        for e in read_ledger(wd / f"results/{name}/claims.json", name)["claims"]
    ]
    c = counts(entries)
    last = lines[-1]
    assert last.startswith(f"{c['PASS']} PASS, {c['FAIL']} FAIL, {c['INCONCLUSIVE']} INCONCLUSIVE")
    assert "report: results/report.html" in last


# ----------------------------------------------------------------------------- the browser
def chromium() -> str:
    """Debian's Chromium, installed with apt-get when missing and root (as tests/slurm
    installs SLURM); skipped, saying why, where neither is possible."""
    if not Path(CHROMIUM).exists():
        if os.name != "posix" or os.geteuid() != 0 or shutil.which("apt-get") is None:
            pytest.skip("headless Chromium unavailable: /usr/bin/chromium missing, not root")
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=900,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            )
            assert proc.returncode == 0, proc.stderr[-3000:]
    return CHROMIUM


@pytest.fixture(scope="module")
def page(quickstart):
    """The report open in headless Chromium at 1,400 x 900."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
    wd = quickstart[0]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        tab = browser.new_page(viewport=WINDOW)
        tab.goto((wd / "results/report.html").as_uri())
        tab.wait_for_selector("#attnsvm-verdicts", timeout=60_000)
        yield tab
        browser.close()


def in_first_screen(page, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= WINDOW["height"]


def test_the_report_opens_on_the_answer(quickstart, page):
    assert page.evaluate("window.scrollY") == 0
    assert in_first_screen(page, "h1:has-text('attnsvm sweep report')")
    assert in_first_screen(page, "#attnsvm-verdicts")
    assert in_first_screen(page, "table.attnsvm-claims tbody tr")  # the first claim, FAIL first
    verdicts = page.locator("table.attnsvm-claims tbody tr td:first-child").all_inner_texts()
    order = {"FAIL": 0, "INCONCLUSIVE": 1, "PASS": 2}
    # a cell reads "FAIL* (observation)": the verdict, * when exploratory, the claim's source
    ranks = [order[v.split()[0].rstrip("*")] for v in verdicts]
    assert verdicts and ranks == sorted(ranks)
    assert page.locator("details.attnsvm-config").get_attribute("open") is None  # collapsed
    content = page.content()
    assert "\\xA7" not in content and "§" in content  # UTF-8, not YAML's escapes
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-landing.png"))
    assert (ARTIFACTS / "report-landing.png").stat().st_size > 20_000


def _show(page, result: str):
    """Open a result of the report as its list entry does; returns the frame showing it."""
    page.evaluate(
        "path => app.setView({content: 'html', contentPath: results[path].data_uri,"
        " resultPath: path})",
        result,
    )
    page.wait_for_selector("iframe")
    frame = page.frames[-1]
    frame.wait_for_load_state()
    return frame


def test_every_figure_page_shows_its_image_and_this_runs_numbers(quickstart, page):
    wd, config, _, _ = quickstart
    results = page.evaluate("Object.keys(results)")
    for name, exp in config["experiments"].items():
        for fig in exp["figures"]:
            path = f"results/{name}/figures/{fig}.html"
            assert path in results, path
            frame = _show(page, path)
            width = frame.evaluate(
                "() => { const i = document.querySelector('figure img');"
                " return i && i.complete ? i.naturalWidth : 0; }"
            )
            assert width > 300, path
            caption = frame.locator("figcaption").inner_text()
            assert "This run" in caption, path


def test_the_claims_page_fits_the_window(quickstart, page):
    frame = _show(page, "results/claims.html")
    width = frame.evaluate("document.documentElement.scrollWidth")
    assert width <= frame.evaluate("window.innerWidth"), "sideways scrolling"
    labels = frame.locator("td.text").all_inner_texts()
    assert labels and not any(t.startswith("pooled: pooled") for t in labels)


# ----------------------------------------------------------------------------- the docs
@dataclass(frozen=True)
class Cover:
    """How a documented command runs here: ``run`` (None: as written; else what covers it)
    and ``why`` that covers it; ``codes``: the exit statuses it may end with."""

    run: str | None = None
    why: str = "run as written"
    codes: tuple[int, ...] = (0,)
    in_repo: bool = False  # runs in the repository (bench/, tests/), not the run's clone


_SELF = "the suite itself: CI runs this very line (.ci/run)"
_PAPER = "config/paper.yaml is hours of CPU: planned in full (--dry-run), not run"
_BEYOND = "config/beyond.yaml is about 2 CPU-hours: planned in full (--dry-run), not run"
#: a command that refuses (results that do not exist here): any non-zero exit, no traceback
REFUSES = tuple(range(1, 256))

#: Every shell command of README.md and docs/*.md (fenced bash blocks and inline commands),
#: and how this module runs it against the Quickstart run.
COVERAGE: dict[str, Cover] = {
    # README.md
    'pip install torch==2.13.0 -e ".[workflow]" && snakemake && snakemake --report '
    "results/report.html": Cover(
        "true",
        "the fixture ran `snakemake && snakemake --report results/report.html` (its exit and"
        " output are checked there); the pip part is the install CI made with the second line",
    ),
    'pip install torch==2.13.0 -e ".[test]" && python -m pytest': Cover("true", _SELF),
    "attnsvm check-config config/paper.yaml": Cover(),
    "snakemake --workflow-profile workflow/profiles/default --configfile config/paper.yaml": Cover(
        "snakemake --workflow-profile workflow/profiles/default --configfile config/paper.yaml"
        " --dry-run",
        _PAPER,
    ),
    "attnsvm status --configfile config/paper.yaml": Cover(),
    "attnsvm claims --configfile config/paper.yaml": Cover(
        None, "refuses: the paper run has not run here", REFUSES
    ),
    "attnsvm run-cell --d 10 --T 8 --n 6 --param KQ --seed 0": Cover(),
    "attnsvm run-cell --d 10 --T 8 --n 6 --param W --seed 0 --json": Cover(),
    "attnsvm run-cell --help": Cover(),
    "snakemake --workflow-profile workflow/profiles/default --unlock && snakemake "
    "--workflow-profile workflow/profiles/default": Cover(),
    'pip install -e ".[slurm]"': Cover(
        "true", "the test extra holds the slurm extra (test_the_slurm_extra_is_installed)"
    ),
    "snakemake --workflow-profile workflow/profiles/slurm --configfile config/paper.yaml": Cover(
        "snakemake --workflow-profile workflow/profiles/slurm --configfile config/paper.yaml"
        " --dry-run",
        "needs a SLURM cluster: planned (--dry-run) here; tests/test_slurm.py runs the profile"
        " on a local cluster",
    ),
    "attnsvm open [RESULTS]": Cover("attnsvm open results", "[RESULTS]: results"),
    "attnsvm open results/paper": Cover(
        None, "refuses: the paper run has not run here (one clear error)", REFUSES
    ),
    "pip install -e .": Cover(
        "python -c 'import attnsvm; attnsvm.run_cells'",
        "the library without the workflow extra: tests/test_quickstart.py imports it without"
        " snakemake (test_the_library_needs_no_snakemake)",
    ),
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu": Cover(
        "python -c 'import torch'", "CI's torch is that CPU wheel, installed by the second line"
    ),
    "attnsvm status": Cover(),
    # docs/claims.md
    "attnsvm claims": Cover(None, "exit 1 where a claim FAILs (docs/claims.md)", (0, 1)),
    "attnsvm claims --json": Cover(None, "exit 1 where a claim FAILs", (0, 1)),
    "attnsvm check-config": Cover(
        "attnsvm check-config config/config.yaml", "the config of this run"
    ),
    # docs/development.md
    'python -m pytest -m "not slow"': Cover("true", _SELF),
    "snakemake --lint": Cover(),
    "python -m tests.workflow_helpers": Cover(
        "true", "writes .test/config/config.yaml; tests/test_workflow.py checks it is current"
    ),
    "snakemake -n": Cover(),
    "attnsvm generate": Cover(
        "attnsvm generate --check", "writes files; --check says they are current", in_repo=True
    ),
    "python bench/tables.py": Cover(
        "true", "writes BENCHMARKS.md; tests/test_benchmarks.py checks it is current"
    ),
    "snakemake --configfile .test/config/config.yaml": Cover(
        "snakemake --configfile .test/config/config.yaml --dry-run",
        "the fixture ran this config (its results in results/); planned here",
    ),
    # docs/extending.md
    "snakemake --workflow-profile workflow/profiles/default --configfile "
    "config/logit_scale.yaml": Cover(
        "true", "the worked example's new field and figure exist only once added (the doc)"
    ),
    "attnsvm claims --configfile config/logit_scale.yaml": Cover(
        "true", "the worked example's config exists only once added (the doc)"
    ),
    "attnsvm generate --check": Cover(in_repo=True),
    # docs/resume.md
    "snakemake ... --forcerun $(attnsvm status --configfile config/config.yaml "
    "--failed-paths)": Cover(
        "snakemake --workflow-profile workflow/profiles/default --forcerun $(attnsvm status"
        " --configfile config/config.yaml --failed-paths) --dry-run",
        "...: the run's own options",
    ),
    "snakemake ... --unlock && snakemake ...": Cover(
        "snakemake --unlock && snakemake -n", "...: the run's own options"
    ),
    "attnsvm status --verify": Cover(),
    # docs/science.md
    "python bench/bench_svm.py --routes": Cover(
        "python bench/bench_svm.py --help", "a benchmark (minutes): its options", in_repo=True
    ),
    "python bench/bench_scaling.py": Cover(
        "python bench/bench_scaling.py --help", "a benchmark (minutes): its options", in_repo=True
    ),
    "python bench/compare_runs.py BEFORE AFTER": Cover(
        f"python {REPO}/bench/compare_runs.py results results", "a run against itself"
    ),
    "snakemake --configfile <that config>": Cover(
        "snakemake --configfile config/config.yaml -n", "<that config>: this run's"
    ),
    "snakemake --workflow-profile workflow/profiles/default --cores 2 --configfile "
    "config/paper.yaml": Cover(
        "snakemake --workflow-profile workflow/profiles/default --cores 2 --configfile"
        " config/paper.yaml --dry-run",
        _PAPER,
    ),
    "attnsvm claims --configfile <that config>": Cover(
        "attnsvm claims --configfile config/config.yaml", "<that config>: this run's", (0, 1)
    ),
    "attnsvm check-config config/config.yaml": Cover(),
    "attnsvm claims --calibrate": Cover(),
    "attnsvm claims --calibrate [--json]": Cover("attnsvm claims --calibrate --json"),
    "attnsvm claims [--configfile config/paper.yaml]": Cover(
        "attnsvm claims", "[...]: this run's config (the paper's refuses here, above)", (0, 1)
    ),
    "python bench/bench_svm_routes.py": Cover(
        "python bench/bench_svm_routes.py --help",
        "a benchmark (minutes): its options",
        in_repo=True,
    ),
    "snakemake --workflow-profile workflow/profiles/default --cores 2 [--configfile "
    "config/paper.yaml]": Cover(
        "snakemake --workflow-profile workflow/profiles/default --cores 2 --configfile"
        " config/paper.yaml --dry-run",
        _PAPER,
    ),
    "snakemake --cores 2 --configfile config/beyond.yaml": Cover(
        "snakemake --cores 2 --configfile config/beyond.yaml --dry-run", _BEYOND
    ),
    "attnsvm claims --configfile config/beyond.yaml": Cover(
        None, "refuses: the beyond run has not run here", REFUSES
    ),
    # docs/store.md
    "attnsvm status --failed-paths": Cover(),
    "attnsvm open": Cover(),
}

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"`((?:attnsvm|snakemake|python|pip) [^`]*)`")


def documented_commands() -> dict[str, str]:
    """``{command: the file it is in}``: every line of a fenced bash block (comments cut)
    and every inline command of README.md and docs/*.md."""
    found: dict[str, str] = {}
    for doc in DOCS:
        text = doc.read_text()
        for lang, body in _FENCE.findall(text):
            if lang not in ("bash", "sh", "shell", "console"):
                continue
            for line in body.splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command:
                    found.setdefault(command, doc.name)
        for span in _INLINE.findall(_FENCE.sub("", text)):
            found.setdefault(" ".join(span.split()), doc.name)
    return found


def test_every_documented_command_has_a_way_to_run():
    found = documented_commands()
    assert sorted(set(found) - set(COVERAGE)) == [], "add them to COVERAGE"
    assert sorted(set(COVERAGE) - set(found)) == [], "no longer documented"


@pytest.mark.parametrize("command", list(COVERAGE))
def test_documented_command_runs(quickstart, command):
    wd = quickstart[0]
    cover = COVERAGE[command]
    proc = sh(REPO if cover.in_repo else wd, cover.run or command, timeout=900)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    assert proc.returncode in cover.codes, (proc.returncode, out[-3000:])


def test_the_readmes_notebook_runs_on_the_run(quickstart):
    """The README's notebook section on this run (with claims ledgers whose evidence rows
    have no verdict: `attnsvm open` once crashed sorting them)."""
    wd = quickstart[0]
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Open results in a notebook") :]
    code = section[section.index("```python\n") + 10 : section.index("```\n", 10)]
    namespace: dict = {}
    exec(code.replace('"results"', repr(str(wd / "results"))), namespace)  # noqa: S102
    assert isinstance(namespace["runs"]["e2_local/sweep"][["corr_fro_alpha"]], xr.Dataset)


def test_the_slurm_extra_is_installed():
    """README's ``pip install -e ".[slurm]"`` adds nothing to what the test extra holds."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(extras["slurm"]) <= set(extras["test"])


# ----------------------------------------------------------------------------- promises
def test_every_commit_the_docs_name_is_in_the_history():
    """No citation of a commit that is not in the history (README, docs)."""
    named = set()
    for doc in DOCS:
        named |= set(re.findall(r"\bcommits? ([0-9a-f]{7,40})\b", doc.read_text()))
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no history to check the commits against")
    missing = [
        c
        for c in sorted(named)
        if subprocess.run(
            ["git", "cat-file", "-e", f"{c}^{{commit}}"], cwd=REPO, capture_output=True
        ).returncode
    ]
    assert missing == []


def test_the_readme_states_the_slurm_profiles_gpu_request():
    profile = yaml.safe_load((REPO / "workflow/profiles/slurm/profile.yaml").read_text())
    gpus = profile.get("set-resources", {}).get("block", {}).get("gpu")
    readme = " ".join((REPO / "README.md").read_text().split())
    if gpus:
        assert f"each asking for one GPU (`gpu: {gpus}`" in readme


def test_each_shipped_config_writes_into_its_own_results_directory():
    """A paper or beyond run never writes over the Quickstart's results (README)."""
    from attnsvm.config.files import load_config_file

    dirs = {
        path.name: Path(load_config_file(path).get("results", "results")).resolve()
        for path in sorted((REPO / "config").glob("*.yaml"))
    }
    assert len(set(dirs.values())) == len(dirs), dirs
    readme = " ".join((REPO / "README.md").read_text().split())
    table = (REPO / "config/README.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| `results` | `results`"))
    for name, path in dirs.items():
        rel = path.relative_to(REPO)
        assert f"`config/{name}` into `{rel}/`" in readme, name
        assert f"`{rel}` ({name})" in row, name


def test_the_rules_conda_env_is_generated_from_pyproject():
    """workflow/envs/attnsvm.yaml holds every dependency of pyproject.toml (under its
    conda-forge name, same bounds) and is current (attnsvm generate)."""
    import tomllib

    from attnsvm import generate

    env = yaml.safe_load((REPO / "workflow/envs/attnsvm.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    want = {
        generate.CONDA_NAMES.get(name, name.lower()) + spec
        for name, spec in (
            re.match(r"([\w.-]+)(.*)", d.replace(" ", "")).groups() for d in project["dependencies"]
        )
    }
    conda = {d for d in env["dependencies"] if isinstance(d, str)}
    assert conda == want | {"python" + project["requires-python"], "pip"}
    assert "workflow/envs/attnsvm.yaml" not in generate.stale()


def test_the_library_needs_no_snakemake():
    """``attnsvm`` and ``run_cells`` import without Snakemake (the ``workflow`` extra)."""
    code = (
        "import sys; sys.modules['snakemake'] = None\n"
        "import attnsvm, attnsvm.results, attnsvm.cli\n"
        "from attnsvm import Cell, run_cells\n"
        "r = run_cells([Cell(d=4, T=3, n=2, iterations=20, seed=0)], device='cpu')\n"
        "assert r[0].status == 'ok', r[0].message\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


# ----------------------------------------------------------------------------- CLI odds
def test_an_unknown_option_gets_the_subcommands_did_you_mean():
    proc = subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "run-cell", "--dd", "10"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "attnsvm run-cell: error: unrecognized arguments: --dd 10; did you mean --d?" in (
        proc.stderr
    )


def test_check_config_states_totals_in_a_readable_unit_and_ends_ok():
    from attnsvm.config.cost import format_cpu_time

    assert [format_cpu_time(s) for s in (2.6, 245, 11_520)] == [
        "2.6 CPU-s",
        "4.1 CPU-min",
        "3.2 CPU-h",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "check-config", "config/config.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.fullmatch(
        r"total: \d+ experiments, [\d,]+ cells in [\d,]+ blocks, ~[\d.]+ CPU-(s|min|h) "
        r"predicted; results in results/",
        lines[-2],
    ), lines[-2]
    assert lines[-1] == "OK: config/config.yaml is a valid config"
    assert "CPU-hours" not in proc.stdout
