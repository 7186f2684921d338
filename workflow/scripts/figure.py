"""Snakemake script of rule `figure`: one figure as PDF and PNG, and its report caption."""

from attnsvm.logs import log_to

log_to(snakemake.log[0])  # noqa: F821 - stderr and attnsvm's log records: the rule's log

from attnsvm.report.draw import make_figure  # noqa: E402

make_figure(
    snakemake.wildcards.figure,  # noqa: F821
    snakemake.input.sweep,  # noqa: F821
    snakemake.input.summary,  # noqa: F821
    snakemake.output.pdf,  # noqa: F821
    snakemake.output.png,  # noqa: F821
    snakemake.output.caption,  # noqa: F821
)
