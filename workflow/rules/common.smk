# The only place for Python helpers of the workflow: config validation first, then
# named input/param functions. All logic lives in attnsvm.workflow_plan.
import sys

from snakemake.utils import validate

import attnsvm
from attnsvm.grid import ConfigError
from attnsvm.workflow_plan import Plan

try:
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


def block_stores(wildcards):
    return PLAN.block_paths(wildcards.experiment)


def experiment_settings(wildcards):
    return PLAN.experiment_config(wildcards.experiment)
