# Block jobs (train + solve a block of cells), then per experiment collect (the sweep store)
# and derive (summary, figures, status table, claims ledger: one process, whose imports are
# most of its cost). Priorities (attnsvm.plan.Plan.priority): the longest blocks first, and
# each experiment's collect and derive as soon as its own blocks are done.


rule block:
    output:
        store=path("block"),  # one file per block (attnsvm.sweep.onefile)
    log:
        path("block_log"),
    priority: block_priority
    conda:
        "../envs/attnsvm.yaml"
    threads: config.get("threads", 1)
    resources:
        runtime=block_runtime,
        mem_mb=config.get("mem_mb", 4000),
    params:
        cells_digest=block_digest,
        version=attnsvm.__version__,
        device=config.get("device", "auto"),
    script:
        "../scripts/block.py"


rule collect:
    input:
        block_stores,
    output:
        sweep=directory(path("sweep")),
    log:
        path("collect_log"),
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    # block stores are read by up to 2 processes, from 100 stores per process on (the SLURM
    # profile sets 2; more only pays for thousands of blocks): a smaller experiment's collect
    # takes one core, beside the block jobs
    threads: collect_threads
    params:
        experiment=experiment_settings,
        version=attnsvm.__version__,
    script:
        "../scripts/collect.py"


rule derive:
    input:
        sweep=rules.collect.output.sweep,
    output:
        summary=path("summary"),
        # the figures folder: every figure's PDF, PNG, caption, page and digest record; the
        # report lists the pages (the PNG with this run's numbers under it)
        figures=report(
            directory(path("figures")),
            patterns=["{figure}.html"],
            caption="../report/figure.rst",
            category=report_category,
            subcategory="{experiment}",
            labels=figure_labels,
        ),
        html=report(
            path("status_table"),
            caption="../report/status.rst",
            category=report_category,
            subcategory="{experiment}",
            labels={"result": "table: cells per status", "experiment": "{experiment}"},
        ),
        claims=path("claims"),
        claims_table=path("claims_table"),
    log:
        path("derive_log"),
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    params:
        claims=experiment_claims,
        figures=figure_captions,
        version=attnsvm.__version__,
    script:
        "../scripts/derive.py"
