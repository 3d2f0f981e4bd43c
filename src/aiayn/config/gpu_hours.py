"""What a study's training will cost before it runs: GPU-hours per training job and in total,
printed by `snakemake -n` so that a cluster user sees the bill before submitting.

A job's hours are its steps times its step time times its GPUs. The step time is the
experiment's `expected_step_seconds` (measured or stated for its `processes` GPUs) where set;
otherwise the paper's own (section 5.2: base 100k steps in 12 hours, big 300k in 3.5 days, on 8
P100s), other models scaled from base by their FLOPs per step, in P100-hours.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aiayn.config import paths
from aiayn.flops import forward_flops
from aiayn.model_config import TransformerConfig, build_config
from aiayn.paper import PAPER_VOCABULARY, paper_steps_per_minute
from aiayn.train.settings import TrainSettings

PAPER_TOKENS_PER_STEP = 25000  # ~25000 source and ~25000 target tokens a batch (section 5.1)
SENTENCE = 25  # tokens a side of a typical WMT sentence, for FLOPs ratios


@dataclass
class TrainingCost:
    experiment: str
    steps: int
    gpus: int
    step_seconds: float
    basis: str  # where the step time comes from
    done_steps: int = 0  # trained already (runs/<name>/train.json): not to pay again
    restarts: bool = False  # a run of other settings or code is there: moved aside, from 0

    @property
    def gpu_hours(self) -> float:
        return self.steps * self.step_seconds * self.gpus / 3600

    @property
    def remaining_hours(self) -> float:
        return max(self.steps - self.done_steps, 0) * self.step_seconds * self.gpus / 3600

    @property
    def trained(self) -> bool:
        return self.done_steps >= self.steps


def paper_step_seconds(preset: str) -> float:
    """Seconds per step of the paper's base or big model on its 8 P100s."""
    return 60 / paper_steps_per_minute(preset)


def scaled_step_seconds(model: TransformerConfig, reference: str, tokens_per_step: int) -> float:
    """The paper's step time of `reference` (base or big) scaled by this model's FLOPs per step
    against the reference's (same sentence lengths, the paper's vocabulary)."""
    paper = build_config(PAPER_VOCABULARY, reference)
    ours = forward_flops(model, 1, SENTENCE, SENTENCE)
    ratio = ours / forward_flops(paper, 1, SENTENCE, SENTENCE)
    return paper_step_seconds(reference) * ratio * tokens_per_step / PAPER_TOKENS_PER_STEP


def training_cost(
    name: str, entry: dict, spec: dict, root: Path = Path("."), code: str | None = None
) -> TrainingCost:
    """One experiment's expected GPU-hours (its config entry, its resolved trainer spec and the
    train stage's code version, where known)."""
    train = spec["train"]
    summary = root / paths.train_summary(name)
    marker = summary.parent / "identity.json"
    restarts = summary.exists() and not same_trajectory(marker, spec, code)
    done = 0 if restarts else done_steps(summary, train["max_steps"])
    if entry.get("expected_step_seconds"):
        gpus = entry["processes"] * entry["nodes"]
        return TrainingCost(name, train["max_steps"], gpus, entry["expected_step_seconds"],
                            "stated", done, restarts)  # fmt: skip
    reference = "big" if entry["model"] == "big" else "base"
    model = TransformerConfig(**spec["model"])
    seconds = scaled_step_seconds(model, reference, train["tokens_per_step"])
    same = abs(seconds / paper_step_seconds(reference) - 1) < 1e-9
    basis = f"paper {reference}" + ("" if same else ", scaled by FLOPs")
    return TrainingCost(name, train["max_steps"], 8, seconds, basis + " (8 P100)", done, restarts)


def same_trajectory(marker: Path, spec: dict, code: str | None = None) -> bool:
    """Whether the run folder's configuration (its identity.json) trains as `spec` does with
    the train stage's `code`: the same model, settings of the trajectory and training code.
    Otherwise the training moves the old run aside and starts from step 0
    (aiayn.train.run_folder), and none of its steps count. A folder without a readable record
    counts as the same, and so does data whose content changed: the training decides then."""
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
        model, train = recorded["model"], recorded["train"]
        trained_by = recorded["trajectory"]["code"][0] if "trajectory" in recorded else None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return True
    if code is not None and trained_by != code:  # None: written before the code was recorded
        return False
    trajectory = TrainSettings.TRAJECTORY
    return model == spec["model"] and all(train.get(k) == spec["train"][k] for k in trajectory)


def done_steps(summary: Path, max_steps: int) -> int:
    """The steps a finished training already took (0: none yet); a run early stopping ended
    counts as done (it resumes only if its patience is raised), one whose max_steps was raised
    since resumes from where it ended."""
    try:
        record = json.loads(summary.read_text(encoding="utf-8"))
        if str(record.get("ended_by", "")).startswith("early_stopping"):
            return max_steps
        return int(record.get("steps", 0))
    except (OSError, ValueError, AttributeError, TypeError):  # damaged: the stages say so
        return 0


def report(costs: list[TrainingCost]) -> str:
    """The dry run's lines: one per training job, then the total still to run."""
    lines = [
        "Expected training cost (GPU-hours = steps x seconds/step x GPUs; P100 where the step",
        "time is the paper's; set an experiment's expected_step_seconds for your GPUs):",
        f"  {'experiment':<24} {'steps':>8} {'s/step':>7} {'GPUs':>4} {'GPU-h':>8}  basis",
    ]
    for cost in costs:
        done = "  (trained)" if cost.trained else ""
        if cost.done_steps and not cost.trained:
            done = f"  (trained to step {cost.done_steps}: resumes)"
        if cost.restarts:
            done = "  (trained with other settings or code: from step 0)"
        lines.append(
            f"  {cost.experiment:<24} {cost.steps:>8} {cost.step_seconds:>7.3f} {cost.gpus:>4} "
            f"{cost.gpu_hours:>8.1f}  {cost.basis}{done}"
        )
    remaining = sum(cost.remaining_hours for cost in costs)
    total = sum(cost.gpu_hours for cost in costs)
    lines.append(f"  total: {total:.1f} GPU-hours, {remaining:.1f} of them still to train")
    return "\n".join(lines)
