# The only place for Python helpers of the workflow: config validation first, then
# named input/param functions. All logic lives in attnsvm.plan, every path in
# attnsvm.sweep.paths (rules take their outputs and logs from path(), inputs from rules.X.output).
#
# Validation: Plan.from_config runs the config models (attnsvm.config.schema, the same that
# `attnsvm check-config` runs), one error line naming key, value and what is allowed, before
# any job is planned; workflow/schemas/config.schema.yaml is generated from those models.
import sys
import time

import attnsvm
from attnsvm.config.files import (
    check_config_files,
    check_results_dir,
    config_file_names,
)
from attnsvm.config.errors import ConfigError
from attnsvm.plan import Plan, failure_report, lock_results, unlock_results
from attnsvm.progress import print_last, start_status_lines, verdict_line
from attnsvm.sweep.environment import EnvironmentVariableError, check_environment
from attnsvm.sweep.lock import ResultsInUseError
from attnsvm.sweep.slurm_arrays import fit_arrays_to_cluster

STARTED = time.time()
try:
    check_environment()  # every ATTNSVM_* variable, once, before any job
except EnvironmentVariableError as err:
    sys.exit(f"attnsvm: environment error: {err}")
try:
    check_config_files(workflow.configfiles)  # what Snakemake's loader lets through
    PLAN = Plan.from_config(config)
    check_results_dir(PLAN.results)  # a file, a dangling or looping symlink, unwritable
except ConfigError as err:
    sys.exit(f"attnsvm: config error: {err}")

if workflow.is_main_process:
    fit_arrays_to_cluster()  # SLURM arrays within MaxArraySize (the plugin's chunks are not)
    for warning in PLAN.cost_warnings(workflow.local_exec, workflow._cores):
        print(f"attnsvm: warning: {warning}", file=sys.stderr)
    dry_run = getattr(workflow.output_settings, "dryrun", False)
    # one workflow at a time per experiment directory, taken before the repair below moves
    # anything: a refused run changes nothing (not taken for a dry run, which changes nothing)
    if not dry_run:
        try:
            for note in lock_results(PLAN):
                print(f"attnsvm: warning: {note}", file=sys.stderr)
        except ResultsInUseError as err:
            sys.exit(f"attnsvm: {err}")
        except OSError as err:  # e.g. a full disk
            sys.exit(f"attnsvm: cannot take the lock of {PLAN.results}: {err}")
        PLAN.remember()  # this run's packs and digests, for its jobs and later plans
    # unfinished block stores (damaged, stale, foreign, environmental crash) become missing,
    # so that Snakemake recomputes them (docs/store.md, "Integrity")
    for warning in PLAN.repair(dry_run=dry_run):
        print(f"attnsvm: warning: {warning}", file=sys.stderr)
    # one `attnsvm status` line a minute (time left), while the jobs run
    if not dry_run and workflow.configfiles:
        start_status_lines(PLAN.results, workflow.configfiles[-1])


wildcard_constraints:
    experiment="[A-Za-z0-9_-]+",
    block="[^/]+",


def path(name, **values):
    # an output or log path of attnsvm.sweep.paths.LAYOUT, the one path scheme; fields not
    # given stay wildcards ({experiment}, {block})
    return PLAN.paths.pattern(name, **values)


def final_outputs():
    return PLAN.final_outputs()


def block_digest(wildcards):
    return PLAN.block_digest(wildcards.experiment, wildcards.block)


def block_runtime(wildcards):
    # SLURM job arrays share the first task's runtime: Plan.block_runtime asks for the longest
    arrays = getattr(getattr(workflow, "executor_settings", None), "array_jobs", None)
    return PLAN.block_runtime(wildcards.experiment, wildcards.block, arrays)


def block_priority(wildcards):
    return PLAN.priority(wildcards.experiment, wildcards.block)


def results_priority(wildcards):
    return PLAN.priority(wildcards.experiment, results=True)


def collect_threads(wildcards):
    return PLAN.collect_threads(wildcards.experiment)


def block_stores(wildcards):
    return PLAN.block_paths(wildcards.experiment)


def experiment_settings(wildcards):
    return PLAN.experiment_config(wildcards.experiment)


def experiment_claims(wildcards):
    return PLAN.claims_config(wildcards.experiment)


def figure_captions(wildcards):
    # {figure: its caption file}, in the experiment's order: what derive draws, and what the
    # report's figure caption includes
    return PLAN.figure_captions(wildcards.experiment)


def report_category(wildcards):
    return PLAN.report_category(wildcards.experiment)


def figure_labels(wildcards):
    return PLAN.figure_labels(wildcards.experiment, wildcards.figure)


# The results lock (taken above, at parse time) is released at the end of the workflow; a run
# in which a block job failed ends non-zero, counting them (attnsvm.sweep.failed); a
# successful run ends on its verdicts: "N PASS, M FAIL, K INCONCLUSIVE; report: ...".
onsuccess:
    unlock_results(PLAN)
    failures = failure_report(PLAN, STARTED)
    if failures:
        sys.exit(f"attnsvm: {failures}")
    print_last(verdict_line(PLAN.claims_ledgers(), PLAN.results))


onerror:
    unlock_results(PLAN)
    if failure_report(PLAN, STARTED):
        print(f"attnsvm: {failure_report(PLAN, STARTED)}", file=sys.stderr)
