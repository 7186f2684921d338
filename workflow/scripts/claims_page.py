"""Snakemake script of rule `claims_page`: every claims ledger -> the report's claims."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.sweep.forkserver import call  # noqa: E402 - the imports: once per machine

call(
    "attnsvm.report.claims_page:write_claims_page",
    {e: str(p) for e, p in zip(snakemake.params.experiments, snakemake.input.ledgers)},  # noqa: F821, B905
    dict(snakemake.params.figures),  # noqa: F821
    str(snakemake.output.rst),  # noqa: F821
    str(snakemake.output.html),  # noqa: F821
)
