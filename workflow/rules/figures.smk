# One rule per figure kind (E1-E6 of SCIENCE.md section 6) plus a status table per experiment.


rule figure:
    input:
        sweep=rules.collect.output.sweep,
        summary=rules.summarize.output.summary,
    output:
        pdf=f"{RESULTS}/{{experiment}}/figures/{{figure}}.pdf",
        png=report(
            f"{RESULTS}/{{experiment}}/figures/{{figure}}.png",
            caption="../report/figure.rst",
            category="{experiment}",
            labels={"experiment": "{experiment}", "figure": "{figure}"},
        ),
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
            category="{experiment}",
            labels={"experiment": "{experiment}", "figure": "status counts"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/status_table.log",
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    script:
        "../scripts/status_table.py"
