"""Check, not a timing: does train.sync_free's step really never wait for the device? Base (or
--preset) in bf16 trains 4 steps of 2 micro-batches twice, sync_free off and on, the second
step's gradients made infinite by a hook (an injected overflow). On CUDA the sync_free steps run
under torch.cuda.set_sync_debug_mode("warn"), so any wait for the device inside a step is caught.
Recorded: whether a step synchronized, the skip counted, the learning-rate schedule held at the
skipped step, and the losses and fp32 weights equal to sync_free off. On a CPU (CI's smoke) the
same run without the sync mode, which CUDA alone has. Issue #67: switch sync_free on by default
only if this passes and it is >= 1.00x on base and big.

    python bench/sync_check.py --preset base       # on a GPU
    python bench/sync_check.py --preset tiny --tokens 600 --vocab 500   # CPU-sized
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import benchlib
import torch
import train_throughput

from aiayn.model_config import build_config
from aiayn.train.trainer import leave


def four_steps(config, corpus, args, sync_free: bool, folder: Path) -> dict:
    """Losses, rates, fp32 weights after each step, the skip count, and any device sync."""
    settings = train_throughput.bench_settings(args, precision="bf16", sync_free=sync_free,
                                               warmup_steps=2)  # fmt: skip
    trainer = train_throughput.our_trainer(config, corpus, settings, folder)
    poisoned = {"now": False}
    next(trainer.engine.module.parameters()).register_hook(
        lambda grad: grad * float("inf") if poisoned["now"] else grad
    )
    optimizer, cuda = trainer.engine.optimizer, trainer.device.type == "cuda"
    losses, rates, weights, synced = [], [], [], None
    for step in range(1, 5):
        poisoned["now"] = step == 2
        # "warn", not "error": a step stopped half-way by an error could not be compared
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if cuda and sync_free:
                torch.cuda.set_sync_debug_mode("warn")
            try:
                loss, *_ = trainer.train_step(save_requested=False, budget_spent=False)
            finally:
                if cuda:
                    torch.cuda.set_sync_debug_mode("default")
        syncs = [str(w.message) for w in caught if "synchroniz" in str(w.message).lower()]
        synced = synced or (syncs[0].splitlines()[0][:200] if syncs else None)
        losses.append(float(loss))
        rates.append(trainer.engine.lr_scheduler.get_last_lr()[0])
        weights.append(optimizer.fp32_groups_flat_partition[0].detach().clone())
    trainer.steps.settle(trainer.state, trainer.folder.newest)
    return {"losses": losses, "rates": rates, "weights": weights, "synced": synced,
            "skipped": trainer.state["skipped_steps"]}  # fmt: skip


def main() -> None:
    parser = benchlib.parser(__doc__, out=True)
    parser.add_argument("--preset", default="base")
    parser.add_argument("--tokens", type=int, default=8000, help="target tokens a step")
    parser.add_argument("--vocab", type=int, default=8000)
    args = parser.parse_args()
    args.batch_tokens = args.tokens // 2  # two micro-batches: the skip is decided over both
    from aiayn.train.engine import init_process

    _, _, device = init_process()
    config = build_config(args.vocab, args.preset)
    corpus = train_throughput.synthetic_corpus(2000, args.vocab)
    runs = {}
    for sync_free in (False, True):
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as folder:
            runs[sync_free] = four_steps(config, corpus, args, sync_free, Path(folder))
    shipped, ours = runs[False], runs[True]
    record = {
        **benchlib.header("sync_check", device),
        "preset": args.preset,
        "no_sync_inside_step": (
            ours["synced"] is None if device.type == "cuda" else "not checked: CUDA only"
        ),
        "first_sync": ours["synced"],
        "rates": ours["rates"],
        "skipped_steps": [shipped["skipped"], ours["skipped"]],
        # the skipped step left the schedule where it was, as DeepSpeed's own step does
        "schedule_held": ours["rates"][0] == ours["rates"][1]
        and all(
            abs(a - b) <= 1e-12 * b for a, b in zip(ours["rates"], shipped["rates"], strict=True)
        ),
        "same_losses": ours["losses"] == shipped["losses"],
        "same_weights": all(map(torch.equal, ours["weights"], shipped["weights"])),
    }
    record["passed"] = (record["no_sync_inside_step"] is not False and record["schedule_held"]
                        and record["skipped_steps"] == [1, 1] and record["same_losses"]
                        and record["same_weights"])  # fmt: skip
    benchlib.finish(record, args, device)


if __name__ == "__main__":
    main()
    leave(0)  # as the trainer ends: no C++ static destructors after DeepSpeed ran
