# attnsvm sweep workflow: config grid -> block jobs -> Zarr -> summaries, figures -> report.
# Rules live in workflow/rules/; every script calls one attnsvm library function.
from snakemake.utils import min_version

min_version("9.0")


# The default sweep, unless the command line names config files (--configfile), which then
# replace it instead of being merged into it; --config key=value still overrides single keys.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        final_outputs(),
