"""One training run's settings, and experiment.json, the file that carries them to the trainer.

The workflow writes experiment.json (experiments.py resolves it from the config); the trainer,
the benchmark and the tests read it back as an Experiment.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from aiayn.model_config import TransformerConfig


@dataclass(frozen=True)
class TrainSettings:
    max_steps: int = 100_000
    max_minutes: float | None = None  # training time budget over all sessions (fairseq's stop-time)
    warmup_steps: int = 4000
    lr_scale: float = 1.0  # multiplies the paper's schedule
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1
    tokens_per_step: int = (
        25000  # source and target tokens (padded) per optimizer step, all processes
    )
    tokens_per_batch: int = 25000  # per process per forward pass: the memory limit
    pad_to_multiple: int = 8
    seed: int = 1
    precision: str = "auto"  # auto (bf16 where the device has it), bf16 or fp32
    zero_stage: int = 1
    compile: bool = False  # torch.compile the model for training (not the trajectory: same maths)
    checkpoint_every_steps: int | None = None
    checkpoint_every_minutes: float | None = 10.0  # the paper: every 10 minutes
    keep_states: int = 1  # full training states kept for resuming
    average_last: int = 5  # consolidated weights kept, and averaged by the average stage
    log_every_steps: int = 100
    dev_every_steps: int = 1000

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
        )

    def as_dict(self) -> dict:
        """The resolved experiment, as experiment.json holds it."""
        return {
            "name": self.name,
            "run_dir": str(self.run_dir),
            "data": {"train": list(self.train_data), "dev": list(self.dev_data)},
            "model": asdict(self.model),
            "train": asdict(self.train),
        }

    def identity(self) -> str:
        """Hash of what decides the trained weights; checkpoints of another are not resumed."""
        trajectory = {k: getattr(self.train, k) for k in TrainSettings.TRAJECTORY}
        blob = json.dumps([asdict(self.model), trajectory, self.train_data], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]
