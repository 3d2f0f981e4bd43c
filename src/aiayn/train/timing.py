"""When training checkpoints by the clock (`checkpoint_every_minutes`, the paper's 10 minutes)
and when its time budget (`max_minutes`, counted over every session of a resumed run) is spent.

Only rank 0's clock counts: it votes through the step (train_step.Steps), so that all ranks
save and stop at the same step.
"""

from __future__ import annotations

import time

from aiayn.train.settings import TrainSettings


class TrainingClock:
    def __init__(self, settings: TrainSettings, rank: int, seconds_before: float):
        """`seconds_before`: the training seconds of earlier sessions (from the checkpoint)."""
        self.settings, self.rank, self.seconds_before = settings, rank, seconds_before
        self.start = self.last_save = time.monotonic()

    def seconds(self) -> float:
        """Training seconds so far, all sessions."""
        return self.seconds_before + time.monotonic() - self.start

    def save_due(self) -> bool:
        """Whether rank 0's checkpoint_every_minutes timer ran out."""
        minutes = self.settings.checkpoint_every_minutes
        if minutes is None or self.rank != 0:
            return False
        return time.monotonic() - self.last_save >= 60 * minutes

    def saved(self) -> None:
        self.last_save = time.monotonic()

    def out_of_time(self, seconds: float) -> bool:
        """Whether `seconds` of training (all sessions) use up the max_minutes budget."""
        budget = self.settings.max_minutes
        return budget is not None and seconds >= 60 * budget
