"""The trainer's parts, in this process and in seconds: the clock, the batches, the step and the
dev loss through a real DeepSpeed engine, the run folder and the records. tests/test_train.py
trains whole runs in subprocesses, as the workflow does; these name the part that broke."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiayn.decode.translate import autocast
from aiayn.errors import InputError
from aiayn.model import Transformer
from aiayn.model_config import TransformerConfig
from aiayn.prepare.binarize import write_indexed
from aiayn.textio import file_sha256
from aiayn.train import checkpoint as ckpt
from aiayn.train import timing
from aiayn.train.batches import TrainingBatches
from aiayn.train.engine import (
    LAUNCH_VARIABLES,
    deepspeed_engine,
    init_process,
    precision_config,
    resolve_precision,
    sum_over_processes,
)
from aiayn.train.loader import BatchStream
from aiayn.train.record import (
    LogWindow,
    RunShape,
    TrainLog,
    step_fill,
    write_summary,
)
from aiayn.train.run_folder import RunFolder, last_interruption, record_interruption
from aiayn.train.settings import Experiment, TrainSettings, data_digest
from aiayn.train.step import Diverged, Steps
from aiayn.train.timing import TrainingClock
from tests.test_train import copy_splits

MODEL = TransformerConfig(vocab_size=20, n_layers=1, d_model=32, d_ff=64, n_heads=2, dropout=0.0)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return copy_splits(tmp_path_factory.mktemp("parts"), 400, 40)


def an_experiment(run_dir: Path, data, dev=None, code=None, train_data_digest=None, **train):
    settings = {"tokens_per_step": 300, "tokens_per_batch": 300, "warmup_steps": 10, **train}
    return Experiment(
        name=run_dir.name,
        run_dir=run_dir,
        train_data=data[0],
        dev_data=dev or data[1],
        model=MODEL,
        train=TrainSettings(**settings),
        code=code,
        train_data_digest=train_data_digest,
    )


# ---- the clock --------------------------------------------------------------------------


def test_the_clock_counts_earlier_sessions_and_only_rank_0_calls_a_save(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(timing.time, "monotonic", lambda: now[0])
    settings = TrainSettings(checkpoint_every_minutes=10, max_minutes=30)
    clock, other_rank = TrainingClock(settings, 0, 600.0), TrainingClock(settings, 1, 600.0)
    now[0] += 599
    assert clock.seconds() == 1199 and not clock.save_due()
    now[0] += 1
    assert clock.save_due() and not other_rank.save_due()  # rank 0 votes for all ranks
    clock.saved()
    assert not clock.save_due()
    assert not clock.out_of_time(1799) and clock.out_of_time(1800)  # 30 minutes, all sessions
    unlimited = TrainingClock(TrainSettings(checkpoint_every_minutes=None), 0, 0.0)
    now[0] += 10**6
    assert not unlimited.save_due() and not unlimited.out_of_time(10**6)


# ---- what training reads ----------------------------------------------------------------


def test_each_process_reads_its_own_shard_of_an_epoch_and_every_rank_the_same_dev_batches(
    tmp_path, data
):
    experiment = an_experiment(tmp_path / "run", data)
    ranks = [TrainingBatches(experiment, rank, 2, 1, 150) for rank in (0, 1)]
    shards = [b.of_epoch(0) for b in ranks]
    assert len(shards[0]) == len(shards[1])  # equal steps on both ranks
    seen = [int(i) for shard in shards for batch in shard for i in batch]
    assert len(seen) == len(set(seen))  # no pair in both shards
    assert [b.tolist() for b in ranks[0].dev] == [b.tolist() for b in ranks[1].dev]
    assert sum(len(b) for b in ranks[0].dev) == 40  # the dev loss reads every dev pair
    again = TrainingBatches(experiment, 0, 2, 1, 150).of_epoch(0)
    assert [b.tolist() for b in again] == [b.tolist() for b in shards[0]]  # reproducible
    assert [b.tolist() for b in ranks[0].of_epoch(1)] != [b.tolist() for b in shards[0]]


def test_an_empty_dev_split_or_one_without_a_pair_that_fits_is_refused_before_training(
    tmp_path, data
):
    write_indexed(tmp_path / "empty", [], vocab_size=20)
    empty = (str(tmp_path / "empty"), str(tmp_path / "empty"))
    with pytest.raises(InputError, match="the dev split .*empty is empty"):
        TrainingBatches(an_experiment(tmp_path / "run", data, dev=empty), 0, 1, 1, 300)
    long = [list(range(4, 20)) * 30]  # 480 tokens: no batch of 300 holds it
    write_indexed(tmp_path / "long", long, vocab_size=20)
    too_long = (str(tmp_path / "long"), str(tmp_path / "long"))
    with pytest.raises(InputError, match="no dev pair can be scored: all 1 pairs"):
        TrainingBatches(an_experiment(tmp_path / "run", data, dev=too_long), 0, 1, 1, 300)
    padded = an_experiment(tmp_path / "run", data, pad_to_multiple=1000)  # pads past 300
    with pytest.raises(InputError) as refused:
        TrainingBatches(padded, 0, 1, 1, 300)
    assert "or lower train.pad_to_multiple (1000: every sentence is padded past" in str(
        refused.value
    )


@pytest.mark.parametrize("pad", [1, 8])
def test_steps_short_of_their_real_tokens_are_told_only_the_ways_that_help(
    tmp_path, data, caplog, pad
):
    """Padded batches that close before tokens_per_step's real tokens: raise the memory limit,
    or lower pad_to_multiple where it pads at all."""
    tight = an_experiment(tmp_path / "run", data, pad_to_multiple=pad, tokens_per_batch=200)
    with caplog.at_level("WARNING", logger="aiayn.train.trainer"):
        TrainingBatches(tight, 0, 1, 1, 300).of_epoch(0)
    [warning] = [r.getMessage() for r in caplog.records if "real tokens, not" in r.getMessage()]
    assert "Raise tokens_per_batch" in warning
    assert ("lower pad_to_multiple (8)" in warning) == (pad > 1), warning


# ---- one step and the dev loss, through a real DeepSpeed engine -------------------------


@pytest.fixture(scope="module")
def steps(tmp_path_factory, data):
    """A one-process DeepSpeed engine over a small copy task, in this process."""
    rank, world, device = init_process()
    torch.manual_seed(0)
    experiment = an_experiment(tmp_path_factory.mktemp("steps") / "run", data)
    batches = TrainingBatches(experiment, rank, world, 1, 300)
    engine = deepspeed_engine(Transformer(MODEL), experiment.train, 1, "fp32", device)
    stream = BatchStream(batches.train_source, batches.train_target, batches.of_epoch, 1, device)

    def all_reduce(values):
        return sum_over_processes(values, world, device)

    made = Steps(
        engine, stream, MODEL, experiment.train, 1, all_reduce, rank, world, device, "sliced",
        "fp32",
    )  # fmt: skip
    return made, batches


def new_state() -> dict:
    counters = ("step", "target_tokens", "source_tokens", "train_flops")
    return {**dict.fromkeys(counters, 0), "padded_source_tokens": 0, "padded_target_tokens": 0}


def test_a_step_updates_the_weights_counts_its_tokens_and_passes_the_votes_on(steps):
    step, batches = steps
    before = [p.detach().clone() for p in step.engine.module.parameters()]
    state = new_state()
    votes = {"save": True, "last": False, "stop": False}
    loss, nll, tokens, decided = step.step(state, votes, lambda: None)
    assert decided == votes  # one process: its own votes decide
    assert state["step"] == 1 and state["target_tokens"] == tokens > 0
    assert state["padded_target_tokens"] >= state["target_tokens"]
    assert state["train_flops"] > 6 * tokens  # at least 6 x parameters x tokens
    assert loss >= nll > 0 and math.isfinite(loss)  # label smoothing adds to the nll
    moved = [
        not torch.equal(a, b) for a, b in zip(before, step.engine.module.parameters(), strict=True)
    ]
    assert all(moved)
    dev = step.evaluate(batches)
    assert dev["dev_ppl"] == pytest.approx(math.exp(dev["dev_nll"]))
    assert dev["dev_loss"] >= dev["dev_nll"] > 0
    assert step.engine.module.training  # back to training after the dev loss


def test_a_step_whose_loss_is_not_finite_stops_with_advice_keeping_the_newest(steps):
    step, _ = steps
    weights = next(step.engine.module.parameters())
    saved = weights.detach().clone()
    with torch.no_grad():
        weights.fill_(float("nan"))
    try:
        with pytest.raises(Diverged, match="newest checkpoint \\(runs/x/step00000010\\) is kept"):
            step.step(
                new_state(),
                dict.fromkeys(("save", "last", "stop"), False),
                lambda: "runs/x/step00000010",
            )
    finally:
        with torch.no_grad():
            weights.copy_(saved)


# ---- the run folder ----------------------------------------------------------------------


def test_opening_a_run_of_another_configuration_moves_its_outputs_aside(tmp_path, data):
    root = tmp_path / "run"
    first = RunFolder(an_experiment(root, data), 0, 1)
    first.open()
    (root / "checkpoints" / "step00000010").mkdir(parents=True)  # half-written: no COMPLETE
    (root / "train.json").write_text("{}")
    (root / "tensorboard").mkdir()  # the old run's curves, which the new run must not continue
    (root / "wandb_run.json").write_text('{"id": "old"}')
    first.open()
    assert not (root / "checkpoints" / "step00000010").exists()  # dropped
    assert (root / "train.json").exists()  # same configuration: kept
    old = json.loads((root / "identity.json").read_text())["identity"]
    changed = RunFolder(an_experiment(root, data, seed=7), 0, 1)
    changed.open()
    assert (root / "superseded" / old / "train.json").exists() and not (
        root / "train.json"
    ).exists()
    for curves in ("tensorboard", "wandb_run.json"):  # archived with the run (#77)
        assert (root / "superseded" / old / curves).exists() and not (root / curves).exists()
    assert json.loads((root / "identity.json").read_text())["identity"] != old
    budget = RunFolder(an_experiment(root, data, seed=7, max_steps=99), 0, 1)
    budget.open()  # a longer budget is the same trajectory: nothing moves
    assert len(list((root / "superseded").iterdir())) == 1


@pytest.mark.parametrize("marker", [b'{"st', b'{"step": 8, "files": []}', b'{"step": "\xff"}'])
def test_a_checkpoint_whose_complete_record_is_damaged_is_set_aside(tmp_path, data, marker):
    """The COMPLETE record says what a checkpoint holds: cut short, not UTF-8 or listing no
    files, the checkpoint is set aside as damaged and the one before becomes the newest (a
    JSONDecodeError traceback stopped the trainer)."""
    root = tmp_path / "run"
    folder = RunFolder(an_experiment(root, data), 0, 1)
    folder.open()
    for step in (4, 8):
        checkpoint = root / "checkpoints" / f"step{step:08d}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "states.pt").write_bytes(bytes(step))
        ckpt.mark_complete(checkpoint, step)
    (root / "checkpoints/step00000008" / ckpt.COMPLETE).write_bytes(marker)
    folder.open()
    assert folder.newest() == root / "checkpoints/step00000004"
    assert (root / "checkpoints/step00000008.damaged/states.pt").exists()


@pytest.mark.parametrize("damage", [b'{"identity": "ab', b"[]", b'{"identity": "\xff"}'])
def test_a_damaged_identity_json_is_refused_with_both_ways_out_and_nothing_moved(
    tmp_path, data, damage
):
    """identity.json says what trained the checkpoints beside it: cut short, of another shape
    or not UTF-8, the run is neither resumed nor set aside on a guess (it was a traceback);
    the refusal names both ways out, and deleting it resumes the run as this experiment's."""
    root = tmp_path / "run"
    RunFolder(an_experiment(root, data), 0, 1).open()
    (root / "train.json").write_text("{}")
    marker = root / "identity.json"
    whole = marker.read_bytes()
    marker.write_bytes(damage)
    with pytest.raises(InputError) as refused:
        RunFolder(an_experiment(root, data), 0, 1).open()
    told = str(refused.value)
    assert told.startswith(f"{marker} ") and "It records the settings that trained" in told
    assert f"move {root} away to train afresh, or, only if" in told
    assert (root / "train.json").exists() and not (root / "superseded").exists()
    marker.unlink()
    RunFolder(an_experiment(root, data), 0, 1).open()
    assert marker.read_bytes() == whole and (root / "train.json").exists()


