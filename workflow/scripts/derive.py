"""Snakemake script of rule `derive`: sweep.zarr -> summary, figures, status table, claims."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.report.derive import write_derived  # noqa: E402

write_derived(
    snakemake.input.sweep,  # noqa: F821
    snakemake.wildcards.experiment,  # noqa: F821
    snakemake.params.claims,  # noqa: F821
    list(snakemake.params.figures),  # noqa: F821 - {figure: caption}, in order
    snakemake.output.summary,  # noqa: F821
    snakemake.output.figures,  # noqa: F821
    snakemake.output.html,  # noqa: F821
    snakemake.output.claims,  # noqa: F821
    snakemake.output.claims_table,  # noqa: F821
)
