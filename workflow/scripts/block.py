"""Snakemake script of rule `block`: train and solve one block of cells into its Zarr store."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.sweep.job import planned_block_job  # noqa: E402

planned_block_job(
    snakemake.config,  # noqa: F821 - validated by the Snakemake process that planned the job
    snakemake.wildcards.experiment,  # noqa: F821
    snakemake.wildcards.block,  # noqa: F821
    snakemake.output.store,  # noqa: F821
    device=snakemake.params.device,  # noqa: F821
    threads=snakemake.threads,  # noqa: F821
    log=snakemake.log[0],  # noqa: F821
)