@pytest.mark.parametrize(
    ("change", "named"),
    [({"code": "edited"}, "the training code"), ({"train_data_digest": "other"}, "the training data"),
     ({"seed": 7}, "the training settings"),
     ({"code": "edited", "train_data_digest": "other"}, "the training code and the training data")],
)  # fmt: skip
def test_a_run_of_other_code_or_data_is_moved_aside_and_named(tmp_path, data, caplog, change,
                                                              named):  # fmt: skip
    """The code that trains and the data's content are part of what a checkpoint continues: a
    run of other ones is not resumed, and the log says which changed."""
    root = tmp_path / "run"
    first = an_experiment(root, data, code="trained", train_data_digest="corpus")
    RunFolder(first, 0, 1).open()
    weights = root / "weights" / "step00000010.safetensors"
    weights.parent.mkdir()
    weights.write_bytes(b"the first run's")
    RunFolder(first, 0, 1).open()  # the same code and data: kept
    assert weights.exists()
    settings = {"code": "trained", "train_data_digest": "corpus", **change}
    with caplog.at_level(logging.WARNING):
        RunFolder(an_experiment(root, data, **settings), 0, 1).open()
    archive = root / "superseded" / first.identity()
    assert (archive / "weights" / weights.name).read_bytes() == b"the first run's"
    assert not weights.exists()
    assert f"{named} changed since {root} was trained" in caplog.text
    assert "training starts from step 0" in caplog.text


