# One rule per figure kind (E1-E6 of docs/science.md §6 and the beyond-the-paper figures),
# a status table per experiment, and the report's section about the run.


rule figure:
    input:
        sweep=rules.collect.output.sweep,
        summary=rules.summarize.output.summary,
    output:
        pdf=path("figure", ext="pdf"),
        png=report(
            path("figure", ext="png"),
            caption="../report/figure.rst",
            category=report_category,
            subcategory="{experiment}",
            labels=figure_labels,
        ),
        caption=path("caption"),
    log:
        path("figure_log"),
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    params:
        version=attnsvm.__version__,
    script:
        "../scripts/figure.py"


rule status_table:
    input:
        summary=rules.summarize.output.summary,
    output:
        html=report(
            path("status_table"),
            caption="../report/status.rst",
            category=report_category,
            subcategory="{experiment}",
            labels={"result": "table: cells per status", "experiment": "{experiment}"},
        ),
    log:
        path("status_table_log"),
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    script:
        "../scripts/status_table.py"


rule run_info:
    input:
        sweeps=expand(rules.collect.output.sweep, experiment=list(PLAN.experiments)),
    output:
        rst=path("run_info"),
    log:
        path("run_info_log"),
    conda:
        "../envs/attnsvm.yaml"
    params:
        config=config,
        experiments=list(PLAN.experiments),
        version=attnsvm.__version__,
    script:
        "../scripts/run_info.py"
