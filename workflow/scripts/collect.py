"""Snakemake script of rule `collect`: every block store of an experiment -> sweep.zarr."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.sweep.forkserver import call  # noqa: E402 - the imports: once per machine

call(
    "attnsvm.sweep.collect:collect_experiment",
    snakemake.params.experiment,  # noqa: F821
    [str(p) for p in snakemake.input],  # noqa: F821
    str(snakemake.output.sweep),  # noqa: F821
    snakemake.threads,  # noqa: F821
)
