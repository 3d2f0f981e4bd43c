"""Records what a finished `snakemake --cores all` on the shipped config gave, as the README's
toy table quotes it: results/toy/default_run.json (per experiment: steps, training time, dev
perplexity, and each decode's scores with its bootstrap interval and paired test).

    snakemake --cores all                                   # in a fresh clone, timed
    python bench/default_run_record.py CLONE --wall-seconds S --device "CPU: ..."

Run it on a workflow folder where nothing was reused (a fresh clone), so the wall time is the
whole run's. The clone's results/toy/ is what the workflow wrote there: commit it with the
record, which tests check against the committed score files.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

from aiayn.config import paths

PROJECT = Path(__file__).resolve().parents[1]
RECORD = PROJECT / "results" / "toy" / "default_run.json"
DECODES = (("last", "dev"), ("averaged", "dev"), ("averaged", "test"))


def decode_figures(root: Path, name: str, checkpoint: str, split: str) -> dict:
    """One decode's scores, sacreBLEU's 95% half-width, its paired test, its speed, unrounded:
    whatever quotes them rounds once, from the value itself."""
    scores = json.loads((root / paths.score_file(name, checkpoint, split, "toy")).read_text())
    decode = json.loads((root / paths.decode_output("json", name, checkpoint, split)).read_text())
    test = scores.get("paired_bootstrap") or {}
    return {
        "sacrebleu": scores["sacrebleu"]["score"],
        "sacrebleu_ci95": scores["sacrebleu"]["bootstrap"]["ci95"],
        "tokenized_bleu": scores["tokenized_bleu"]["score"],
        "chrf": scores["chrf"]["score"],
        "baseline": test.get("baseline"),
        "p_vs_baseline": None if test.get("is_baseline") else test["p_value"],
        "decode_sentences_per_s": decode["sentences_per_s"],
    }


def experiment_figures(root: Path, name: str) -> dict:
    train = json.loads((root / paths.train_summary(name)).read_text())
    figures = {
        "steps": train["steps"],
        "train_seconds": train["seconds"],
        "dev_ppl": train["dev_ppl"],
        "train_flops": train["train_flops"],
        "real_tokens_per_step": train["real_tokens_per_step"],
    }
    for checkpoint, split in DECODES:
        figures[f"{checkpoint}_{split}"] = decode_figures(root, name, checkpoint, split)
    return figures


def clone_commit(root: Path) -> str:
    """The commit the run's clone was at; a clone whose code was edited is no commit's run (the
    run rewrites the committed results/, so those do not count)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{root} is not a git clone: run the default config in a fresh clone")
        return done.stdout.strip()

    if git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!results"):
        sys.exit(f"{root} has uncommitted changes: its run is not the run of a commit")
    return git("rev-parse", "--short", "HEAD")


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("root", type=Path, help="the workflow folder the default run finished in")
    cli.add_argument("--wall-seconds", type=float, required=True, help="the run's wall time")
    cli.add_argument("--device", required=True, help='e.g. "CPU: AMD EPYC, 2 cores"')
    args = cli.parse_args()
    scores = args.root / paths.results_dir("toy") / "scores"  # the toy study's experiments only
    names = sorted(path.name for path in scores.glob("*") if path.is_dir())
    if not names:
        sys.exit(f"{args.root} has no {scores}/: run `snakemake --cores all` there first")
    record = {
        "what": "`snakemake --cores all` on the default config in a fresh clone (no data/, runs/, "
        ".snakemake/): train.json, decode and score files of each experiment",
        "device": args.device,
        "commit": clone_commit(args.root),
        "date": datetime.date.today().isoformat(),
        "snakemake_wall_seconds_from_scratch": round(args.wall_seconds),
        "experiments": {name: experiment_figures(args.root, name) for name in names},
    }
    RECORD.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(RECORD)


if __name__ == "__main__":
    main()