def test_the_data_digest_follows_the_content_not_the_write(tmp_path):
    """Writing the same corpus again keeps the digest; one token more changes it."""
    prefixes = (str(tmp_path / "train.en"), str(tmp_path / "train.de"))
    for prefix in prefixes:
        for suffix, content in ((".bin", b"\x01\x02"), (".idx", b"\x00")):
            Path(prefix + suffix).write_bytes(content)
    before = data_digest(prefixes)
    Path(prefixes[1] + ".bin").write_bytes(b"\x01\x02")
    assert data_digest(prefixes) == before
    Path(prefixes[1] + ".bin").write_bytes(b"\x01\x02\x03")
    assert data_digest(prefixes) != before


def test_the_weights_to_average_are_the_newest_scheduled_ones(tmp_path, data):
    folder = RunFolder(an_experiment(tmp_path / "run", data, average_last=2), 0, 1)
    payload = {"state_dict": {"w": torch.zeros(1)}, "model_config": {}, "step": 0}
    for step, stopped in ((10, False), (20, False), (25, True), (30, False)):
        ckpt.save_weights(ckpt.weights_file(folder.weights_dir, step, stopped), payload)
    assert [p.name for p in folder.weights_to_average()] == [
        "step00000020.safetensors",
        "step00000030.safetensors",
    ]


