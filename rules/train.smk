"""Stages train and average: one DeepSpeed run per experiment, then its last checkpoints averaged."""

from aiayn.train.launch import check_nodes_have_slurm


onstart:
    # before any job: a training across machines that no SLURM allocation can give
    check_nodes_have_slurm(
        {
            job.wildcards.experiment: runs[job.wildcards.experiment]["nodes"]
            for job in workflow.dag.needrun_jobs()
            if job.rule.name == "train"
        },
        workflow.local_exec and not workflow.touch,
    )


rule train:
    """Train one experiment (resuming from its newest checkpoint when there is one)."""
    input:
        train_data=of_dataset(
            "data/{dataset}/bin/train.{src}-{tgt}.{lang}", (".bin", ".idx")
        ),
        dev_data=of_dataset(
            "data/{dataset}/bin/{dev_split}.{src}-{tgt}.{lang}", (".bin", ".idx")
        ),
        subword=of_dataset("data/{dataset}/spm/bpe.model"),  # its hash goes into the weights
        dev_monitor=dev_monitor_inputs,
    output:
        summary="runs/{experiment}/train.json",
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
        nodes=lookup(dpath="{experiment}/nodes", within=runs),
        gres=train_gres,
    params:
        spec=trainer_spec,
        processes=lookup(dpath="{experiment}/processes", within=runs),
        nodes=lookup(dpath="{experiment}/nodes", within=runs),
    script:
        "../workflow_scripts/train.py"


rule average:
    """Average the experiment's last `train.average_last` checkpoints (the paper: 5 base, 20 big)."""
    input:
        summary="runs/{experiment}/train.json",
    output:
        model="runs/{experiment}/averaged.safetensors",
    log:
        "logs/average/{experiment}.log",
    conda:
        "envs/aiayn.yaml"
    params:
        last=lookup(dpath="{experiment}/train/average_last", within=runs),
    script:
        "../workflow_scripts/average.py"
