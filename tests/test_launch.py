"""The launch command for each placement (the SLURM path runs for real in test_slurm.py)."""

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.errors import InputError
from aiayn.train.launch import (
    check_nodes_have_slurm,
    failed_task,
    killed_message,
    launch_command,
    lost_node,
    trainer_environment,
)


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


@pytest.mark.parametrize(
    ("local", "env", "refused"),
    [(True, {}, True), (False, {}, False), (True, {"SLURM_JOB_ID": "42"}, False)],
)
def test_trainings_across_machines_are_refused_before_any_job_only_where_slurm_cannot_give_them(
    local, env, refused
):
    """Jobs run here (not submitted) outside an allocation: refused; submitted through the
    cluster profile, or run inside an allocation: left to SLURM. One machine is never refused."""
    check_nodes_have_slurm({"one": 1, "single": 1}, local, env)
    planned = {"one": 1, "wide": 2}
    if refused:
        with pytest.raises(InputError, match="experiment 'wide' trains on nodes: 2, which needs"):
            check_nodes_have_slurm(planned, local, env)
    else:
        check_nodes_have_slurm(planned, local, env)


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


# What srun and the processes around it print into the train log while a launch across nodes
# breaks (from runs on the test cluster), in any order around srun's own verdicts.
NODE = st.from_regex(r"[a-z][a-z0-9-]{0,30}[0-9]", fullmatch=True)
TASKS = st.integers(0, 4095).map(str) | st.sampled_from(["0-1", "0,2-3"])
HOW = st.sampled_from(["Exited with exit code 1", "Killed", "Terminated", "Segmentation fault"])
NOISE = st.lists(
    st.sampled_from(
        [
            "srun: launch/slurm: _step_signal: Terminating StepId=226.1",
            "slurmstepd-aiayn-node1: error: *** STEP 227.1 ON aiayn-node1 CANCELLED AT "
            "2026-12-07T10:15:03 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
            "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
            "srun: forcing job termination",
            "  traceback : Signal 9 (SIGKILL) received by PID 24091",
            "pair_lost:  60%|######    | 12/20 [00:02<00:01,  4.84 steps/s]",
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed",
        ]
    ),
    max_size=6,
)


@settings(derandomize=True, deadline=None)  # the same examples in every run
@given(first=NODE, tasks=TASKS, how=HOW, later=st.lists(st.tuples(NODE, TASKS, HOW)),
       before=NOISE, between=NOISE)  # fmt: skip
def test_the_node_whose_task_failed_first_is_named(first, tasks, how, later, before, between):
    """srun reports the first task to end badly, then (`--kill-on-bad-exit`) the others it
    stopped: the first report names where the run broke; no node was lost."""
    reports = [f"srun: error: {node}: task{'s' * ('-' in t or ',' in t)} {t}: {h}"
               for node, t, h in [(first, tasks, how), *later]]  # fmt: skip
    output = "\n".join([*before, reports[0], *between, *reports[1:]]) + "\n"
    assert failed_task(output).startswith(f"it failed first on node {first} (srun: task")
    assert f"{tasks}: {how})" in failed_task(output)
    assert lost_node(output) is None


@settings(derandomize=True, deadline=None)
@given(node=NODE, tasks=st.lists(st.tuples(NODE, TASKS, HOW), max_size=3), before=NOISE,
       after=NOISE)  # fmt: skip
def test_a_node_slurm_lost_is_named_whatever_the_tasks_report(node, tasks, before, after):
    """SLURM's node failure is the cause, wherever srun's line stands among the tasks' reports
    (a rank on a surviving node may fail first, its peer gone)."""
    reports = [f"srun: error: {n}: task {t}: {h}" for n, t, h in tasks]
    output = "\n".join([*before, *reports, f"srun: error: Node failure on {node}", *after])
    assert lost_node(output) == node
    assert failed_task("\n".join([*before, *after])) is None


@pytest.mark.parametrize(
    ("train", "decoding"),
    [({"dev_bleu_sentences": 0}, []), ({"dev_bleu_sentences": 100}, ["bleu"]),
     ({"dev_parse_sentences": 50, "dev_bleu_sentences": 0}, ["parse"])],
)  # fmt: skip
def test_a_killed_trainer_is_told_the_settings_that_hold_its_memory(train, decoding):
    """The dev decoding's beam and sentences are advised only to a run that decodes dev."""
    said = killed_message("tiny", None, "logs/train/tiny.log", train)
    assert "Lower train.tokens_per_batch" in said and "a rerun starts afresh" in said
    advised = [task for task in ("bleu", "parse") if f"train.dev_{task}_beam" in said]
    assert advised == decoding, said
