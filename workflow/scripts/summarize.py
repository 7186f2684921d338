"""Snakemake script of rule `summarize`: sweep.zarr -> summary.nc (statistics over seeds)."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821, SIM115

from attnsvm.summary import write_summary  # noqa: E402

write_summary(snakemake.input.sweep, snakemake.output.summary)  # noqa: F821
