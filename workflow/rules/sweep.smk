# Block jobs (train + solve a block of cells), then collect and summarize per experiment.
# Priorities (attnsvm.plan.Plan.priority): experiments in config order, and each
# experiment's collect, summary and figures as soon as its own blocks are done.


rule block:
    output:
        store=directory(path("block")),
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


rule summarize:
    input:
        sweep=rules.collect.output.sweep,
    output:
        summary=path("summary"),
    log:
        path("summarize_log"),
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    params:
        version=attnsvm.__version__,
    script:
        "../scripts/summarize.py"
