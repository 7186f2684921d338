"""Snakemake script of rule `run_info`: the report's section on versions, cells and config."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.sweep.forkserver import call  # noqa: E402 - the imports: once per machine

call(
    "attnsvm.report.text:write_run_info",
    dict(snakemake.params.config),  # noqa: F821
    {e: str(p) for e, p in zip(snakemake.params.experiments, snakemake.input.sweeps)},  # noqa: F821, B905
    str(snakemake.output.rst),  # noqa: F821
    [str(f) for f in snakemake.params.configfiles],  # noqa: F821
)
