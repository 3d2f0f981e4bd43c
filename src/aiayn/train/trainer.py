"""Training (section 5 of the paper) with the DeepSpeed engine, on any device, CPU included.

    python -m aiayn.train.trainer runs/EXP/experiment.json                       # one process
    torchrun --standalone --nproc_per_node 8 -m aiayn.train.trainer runs/EXP/experiment.json

Each optimizer step sees `tokens_per_step` real (unpadded) source and target tokens, whatever the
number of processes: every process takes batches of its own shard, each holding its share of the
step's real tokens within the padded `tokens_per_batch` memory limit, and the step accumulates
`accumulation` of them. The loss is the label-smoothed cross-entropy summed over the
step's target tokens on all processes and divided by their number, so the gradient does not
depend on how the tokens were split. A checkpoint holds everything needed to continue exactly
(weights, Adam state, schedule, data position, RNG states); a run resumes from the newest one.

Its parts in aiayn.train, each named for what it does: engine (processes, DeepSpeed), batches
(what each epoch and the dev loss read), loader (batches collated ahead), step (one optimizer
step with the ranks' votes, and the dev loss), sync_free (the optimizer step without waits for
the device), loss (the objective), timing (clock checkpoints and the time budget), run_folder
(checkpoints and resuming), record (train.jsonl and train.json), settings (the settings),
memory (whether the model fits, and what running out of memory tells). This module keeps the
set-up and the loop.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from typing import NoReturn

import torch

from aiayn.config import paths
from aiayn.errors import InputError, out_of_memory, storage_refusal
from aiayn.logs import progress, setup_logging
from aiayn.model import Transformer
from aiayn.precision import half_dtype
from aiayn.train.batches import TrainingBatches
from aiayn.train.batching import step_plan
from aiayn.train.early_stopping import EarlyStopping
from aiayn.train.engine import (
    deepspeed_engine,
    host_group,
    init_process,
    logs_for_the_run,
    resolve_precision,
    sum_over_processes,
)
from aiayn.train.loader import BatchStream
from aiayn.train.loss import resolve_loss_kernel
from aiayn.train.memory import check_fits, exhausted
from aiayn.train.record import LogWindow, RunShape, TrainLog, write_summary
from aiayn.train.run_folder import RunFolder
from aiayn.train.settings import Experiment
from aiayn.train.step import Diverged, Steps
from aiayn.train.timing import TrainingClock

log = logging.getLogger("aiayn.train.trainer")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class Stopped(Exception):
    """Training stopped by a signal after writing a checkpoint; rerunning resumes from it."""

    def __init__(self, step: int, signum: int):
        super().__init__(step, signum)
        self.step, self.signum = step, signum


class Trainer:
    """Sets up the process, its batches, the engine and the run folder, then runs the loop.

    `build_model` makes the model from its config before DeepSpeed wraps it: the workflow's is
    Transformer; a benchmark's A/B of another layout hands in its own (bench/)."""

    def __init__(self, experiment: Experiment, build_model=Transformer):
        self.exp, self.settings, self.build_model = experiment, experiment.train, build_model
        self.rank, self.world, self.device = init_process()
        self.precision, self.precision_reason = resolve_precision(
            self.settings.precision, self.device
        )
        if self.precision == "bf16" and self.settings.zero_stage == 0:
            raise InputError(
                "train.precision bf16 needs train.zero_stage >= 1 (its fp32 weights live in "
                "ZeRO's partitions); bf16-autocast keeps fp32 weights and runs with stage 0"
            )
        self.accumulation, self.batch_tokens = step_plan(
            self.settings.tokens_per_step, self.settings.tokens_per_batch, self.world
        )
        self.folder = RunFolder(experiment, self.rank, self.world)
        # sync_free: the step's counts and votes summed through the CPU, not through the device
        self.host_group = host_group(self.world, self.device) if self.settings.sync_free else None
        self.log = TrainLog(experiment.run_dir / paths.TRAIN_LOG, self.rank, self.all_reduce)
        self.batches = TrainingBatches(
            experiment, self.rank, self.world, self.accumulation, self.batch_tokens
        )
        self.state = {
            "step": 0,
            "epoch": 0,
            "batch": 0,
            "target_tokens": 0,
            "source_tokens": 0,
            "padded_target_tokens": 0,
            "padded_source_tokens": 0,
            "train_flops": 0,
            "skipped_steps": 0,
            "seconds": 0.0,
            "world_size": self.world,
        }
        self.engine = self.build_engine()
        self.data = BatchStream(
            self.batches.train_source,
            self.batches.train_target,
            self.batches.of_epoch,
            self.settings.pad_to_multiple,
            self.device,
        )
        self.steps = Steps(
            self.engine,
            self.data,
            experiment.model,
            self.settings,
            self.accumulation,
            self.all_reduce,
            self.rank,
            self.world,
            self.device,
            resolve_loss_kernel(
                self.settings.loss_kernel,
                self.device,
                half_dtype(self.precision),  # the logits'
            ),
            self.precision,
        )
        # a parser's dev F1, a translation's dev BLEU: at each dev evaluation, on rank 0
        self.dev_monitor = None
        if experiment.dev_monitor and self.rank == 0:
            monitor = plugin(experiment.dev_monitor["monitor"])
            self.dev_monitor = monitor(experiment.dev_monitor, experiment.dev_data, self.settings)
        self.stopping = EarlyStopping.from_settings(self.settings)  # None when off
        self.stop_signal: int | None = None
        for signum in STOP_SIGNALS:
            signal.signal(signum, self.request_stop)

    def request_stop(self, signum, frame) -> None:
        """SLURM's time limit or preemption (SIGTERM), or its early warning (--signal=USR1@N):
        finish the step, write a checkpoint on every rank, and exit for a resubmission."""
        if self.stop_signal is None:
            self.stop_signal = signum
            log.warning("received %s: checkpointing after this step", signal.Signals(signum).name)

    def build_engine(self):
        check_fits(self.build_model, self.exp, self.precision, self.world, self.device)
        torch.manual_seed(self.settings.seed)  # the same initial weights on every rank
        model = self.build_model(self.exp.model)
        if self.settings.compile:
            model.compile()  # in place: parameter names, hence checkpoints, stay as they are
        engine = deepspeed_engine(
            model, self.settings, self.accumulation, self.precision, self.device
        )
        torch.manual_seed(self.settings.seed * 1000 + self.rank)  # dropout differs between ranks
        return engine

    def all_reduce(self, values: list[float]) -> list[float]:
        return sum_over_processes(values, self.world, self.device, self.host_group)

    def train_step(
        self, save_requested: bool, budget_spent: bool
    ) -> tuple[float | torch.Tensor, float | torch.Tensor, float, dict[str, bool]]:
        """One optimizer step (train_step.Steps), voting on saving now (a rank's timer ran
        out), on this being the last step (rank 0's time budget is spent) and on stopping (a
        rank was signalled)."""
        votes = {"save": save_requested, "last": budget_spent, "stop": self.stop_signal is not None}
        return self.steps.step(self.state, votes, self.folder.newest)

    def run(self) -> dict:
        self.resume()
        settings = self.settings
        clock = TrainingClock(settings, self.rank, self.state["seconds"])
        window, last_dev = LogWindow(), {}
        bar = progress(
            total=settings.max_steps,
            initial=self.state["step"],
            desc=self.exp.name,
            unit=" steps",
            disable=self.rank != 0,
        )
        # seconds_before comes from the checkpoint, the same on every rank, so all ranks agree
        # here; later budget checks go through the vote in train_step. A run that stopped early
        # stays stopped (unless its patience was raised).
        budget_left = not clock.out_of_time(clock.seconds_before) and not self.stopped_early()
        while budget_left and self.state["step"] < settings.max_steps:
            budget_spent = self.rank == 0 and clock.out_of_time(clock.seconds())
            loss, nll, tokens, voted = self.train_step(clock.save_due(), budget_spent)
            step = self.state["step"]
            self.state["seconds"] = clock.seconds()
            window.add(loss, nll, tokens)
            bar.update(1)
            final = step == settings.max_steps or voted["last"]
            logged = step % settings.log_every_steps == 0 or final
            if logged:
                self.steps.settle(self.state, self.folder.newest)
                self.log.window(window, self.engine, self.state)
                window = LogWindow()
            every = settings.checkpoint_every_steps
            scheduled = voted["save"] or final or bool(every and step % every == 0)
            # the best checkpoints are averaged: each one scheduled is evaluated as it is saved;
            # early stopping counts only the evaluations at the fixed interval, so that its
            # patience means the same whatever the averaging rule, and a run resumed after
            # checkpoints by minutes stops where an unbroken one does (as sockeye and fairseq)
            by_score = scheduled and settings.average_best_by is not None
            on_interval = step % settings.dev_every_steps == 0
            if on_interval or final or by_score:
                last_dev = self.dev_evaluation(step)
                if on_interval and early_stop_agreed(self, step, last_dev):
                    final = scheduled = True
                    if not logged:  # the steps since the last log line, before stopping
                        self.steps.settle(self.state, self.folder.newest)
                        self.log.window(window, self.engine, self.state)
            if scheduled or voted["stop"]:
                self.steps.settle(self.state, self.folder.newest)  # never save a diverged step
                dev = last_dev if last_dev.get("step") == step else None
                self.folder.save(self.engine, self.state, stopped=not scheduled, dev=dev)
                clock.saved()
            if final:
                break
            if voted["stop"]:
                bar.close()
                raise Stopped(step, self.stop_signal)
        bar.close()
        self.steps.settle(self.state, self.folder.newest)
        if not last_dev:  # resumed a finished run
            last_dev = self.evaluate()
        self.log.curves.close()
        return write_train_summary(self, last_dev)

    def dev_evaluation(self, step: int) -> dict:
        """The dev figures at this step, logged to train.jsonl and the curves."""
        figures = self.evaluate()
        self.log.append({"step": step, **figures, "seconds": round(self.state["seconds"], 2)})
        return {"step": step, **figures}

    def stopped_early(self) -> bool:
        """Whether the resumed run had spent its patience (every rank reads rank 0's count)."""
        return self.stopping is not None and self.stopping.exhausted()

    def evaluate(self) -> dict:
        """The dev loss over all processes; for a parser, rank 0 adds its dev parses' figures."""
        figures = self.steps.evaluate(self.batches)
        if self.dev_monitor is not None:
            figures |= self.dev_monitor.measure(self.engine.module)
        return figures

    def resume(self) -> None:
        """Continue from the newest complete checkpoint, if there is one: its step, data
        position, early-stopping count; the lines and curves after it are dropped."""
        self.folder.open()
        saved = self.folder.resume(self.engine)
        if saved is not None:
            self.state = {**self.state, **saved, "world_size": self.world}
            self.data.seek((self.state["epoch"], self.state["batch"]))
        # from the checkpoint's step, or from step 0 after an attempt killed before its first
        # checkpoint: what that attempt logged is dropped too, so that no step is logged twice
        self.log.forget_after(self.state["step"])
        if self.stopping is not None:
            self.stopping.restore(self.state.get("early_stopping"))
        self.log.open_curves(self.state["step"], self.settings)


