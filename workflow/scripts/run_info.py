"""Snakemake script of rule `run_info`: the report's section on versions, cells and config."""

import sys

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821, SIM115

from attnsvm.report.text import write_run_info  # noqa: E402

write_run_info(
    snakemake.params.config,  # noqa: F821
    dict(zip(snakemake.params.experiments, snakemake.input.sweeps, strict=True)),  # noqa: F821
    snakemake.output.rst,  # noqa: F821
    snakemake.params.configfiles,  # noqa: F821
)
