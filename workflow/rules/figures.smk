# One rule per figure kind (E1-E6 of SCIENCE.md section 6 and the beyond-the-paper figures),
# a status table per experiment, and the report's section about the run.


rule figure:
    input:
        sweep=rules.collect.output.sweep,
        summary=rules.summarize.output.summary,
    output:
        pdf=f"{RESULTS}/{{experiment}}/figures/{{figure}}.pdf",
        png=report(
            f"{RESULTS}/{{experiment}}/figures/{{figure}}.png",
            caption="../report/figure.rst",
            category=report_category,
            subcategory="{experiment}",
            labels=figure_labels,
        ),
        caption=f"{RESULTS}/{{experiment}}/figures/{{figure}}.caption.rst",
    log:
        f"{RESULTS}/{{experiment}}/logs/figure_{{figure}}.log",
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
            f"{RESULTS}/{{experiment}}/status.html",
            caption="../report/status.rst",
            category=report_category,
            subcategory="{experiment}",
            labels={"result": "table: cells per status", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/status_table.log",
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    script:
        "../scripts/status_table.py"


rule run_info:
    input:
        sweeps=PLAN.sweep_paths(),
    output:
        rst=PLAN.paths.run_info(),
    log:
        f"{RESULTS}/logs/run_info.log",
    conda:
        "../envs/attnsvm.yaml"
    params:
        config=config,
        experiments=list(PLAN.experiments),
        version=attnsvm.__version__,
    script:
        "../scripts/run_info.py"
