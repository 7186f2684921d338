"""What the Snakemake workflow needs from a config: the one validation, blocks, paths, estimates.

:func:`parse_config` is the one validation of a sweep config: the workflow
(``workflow/rules/common.smk``), ``attnsvm check-config`` and ``attnsvm status`` all call it.
It checks the config against the models generated from the field registry
(:mod:`attnsvm.config`) and the figure names against the figure registry
(:mod:`attnsvm.report.figures`): this module is where the workflow's registries meet, above
the packages that define them. Every output path of the workflow is defined once, in
:mod:`attnsvm.sweep.paths`; the rules, the plan and the ``attnsvm status`` command all use it.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from attnsvm.claims.spec import check_claims, claims_json
from attnsvm.config import grid
from attnsvm.config.cell import cells_digest
from attnsvm.config.errors import ConfigError
from attnsvm.config.fields import DEFAULTS
from attnsvm.config.grid import Block, Experiment
from attnsvm.report.figures import FIGURES, PAPER_FIGURES, figure_tasks
from attnsvm.sweep import packs, plan_cache
from attnsvm.sweep.collect import read_workers
from attnsvm.sweep.derived import (
    blocks_digest,
    check_record,
    claims_inputs,
    claims_page_inputs,
    figure_code_digest,
    figure_record,
    record_of,
    run_info_inputs,
    sweep_digest,
)
from attnsvm.sweep.failed import current_failures
from attnsvm.sweep.forkserver import code_fingerprint
from attnsvm.sweep.integrity import (
    StoreError,
    VerifyCache,
    repair_blocks,
    store_snapshot,
    verify_store,
)
from attnsvm.sweep.lock import lock_experiments, unlock_experiments
from attnsvm.sweep.paths import Paths
from attnsvm.sweep.summary import verified_summary

log = logging.getLogger(__name__)


def parse_config(config: Any) -> dict[str, Experiment]:
    """The one validation of a sweep config (:func:`attnsvm.config.grid.parse_sweep` with the
    figure registry's names, then every claim against what its experiment stores,
    :func:`attnsvm.claims.spec.check_claims`): experiments whose cells and claims are all
    valid, or one :class:`~attnsvm.config.errors.ConfigError` line naming the key, the value
    and what is allowed."""
    experiments = grid.parse_sweep(config, figures=FIGURES)
    for exp in experiments.values():
        check_figures(exp)
        check_claims(exp)
    return experiments


def check_figures(exp: Experiment) -> None:
    """Every figure of ``exp`` draws the task of each of its cells (the figure registry's
    ``TASKS``, :func:`attnsvm.report.figures.figure_tasks`); otherwise one ConfigError naming
    the experiment, the figure and the tasks (docs/science.md §6)."""
    if "task" in exp.axes:
        tasks = [str(t) for t in exp.axes["task"]]
    else:
        tasks = [str(exp.fixed.get("task", DEFAULTS["task"]))]
    for fig in exp.figures:
        allowed = figure_tasks(fig)
        other = sorted({t for t in tasks if t not in allowed})
        if other:
            raise ConfigError(
                f"experiment {exp.name!r}: figure {fig!r} draws cells of task "
                f"{', '.join(allowed)}, but the experiment has cells of task {', '.join(other)}; "
                "set 'task' or pick another figure"
            )


def parse_experiment(
    name: str, raw: Any, default_block_size: int, mem_mb: int | None = None
) -> Experiment:
    """One experiment entry validated as :func:`parse_config` would (tests, benchmarks)."""
    exp = grid.parse_experiment(name, raw, default_block_size, mem_mb, figures=FIGURES)
    check_figures(exp)
    check_claims(exp)
    return exp


JOB_STARTUP_SECONDS = 3.0
COLLECT_THREADS = 2  # most processes of a collect job (2 fit any node; workflow/profiles)
LOCAL_HOURS_WARN = 12.0
BLOCK_MINUTES_WARN = 24 * 60
BLOCK_SLACK_MINUTES = 5  # start-up slack of every block job's runtime request


def array_rules(setting: str | None) -> set[str]:
    """Rule names selected by snakemake-executor-plugin-slurm's ``--slurm-array-jobs`` value.

    The plugin accepts ``"rule1, rule2"`` (commas or semicolons) or ``"all"``; None or an
    empty value selects nothing (workflow/profiles/README.md, "Job arrays").
    """
    if not setting:
        return set()
    return {r.strip() for r in str(setting).replace(";", ",").split(",") if r.strip()}


class Plan:
    """A validated sweep configuration as the workflow sees it."""

    def __init__(self, experiments: dict[str, Experiment], results: str):
        self.paths = Paths(results)
        # the packs of the plan that last ran on these results: kept (attnsvm.sweep.packs)
        self.experiments = {
            name: packs.kept(exp, self.paths.experiment(name)) for name, exp in experiments.items()
        }
        self.results = results
        self._blocks = {
            name: {b.name: b for b in exp.blocks()} for name, exp in self.experiments.items()
        }
        self._digests: dict[str, dict[str, str]] = {}  # block_digests, computed once
        self._cached: set[str] = set()  # experiments whose digests came from their cache
        self._array_minutes: int | None = None  # array_block_minutes, computed once
        self._block_priorities: dict[tuple[str, str], int] | None = None  # priority, once
        self._seconds: dict[tuple[str, str], float] = {}  # _predicted, once per block

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Plan:
        """Validate ``config`` (raises :class:`~attnsvm.config.grid.ConfigError`) and plan it."""
        return cls(parse_config(config), str(config.get("results", "results")))

    def remember(self) -> None:
        """The workflow's start, before any job: record every experiment's packs in its
        results (:func:`attnsvm.sweep.packs.write`), so that its jobs, collect, ``attnsvm
        status`` and the next run keep them, and keep its blocks' cells digests
        (:mod:`attnsvm.sweep.plan_cache`), so that the next start does not compute them."""
        for name, exp in self.experiments.items():
            packs.write(exp, self.paths.experiment(name))
            if name not in self._cached:
                plan_cache.write(self.paths.experiment(name), self._digest_key(name),
                                 self._block_digests(name))  # fmt: skip
                self._cached.add(name)

    def blocks(self, exp: str) -> dict[str, Block]:
        return self._blocks[exp]

    def block_digest(self, exp: str, block: str) -> str:
        """Digest of one block's cells: the job's params (a change reruns the job); the job
        builds the cells from the config (:func:`attnsvm.sweep.job.planned_block_job`)."""
        return self._block_digests(exp)[block]

    def block_minutes(self, exp: str, block: str) -> int:
        """Runtime request for a block job in minutes (estimate x 3 + 5 min start-up slack)."""
        return int(BLOCK_SLACK_MINUTES + 3 * self._predicted(exp, block) / 60)

    def _predicted(self, exp: str, block: str) -> float:
        """The cost model's seconds of one block (:meth:`Block.predicted_seconds`), once per
        plan: the runtime requests and the priorities both ask for every block's."""
        key = (exp, block)
        if key not in self._seconds:
            self._seconds[key] = self._blocks[exp][block].predicted_seconds()
        return self._seconds[key]

    def array_block_minutes(self) -> int:
        """Runtime request of every block job when blocks go out as SLURM job arrays.

        snakemake-executor-plugin-slurm (2.x, ``--slurm-array-jobs``) submits all ready jobs of
        a rule as one array with the resources of the first of them (one ``sbatch -t`` for all
        tasks), whatever experiment they belong to. Every block therefore asks for the longest
        :meth:`block_minutes` of the whole plan, so that no task inherits a shorter walltime
        than its own estimate (workflow/profiles/README.md, "Job arrays"). Computed once per
        plan: Snakemake asks each block job for it, so a maximum over the plan at every ask
        would cost blocks^2 cost-model evaluations (hours of planning at 10^4 blocks).
        """
        if self._array_minutes is None:
            self._array_minutes = max(
                (self.block_minutes(e, b) for e in self._blocks for b in self._blocks[e]),
                default=BLOCK_SLACK_MINUTES,
            )
        return self._array_minutes

    def block_runtime(self, exp: str, block: str, array_setting: str | None = None) -> int:
        """The block rule's ``runtime`` resource (minutes) under the executor's array setting.

        ``array_setting`` is the SLURM plugin's ``--slurm-array-jobs`` value (None or empty
        off-cluster and without arrays): when it selects the ``block`` rule, every block asks
        for :meth:`array_block_minutes`, otherwise for its own :meth:`block_minutes`.
        """
        if "block" in array_rules(array_setting) or "all" in array_rules(array_setting):
            return self.array_block_minutes()
        return self.block_minutes(exp, block)

    def priority(self, exp: str, block: str | None = None, results: bool = False) -> int:
        """Snakemake job priority: the longest blocks first, each experiment's results first.

        Blocks run longest predicted first (:meth:`attnsvm.config.grid.Block.predicted_seconds`;
        ties in config order, then block order): on a few cores the sweep then ends on short
        blocks instead of waiting for one long block and its experiment's results while the
        other cores idle (longest processing time first). An experiment's collect and derive
        (``results``) outrank every block, in config order, so they run as soon as that
        experiment's own blocks are done instead of after the whole sweep. Computed for
        every block once per plan.
        """
        order = self._priorities()
        if results:
            return len(order) + len(self.experiments) - list(self.experiments).index(exp)
        if block is None:
            raise ValueError("a block job's priority needs its block")
        return order[(exp, block)]

    def _priorities(self) -> dict[tuple[str, str], int]:
        if self._block_priorities is None:
            keys = [(e, b) for e in self._blocks for b in self._blocks[e]]
            seconds = [self._predicted(e, b) for e, b in keys]
            ranked = sorted(range(len(keys)), key=lambda i: -seconds[i])  # stable: config order
            self._block_priorities = {keys[i]: len(keys) - r for r, i in enumerate(ranked)}
        return self._block_priorities

    def collect_threads(self, exp: str) -> int:
        """Threads of the collect job of ``exp``: the processes it reads block stores with
        (:func:`attnsvm.sweep.collect.read_workers`, at most ``COLLECT_THREADS``). An
        experiment of fewer than 200 blocks is read by one, so its collect takes one core and
        runs beside the block jobs instead of waiting for two free cores (on 2 cores, until
        every block was done)."""
        return read_workers(len(self._blocks[exp]), COLLECT_THREADS)

    def block_seconds(self, exp: str) -> dict[str, float]:
        """Predicted seconds of every block job of ``exp``, start-up included (rough)."""
        return {
            name: self._predicted(exp, name) + JOB_STARTUP_SECONDS for name in self._blocks[exp]
        }

    def block_paths(self, exp: str) -> list[str]:
        return [self.paths.block(exp, b) for b in self._blocks[exp]]

    def block_digests(self, exp: str) -> dict[str, str]:
        """``{block: digest of its cells}``: what a finished store of each block must hold."""
        return dict(self._block_digests(exp))

    def _digest_key(self, exp: str) -> str:
        return plan_cache.key(self.experiment_config(exp), packs.record(self.experiments[exp]),
                              code_fingerprint())  # fmt: skip

    def _block_digests(self, exp: str) -> dict[str, str]:
        """The digests, computed once per plan (the repair step and every block job's params
        ask for them: 2 x 10^4 digests per Snakemake start at 10^4 blocks otherwise), or
        read from what the last start kept for the same settings, packs and code
        (:mod:`attnsvm.sweep.plan_cache`)."""
        if exp not in self._digests:
            blocks = self._blocks[exp]
            kept = plan_cache.read(self.paths.experiment(exp), self._digest_key(exp))
            if kept is not None and set(kept) == set(blocks):
                self._cached.add(exp)
                self._digests[exp] = {name: kept[name] for name in blocks}
            else:
                self._digests[exp] = {name: cells_digest(b.cells) for name, b in blocks.items()}
        return self._digests[exp]

    def repair(self, dry_run: bool = False) -> list[str]:
        """Prepare the results for a run: every block store that is not finished is missing,
        every derived output that does not check out against its digests is missing.

        Damaged, stale or foreign block stores are moved into ``<experiment>/quarantine/``,
        stores of blocks that failed for an environmental reason are removed, so that the
        workflow recomputes those blocks (:func:`attnsvm.sweep.integrity.repair_blocks`); a sweep
        store that does not verify, lacks a block store, is another experiment's or was
        collected from other block stores is removed with its summary (they are rebuilt;
        Snakemake would not rerun collect otherwise). A summary, status table or claims ledger
        whose digest record (:mod:`attnsvm.sweep.derived`) does not match its files or its
        inputs is removed, a figure that does not (or is absent) with its whole figures folder,
        so that Snakemake reruns the experiment's derive job, which rebuilds them. Returns the
        warnings, each naming a path; ``dry_run`` only reports.
        """
        out = []
        for exp in self.experiments:
            blocks_dir = Path(self.paths.blocks_dir(exp))
            finished: dict[str, str] = {}  # manifests read once, for blocks_digest too
            planned = self.block_digests(exp)
            found, redo = repair_blocks(blocks_dir, exp, planned, dry_run, finished)
            out += found
            out += self._repair_derived(exp, {Path(p) for p in redo}, dry_run, finished)
        out += self._repair_run_outputs(dry_run)
        return out

    def _repair_run_outputs(self, dry_run: bool) -> list[str]:
        """The report's run-level inputs (``run_info.rst``: every sweep's digest; the claims
        page: every ledger's SHA-256) that do not check out against their digest records are
        removed, so that Snakemake rebuilds them; returns the warnings."""
        out: list[str] = []
        action = "will be rebuilt" if dry_run else "removed, rebuilt"
        sweeps = {exp: self.paths.sweep(exp) for exp in self.experiments}
        ledgers = {exp: self.paths.claims(exp) for exp in self.experiments}
        checks = [
            (Path(self.paths.run_info()), [Path(self.paths.run_info())], "run_info",
             lambda: run_info_inputs(sweeps)),
            (Path(self.paths.claims_page()),
             [Path(self.paths.claims_page()), Path(self.paths.claims_rst())], "claims_page",
             lambda: claims_page_inputs(ledgers)),
        ]  # fmt: skip
        for main, files, kind, inputs in checks:
            record = record_of(main)
            present = [p for p in (*files, record) if os.path.lexists(p)]
            if not present:
                continue
            try:
                check_record(record, kind, "", inputs())
            except StoreError as err:
                if not dry_run:
                    for p in present:
                        p.unlink()
                out.append(f"derived output {main} does not check out ({err}): {action}")
        return out

    def check_derived(self, exp: str) -> list[str]:
        """What the next run's repair step would rebuild of ``exp``'s derived outputs (sweep,
        summary, figures, status table; nothing is changed): one line per output, naming it
        (``attnsvm status --verify``)."""
        return self._repair_derived(exp, set(), dry_run=True)

    def check_run_outputs(self) -> list[str]:
        """What the next run's repair step would rebuild of the run-level outputs (the report's
        run section and claims page; nothing is changed): one line per output, naming it."""
        return self._repair_run_outputs(dry_run=True)

    def _repair_derived(
        self, exp: str, redo: set[Path], dry_run: bool, finished: dict[str, str] | None = None
    ) -> list[str]:
        """The derived outputs of ``exp`` (sweep, summary, figures, status table, claims) that
        do not check out are removed (docs/store.md, "Derived outputs"); returns the warnings.
        ``finished``: the content_sha256 of the finished block stores the repair step just
        read (:func:`attnsvm.sweep.integrity.repair_blocks`)."""
        out: list[str] = []
        action = "will be rebuilt" if dry_run else "removed, rebuilt"
        sweep, summary = Path(self.paths.sweep(exp)), Path(self.paths.summary(exp))

        def drop(paths: list[Path], what: Path, why: str) -> None:
            present = [p for p in paths if os.path.lexists(p)]
            if not present:
                return
            if not dry_run:
                for p in present:
                    if p.is_dir() and not p.is_symlink():
                        shutil.rmtree(p)
                    else:
                        p.unlink()
            kind = "sweep store" if what == sweep else "derived output"
            out.append(f"{kind} {what} {why}: {action}")

        summary_files = [summary, record_of(summary)]
        if os.path.lexists(sweep):
            # Snakemake recomputes a missing block only for a job that needs it, and reruns
            # no job for a missing intermediate output (the sweep) while its final outputs
            # are up to date: sweep and summary go, so collect and its successors rerun
            block_paths = {b: self.paths.block(exp, b) for b in self._blocks[exp]}
            absent = [p for p in block_paths.values() if Path(p) in redo or not Path(p).exists()]
            why = f"lacks {len(absent)} block store(s), e.g. {absent[0]}" if absent else ""
            if not why:
                cache = VerifyCache(sweep.parent)  # after repair_blocks saved it
                try:
                    vouched = cache.vouched("<sweep>", sweep)
                    if isinstance(vouched, dict):
                        m = vouched
                    else:
                        before = store_snapshot(sweep)
                        m = verify_store(sweep)
                        cache.record("<sweep>", sweep, m, before)
                    if m.get("kind") != "sweep" or m.get("experiment") != exp:
                        why = f"is the {m.get('kind')} store of experiment {m.get('experiment')!r}"
                    elif "inputs_sha256" not in m:
                        why = "records no inputs_sha256 (written before derived digests)"
                    elif m.get("inputs_sha256") != blocks_digest(block_paths, finished):
                        why = "was collected from other block stores (inputs_sha256)"
                except StoreError as err:
                    why = err.reason
                    cache.drop("<sweep>")
                if not dry_run:
                    cache.save()
            if why:
                drop([sweep, *summary_files], sweep, why + " (with its summary)")
                return out
        elif any(os.path.lexists(p) for p in summary_files):
            drop(summary_files, summary, "has no sweep store")
            return out
        summary_sha = ""
        if os.path.lexists(summary) or os.path.lexists(record_of(summary)):
            try:
                summary_sha = verified_summary(summary, sweep)
            except StoreError as err:
                drop(summary_files, summary, f"does not check out ({err})")
                return out  # the derive job rebuilds figures, table and claims with it
        elif not os.path.lexists(sweep):
            return out
        folder = Path(self.paths.figures(exp))
        if os.path.lexists(folder):
            # one output of the derive job: a figure that does not check out (or is absent)
            # takes the folder with it, so that Snakemake reruns the job
            for fig in self.experiments[exp].figures:
                files = [Path(self.paths.figure(exp, fig, e)) for e in ("pdf", "png")]
                files.append(Path(self.paths.get("caption", experiment=exp, figure=fig)))
                page = Path(self.paths.figure(exp, fig, "html"))  # the report shows the page
                record = figure_record(files[1])
                try:
                    if not any(os.path.lexists(p) for p in (*files, page, record)):
                        raise StoreError(files[1], "missing (none of the figure's files is there)")
                    if not os.path.lexists(page):
                        raise StoreError(page, "missing (the figure's page in the report)")
                    inputs = {"summary": summary_sha, "sweep": sweep_digest(sweep),
                              "code": figure_code_digest(fig)}  # fmt: skip
                    check_record(record, "figure", exp, inputs)
                except StoreError as err:
                    drop([folder], files[1], f"does not check out ({err}), with {folder}")
                    break
        table = Path(self.paths.status_table(exp))
        if os.path.lexists(table) or os.path.lexists(record_of(table)):
            try:
                check_record(record_of(table), "status_table", exp, {"summary": summary_sha})
            except StoreError as err:
                drop([table, record_of(table)], table, f"does not check out ({err})")
        ledger = [Path(self.paths.claims(exp)), Path(self.paths.claims_table(exp))]
        if any(os.path.lexists(p) for p in (*ledger, record_of(ledger[0]))):
            try:
                inputs = claims_inputs(sweep, self.claims_config(exp))
                check_record(record_of(ledger[0]), "claims", exp, inputs)
            except StoreError as err:
                drop([*ledger, record_of(ledger[0])], ledger[0], f"does not check out ({err})")
        return out

    def experiment_config(self, exp: str) -> str:
        """The experiment's settings as canonical JSON (a change reruns the collect job)."""
        e = self.experiments[exp]
        return json.dumps(
            {
                "name": e.name,
                "fixed": e.fixed,
                "grid": e.axes,
                "seeds": e.seeds,
                "figures": e.figures,
                "block_size": e.block_size,
                "block_seconds": e.block_seconds,
                "description": e.description,
            },
        )  # key order kept: axis order defines block names and sweep dims

    def claims_config(self, exp: str) -> str:
        """The experiment's claims as canonical JSON (a change reruns its derive job: the
        summary, figures and status table are rewritten with the same values)."""
        return claims_json(self.experiments[exp].claims)

    def estimated_seconds(self) -> float:
        """Predicted CPU seconds of every block of the plan (rough, see Block.predicted_seconds)."""
        return sum(s for exp in self._blocks for s in self.block_seconds(exp).values())

    def cost_warnings(self, local: bool, cores: int | None) -> list[str]:
        """Warnings about a grid whose predicted cost is absurd for how it is run."""
        out = []
        total = self.estimated_seconds()
        n_cells = sum(e.n_cells for e in self.experiments.values())
        if local:
            hours = total / max(1, cores or 1) / 3600
            if hours > LOCAL_HOURS_WARN:
                out.append(
                    f"the sweep ({n_cells} cells) is predicted to take about {hours:.0f} hours on "
                    f"{cores or 1} local core(s); consider the SLURM profile "
                    "(workflow/profiles/slurm), fewer seeds or a smaller grid"
                )
        longest = max(
            (self.block_minutes(e, b) for e in self._blocks for b in self._blocks[e]), default=0
        )
        if longest > BLOCK_MINUTES_WARN:
            out.append(
                f"the largest block is predicted to need about {longest} minutes, more than a "
                "typical job walltime; lower block_size"
            )
        return out

    #: the report's category of the claims page, first (categories are sorted by name)
    CLAIMS_CATEGORY = "0. Claims"

    def report_category(self, exp: str) -> str:
        """Report category of an experiment: the paper's E1-E6 first, then the others (after
        the claims, :attr:`CLAIMS_CATEGORY`).

        The report sorts categories by name, hence the leading numbers.
        """
        figures = self.experiments[exp].figures
        if figures and all(f in PAPER_FIGURES for f in figures):
            return "1. Paper experiments E1-E6"
        return "2. Beyond the paper"

    def figure_pngs(self) -> dict[str, dict[str, str]]:
        """``{experiment: {figure: its PNG}}``: where the report finds each figure."""
        return {
            name: {fig: self.paths.figure(name, fig, "png") for fig in exp.figures}
            for name, exp in self.experiments.items()
        }

    def figure_pages(self) -> dict[str, dict[str, str]]:
        """``{experiment: {figure: its page}}``: the figure with its caption, as the report
        shows it (:mod:`attnsvm.report.figure_page`), which the claims table links to."""
        return {
            name: {fig: self.paths.figure(name, fig, "html") for fig in exp.figures}
            for name, exp in self.experiments.items()
        }

    def claims_ledgers(self) -> dict[str, str]:
        """``{experiment: its claims.json}``: what the end of a run counts verdicts from."""
        return {name: self.paths.claims(name) for name in self.experiments}

    def figure_captions(self, exp: str) -> dict[str, str]:
        """``{figure: its caption file}`` of ``exp``, in the experiment's order: the figures
        its derive job draws (a change of the list reruns the job) and the files the report's
        figure captions include."""
        return {
            fig: self.paths.get("caption", experiment=exp, figure=fig)
            for fig in self.experiments[exp].figures
        }

    def figure_labels(self, exp: str, fig: str) -> dict[str, str]:
        """Labels of a figure in the report's result list."""
        title = f"figure {fig.upper()}" if fig in PAPER_FIGURES else f"figure {fig}"
        return {"result": title, "experiment": exp}

    def final_outputs(self) -> list[str]:
        out = [self.paths.run_info(), self.paths.claims_rst(), self.paths.claims_page()]
        for name in self.experiments:
            out += [self.paths.summary(name), self.paths.figures(name)]
            out += [self.paths.status_table(name), self.paths.claims(name)]
            out += [self.paths.claims_table(name)]
        return out


