"""Snakemake script of rule `claims_page`: every claims ledger -> the report's claims."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.report.claims_page import write_claims_page  # noqa: E402

write_claims_page(
    dict(zip(snakemake.params.experiments, snakemake.input.ledgers, strict=True)),  # noqa: F821
    snakemake.params.figures,  # noqa: F821
    snakemake.output.rst,  # noqa: F821
    snakemake.output.html,  # noqa: F821
)
