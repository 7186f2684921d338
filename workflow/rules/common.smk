# The only place for Python helpers of the workflow: config validation first, then
# named input/param functions. All logic lives in attnsvm.workflow_plan.
import sys

from snakemake.utils import validate

import attnsvm
from attnsvm.config_io import check_config_files
from attnsvm.grid import ConfigError
from attnsvm.workflow_plan import Plan, lock_results, unlock_results

try:
    check_config_files(workflow.configfiles)  # what Snakemake's loader lets through
    PLAN = Plan.from_config(config)
except ConfigError as err:
    sys.exit(f"attnsvm: config error: {err}")

validate(config, "../schemas/config.schema.yaml")

if workflow.is_main_process:
    for warning in PLAN.cost_warnings(workflow.local_exec, workflow._cores):
        print(f"attnsvm: warning: {warning}", file=sys.stderr)
    # unfinished block stores (damaged, stale, foreign, environmental crash) become missing,
    # so that Snakemake recomputes them (docs/store.md, "Integrity")
    dry_run = getattr(workflow.output_settings, "dryrun", False)
    for warning in PLAN.repair(dry_run=dry_run):
        print(f"attnsvm: warning: {warning}", file=sys.stderr)

RESULTS = PLAN.results


wildcard_constraints:
    experiment="[A-Za-z0-9_-]+",
    block="[^/]+",
    figure="e[1-6]|phase|rank_gd|rank_m|attention|regpath|optimizer",


def final_outputs():
    return PLAN.final_outputs()


def block_cells(wildcards):
    return PLAN.block_cells(wildcards.experiment, wildcards.block)


def block_runtime(wildcards):
    return PLAN.block_minutes(wildcards.experiment, wildcards.block)


def block_priority(wildcards):
    return PLAN.priority(wildcards.experiment)


def results_priority(wildcards):
    return PLAN.priority(wildcards.experiment, results=True)


def block_stores(wildcards):
    return PLAN.block_paths(wildcards.experiment)


def experiment_settings(wildcards):
    return PLAN.experiment_config(wildcards.experiment)


def report_category(wildcards):
    return PLAN.report_category(wildcards.experiment)


def figure_labels(wildcards):
    return PLAN.figure_labels(wildcards.experiment, wildcards.figure)


# One workflow at a time per experiment directory (not taken for a dry run).
onstart:
    lock_results(PLAN)


onsuccess:
    unlock_results(PLAN)


onerror:
    unlock_results(PLAN)