# ---- the records -------------------------------------------------------------------------


def test_the_training_log_is_written_by_rank_0_and_forgets_what_a_resume_replays(tmp_path):
    path = tmp_path / "train.jsonl"
    for rank in (0, 1):
        log = TrainLog(path, rank, lambda values: values)
        for step in (10, 20, 30):
            log.append({"step": step, "loss": 1.0})
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [10, 20, 30]
    TrainLog(path, 0, lambda values: values).forget_after(20)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [10, 20]
    window = LogWindow()
    window.add(3.0, 2.0, 10)
    window.add(1.0, 1.0, 5)
    assert (window.loss, window.nll, window.tokens) == (4.0, 3.0, 15)


def test_the_step_fill_is_real_tokens_per_step_against_the_setting():
    state = {
        "step": 4,
        "target_tokens": 3600,
        "source_tokens": 4000,
        "padded_source_tokens": 5000,
        "padded_target_tokens": 4500,
    }
    assert step_fill(state, 2000) == {
        "tokens_per_step": 2000,
        "real_tokens_per_step": {"source": 1000.0, "target": 900.0},
        "padded_over_real": {"source": 1.25, "target": 1.25},
    }


def test_the_summary_reports_the_run_as_it_was_laid_out(tmp_path, steps):
    step, _ = steps
    settings = TrainSettings(max_steps=1)
    shape = RunShape("quick", 0, 1, 1, 300, "fp32", "auto: no GPU", "sliced", torch.device("cpu"))
    state = {**new_state(), "step": 1, "epoch": 0, "seconds": 1.234}
    weights = [tmp_path / "weights" / "step00000001.safetensors"]
    summary = write_summary(
        tmp_path, shape, state, settings, step.engine, weights, weights[-1], {"dev_ppl": 2.0}
    )
    written = json.loads((tmp_path / "train.json").read_text())
    assert written == summary
    assert summary["experiment"] == "quick" and summary["ended_by"] == "max_steps"
    assert summary["processes"] == 1 and summary["precision"] == "fp32"
    assert summary["precision_reason"] == "auto: no GPU"
    assert summary["device_tflops_bf16"] is None and summary["device_tflops_fp16"] is None
    assert summary["final_weights"] == str(weights[0]) and summary["dev_ppl"] == 2.0
    assert summary["average_rule"] == {  # the paper's, by default; one file to average here
        "rule": "last",
        "count": 5,
        "averaged": 1,
        "fewer": "the run saved only 1 checkpoint",
    }
    assert summary["gradient_dtypes"] == {"accumulation": "float32", "communication": "float32"}
    assert summary["ranks_agree"] is True
    assert np.isfinite(summary["device_tflops_fp32"])
    software = summary["software"]  # what another machine must match to get these weights
    assert software["torch"] == torch.__version__ and software["deepspeed"]
    assert software["cuda"] is software["gpu"] is software["driver"] is None  # a CPU build
    cpu = summary["cpu"]  # and what moves a CPU's floats (#75)
    assert cpu["capability"] == torch.backends.cpu.get_cpu_capability()
    assert cpu["threads"] == torch.get_num_threads() and cpu["blas"]


