"""Snakemake script of rule `collect`: every block store of an experiment -> sweep.zarr."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821, SIM115

from attnsvm.workflow_plan import collect_experiment  # noqa: E402

collect_experiment(
    snakemake.params.experiment,  # noqa: F821
    list(snakemake.input),  # noqa: F821
    snakemake.output.sweep,  # noqa: F821
    snakemake.threads,  # noqa: F821
)
