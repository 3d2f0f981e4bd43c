"""The workflow through a real SLURM cluster: tests/slurm/up.sh brings up slurmctld, slurmd and
munged on this machine (this machine a node with 2 fake GPUs, and two more nodes in network
namespaces) for the test session (conftest.slurm_controller), every job goes through sbatch,
down.sh stops it at the end.

Needs root, Debian's slurmctld, slurmd, slurm-client and munge, and iproute2; .ci/run installs
them. Outside CI the tests skip without them; in CI (CI=true) their absence is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from datetime import datetime
from pathlib import Path

import pytest
import torch
import yaml
from torch.utils.cpp_extension import get_default_build_root

from tests.conftest import (
    PROJECT,
    SLURM_SCRIPTS,
    copy_project,
    edit_config,
    fault_point_env,
    quick_experiment,
    run_snakemake,
    slurm_missing,
    wait_until_stopped,
)

pytestmark = pytest.mark.workflow
CLUSTER_COMMAND = "snakemake --cores all --profile slurm"
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")


@pytest.fixture(scope="module")
def slurm_cluster(slurm_controller):
    """The session's cluster (conftest.slurm_controller), started once more if it did not come up."""
    reason = slurm_missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the SLURM tests: {reason}")
        pytest.skip(reason)
    if slurm_controller.returncode != 0:
        # The daemons are test machinery, not the product: one fresh start is fair, and the
        # first try's diagnostics stay visible in pytest's warnings summary.
        warnings.warn(
            f"SLURM did not come up at once, starting it again:\n{slurm_controller.stderr}",
            stacklevel=1,
        )
        subprocess.run([SLURM_SCRIPTS / "down.sh"], check=False)
        subprocess.run([SLURM_SCRIPTS / "up.sh"], check=True)


def with_test_limits(root: Path) -> Path:
    """The project copy with the test cluster's per-rule limits as its workflow profile."""
    shutil.copy(SLURM_SCRIPTS / "profile" / "config.yaml", root / "profiles/default/config.yaml")
    return root


def link_profile(root: Path, home: Path) -> dict:
    """Run the documented one step that makes `--profile slurm` find profiles/slurm, with
    `home` as the user's home; the environment for running snakemake as that user."""
    env = as_user(home)
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run(["bash", "-ec", profile_step()], cwd=root, env=env, check=True)
    return env