def test_the_driver_version_is_read_from_what_linux_says_of_the_loaded_driver(
    tmp_path, monkeypatch
):
    from aiayn import software

    said = tmp_path / "version"
    said.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\nGCC version:  gcc 12\n"
    )
    monkeypatch.setattr(software, "NVIDIA_DRIVER", said)
    assert software.nvidia_driver() == "550.54.15"
    monkeypatch.setattr(software, "NVIDIA_DRIVER", tmp_path / "absent")
    assert software.nvidia_driver() is None


def test_the_cpu_is_read_from_cpuinfo_and_the_kernels_torch_runs_are_what_it_was_told(
    tmp_path, monkeypatch
):
    """/proc/cpuinfo's first processor names the CPU; ATEN_CPU_CAPABILITY, which gives this
    machine another machine's kernels, is what the record then says torch ran."""
    from aiayn import software

    said = tmp_path / "cpuinfo"
    said.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
                    "model name\t: AMD EPYC 7763\n\nprocessor\t: 1\nmodel name\t: other\n")  # fmt: skip
    monkeypatch.setattr(software, "CPUINFO", said)
    assert software.cpu_model() == {"vendor": "AuthenticAMD", "family": "25", "model_number": "1",
                                    "model": "AMD EPYC 7763"}  # fmt: skip
    script = "import json; from aiayn.software import cpu_kernels; print(json.dumps(cpu_kernels()))"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    ran = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    kernels = json.loads(ran.stdout)
    assert (kernels["capability"], kernels["capability_requested"]) == ("DEFAULT", "default")


def test_weights_say_which_run_and_which_bpe_model_they_were_trained_with(tmp_path, data):
    bpe = tmp_path / "bpe.model"
    bpe.write_bytes(b"pieces")
    experiment = dataclasses.replace(an_experiment(tmp_path / "run", data), subword=str(bpe))
    payload = RunFolder(experiment, 0, 1).weights_payload({}, 3)
    assert payload["experiment"] == "run" and payload["step"] == 3
    assert payload["identity"] == experiment.identity()
    assert payload["subword_sha256"] == file_sha256(bpe)
    assert Experiment.from_json(write_spec(tmp_path / "e.json", experiment)).subword == str(bpe)


def write_spec(path: Path, experiment: Experiment) -> Path:
    path.write_text(json.dumps(experiment.as_dict()))
    return path


NUMBERS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
# what a shell can hold: any text but NUL and lone surrogates, numbers of every size and sign
VARIABLE = st.one_of(
    st.integers(-3, 5).map(str), st.integers().map(str), st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8),
)  # fmt: skip


def whole(text: str) -> bool:
    """Whether int() reads `text` (as the trainer reads a launch variable)."""
    try:
        int(text)
    except ValueError:
        return False
    return True


