"""Training batches in their reproducible order, collated ahead while the device computes.

The trainer launches a step's kernels, then asks for the next step's batches to be prepared
(collated into pinned memory and copied to the device without waiting) before it reads the step's
loss back: the host's share of a step runs while the GPU is busy instead of between steps.

The data position that checkpoints store, (epoch, batch), counts batches *taken*. Batches prepared
ahead are not counted, so a checkpoint taken at any step resumes exactly: whatever was prepared
and not taken is prepared again from the same position.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
import torch

from aiayn.train.batching import Batch, collate

Position = tuple[int, int]  # (epoch, batches of that epoch already passed)


class BatchStream:
    def __init__(
        self,
        source_data,
        target_data,
        plan: Callable[[int], list[np.ndarray]],
        pad_to: int,
        device: torch.device,
        position: Position = (0, 0),
    ):
        """`plan(epoch)` gives that epoch's batches (arrays of example indices) for this process."""
        self.source_data, self.target_data, self.pad_to = source_data, target_data, pad_to
        self.plan, self.plans = plan, {}
        self.device, self.pin_memory = device, device.type == "cuda"
        self.seek(position)

    def seek(self, position: Position) -> None:
        """Continue from `position` (a checkpoint's), dropping anything prepared."""
        self.position = self.ahead = tuple(position)
        self.ready: deque[Batch] = deque()

    def take(self, count: int) -> list[Batch]:
        """The next `count` batches, on the device; prepares any that are not ready yet."""
        self.prepare(count)
        for _ in range(count):
            self.position, _ = self.advance(self.position)
        return [self.ready.popleft() for _ in range(count)]

    def prepare(self, count: int) -> None:
        """Collate the next `count` batches and start their copies to the device, not waiting."""
        while len(self.ready) < count:
            self.ahead, indices = self.advance(self.ahead)
            batch = collate(
                self.source_data, self.target_data, indices, self.pad_to, self.pin_memory
            )
            self.ready.append(batch.to(self.device))

    def advance(self, position: Position) -> tuple[Position, np.ndarray]:
        """The position after one more batch, and that batch's example indices."""
        epoch, passed = position
        if passed >= len(self.epoch_plan(epoch)):
            epoch, passed = epoch + 1, 0
        return (epoch, passed + 1), self.epoch_plan(epoch)[passed]

    def epoch_plan(self, epoch: int) -> list[np.ndarray]:
        """Planning an epoch sorts the corpus: keep the plans of the epochs in use only."""
        if epoch not in self.plans:
            self.plans = {e: p for e, p in self.plans.items() if e >= epoch - 1}
            self.plans[epoch] = self.plan(epoch)
        return self.plans[epoch]
