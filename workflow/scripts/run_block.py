"""Snakemake script of rule `block`: train and solve one block of cells into its Zarr store."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821, SIM115

from attnsvm.job import run_job  # noqa: E402

run_job(
    snakemake.params.cells,  # noqa: F821
    snakemake.output.store,  # noqa: F821
    experiment=snakemake.wildcards.experiment,  # noqa: F821
    block=snakemake.wildcards.block,  # noqa: F821
    device=snakemake.params.device,  # noqa: F821
    threads=snakemake.threads,  # noqa: F821
    log=snakemake.log[0],  # noqa: F821
)
