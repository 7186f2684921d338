"""Snakemake script of rule `summarize`: sweep.zarr -> summary.nc (statistics over seeds)."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.sweep.summary import write_summary  # noqa: E402

write_summary(snakemake.input.sweep, snakemake.output.summary)  # noqa: F821
