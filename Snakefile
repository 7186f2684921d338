# attnsvm sweep workflow: config grid -> block jobs -> Zarr -> summaries -> figures -> report.
# Rules live in workflow/rules/; every script calls one attnsvm library function.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/figures.smk"


rule all:
    input:
        final_outputs(),
    default_target: True
