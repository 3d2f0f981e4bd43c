"""Early stopping (beyond the paper, which trained for fixed steps): stop once a dev metric has
not improved by at least `min_improvement` for `patience` evaluations in a row.

Its state is part of the checkpoint, so a run killed in the middle of its patience resumes
counting where the checkpoint left it and stops at the same step as a run never stopped
(fairseq's --patience restarts its count at every resume).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

# metric -> whether larger is better; each is a key of the dev evaluation's record
METRICS = {"dev_bleu": True, "dev_chrf": True, "dev_loss": False}


@dataclass
class EarlyStopping:
    metric: str = "dev_bleu"
    patience: int = 5  # dev evaluations without improvement before stopping
    min_improvement: float = 0.0  # in the metric's units (BLEU points, nats)
    best: float | None = None
    best_step: int | None = None
    evaluations_since_best: int = 0

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(
                f"early stopping's metric must be one of {', '.join(METRICS)}, not {self.metric!r}"
            )
        if self.patience < 1 or self.min_improvement < 0:
            raise ValueError("early stopping needs patience >= 1 and min_improvement >= 0")

    def improved(self, value: float) -> bool:
        """Better than the best by the minimum; NaN never is (nothing would beat it after)."""
        if math.isnan(value):
            return False
        if self.best is None:
            return True
        gain = value - self.best if METRICS[self.metric] else self.best - value
        return gain >= self.min_improvement and gain > 0

    @classmethod
    def from_settings(cls, settings) -> EarlyStopping | None:
        """The train settings' early stopping, or None when it is off."""
        if settings.early_stopping_metric is None:
            return None
        return cls(settings.early_stopping_metric, settings.early_stopping_patience,
                   settings.early_stopping_min_improvement)  # fmt: skip

    def update(self, step: int, figures: dict) -> bool:
        """Count this dev evaluation; True when training should stop now."""
        value = figures[self.metric]
        if self.improved(value):
            self.best, self.best_step, self.evaluations_since_best = value, step, 0
        else:
            self.evaluations_since_best += 1
        return self.exhausted()

    def exhausted(self) -> bool:
        """Whether the patience is spent (also after a resume: a stopped run stays stopped
        unless its patience was raised)."""
        return self.evaluations_since_best >= self.patience

    def state_dict(self) -> dict:
        return asdict(self)

    def restore(self, saved: dict | None) -> None:
        """The counts a checkpoint saved, when it watched the same metric; the patience and
        minimum improvement stay this run's settings."""
        if saved and saved.get("metric") == self.metric:
            self.best, self.best_step = saved["best"], saved["best_step"]
            self.evaluations_since_best = saved["evaluations_since_best"]

    def reason(self) -> str:
        """Why training ended, for train.json's ended_by."""
        if self.best is None:  # every evaluation so far was NaN
            return (
                f"early_stopping: {self.metric} was not a number at {self.patience} dev "
                "evaluations in a row, and at none before them"
            )
        return (
            f"early_stopping: {self.metric} did not improve by {self.min_improvement} for "
            f"{self.patience} dev evaluations after its best {self.best:.4g} at step "
            f"{self.best_step}"
        )
