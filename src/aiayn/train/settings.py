"""One training run's settings, and experiment.json, the file that carries them to the trainer.

The workflow writes experiment.json (experiments.py resolves it from the config); the trainer,
the benchmark and the tests read it back as an Experiment.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from aiayn.config.schema import defaults
from aiayn.model_config import TransformerConfig
from aiayn.textio import file_sha256

DEFAULTS = defaults("train")  # schemas/config.schema.yaml


@dataclass(frozen=True)
class TrainSettings:
    max_steps: int = DEFAULTS["max_steps"]
    max_minutes: float | None = DEFAULTS["max_minutes"]  # over all sessions (fairseq stop-time)
    warmup_steps: int = DEFAULTS["warmup_steps"]
    lr_scale: float = DEFAULTS["lr_scale"]  # multiplies the paper's schedule
    adam_beta1: float = DEFAULTS["adam_beta1"]
    adam_beta2: float = DEFAULTS["adam_beta2"]
    adam_eps: float = DEFAULTS["adam_eps"]
    label_smoothing: float = DEFAULTS["label_smoothing"]
    tokens_per_step: int = DEFAULTS["tokens_per_step"]  # real source and target, all processes
    tokens_per_batch: int = DEFAULTS["tokens_per_batch"]  # padded, per forward pass: memory
    pad_to_multiple: int = DEFAULTS["pad_to_multiple"]
    seed: int = DEFAULTS["seed"]
    precision: str = DEFAULTS[
        "precision"
    ]  # auto (aiayn.precision), bf16, bf16-autocast, fp16, fp32
    zero_stage: int = DEFAULTS["zero_stage"]
    flat_gradients: bool = DEFAULTS["flat_gradients"]  # bf16, ZeRO 1 (aiayn.train.flat_gradients)
    sync_free: bool = DEFAULTS["sync_free"]  # read the step back at log time (train.sync_free)
    compile: bool = DEFAULTS["compile"]  # torch.compile for training (same maths, faster)
    loss_kernel: str = DEFAULTS["loss_kernel"]  # auto, sliced or compiled (aiayn.train.loss)
    real_rows_only: bool = DEFAULTS["real_rows_only"]  # the projection on real target rows
    checkpoint_every_steps: int | None = DEFAULTS["checkpoint_every_steps"]
    checkpoint_every_minutes: float | None = DEFAULTS["checkpoint_every_minutes"]
    keep_states: int = DEFAULTS["keep_states"]  # full training states kept for resuming
    average_last: int = DEFAULTS["average_last"]  # consolidated weights kept and averaged
    log_every_steps: int = DEFAULTS["log_every_steps"]
    dev_every_steps: int = DEFAULTS["dev_every_steps"]
    dev_parse_sentences: int = DEFAULTS["dev_parse_sentences"]  # parsing: dev F1 as it trains
    dev_parse_beam: int = DEFAULTS["dev_parse_beam"]
    dev_parse_constrain: str = DEFAULTS["dev_parse_constrain"]
    dev_bleu_sentences: int = DEFAULTS["dev_bleu_sentences"]  # translation: dev BLEU, chrF
    dev_bleu_beam: int = DEFAULTS["dev_bleu_beam"]
    dev_bleu_alpha: float = DEFAULTS["dev_bleu_alpha"]
    tensorboard: bool = DEFAULTS["tensorboard"]  # aiayn.train.curves
    wandb: str = DEFAULTS["wandb"]  # off, offline or online
    wandb_project: str = DEFAULTS["wandb_project"]
    early_stopping_metric: str | None = DEFAULTS["early_stopping_metric"]  # None: off
    early_stopping_patience: int = DEFAULTS["early_stopping_patience"]
    early_stopping_min_improvement: float = DEFAULTS["early_stopping_min_improvement"]
    average_best_by: str | None = DEFAULTS["average_best_by"]  # None: the last average_last

    # Settings that change the trajectory; the rest (budget, intervals) may change on resume.
    TRAJECTORY = (
        "warmup_steps",
        "lr_scale",
        "adam_beta1",
        "adam_beta2",
        "adam_eps",
        "label_smoothing",
        "tokens_per_step",
        "tokens_per_batch",
        "pad_to_multiple",
        "seed",
        "precision",
        "zero_stage",
    )


@dataclass(frozen=True)
class Experiment:
    name: str
    run_dir: Path
    train_data: tuple[str, str]  # prefixes of the binarized source and target sides
    dev_data: tuple[str, str]
    model: TransformerConfig
    train: TrainSettings
    # what measures the model at each dev evaluation beside the dev loss, loaded by name: a
    # parser's dev parses (train.dev_parse_sentences), a translation's dev BLEU
    # (train.dev_bleu_sentences), with the files it reads (experiments.dev_monitor)
    dev_monitor: dict | None = None
    # the BPE model the data was cut with; its hash goes into every weights file
    subword: str | None = None
    # what computed the weights beside the settings: the train stage's code version (the rule's
    # `code` param) and the binarized training data's content (`data_digest`); the checkpoints
    # of other code or other data are not resumed
    code: str | None = None
    train_data_digest: str | None = None

    @classmethod
    def from_json(cls, path: str | Path) -> Experiment:
        spec = json.loads(Path(path).read_text())
        return cls(
            name=spec["name"],
            run_dir=Path(spec["run_dir"]),
            train_data=tuple(spec["data"]["train"]),
            dev_data=tuple(spec["data"]["dev"]),
            model=TransformerConfig(**spec["model"]),
            train=TrainSettings(**spec["train"]),
            dev_monitor=spec.get("dev_monitor"),
            subword=spec["data"].get("subword"),
            code=spec.get("code"),
            train_data_digest=spec["data"].get("digest"),
        )

    def as_dict(self) -> dict:
        """The resolved experiment, as experiment.json holds it."""
        return {
            "name": self.name,
            "run_dir": str(self.run_dir),
            "data": {
                "train": list(self.train_data),
                "dev": list(self.dev_data),
                **({"subword": self.subword} if self.subword else {}),
                **({"digest": self.train_data_digest} if self.train_data_digest else {}),
            },
            **({"code": self.code} if self.code else {}),
            "model": asdict(self.model),
            "train": asdict(self.train),
            **({"dev_monitor": self.dev_monitor} if self.dev_monitor else {}),
        }

    def identity(self) -> str:
        """Hash of what decides the trained weights; checkpoints of another are not resumed."""
        blob = json.dumps(self.trajectory(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def trajectory(self) -> dict:
        """What decides the trained weights: the model, the settings of the trajectory, the
        training data (its files and content) and the code that trains (with a dev monitor's
        where its figures choose weights)."""
        return {
            "model": asdict(self.model),
            "train": {k: getattr(self.train, k) for k in TrainSettings.TRAJECTORY},
            "data": [*self.train_data, self.train_data_digest],
            "code": [self.code, (self.dev_monitor or {}).get("code")],
        }


def data_digest(prefixes: tuple[str, str] | list[str]) -> str:
    """The binarized training data's content, both sides' .bin and .idx: a rebuilt corpus with
    other sentences is another run, the same sentences written again the same one."""
    files = [f"{prefix}{suffix}" for prefix in prefixes for suffix in (".bin", ".idx")]
    text = json.dumps([file_sha256(path) for path in files])
    return hashlib.sha256(text.encode()).hexdigest()[:16]