def early_stop_agreed(trainer: Trainer, step: int, dev: dict) -> bool:
    """Count this dev evaluation (rank 0, which holds every dev figure; its count goes into
    the checkpoint) and agree on every rank whether to stop now."""
    if trainer.stopping is None:
        return False
    stop = False
    if trainer.rank == 0:
        stop = trainer.stopping.update(step, dev)
        trainer.state["early_stopping"] = trainer.stopping.state_dict()
    return trainer.all_reduce([1.0 if stop else 0.0])[0] > 0


def write_train_summary(trainer: Trainer, last_dev: dict) -> dict:
    """train.json of the finished (or stopped) run: how it was laid out, why it ended, which
    weights the averaged model averages."""
    shape = RunShape(
        trainer.exp.name,
        trainer.rank,
        trainer.world,
        trainer.accumulation,
        trainer.batch_tokens,
        trainer.precision,
        trainer.precision_reason,
        trainer.steps.loss_kernel,
        trainer.device,
    )
    ended_by = trainer.stopping.reason() if trainer.stopped_early() else None
    dev = {key: value for key, value in last_dev.items() if key != "step"}
    folder = trainer.folder
    return write_summary(
        trainer.exp.run_dir,
        shape,
        trainer.state,
        trainer.settings,
        trainer.engine,
        folder.weights_to_average(),
        folder.final_weights(),
        dev,
        ended_by,
    )


