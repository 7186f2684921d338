"""Snakemake script of rule `claims`: an experiment's claims on its sweep -> claims.json/.csv."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.claims.ledger import write_ledger  # noqa: E402

write_ledger(
    snakemake.input.sweep,  # noqa: F821
    snakemake.params.claims,  # noqa: F821
    snakemake.wildcards.experiment,  # noqa: F821
    snakemake.output.json,  # noqa: F821
    snakemake.output.table,  # noqa: F821
)
