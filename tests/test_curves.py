"""Live curves and early stopping (#65), at unit level: what TensorBoard's own reader and W&B's
offline run hold after a run that was killed and resumed, and a patience count that resumes
from its checkpointed state to the step an unbroken run stops at."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.errors import InputError
from aiayn.train.curves import WANDB_RUN_FILE, Curves, scalars, tag
from aiayn.train.early_stopping import EarlyStopping
from tests.conftest import wandb_history


@pytest.fixture(autouse=True)
def no_wandb_writer_left_behind():
    """wandb.init gives the processes this one starts its writer (WANDB_SERVICE in the
    environment): taken back after each test, so that a later attempt or trainer this process
    starts has a writer of its own, which dies with it as a trainer's does."""
    yield
    os.environ.pop("WANDB_SERVICE", None)


def window(step: int, attempt: int) -> dict:
    """A train.jsonl log line; `attempt` makes a resumed run's values differ from the first's."""
    return {"step": step, "loss": 5.0 - step / 10 + attempt, "lr": 1e-4 * step, "epoch": 0,
            "grad_norm": None, "skipped_steps": 0}  # fmt: skip


def event_steps(folder, name: str) -> dict[int, float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder / "tensorboard"))
    events.Reload()
    scalars_ = events.Scalars(name)
    steps = [event.step for event in scalars_]
    assert len(steps) == len(set(steps)), f"{name}: a step twice: {steps}"
    return {event.step: event.value for event in scalars_}


def test_keys_become_tags_and_only_finite_numbers_are_written():
    assert tag("dev_bleu") == "dev/bleu" and tag("loss") == "train/loss"
    record = {"step": 3, "loss": 2.5, "grad_norm": None, "ppl": float("inf"), "ok": True}
    assert scalars(record) == {"train/loss": 2.5}


def test_a_resumed_run_writes_each_step_once_with_the_resumed_values(tmp_path):
    """Killed at step 8 (nothing closed) after its checkpoint at step 6: the resumed writer
    hides steps 7 and 8 of the first attempt, as train.jsonl drops their lines."""
    first = Curves(tmp_path, resumed_at=None)
    for step in range(1, 9):
        first.write(window(step, attempt=0))
        if step % 4 == 0:
            first.write({"step": step, "dev_loss": 3.0 - step / 10, "dev_bleu": 10.0 + step})
    resumed = Curves(tmp_path, resumed_at=6)
    for step in range(7, 13):
        resumed.write(window(step, attempt=1))
        if step % 4 == 0:
            resumed.write({"step": step, "dev_loss": 2.0, "dev_bleu": 30.0 + step})
    resumed.close()
    loss = event_steps(tmp_path, "train/loss")
    assert sorted(loss) == list(range(1, 13))
    assert loss[6] == pytest.approx(window(6, 0)["loss"]) and loss[7] == pytest.approx(
        window(7, 1)["loss"]
    )
    assert event_steps(tmp_path, "dev/bleu") == {4: 14.0, 8: 38.0, 12: 42.0}
    assert sorted(event_steps(tmp_path, "train/lr")) == list(range(1, 13))


def test_curves_turned_on_in_a_resumed_run_begin_at_its_first_step(tmp_path):
    """train.tensorboard was false until the checkpoint at step 4 (or the tensorboard folder
    was deleted): the resumed run writes the 4 kept lines first, then its own; a folder that
    holds curves gets none of them again."""
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(window(s, 0)) + "\n" for s in (2, 4)))
    resumed = Curves(tmp_path, resumed_at=4)
    resumed.write(window(6, attempt=1))
    resumed.close()
    assert sorted(event_steps(tmp_path, "train/loss")) == [2, 4, 6]
    again = Curves(tmp_path, resumed_at=6)
    again.close()
    assert sorted(event_steps(tmp_path, "train/loss")) == [2, 4, 6]


