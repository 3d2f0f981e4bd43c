"""Stages train and average: one DeepSpeed run per experiment, then its last checkpoints averaged."""


rule train:
    """Train one experiment (resuming from its newest checkpoint when there is one)."""
    input:
        unpack(trainer_data),
    output:
        summary=paths.train_summary(),
    log:
        "logs/train/{experiment}.log",
    benchmark:
        "benchmarks/train/{experiment}.tsv"
    conda:
        "envs/aiayn.yaml"
    threads: 1
    resources:
        # One allocation of `nodes` machines with `processes` GPUs each; the workflow profile
        # (profiles/default/) adds memory, run time and CPUs per GPU, the cluster profile
        # (profiles/slurm/) the partition.
        nodes=train_nodes,
        gres=train_gres,
    params:
        spec=trainer_spec,
        processes=train_processes,
        nodes=train_nodes,
        code=code_version("train.py"),
    script:
        "../workflow_scripts/train.py"


rule average:
    """Average the experiment's last `train.average_last` checkpoints (the paper: 5 base, 20 big)."""
    input:
        summary=paths.train_summary(),
    output:
        model=paths.averaged_model(),
    log:
        "logs/average/{experiment}.log",
    conda:
        "envs/aiayn.yaml"
    params:
        last=averaged_checkpoints,
        code=code_version("average.py"),
    script:
        "../workflow_scripts/average.py"
