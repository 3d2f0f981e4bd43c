"""Live curves and early stopping (#65), at unit level: what TensorBoard's own reader and W&B's
offline run hold after a run that was killed and resumed, and a patience count that resumes
from its checkpointed state to the step an unbroken run stops at."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from aiayn.errors import InputError
from aiayn.train.curves import WANDB_RUN_FILE, Curves, scalars, tag
from aiayn.train.early_stopping import EarlyStopping


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


def test_dev_loss_improves_downwards_and_bad_settings_are_refused():
    stopping = EarlyStopping(metric="dev_loss", patience=1)
    assert not stopping.update(1, {"dev_loss": 3.0}) and not stopping.update(2, {"dev_loss": 2.9})
    assert stopping.update(3, {"dev_loss": 2.95})
    with pytest.raises(ValueError, match="one of dev_bleu, dev_chrf, dev_loss"):
        EarlyStopping(metric="bleu")
    with pytest.raises(ValueError, match="patience >= 1"):
        EarlyStopping(patience=0)


def test_dev_bleu_scores_the_models_own_translations_as_sacrebleu_does(tmp_path):
    """The dev monitor on a random model: scored against its own outputs it gets 100, against
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
    train_bpe([str(text)], str(tmp_path / "bpe.model"), SubwordSettings(vocab_size=600), threads=1)
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
    assert DevTranslator(spec, dev).measure(model)["dev_bleu"] == 100.0