@given(values=st.fixed_dictionaries({}, optional=dict.fromkeys(NUMBERS, VARIABLE)))
@example(values={"RANK": "\u00b2"})  # a digit to str.isdigit, none to int()
@example(values={"LOCAL_WORLD_SIZE": "abc"})
@settings(max_examples=300, derandomize=True, deadline=None)
def test_any_launch_variables_are_a_world_or_refused_naming_them(values):
    """RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE left in the shell or set by hand, each
    any text: they describe a world this process is part of, or are refused naming them
    (RANK=1 in a world of one waited forever for rank 0; RANK=abc or LOCAL_WORLD_SIZE=abc were
    ValueError tracebacks). Whatever they hold, the process knows whether it logs."""
    from aiayn.train.engine import check_launch_variables, logs_for_the_run
    from aiayn.train.memory import available_bytes

    defaults = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}  # as init_process sets them
    with pytest.MonkeyPatch.context() as patch:
        for name in NUMBERS:
            patch.delenv(name, raising=False)
        for name, value in {**defaults, **values}.items():
            patch.setenv(name, value)
        assert logs_for_the_run() in (True, False)
        try:
            check_launch_variables()
        except InputError as refusal:
            said = str(refusal)
            assert "\n" not in said and any(f"{name}=" in said for name in values), said
            if not all(whole(value) for value in values.values()):
                assert said.startswith("the launch variables must be whole numbers"), said
            return
        rank, local, world = (
            int(os.environ[name]) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE")
        )
        assert 0 <= rank < world and 0 <= local < world
        assert logs_for_the_run() == (rank == 0)
        assert available_bytes(torch.device("cpu")) is not None