def lock_results(plan: Plan) -> list[str]:
    """Workflow start: take the plan's experiment directories (see :mod:`attnsvm.sweep.lock`).

    Called when the workflow has parsed its config, before :meth:`Plan.repair` moves or removes
    anything, so that a refused run changes nothing. Raises
    :class:`~attnsvm.sweep.lock.ResultsInUseError` (one line naming the holder's pid, host and
    start time) if another live workflow holds one of them. The locks are released when the
    process exits, however it ends (:func:`unlock_results` also runs at the workflow's end).
    Returns one line per stale lock taken over (:func:`attnsvm.sweep.lock.lock_experiments`).
    """
    notes: list[str] = []
    lock_experiments(plan.results, plan.experiments, notes)
    atexit.register(unlock_results, plan)
    return notes


def unlock_results(plan: Plan) -> None:
    """Workflow end (success or error): release the locks this process took."""
    unlock_experiments(plan.results, plan.experiments)


def failed_blocks(plan: Plan, since: float | None = None) -> list[dict]:
    """The records of the plan's failed block jobs that still stand
    (:func:`attnsvm.sweep.failed.current_failures`), of jobs that started from ``since``
    (Unix time) on when given: what the workflow counts at its end."""
    out = []
    for exp in plan.experiments:
        found = current_failures(plan.paths.blocks_dir(exp), plan.blocks(exp))
        out += [r for r in found if since is None or float(r.get("started", 0)) >= since]
    return out


def failure_report(plan: Plan, since: float | None = None) -> str | None:
    """One line counting the plan's failed block jobs (:func:`failed_blocks`) by kind, with
    the first of each; None when none failed (the workflow's end: a run with one exits
    non-zero)."""
    records = failed_blocks(plan, since)
    if not records:
        return None
    kinds: dict[str, list[dict]] = {}
    for r in records:
        kinds.setdefault(str(r.get("kind", "?")), []).append(r)
    parts = []
    for kind, rs in sorted(kinds.items()):
        what = ("nothing stored, recomputed by the next run" if kind == "environment"
                else "stored as failed cells; rerun with --forcerun after a fix")  # fmt: skip
        why = (str(rs[0].get("reason", "")).splitlines() or [""])[0][:200]
        parts.append(
            f"{len(rs)} {kind} ({what}); e.g. {rs[0]['experiment']}/{rs[0]['block']}: {why}"
        )
    return f"{len(records)} block job(s) failed: " + "; ".join(parts)
