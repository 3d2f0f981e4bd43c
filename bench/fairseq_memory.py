"""Benchmark: what holds ours' training memory above fairseq's, on fairseq_learning.py's runs.

Ours plans a step by its real tokens (`tokens_per_step`) and caps each batch's padded size at
`tokens_per_batch`; fairseq's `--max-tokens` caps the padded size alone. Each run here trains the
same shape on the same exported ids for a few steps, one process at a time, one thread: ours at
multi30k_small's padded cap and at fairseq's, and fairseq (the baseline). Recorded: each run's
peak resident memory, and the padded tokens of ours' batches under each cap.

    python bench/fairseq_memory.py --work W --fairseq-python VENV/bin/python --steps 70
"""

from __future__ import annotations

import shutil

import benchlib
import numpy as np
import yaml
from fairseq_learning import (
    THREADS_A_RUN,
    export_to_fairseq,
    fairseq_command,
    ours_command,
    ours_config,
    peak_gib,
    start,
)

from aiayn.model_config import build_config
from aiayn.prepare.binarize import IndexedDataset
from aiayn.train.batching import token_batches


def ours_at_cap(work, args, cap: int) -> tuple[str, list[str]]:
    """The train rule's command for multi30k_small capped at `cap` padded tokens a batch,
    from scratch: a run folder left by an earlier measurement would resume, not train."""
    name = f"memory_cap{cap}"
    shutil.rmtree(work / "runs" / name, ignore_errors=True)
    config, _ = ours_config(work, args, name, tokens_per_batch=cap)
    return name, ours_command(work, config, 1, name)


def measured(command: list[str], log_path) -> float:
    return round(peak_gib(*start(command, log_path)), 3)


def padded_targets(work, experiment: dict, cap: int, seed: int = 1) -> dict:
    """Padded target tokens of epoch 0's batches under `cap`, as the trainer plans them."""
    model = build_config(8000, experiment["model"], **experiment["overrides"])
    # one process, no accumulation: a batch holds the whole step's real tokens
    real = experiment["train"]["tokens_per_step"]
    prefix = work / "data/multi30k/bin/train.en-de"
    source, target = (IndexedDataset(f"{prefix}.{lang}").lengths + 1 for lang in ("en", "de"))
    batches, _ = token_batches(
        source, target, real, seed, 0, 1, model.position_limit, max_padded=cap
    )
    padded = np.array([len(rows) * target[rows].max() for rows in batches])
    return {"batches": len(batches), "median": int(np.median(padded)), "max": int(padded.max())}


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--work", type=benchlib.Path, required=True)
    parser.add_argument("--fairseq-python", required=True)
    parser.add_argument("--data-root", help="Multi30k's raw files, when not the config's URL")
    parser.add_argument("--steps", type=int, default=70)
    parser.add_argument("--fairseq-max-tokens", type=int, default=3300)
    args = parser.parse_args()
    args.seeds, args.every = 1, args.steps  # one seed, a dev evaluation only at the end
    work = args.work.resolve()
    data_bin = export_to_fairseq(work, work / "fairseq", args.fairseq_python)
    experiment = yaml.safe_load((benchlib.PROJECT / "configs/multi30k.yaml").read_text())[
        "experiments"
    ]["multi30k_small"]
    logs = work / "logs" / "fairseq_memory"
    logs.mkdir(parents=True, exist_ok=True)
    rows = []
    for cap in (experiment["train"]["tokens_per_batch"], args.fairseq_max_tokens):
        name, command = ours_at_cap(work, args, cap)
        rows.append({"run": f"ours, tokens_per_batch {cap}",
                     "peak_rss_gib": measured(command, logs / f"{name}.log"),
                     "padded_target_tokens": padded_targets(work, experiment, cap)})  # fmt: skip
    theirs = fairseq_command(data_bin, 1, experiment, args)
    rows.append({"run": f"fairseq, --max-tokens {args.fairseq_max_tokens}",
                 "peak_rss_gib": measured(theirs, logs / "fairseq.log")})  # fmt: skip
    record = benchlib.header("fairseq_memory", threads_a_run=THREADS_A_RUN) | {
        "steps": args.steps,
        "rows": rows,
    }
    benchlib.finish(record, args)


if __name__ == "__main__":
    main()
