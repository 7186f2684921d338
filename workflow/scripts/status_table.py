"""Snakemake script of rule `status_table`: counts of cells per status as an HTML table."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821, SIM115

from attnsvm.status import write_status_table  # noqa: E402

write_status_table(snakemake.input.summary, snakemake.output.html)  # noqa: F821
