"""Snakemake script of rule `derive`: sweep.zarr -> summary, figures, status table, claims."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.sweep.forkserver import call  # noqa: E402 - the imports: once per machine

call(
    "attnsvm.report.derive:write_derived",
    str(snakemake.input.sweep),  # noqa: F821
    str(snakemake.wildcards.experiment),  # noqa: F821
    snakemake.params.claims,  # noqa: F821
    list(snakemake.params.figures),  # noqa: F821 - {figure: caption}, in order
    str(snakemake.output.summary),  # noqa: F821
    str(snakemake.output.figures),  # noqa: F821
    str(snakemake.output.html),  # noqa: F821
    str(snakemake.output.claims),  # noqa: F821
    str(snakemake.output.claims_table),  # noqa: F821
)