def test_wandb_offline_resumes_the_same_run(tmp_path):
    pytest.importorskip("wandb", reason="pip install -e '.[wandb]'")
    first = Curves(tmp_path, resumed_at=None, wandb={"mode": "offline", "project": "test"})
    first.write(window(1, attempt=0))
    first.close()
    run_id = json.loads((tmp_path / WANDB_RUN_FILE).read_text())["id"]
    resumed = Curves(tmp_path, resumed_at=1, wandb={"mode": "offline", "project": "test"})
    assert resumed.wandb.id == run_id
    resumed.write(window(2, attempt=1))
    resumed.close()
    offline = sorted(path.name for path in (tmp_path / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all(f"-{run_id}" in name for name in offline)


ATTEMPT = """
import sys, time, types
from pathlib import Path
from aiayn.train.record import TrainLog
folder, resumed_at, last, killed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
log = TrainLog(folder / "train.jsonl", 0, lambda values: values)
log.forget_after(resumed_at)
settings = types.SimpleNamespace(wandb="offline", wandb_project="test", tensorboard=False)
log.open_curves(resumed_at, settings)
for step in range(resumed_at + 1, last + 1):
    log.append({"step": step, "loss": 1000.0 / step, "lr": step * 1e-6})
    if step % 100 == 0:
        log.append({"step": step, "dev_bleu": step / 100})
if killed == "killed":
    print("logged", flush=True)
    time.sleep(600)
log.curves.close()
"""


def written_step(folder, run_id: str) -> int:
    """The last step W&B's records hold so far (0: none, or a block read as it is written)."""
    from aiayn.train.curves import last_step_in_wandb

    try:
        return last_step_in_wandb(folder / "wandb", run_id) or 0
    except InputError:
        return 0


def attempt(folder, resumed_at: int, last: int, killed: bool, past: int = 0) -> None:
    """A training attempt's logging, from its checkpoint's step to `last`: `kill -9`ed once its
    W&B records hold a step past `past` (a block its writer wrote: an event, not a delay), or
    closed as a finished run is."""
    command = [sys.executable, "-c", ATTEMPT, str(folder), str(resumed_at), str(last)]
    process = subprocess.Popen([*command, "killed" if killed else "closed"],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    if killed:
        assert process.stdout.readline() == "logged\n"
        run_id = json.loads((folder / WANDB_RUN_FILE).read_text())["id"]
        deadline = time.monotonic() + 300
        while written_step(folder, run_id) <= past:
            assert time.monotonic() < deadline, f"W&B's records hold no step past {past}"
            time.sleep(0.5)
        process.kill()
    assert process.wait(timeout=300) == (-9 if killed else 0)


def test_wandb_holds_each_logged_step_once_across_kills(tmp_path):
    """W&B's writer writes in blocks, and a kill loses the rest: attempt 1 (2000 steps) is
    killed with its record ending past the checkpoint at step 1000 the rerun resumes from,
    attempt 2 with its record ending before its checkpoint at 2500. Read back in order with
    W&B's own reader, the records hold each step of train.jsonl once, with its values: attempt
    2 logs only steps after what attempt 1's record holds, attempt 3 first logs the steps up to
    its checkpoint that no record holds (they were missing, #77)."""
    pytest.importorskip("wandb", reason="pip install -e '.[wandb]'")
    from aiayn.train.curves import last_step_in_wandb

    attempt(tmp_path, 0, 2000, killed=True, past=1000)
    run_id = json.loads((tmp_path / WANDB_RUN_FILE).read_text())["id"]
    after_first = last_step_in_wandb(tmp_path / "wandb", run_id)
    assert after_first is not None and 1000 < after_first < 2000, "no case of a cut record"
    attempt(tmp_path, 1000, 2500, killed=True, past=after_first)
    assert last_step_in_wandb(tmp_path / "wandb", run_id) < 2500, "the kill lost no step"
    attempt(tmp_path, 2500, 3000, killed=False)
    assert len(list((tmp_path / "wandb").glob(f"offline-run-*-{run_id}"))) == 3
    lines = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    rows = wandb_history(tmp_path)
    assert [row["_step"] for row in rows] == list(range(1, 3001))
    for line in lines:
        row = rows[line["step"] - 1]
        assert all(row[name] == value for name, value in scalars(line).items())


def test_a_wandb_record_its_reader_cannot_read_is_named_and_moving_it_out_works(tmp_path):
    """The message names the record and says to move its folder out of wandb/: done, the rerun
    logs to W&B the steps no other record holds (step 1 here) and goes on."""
    pytest.importorskip("wandb", reason="pip install -e '.[wandb]'")
    offline = {"mode": "offline", "project": "test"}
    first = Curves(tmp_path, resumed_at=None, wandb=offline, tensorboard=False)
    first.close()
    record = next((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    record.write_bytes(b"not a W&B record\n" * 100)  # overwritten by another tool, say
    (tmp_path / "train.jsonl").write_text(json.dumps(window(1, attempt=0)) + "\n")
    with pytest.raises(
        InputError, match=re.escape("reader (`wandb leet inspect`) cannot read")
    ) as told:
        Curves(tmp_path, resumed_at=1, wandb=offline, tensorboard=False)
    assert f"{record} (Error: transactionlog: bad header" in str(told.value)
    assert f"move its folder out of {tmp_path / 'wandb'}" in str(told.value)
    record.parent.rename(tmp_path / "set_aside")
    resumed = Curves(tmp_path, resumed_at=1, wandb=offline, tensorboard=False)
    resumed.write(window(2, attempt=0))
    resumed.close()
    assert [row["_step"] for row in wandb_history(tmp_path)] == [1, 2]


def test_wandb_asked_for_but_not_installed_is_named_before_training(tmp_path):
    """A subprocess whose Python cannot import wandb (the extra left out of the install)."""
    script = (
        "import sys; sys.modules['wandb'] = None\n"
        "from pathlib import Path\n"
        "from aiayn.train.curves import Curves\n"
        f"Curves(Path({str(tmp_path)!r}), resumed_at=0, wandb={{'mode': 'offline'}})\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert ran.returncode == 1
    assert "InputError: train.wandb: offline needs Weights & Biases" in ran.stderr
    assert "pip install -e '.[wandb]', or train.wandb: off" in ran.stderr
    assert not list(tmp_path.iterdir())  # nothing written, TensorBoard's curves neither


def test_a_damaged_wandb_run_id_is_named_and_deleting_it_starts_a_new_run(tmp_path):
    pytest.importorskip("wandb", reason="pip install -e '.[wandb]'")
    (tmp_path / WANDB_RUN_FILE).write_text('{"id": "3f2a')  # cut short: a full disk, a kill
    offline = {"mode": "offline", "project": "test"}
    with pytest.raises(InputError, match=f"{WANDB_RUN_FILE} does not hold the W&B run id"):
        Curves(tmp_path, resumed_at=None, wandb=offline, tensorboard=False)
    (tmp_path / WANDB_RUN_FILE).unlink()  # the way out the message gives
    curves = Curves(tmp_path, resumed_at=None, wandb=offline, tensorboard=False)
    assert curves.wandb.id == json.loads((tmp_path / WANDB_RUN_FILE).read_text())["id"]
    curves.close()


def test_wandb_online_without_a_login_is_told_to_log_offline(tmp_path, monkeypatch):
    """It was W&B's traceback (after about 100 s without a network)."""
    pytest.importorskip("wandb", reason="pip install -e '.[wandb]'")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc login
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(InputError, match="W&B could not start the run's online curves") as told:
        Curves(tmp_path, resumed_at=None, wandb={"mode": "online"}, tensorboard=False)
    assert "set train.wandb: offline (`wandb sync` uploads them later)" in str(told.value)


def test_a_file_where_tensorboards_folder_goes_is_refused_before_training(tmp_path):
    (tmp_path / "tensorboard").write_text("notes")
    with pytest.raises(InputError, match="is a file, not TensorBoard's folder: move it away, or"):
        Curves(tmp_path, resumed_at=None)
    assert (tmp_path / "tensorboard").read_text() == "notes"


def test_a_file_where_wandbs_folder_goes_is_refused_before_training(tmp_path):
    """W&B's own error had said to log offline, which the run already did."""
    pytest.importorskip("wandb", reason="pip install -e '.[wandb]'")
    (tmp_path / "wandb").write_text("notes")
    offline = {"mode": "offline", "project": "test"}
    with pytest.raises(InputError, match="is a file, not W&B's folder: move it away, or") as told:
        Curves(tmp_path, resumed_at=None, wandb=offline, tensorboard=False)
    assert "train.wandb: off" in str(told.value) and "offline" not in str(told.value)
    assert (tmp_path / "wandb").read_text() == "notes"
    (tmp_path / "wandb").rename(tmp_path / "notes")  # the way out the message gives
    Curves(tmp_path, resumed_at=None, wandb=offline, tensorboard=False).close()
    assert list((tmp_path / "wandb").glob("offline-run-*"))


def test_curves_that_cannot_be_written_mid_run_stop_with_a_warning_and_training_goes_on(tmp_path):
    """A full disk mid-run (RLIMIT_FSIZE: a write past it fails as on a full disk) killed
    training with TensorBoard's traceback, losing the steps since the checkpoint (#77)."""
    script = (
        "import logging, resource, sys\n"
        "from pathlib import Path\n"
        "from aiayn.train.curves import Curves\n"
        "logging.basicConfig()\n"
        "curves = Curves(Path(sys.argv[1]), resumed_at=None)\n"
        "curves.write({'step': 1, 'loss': 1.0})\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))  # every file is past it now\n"
        "for step in range(2, 200):\n"
        "    curves.write({'step': step, 'loss': 1.0 / step, 'lr': 0.1})\n"
        "curves.close()\n"
        "print('trained on')\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "trained on\n" and "Traceback" not in result.stderr
    assert "TensorBoard's curves in" in result.stderr and "training goes on" in result.stderr
    assert result.stderr.count("could not be written") == 1


def test_patience_resumed_from_its_state_stops_where_an_unbroken_run_stops():
    bleu = [10.0, 12.0, 12.05, 11.0, 12.08, 13.0]  # 12.05 and 12.08: not 0.1 better than 12.0
    unbroken = EarlyStopping(metric="dev_bleu", patience=3, min_improvement=0.1)
    stopped_at = next(i for i, value in enumerate(bleu) if unbroken.update(i, {"dev_bleu": value}))
    assert stopped_at == 4 and unbroken.best == 12.0 and unbroken.best_step == 1
    killed = EarlyStopping(metric="dev_bleu", patience=3, min_improvement=0.1)
    for i in range(3):  # a checkpoint in the middle of the patience
        assert not killed.update(i, {"dev_bleu": bleu[i]})
    saved = json.loads(json.dumps(killed.state_dict()))  # as the checkpoint stores it
    resumed = EarlyStopping(metric="dev_bleu", patience=3, min_improvement=0.1)
    resumed.restore(saved)
    again = next(i for i in range(3, len(bleu)) if resumed.update(i, {"dev_bleu": bleu[i]}))
    assert again == stopped_at and resumed.reason() == unbroken.reason()
    assert "dev_bleu did not improve by 0.1 for 3 dev evaluations" in unbroken.reason()


def test_nan_is_never_the_best_value():
    """A NaN dev loss at the first evaluation was early stopping's best, and nothing beat it:
    a run whose loss fell at every evaluation after it stopped at the patience (#77)."""
    stopping = EarlyStopping(metric="dev_loss", patience=3)
    losses = [float("nan"), 3.0, 2.5, 2.0, 1.5]
    assert not any(stopping.update(step, {"dev_loss": loss}) for step, loss in enumerate(losses))
    assert (stopping.best, stopping.best_step) == (1.5, 4)
    bleu = EarlyStopping(metric="dev_bleu", patience=2)
    assert not bleu.update(1, {"dev_bleu": 10.0}) and not bleu.update(2, {"dev_bleu": math.nan})
    assert bleu.update(3, {"dev_bleu": math.nan}) and bleu.best == 10.0
    never = EarlyStopping(metric="dev_loss", patience=2)  # its reason raised a TypeError
    assert not never.update(1, {"dev_loss": math.nan}) and never.update(2, {"dev_loss": math.nan})
    assert never.reason() == (
        "early_stopping: dev_loss was not a number at 2 dev evaluations in a row, and at none "
        "before them"
    )


def test_best_n_averaging_ranks_a_nan_score_last(tmp_path):
    """Best 2 of {10, NaN, 12, 11} by dev BLEU are 12 and 11 (a NaN in the sort gave 10 and
    NaN's files)."""
    from aiayn.train.run_folder import BestCheckpoints

    best = BestCheckpoints(tmp_path, "dev_bleu", 2)
    for step, value in zip((50, 100, 150, 200), (10.0, math.nan, 12.0, 11.0), strict=True):
        (tmp_path / f"step{step:08d}.safetensors").write_bytes(b"")
        best.record(tmp_path / f"step{step:08d}.safetensors", {"dev_bleu": value})
    assert [path.name for path in best.files()] == ["step00000150.safetensors",
                                                    "step00000200.safetensors"]  # fmt: skip
    three = [path.name for path in BestCheckpoints(tmp_path, "dev_bleu", 3).files()]
    assert "step00000100.safetensors" not in three


SCORED = {"step00000050.safetensors": 10.0, "step00000100.safetensors": 12.5,
          "step00000150.safetensors": 11.0}  # fmt: skip
WRITTEN = json.dumps({"metric": "dev_bleu", "scores": SCORED}, indent=1).encode()
OTHER_SHAPES = [b"[]", b'{"metric": "dev_bleu"}', b'{"scores": [10.0, 12.5]}', b"\xff\xfe{}",
                b'{"scores": {"step00000050.safetensors": "garbage"}}',
                b'{"scores": {"step00000050.safetensors": true}}']  # fmt: skip


@settings(derandomize=True, deadline=None)  # the same examples in every run
@given(damaged=st.integers(0, len(WRITTEN) - 1).map(lambda cut: WRITTEN[:cut])
       | st.sampled_from(OTHER_SHAPES))  # fmt: skip
def test_a_damaged_scores_record_is_refused_before_any_weights_file_goes(tmp_path_factory, damaged):
    """weights/scores.json (best-N averaging's dev figures) cut at any byte or of another shape:
    the averaging and the next checkpoint refuse it by name with the ways out, and every weights
    file stays (read as no scores, the next checkpoint would have deleted them unscored)."""
    from aiayn.train.run_folder import BestCheckpoints

    weights = tmp_path_factory.mktemp("weights")
    for name in SCORED:
        (weights / name).write_bytes(b"weights")
    (weights / "scores.json").write_bytes(damaged)
    best = BestCheckpoints(weights, "dev_bleu", 2)
    for act in (
        best.files,
        lambda: best.record(weights / "step00000200.safetensors", {"dev_bleu": 13.0}),
    ):
        with pytest.raises(
            InputError, match="scores.json .*put back a copy of it, or move the run folder"
        ):
            act()
    assert sorted(path.name for path in weights.glob("*.safetensors")) == sorted(SCORED)
    assert (weights / "scores.json").read_bytes() == damaged


LOG_LINES = ['{"step": 10, "loss": 3.0, "lr": 0.001}', '{"step": 10, "dev_loss": 2.5}',
             '{"step": 20, "loss": 2.0, "lr": 0.002}', '{"step": 20, "dev_loss": 2.1}']  # fmt: skip
DAMAGED_LINE = st.one_of(
    st.sampled_from(LOG_LINES).flatmap(lambda line: st.integers(0, len(line) - 1).map(lambda n: line[:n])),
    st.sampled_from(["[1]", "null", "5", '{"loss": 1.0}', '{"step": "10", "loss": 1.0}', "\x00{"]),
)  # fmt: skip


@settings(
    derandomize=True, deadline=None, max_examples=50
)  # a figure is drawn: matplotlib's first takes a second
@given(line=st.integers(0, len(LOG_LINES) - 1), damaged=DAMAGED_LINE)
def test_the_loss_figure_names_a_damaged_train_log_line_and_drops_a_cut_last_one(
    tmp_path_factory, line, damaged
):
    """The report's loss curves read runs/<name>/train.jsonl as the trainer does: a line before
    the last that is not a step's record is refused by number with the way out (it was json's
    traceback, or a TypeError for a line of another shape); the last one cut short is dropped
    with a warning and the figure drawn."""
    import matplotlib.pyplot as plt

    from aiayn.report.figures import loss_curves

    path = tmp_path_factory.mktemp("run") / "train.jsonl"
    lines = [damaged if number == line else kept for number, kept in enumerate(LOG_LINES)]
    path.write_text("".join(f"{kept}\n" for kept in lines))
    if line < len(LOG_LINES) - 1:
        with pytest.raises(InputError, match=f"train.jsonl, line {line + 1}, is not a JSON line"):
            loss_curves({"tiny": str(path)})
    else:
        plt.close(loss_curves({"tiny": str(path)}))


FINISHED_LOG = "".join(f"{line}\n" for line in LOG_LINES)  # a run that trained 20 steps


@settings(derandomize=True, deadline=None, max_examples=100)
@given(cut=st.integers(0, len(FINISHED_LOG)))
def test_a_finished_runs_log_cut_anywhere_is_refused_not_drawn_short(tmp_path_factory, cut):
    """The figures read a finished run's train.jsonl against the steps its train.json
    records: cut at any byte before the end of its final dev record, it is refused, naming
    both files and the way out (a log cut at a line's end was drawn as a shorter run)."""
    from aiayn.train.curves import check_reaches

    run = tmp_path_factory.mktemp("run")
    (run / "train.jsonl").write_text(FINISHED_LOG[:cut])
    if cut >= len(FINISHED_LOG) - 1:  # whole, or only its last newline lost
        check_reaches(run / "train.jsonl", run / "train.json", 20)
        return
    with pytest.raises(InputError) as refusal:
        check_reaches(run / "train.jsonl", run / "train.json", 20)
    said = str(refusal.value)
    assert f"{run}/train.json records 20 steps" in said
    step_20 = len("\n".join(LOG_LINES[:3]))  # where the training record of step 20 is whole
    step = None if cut < len(LOG_LINES[0]) else 10 if cut < step_20 else 20
    ends = f"ends at step {step}, but" if step else "ends at no step, but"
    assert f"{run}/train.jsonl {ends}" in said, said
    assert said.endswith("run the same command again, which trains it anew"), said


def test_dev_loss_improves_downwards_and_bad_settings_are_refused():
    stopping = EarlyStopping(metric="dev_loss", patience=1)
    assert not stopping.update(1, {"dev_loss": 3.0}) and not stopping.update(2, {"dev_loss": 2.9})
    assert stopping.update(3, {"dev_loss": 2.95})
    with pytest.raises(ValueError, match="one of dev_bleu, dev_chrf, dev_loss"):
        EarlyStopping(metric="bleu")
    with pytest.raises(ValueError, match="patience >= 1"):
        EarlyStopping(patience=0)


def test_dev_bleu_scores_the_models_own_translations_as_sacrebleu_does(tmp_path):
    """The dev monitor on a random model: scored against its own outputs its chrF is 100, against
    the real references what sacreBLEU gives those outputs; only the first `sentences` count."""
    import sacrebleu
    import torch

    from aiayn.data.toy import generate
    from aiayn.decode.dev_translation import DevTranslator
    from aiayn.decode.settings import DecodeSettings
    from aiayn.decode.translate import detokenized, translate
    from aiayn.model import Transformer
    from aiayn.model_config import TransformerConfig
    from aiayn.prepare.binarize import IndexedDataset, write_indexed
    from aiayn.prepare.pieces import load as load_subword
    from aiayn.prepare.subword import SubwordSettings, train_bpe

    pairs = list(generate(300, seed=1, partition="dev"))
    text = tmp_path / "text.txt"
    text.write_text("".join(f"{en}\n{de}\n" for en, de in pairs), encoding="utf-8")
    train_bpe([str(text)], str(tmp_path / "bpe.model"), SubwordSettings(vocab_size=600))
    processor = load_subword(tmp_path / "bpe.model")
    for side, index in (("src", 0), ("tgt", 1)):
        write_indexed(tmp_path / side, (processor.encode(p[index]) for p in pairs), 600)
    (tmp_path / "ref.de").write_text("".join(de + "\n" for _, de in pairs), encoding="utf-8")
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=600, n_layers=1, d_model=32, d_ff=64, n_heads=4,
                               dropout=0.1)  # fmt: skip
    model = Transformer(config).train()
    decode = {"beam": 2, "alpha": 0.6, "max_length_offset": 5}
    spec = {"sentences": 20, "subword": str(tmp_path / "bpe.model"),
            "reference": str(tmp_path / "ref.de"), "decode": decode}  # fmt: skip
    dev = (str(tmp_path / "src"), str(tmp_path / "tgt"))
    figures = DevTranslator(spec, dev).measure(model)
    assert model.training  # left as it was found
    assert figures["dev_bleu_sentences"] == 20 and figures["dev_bleu_seconds"] > 0
    sources = [IndexedDataset(dev[0])[i] for i in range(20)]
    ours, _ = translate(model.eval(), sources, DecodeSettings(**decode))
    lines = detokenized(processor, ours)
    references = [de for _, de in pairs[:20]]
    assert figures["dev_bleu"] == round(sacrebleu.corpus_bleu(lines, [references]).score, 2)
    assert figures["dev_chrf"] == round(sacrebleu.corpus_chrf(lines, [references]).score, 2)
    (tmp_path / "ref.de").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    own = DevTranslator(spec, dev).measure(model)
    # chrF, not BLEU: a random model's lines may be one word each, with no 4-gram to match
    assert own["dev_chrf"] == 100.0
    assert own["dev_bleu"] == round(sacrebleu.corpus_bleu(lines, [lines]).score, 2)
    wide = {**spec, "decode": {**decode, "beam": 2**40}}  # past any machine's memory
    with pytest.raises(InputError) as refused:
        DevTranslator(wide, dev).measure(model)
    assert "lower train.dev_bleu_beam (the paper's beam is 4)" in str(refused.value)