@pytest.mark.parametrize(
    "stray, said",
    [
        (
            {"RANK": "1"},
            "RANK=1, LOCAL_RANK=0, WORLD_SIZE=1 in the environment describe no process",
        ),
        ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 in the environment, but no launcher started this"),
        ({"WORLD_SIZE": "2", "MASTER_PORT": "29555"}, "(RANK, LOCAL_RANK, MASTER_ADDR not set)"),
        ({"RANK": "abc"}, "the launch variables must be whole numbers: RANK='abc'"),
        ({"LOCAL_WORLD_SIZE": "4"}, "LOCAL_WORLD_SIZE=4 in the environment: the processes on"),
    ],
)
def test_the_trainer_with_a_stray_launch_variable_stops_at_once_naming_it(
    tmp_path, data, stray, said
):
    """RANK=1 or WORLD_SIZE=2 left in the shell: the trainer stops with the variables named,
    not a hang for processes that never come, nor DeepSpeed's MPI traceback."""
    import os
    import subprocess
    import sys

    from tests.conftest import PROJECT

    spec = tmp_path / "e.json"
    spec.write_text(json.dumps(an_experiment(tmp_path / "run", data).as_dict()))
    env = {key: value for key, value in os.environ.items() if key not in LAUNCH_VARIABLES}
    env |= {"PYTHONPATH": str(PROJECT / "src"), **stray}
    result = subprocess.run(
        [sys.executable, "-m", "aiayn.train.trainer", str(spec)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert result.returncode == 1 and said in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_a_stopped_training_names_its_checkpoint_or_says_there_is_none():
    from aiayn.train.launch import stopped_message

    none = stopped_message("tiny", -15, None, "logs/train/tiny.log")
    assert "stopped by a signal (exit -15): before any checkpoint was written" in none
    some = stopped_message("tiny", 143, "runs/tiny/checkpoints/step00000010", "logs/x.log")
    assert "its newest checkpoint is runs/tiny/checkpoints/step00000010; rerun" in some


def test_more_processes_than_gpus_is_refused_and_than_cores_warned():
    """A process a GPU: a fifth process on four GPUs would ask for cuda:4 (a traceback from
    each rank). Without a GPU, more processes than cores share them: said, not refused (the
    suite's two-process runs on one core are slow, not wrong)."""
    from aiayn.train.launch import check_processes

    with pytest.raises(InputError) as refused:
        check_processes("big", 5, 4, 64)
    assert "experiment 'big': processes 5, but this machine has 4 GPU(s)" in str(refused.value)
    assert check_processes("big", 4, 4, 2) is None
    crowded = check_processes("tiny", 64, 0, 2)
    assert "64 processes on 2 CPU core(s): they share" in crowded
    assert "`processes: 2` trains the same tokens a step" in crowded
    assert check_processes("tiny", 2, 0, 2) is None


@pytest.mark.parametrize(
    "capability, chosen",
    [((9, 0), "bf16"), ((8, 0), "bf16"), ((7, 5), "fp16"), ((7, 0), "fp16"), ((6, 0), "fp32")],
)
def test_auto_precision_is_what_the_gpu_computes_on_tensor_cores(monkeypatch, capability, chosen):
    """A V100 (7.0) or T4 (7.5) trains and decodes in fp16, not in emulated bf16 (which
    torch.cuda.is_bf16_supported() would allow); the capability is faked, this CPU has no GPU."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla X")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    gpu = torch.device("cuda", 0)
    precision, why = resolve_precision("auto", gpu)
    assert precision == chosen
    assert why.startswith("auto: Tesla X, compute capability " + ".".join(map(str, capability)))
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    context = autocast(gpu)  # decoding follows the same rule
    if chosen == "fp32":
        assert not isinstance(context, torch.autocast)
    else:
        assert context.fast_dtype == dtypes[chosen]
    assert resolve_precision("bf16", gpu) == ("bf16", "as set (train.precision: bf16)")


def test_fp16_trains_with_dynamic_loss_scaling_on_a_gpu_and_is_refused_on_a_cpu():
    from deepspeed.runtime.config import DeepSpeedConfig

    steps = {"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1}
    parsed = DeepSpeedConfig({**steps, **precision_config("fp16")})  # unknown keys are refused
    fp16 = parsed.float16_config
    assert fp16.enabled and fp16.loss_scale == 0 and fp16.initial_scale_power == 16  # dynamic
    assert not parsed.bfloat16_config.enabled
    assert resolve_precision("auto", torch.device("cpu")) == (
        "fp32",
        "auto: CPU (no GPU): fp32",
    )
    with pytest.raises(
        InputError, match="fp16 needs a CUDA GPU.*set train.precision: auto or fp32"
    ):
        resolve_precision("fp16", torch.device("cpu"))


def test_a_train_log_cut_short_resumes_and_a_damaged_line_is_named(tmp_path, caplog):
    """A kill or a full disk while a line was written leaves it cut: that last line came after
    the newest checkpoint and is dropped (the resume had died in json's traceback). A damaged
    line before it is named by number; deleting it, as the message says, lets the run go on."""
    path = tmp_path / "train.jsonl"
    path.write_text('{"step": 2, "loss": 3.0}\n{"step": 4, "loss": 2.0}\n{"step": 6, "lo')
    train_log = TrainLog(path, 0, lambda values: values)
    train_log.forget_after(4)
    assert path.read_text() == '{"step": 2, "loss": 3.0}\n{"step": 4, "loss": 2.0}\n'
    assert "its last line was cut short" in caplog.text
    path.write_text('{"step": 2, "loss": 3.0}\n{"st\x00\n{"step": 4, "loss": 2.0}\n')
    with pytest.raises(InputError, match="train.jsonl, line 2, is not a JSON line") as told:
        train_log.forget_after(4)
    assert "delete that line" in str(told.value)
    lines = path.read_text().splitlines()
    path.write_text("".join(line + "\n" for number, line in enumerate(lines, 1) if number != 2))
    train_log.forget_after(2)
    assert path.read_text() == '{"step": 2, "loss": 3.0}\n'


def test_each_attempts_end_is_kept_and_a_record_it_cannot_write_costs_only_itself(tmp_path, caplog):
    """runs/<name>/interruptions.log: one line an attempt (a message of several lines on one);
    where it cannot be written (a folder in its place) the attempt's message is not lost to a
    traceback: a warning, and the record stays as it was."""
    record_interruption(tmp_path, "training x was stopped by a signal\n(exit 143)")
    record_interruption(tmp_path, "training x broke: SLURM lost node n2")
    first, second = (tmp_path / "interruptions.log").read_text().splitlines()
    assert first.endswith(": training x was stopped by a signal (exit 143)")
    assert last_interruption(tmp_path) == second and second.endswith(
        ": training x broke: SLURM lost node n2"
    )

    blocked = tmp_path / "blocked"
    (blocked / "interruptions.log").mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        record_interruption(blocked, "training x failed (exit 1)")
    assert (
        "could not add to" in caplog.text
        and "this attempt's end is in this log only" in caplog.text
    )
    assert last_interruption(blocked) is None
