"""Snakemake script of rule `status_table`: counts of cells per status as an HTML table."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.report.status_table import write_status_table  # noqa: E402

write_status_table(snakemake.input.summary, snakemake.output.html)  # noqa: F821