def plugin(name: str):
    """The class a spec names as "module:Class", such as a task's dev monitor: a plug-in that
    measures the model at each dev evaluation and never changes it. Loaded by name, so that
    training code knows no task, and the rules' code hash (which follows imports) does not make
    an edit of what only watches the model retrain it."""
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module), attribute)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("experiment", help="experiment JSON written by the workflow's train rule")
    parser.add_argument("--log", help="also log to this file")
    args = parser.parse_args(argv)
    setup_logging(args.log if logs_for_the_run() else None)
    trainer = experiment = None
    try:
        experiment = Experiment.from_json(args.experiment)
        trainer = Trainer(experiment)
        trainer.run()
    except (InputError, Diverged) as err:
        log.error("%s", err)
        return 1
    except OSError as err:  # the storage's refusal (a read-only run folder), not a bug
        if (refusal := storage_refusal(err)) is None:
            raise
        log.error("%s", refusal)
        return 1
    except (RuntimeError, MemoryError) as err:  # torch.OutOfMemoryError is a RuntimeError
        if not out_of_memory(err):
            raise
        name = experiment.name if experiment else args.experiment
        log.error("%s", exhausted(err, name, trainer))
        return 1
    except Stopped as stop:
        log.warning(
            "stopped by %s at step %d with a checkpoint written; rerun to resume from it",
            signal.Signals(stop.signum).name,
            stop.step,
        )
        return 128 + stop.signum
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    return 0


def leave(status: int) -> NoReturn:
    """Exit without running C++ static destructors: with gloo and DeepSpeed's CPU comm op alive a
    rank sometimes aborted there ("terminate called without an active exception", SIGABRT) after
    everything was written (3 of 15 two-process runs of a test's script). Call it last, when
    every output is closed or written atomically; the tests' scripts that build a Trainer too."""
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    leave(main())
