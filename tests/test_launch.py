"""The launch command for each placement (the SLURM path runs for real in test_slurm.py)."""

import sys

import pytest

from aiayn.errors import InputError
from aiayn.train.launch import launch_command, trainer_environment


def test_one_process_runs_the_trainer_directly():
    assert launch_command("runs/x/experiment.json", 1, 1, env={}) == [
        sys.executable,
        "-m",
        "aiayn.train.trainer",
        "runs/x/experiment.json",
    ]


def test_several_processes_on_one_machine_run_under_torchrun_standalone():
    command = launch_command("runs/x/experiment.json", 4, 1, env={})
    assert command[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    assert command[-3:] == ["-m", "aiayn.train.trainer", "runs/x/experiment.json"]


def test_several_nodes_outside_slurm_are_refused_with_the_fix():
    with pytest.raises(InputError, match="needs a SLURM allocation of 2 nodes.*profiles/slurm"):
        launch_command("runs/x/experiment.json", 8, 2, env={})


def test_a_launch_left_in_the_shell_is_left_out_of_the_trainers_environment():
    shell = {"PATH": "/usr/bin", "WORLD_SIZE": "2", "RANK": "0", "MASTER_PORT": "29500",
             "TORCHELASTIC_RUN_ID": "x", "SLURM_JOB_ID": "7"}  # fmt: skip
    env, left_out = trainer_environment(shell, threads=3)
    assert env == {"PATH": "/usr/bin", "SLURM_JOB_ID": "7", "OMP_NUM_THREADS": "3"}
    assert left_out == ["MASTER_PORT=29500", "RANK=0", "TORCHELASTIC_RUN_ID=x", "WORLD_SIZE=2"]


def test_an_srun_across_the_allocation_leaves_the_rules_job_step_behind():
    """The rule runs in a one-node job step; the srun that starts a torchrun per node must see
    the allocation (its job id), not that step, or it runs on the step's one node."""
    shell = {"PATH": "/usr/bin", "SLURM_JOB_ID": "7", "SLURM_JOBID": "7", "SLURM_NNODES": "1",
             "SLURM_STEP_ID": "0", "SLURM_JOB_NODELIST": "node1", "SRUN_DEBUG": "3",
             "SBATCH_PARTITION": "gpu", "SLURM_SUBMIT_DIR": "/home/u"}  # fmt: skip
    env, _ = trainer_environment(shell, threads=1, srun=True)
    assert env == {"PATH": "/usr/bin", "SLURM_JOB_ID": "7", "SLURM_JOBID": "7",
                   "SLURM_SUBMIT_DIR": "/home/u", "OMP_NUM_THREADS": "1"}  # fmt: skip
    kept, _ = trainer_environment(shell, threads=1)  # one process or torchrun: left as it is
    assert kept["SLURM_NNODES"] == "1" and kept["SLURM_STEP_ID"] == "0"