def as_user(home: Path) -> dict:
    """The environment of a user whose home is `home`, with this Python's snakemake first. Its
    build of DeepSpeed's CPU op is the session's (a user's home keeps theirs from run to run; a
    new home would build it again in each test's first training job, 27 s alone)."""
    env = {**os.environ, "HOME": str(home)}
    env.setdefault("TORCH_EXTENSIONS_DIR", get_default_build_root())
    env["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    env.pop("XDG_CONFIG_HOME", None)
    return env


def profile_step() -> str:
    """The cluster page's one step for `--profile slurm`, as the user copies it."""
    text = (PROJECT / "docs/cluster.md").read_text(encoding="utf-8")
    [step] = [line for line in text.splitlines() if line.startswith("mkdir -p ~/.config/snakemake")]
    return step


def run_as_typed(root: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    """`snakemake --cores all --profile slurm` (+ extra) exactly as a user types it."""
    command = " ".join([CLUSTER_COMMAND, *extra])
    return subprocess.run(
        ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True
    )


def submitted_jobs(output: str) -> dict[str, list[str]]:
    """SLURM job ids by rule, from the plugin's submission messages."""
    jobs: dict[str, list[str]] = {}
    for job_id, log in SUBMITTED.findall(output):
        rule = re.search(r"slurm_logs/rule_(\w+)", log).group(1)
        jobs.setdefault(rule, []).append(job_id)
    return jobs


def slurm_job(job_id: str) -> str:
    shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True)
    assert shown.returncode == 0, f"scontrol show job {job_id}: {shown.stderr}"
    return shown.stdout


def test_the_test_profile_differs_from_the_workflow_profile_in_limits_and_polling_only():
    shipped = yaml.safe_load((PROJECT / "profiles/default/config.yaml").read_text())
    test = yaml.safe_load((SLURM_SCRIPTS / "profile/config.yaml").read_text())
    limits = {"mem_mb", "runtime", "cpus_per_gpu"}

    def without_limits(profile):
        return {
            rule: {key: value for key, value in resources.items() if key not in limits}
            for rule, resources in profile["set-resources"].items()
        }

    assert set(shipped) == {"set-resources"}
    assert set(test) == {"set-resources", "slurm-init-seconds-before-status-checks"}
    assert without_limits(shipped) == without_limits(test)
    cluster = yaml.safe_load((PROJECT / "profiles/slurm/config.yaml").read_text())
    assert cluster["slurm-status-command"] == "squeue" and cluster["executor"] == "slurm"
    polls = "slurm-init-seconds-before-status-checks"
    assert test[polls] < cluster[polls]  # the test cluster's jobs are short
    assert "set-resources" not in cluster  # the workflow profile's would replace it


def planned_train_jobs(output: str) -> list[dict[str, str]]:
    """Each planned train job's resources, from the dry run's job listing."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        if block.startswith("rule train:"):
            line = re.search(r"resources: (.*)", block).group(1)
            jobs.append(dict(item.split("=", 1) for item in line.split(", ")))
    return jobs


def test_profile_slurm_as_typed_plans_every_train_job_with_its_gpus(slurm_cluster, tmp_path):
    root = copy_project(tmp_path / "project")
    env = link_profile(root, tmp_path / "home")
    plan = run_as_typed(root, env, "-n")
    assert plan.returncode == 0, plan.stderr[-3000:]
    output = plan.stdout + plan.stderr
    assert "Using profiles slurm and workflow specific profile profiles/default" in output
    jobs = planned_train_jobs(output)
    config = yaml.safe_load((root / "config.yaml").read_text())
    assert len(jobs) == len(config["experiments"]) > 0
    for job in jobs:
        assert job["gres"] == "gpu:1" and job["nodes"] == "1", job
        assert job["cpus_per_gpu"] == "8" and job["mem_mb"] == "64000", job


def test_the_paper_study_plans_on_the_cluster_with_its_gpus_and_gpu_hours(slurm_cluster, tmp_path):
    """configs/paper.yaml under `--profile slurm`: every training job of Tables 2 and 3 (both
    pairs) planned with its GPU, and the GPU-hours it is expected to cost printed first."""
    root = copy_project(tmp_path / "project")
    env = link_profile(root, tmp_path / "home")
    plan = run_as_typed(root, env, "-n", "--configfile", "configs/paper.yaml")
    assert plan.returncode == 0, plan.stderr[-3000:]
    output = plan.stdout + plan.stderr
    jobs = planned_train_jobs(output)
    assert len(jobs) == 4 + 18  # Table 2's four (also Table 3's base and big rows) + rows A-E
    assert all(job["gres"] == "gpu:1" and job["nodes"] == "1" for job in jobs), jobs
    for table in ("table2", "table3", "params"):
        assert f"results/paper/tables/{table}.md" in output
    assert "big_en_fr                  300000" in output and "total: " in output
    assert "left out parser_wsj" in output


def test_a_users_own_slurm_profile_gets_the_workflows_resources(slurm_cluster, tmp_path):
    """Someone with a `slurm` profile of their own keeps it: the per-rule needs come from the
    workflow profile, the GPUs per train job from the experiment."""
    root = copy_project(tmp_path / "project")
    quick_experiment(root, name="pair", processes=2, max_steps=20)
    own = tmp_path / "home/.config/snakemake/slurm"
    own.mkdir(parents=True)
    (own / "config.yaml").write_text(
        "executor: slurm\njobs: 50\nslurm-status-command: squeue\n"
        "default-resources:\n  slurm_partition: gpu\n  slurm_account: lab\n"
    )
    plan = run_as_typed(root, as_user(tmp_path / "home"), "-n", "runs/pair/train.json")
    assert plan.returncode == 0, plan.stderr[-3000:]
    [job] = planned_train_jobs(plan.stdout + plan.stderr)
    assert job["gres"] == "gpu:2" and job["cpus_per_gpu"] == "8" and job["runtime"] == "1440"
    assert job["slurm_account"] == "lab" and job["slurm_partition"] == "gpu", job


def keep_experiments(root: Path, *names: str, **train) -> None:
    """Only these of the default's experiments, their training settings updated by `train`."""

    def keep(config):
        config["experiments"] = {n: e for n, e in config["experiments"].items() if n in names}
        assert list(config["experiments"]) == list(names)
        for experiment in config["experiments"].values():
            experiment["train"] = {**experiment["train"], **train}

    edit_config(root, keep)


# The default pipeline with one of its four experiments, trained for 60 of its 750 steps:
# every rule still runs (28 jobs), its decodes share the two fake GPUs, and the test proves the
# scheduling, not the learning (tests/test_workflow_train.py checks that on the same pipeline
# run locally). All four at full length once took CI over 15 minutes; two at full length, 9;
# two at 60 steps, 10 on an Intel Xeon CI machine (each job spends ~10 s starting snakemake
# inside the allocation, and the 2-CPU node runs two jobs at a time); two processes on two
# GPUs are the next test's. Its own limit, above the suite's 900 s, only ends a hang.
SLURM_TRAINING = {
    "max_steps": 60,
    "warmup_steps": 30,
    "checkpoint_every_steps": 10,
    "dev_every_steps": 30,
    "log_every_steps": 10,
}


@pytest.mark.timeout(1500)
def test_every_rule_of_the_default_pipeline_runs_through_slurm(slurm_cluster, tmp_path):
    root = with_test_limits(copy_project(tmp_path / "project"))
    keep_experiments(root, "tiny", **SLURM_TRAINING)
    result = run_as_typed(root, link_profile(root, tmp_path / "home"))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    jobs = submitted_jobs(output)
    ids = [job_id for ids in jobs.values() for job_id in ids]
    # Each message names what a failure needs to be understood: the jobs submitted per rule
    # (a retried job is submitted twice) or the end of snakemake's log.
    assert len(ids) == len(set(ids)), jobs
    assert len(jobs["train"]) == 1 and len(jobs["decode"]) == 3 and len(jobs["score"]) == 3, jobs
    listed = run_snakemake(root, "--list-rules").stdout.splitlines()
    rules = {line.split()[0] for line in listed if line and not line[0].isspace()} - {"all"}
    # The parsing rules (Table 4) run only for treebank datasets, which the default has none of;
    # tests/test_real_parsing.py runs them on the treebank sample.
    rules -= {"treebank", "score_parse", "parse_baselines"}
    # seed_scores only summarises experiments of several seeds (tests/test_studies.py runs it).
    rules -= {"seed_scores"}
    rules -= {"run_record"}  # a local rule: it runs in snakemake's own process
    rules -= {"export"}  # on request only (runs/<experiment>/export/<format>), not in `all`
    assert (root / "results/toy/run.json").exists()
    assert set(jobs) == rules, f"rules not submitted: {rules - set(jobs)}"
    assert (root / "results/toy/tables/table2.md").exists(), output[-5000:]
    train = slurm_job(jobs["train"][0])
    assert "Partition=gpu" in train and re.search(r"gres[:/]gpu[:=]1", train), train
    assert "Partition=cpu" in slurm_job(jobs["clean"][0])
    summary = json.loads((root / "runs/tiny/train.json").read_text())
    assert summary["steps"] == SLURM_TRAINING["max_steps"] and len(summary["average_weights"]) == 5
    scores = json.loads((root / "results/toy/scores/tiny/averaged/test.json").read_text())
    assert scores["sentences"] == 500 and 0 <= scores["sacrebleu"]["score"] <= 100


def launch_line(root: Path, name: str) -> str:
    log = (root / f"logs/train/{name}.log").read_text()
    return next(line for line in log.splitlines() if line.startswith("$ "))


@pytest.fixture(scope="module")
def two_nodes(slurm_cluster, tmp_path_factory):
    """A project whose toy experiment was trained through `snakemake --profile slurm` as typed,
    on two processes of one node (`pair`), then as one process on each of two nodes
    (`pair_nodes`, the train rule sent to partition multinode): the project, the user's
    environment and the two runs' snakemake results."""
    tmp_path = tmp_path_factory.mktemp("two_nodes")
    root = with_test_limits(copy_project(tmp_path / "project"))
    quick_experiment(
        root, name="pair", processes=2, max_steps=20, warmup_steps=10, tokens_per_step=2000
    )
    edit_config(root, lambda c: c["experiments"].update(
        pair_nodes={**c["experiments"]["pair"], "processes": 1, "nodes": 2}))  # fmt: skip
    env = link_profile(root, tmp_path / "home")
    one_node = run_as_typed(root, env, "runs/pair/train.json")
    profile = root / "profiles/default/config.yaml"  # the test cluster's nodes of one GPU
    settings = yaml.safe_load(profile.read_text())
    settings["set-resources"]["train"]["slurm_partition"] = "multinode"
    profile.write_text(yaml.safe_dump(settings))
    across = (
        run_as_typed(root, env, "runs/pair_nodes/train.json") if one_node.returncode == 0 else None
    )
    return root, env, one_node, across


def final_weights(root: Path, name: str) -> dict:
    from aiayn.train.checkpoint import load_weights

    summary = json.loads((root / f"runs/{name}/train.json").read_text())
    return load_weights(root / summary["final_weights"])["state_dict"]


def assert_same_weights(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(got[name], tensor), name


def test_two_nodes_train_to_the_weights_of_two_processes_on_one(two_nodes):
    """Through `snakemake --profile slurm` as typed: two processes of one node (srun, torchrun
    --nnodes=1), then the same experiment as one process on each of two nodes (the
    allocation's nodes, a rendezvous on the first), which ends with the same weights, tensor
    for tensor: the same two shards of every step, summed by gloo in the same order."""
    root, _, result, two_node_result = two_nodes
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    jobs = submitted_jobs(result.stdout + result.stderr)
    assert re.search(r"gres[:/]gpu[:=]2", slurm_job(jobs["train"][0]))
    launch = launch_line(root, "pair")
    assert launch.startswith("$ srun --overlap") and "--rdzv_backend=c10d" in launch
    assert "--nnodes=1" in launch and "--nproc_per_node=2" in launch

    result = two_node_result
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    [job] = submitted_jobs(result.stdout + result.stderr)["train"]
    assert "NumNodes=2" in slurm_job(job) and "NodeList=aiayn-node[1-2]" in slurm_job(job)
    launch = launch_line(root, "pair_nodes")
    assert "--nodes=2" in launch and "--nnodes=2" in launch and "--nproc_per_node=1" in launch
    assert "--rdzv_endpoint=aiayn-node1:" in launch and "--cpus-per-task=1" in launch
    summaries = [
        json.loads((root / f"runs/{n}/train.json").read_text()) for n in ("pair", "pair_nodes")
    ]
    assert all(s["processes"] == 2 and s["ranks_agree"] and s["steps"] == 20 for s in summaries)
    assert_same_weights(final_weights(root, "pair_nodes"), final_weights(root, "pair"))


# A job of two nodes as Snakemake's slurm-jobstep executor runs a rule: the rule in a one-node
# step (srun -n1 --nodes=1), which starts its own srun across the allocation; the ranks meet at
# a c10d rendezvous on the first node and sum their ranks with gloo, over the nodes' network.
TWO_NODE_JOB = r"""#!/bin/bash
srun -n1 --nodes=1 bash -c '
echo "step: $(hostname) SLURM_NNODES=$SLURM_NNODES"
step=$(env | grep -oE "^(SLURM|SRUN|SBATCH)_[A-Z_]+" \
    | grep -vE "^SLURM_(JOB_?ID|CLUSTER_NAME|SUBMIT_DIR|SUBMIT_HOST)$")
env $(printf -- "-u %s " $step) \
    srun --overlap --jobid=$SLURM_JOB_ID --nodes=2 --ntasks=2 --ntasks-per-node=1 \
    PYTHON -m torch.distributed.run --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
    --rdzv_endpoint=aiayn-node1:29777 --rdzv_id=pair-$SLURM_JOB_ID SCRIPT
'
"""
RANK_REPORT = """
import socket, torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1])
dist.all_reduce(total)
host = socket.gethostname()
print(f"rank {dist.get_rank()} on {host} at {socket.gethostbyname(host)}: sum {total.item()}")
dist.destroy_process_group()  # a gloo group left to the exit can abort the process
"""


def test_the_two_namespaced_nodes_are_two_machines_to_a_job(slurm_cluster, tmp_path):
    """multinode's two nodes (tests/slurm/up.sh): each rank of a two-node job runs on its own
    node, with its own host name and address, and the ranks exchange tensors over the network
    after a rendezvous on the first node, started from a one-node step as a rule is (with
    the step's own SLURM variables left out, so that srun takes the allocation's nodes)."""
    script, report = tmp_path / "job.sh", tmp_path / "ranks.py"
    report.write_text(RANK_REPORT)
    script.write_text(TWO_NODE_JOB.replace("PYTHON", sys.executable).replace("SCRIPT", str(report)))
    output = tmp_path / "job.out"
    submitted = subprocess.run(
        [
            "sbatch",
            "--wait",
            "--partition=multinode",
            "--nodes=2",
            "--gres=gpu:1",
            "--mem=1000",
            f"--output={output}",
            str(script),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=600,
    )
    printed = output.read_text()
    assert submitted.returncode == 0, submitted.stderr + printed
    assert "step: aiayn-node1 SLURM_NNODES=1" in printed
    # torchrun numbers the nodes in the order they join the rendezvous
    ranks = re.findall(r"rank (\d) on (\S+) at (\S+): sum (\d+)", printed)
    assert sorted(rank for rank, *_ in ranks) == ["0", "1"], printed
    assert sorted((host, address, total) for _, host, address, total in ranks) == [
        ("aiayn-node1", "10.254.77.11", "3"),
        ("aiayn-node2", "10.254.77.12", "3"),
    ], printed


def on_node(node: str, program: bytes) -> int | None:
    """The process of a namespaced node (one of its network namespace's) whose command runs
    `program`: the trainer (`aiayn.train.trainer`, not the torchrun above it) or slurmd."""
    listed = subprocess.run(["ip", "netns", "pids", node], capture_output=True, text=True)
    for pid in listed.stdout.split():
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:  # ended since
            continue
        if program in words and b"torch.distributed.run" not in words:
            return int(pid)
    return None


def only_slurmd(node: str) -> bool:
    """Whether nothing but slurmd runs on the namespaced node."""
    listed = subprocess.run(["ip", "netns", "pids", node], capture_output=True, text=True)
    return listed.stdout.split() == [str(on_node(node, b"slurmd"))]


def wait_for(condition, what: str, seconds: float = 300):
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(0.5)
    return found


def node_state(node: str) -> str:
    return subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def lines(root: Path, name: str) -> list[str]:
    return (root / f"runs/{name}/interruptions.log").read_text().splitlines()


def interruptions(root: Path, name: str) -> list[tuple[float, str]]:
    """runs/{name}/interruptions.log: when each attempt ended (seconds since the epoch), why."""
    ended = [re.fullmatch(r"(\S+) \(SLURM job \d+\): (.*)", line) for line in lines(root, name)]
    return [
        (datetime.fromisoformat(when).timestamp(), why) for when, why in map(re.Match.groups, ended)
    ]


def paused_training(root: Path, env: dict, step: int, folder: Path, *options: str):
    """`snakemake --profile slurm` training `pair_lost` in the background, its rank 0 (on the
    first node) stopped after `step` (tests/fault_points): the snakemake process (its output
    goes to `folder`/output) and rank 0's pid."""
    folder.mkdir()
    pause = fault_point_env(root, AIAYN_FAULT_PAUSE=f"progress:{step}:{folder / 'paused'}")
    fault_points = {k: pause[k] for k in ("PYTHONPATH", "AIAYN_FAULT_ROOT", "AIAYN_FAULT_PAUSE")}
    command = " ".join([CLUSTER_COMMAND, *options, "runs/pair_lost/train.json"])
    with open(folder / "output", "w") as output:
        snakemake = subprocess.Popen(["bash", "-c", command], cwd=root, stdout=output,
                                     stderr=subprocess.STDOUT, env={**env, **fault_points})  # fmt: skip
    paused = wait_until_stopped(folder / "paused", snakemake, "training pair_lost")
    return snakemake, paused["pid"]


def finished(snakemake: subprocess.Popen, folder: Path) -> str:
    """What the background snakemake printed, once it has ended."""
    snakemake.wait(timeout=600)
    return (folder / "output").read_text()


def test_a_lost_node_stops_the_job_by_name_and_a_rerun_resumes_to_the_same_weights(
    two_nodes, tmp_path
):
    """`pair_nodes` again as `pair_lost` (checkpoints at steps 10 and 20), broken twice:
    - the second node's trainer killed after step 12: srun stops the first node's within
      seconds, the job fails naming the node, and `snakemake --rerun-incomplete` resumes
      from step 10;
    - then the second node lost to SLURM (its slurmd killed after step 16, so that nothing
      answers for it): SLURM declares it lost after SlurmdTimeout (30 s here) and cancels the
      step (whose SIGTERM lets the ranks checkpoint), the job names the node, SLURM requeues
      it, and once the node is back it resumes and finishes.
    The weights equal the unbroken run's, tensor for tensor; each attempt's message is kept in
    the run folder (Snakemake deletes the rule's log when a job runs again)."""
    root, env, _, unbroken = two_nodes
    assert unbroken is not None and unbroken.returncode == 0, "the unbroken two-node run failed"
    edit_config(root, lambda c: c["experiments"].update(pair_lost=c["experiments"]["pair_nodes"]))

    first, second = tmp_path / "first", tmp_path / "second"
    snakemake, rank0 = paused_training(root, env, 12, first, "--retries 0")
    os.kill(
        wait_for(lambda: on_node("aiayn-node2", b"aiayn.train.trainer"), "its trainer"),
        signal.SIGKILL,
    )
    killed_at = time.time()
    os.kill(rank0, signal.SIGCONT)
    output = finished(snakemake, first)
    assert snakemake.returncode != 0, output[-3000:]
    [(ended, why)] = interruptions(root, "pair_lost")
    assert ended - killed_at < 60, f"the job ended {ended - killed_at:.0f} s after the kill"
    assert "training pair_lost broke: it failed first on node aiayn-node2 (srun: task 1:" in why
    assert "runs/pair_lost/checkpoints/step00000010, which a rerun resumes from" in why
    assert why in output  # Snakemake shows the failed job's log

    snakemake, rank0 = paused_training(root, env, 16, second, "--rerun-incomplete")
    try:
        os.kill(wait_for(lambda: on_node("aiayn-node2", b"slurmd"), "its slurmd"), signal.SIGKILL)
        lost_at = time.time()
        wait_for(lambda: node_state("aiayn-node2").startswith("down"), "SLURM declares it lost")
        with contextlib.suppress(ProcessLookupError):  # SLURM ended the job step first
            os.kill(rank0, signal.SIGCONT)
        requeued = wait_for(lambda: pending_in("multinode"), "SLURM requeues the job")
        subprocess.run([SLURM_SCRIPTS / "node-up.sh", "aiayn-node2"], check=True)
        wait_for(lambda: node_state("aiayn-node2") == "idle", "the node back in service")
        # A requeued job waits two minutes before it may start again. Cut short only once the
        # node's step of the lost attempt is over (its slurmstepd waits for slurmd to report
        # to): a job started while it ends found its node busy and never trained.
        wait_for(lambda: only_slurmd("aiayn-node2"), "the lost attempt's step over")
        subprocess.run(["scontrol", "update", f"jobid={requeued}", "StartTime=now"], check=True)
        output = finished(snakemake, second)
    finally:  # the other tests' cluster whole again
        if on_node("aiayn-node2", b"slurmd") is None:
            subprocess.run([SLURM_SCRIPTS / "node-up.sh", "aiayn-node2"], check=True)
    assert snakemake.returncode == 0, output[-3000:]
    _, (ended, why) = interruptions(root, "pair_lost")
    timeout = 30  # up.sh's SlurmdTimeout: SLURM's ping interval and KillWait come on top
    assert ended - lost_at < timeout + 60, f"the job ended {ended - lost_at:.0f} s after the loss"
    assert why.startswith("training pair_lost broke: SLURM lost node aiayn-node2: its slurmd")
    assert "; SLURM: DOWN" in why  # scontrol's state of the node
    log = (root / "logs/train/pair_lost.log").read_text()
    assert "resumed from runs/pair_lost/checkpoints/step000000" in log
    assert f"last interrupted {lines(root, 'pair_lost')[-1]}" in log
    assert_same_weights(final_weights(root, "pair_lost"), final_weights(root, "pair_nodes"))


def pending_in(partition: str) -> str | None:
    """The id of a job pending in `partition`, if there is one."""
    listed = subprocess.run(["squeue", "-h", "-t", "PD", "-p", partition, "-o", "%i"],
                            capture_output=True, text=True)  # fmt: skip
    return listed.stdout.split()[0] if listed.stdout.split() else None
