"""A study's run record (results/<study>/run.json): what made its results, so that a table pasted
into a paper can be traced to a command, a commit, a device and its times.

Written by the workflow's last job (rule run_record) whenever any result of the study changed; a
run that changes nothing leaves it alone.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import shlex
import subprocess
import time
from pathlib import Path

from aiayn.config import paths
from aiayn.software import cpu_model, package_versions
from aiayn.textio import atomic_output, read_record

INVOCATION = "AIAYN_INVOCATION"  # the main snakemake process's command and start, for its jobs
# variables that choose the CPU code behind the floats: torch's vector instruction set, MKL's and
# oneDNN's code paths, and a preloaded library (.ci/regenerate --as-intel answers MKL's vendor
# check with one); the record names those set
KERNEL_VARIABLES = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "LD_PRELOAD",
)


def remember_invocation(argv: list[str]) -> None:
    """Called by the main snakemake process: the jobs it starts (a `run:` job too runs in a
    child process, with its own argv) inherit the command typed and when it started."""
    os.environ[INVOCATION] = json.dumps({"argv": argv, "started": time.time()})


def invocation() -> tuple[list[str], float]:
    """The command typed and its start time, as the main process remembered them."""
    if INVOCATION not in os.environ:
        raise RuntimeError(f"{INVOCATION} is unset: the run record is written by a snakemake job")
    remembered = json.loads(os.environ[INVOCATION])
    return remembered["argv"], remembered["started"]


def command_line(argv: list[str]) -> str:
    """The command as typed: `snakemake ...`, whatever path the executable had (or
    `python -m snakemake`, whose argv[0] is snakemake's __main__.py)."""
    program = Path(argv[0]).name
    return shlex.join(["snakemake" if program == "__main__.py" else program, *argv[1:]])


def commit_of(root: Path) -> dict:
    """The checkout's commit, and whether its code differs from it (results/ not counted)."""

    def git(*args: str) -> str | None:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:
        return {"commit": None, "uncommitted_changes": None}
    changes = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!results")
    return {"commit": commit, "uncommitted_changes": bool(changes)}


def experiment_record(summary_path: str, decode: dict) -> dict:
    """What one training says of its run (steps, time, device, dev perplexity), the settings it
    trained with (its experiment.json) and the decode settings its scores used."""
    summary = read_record(summary_path, "steps", "seconds")
    spec_path = Path(summary_path).with_name(paths.EXPERIMENT_SPEC)
    spec = read_record(spec_path) if spec_path.is_file() else {}
    return {
        "steps": summary["steps"],
        "ended_by": summary.get("ended_by"),
        "epochs": summary.get("epochs"),
        "train_seconds": round(summary["seconds"], 1),
        "processes": summary.get("processes"),
        "device": summary.get("device_name") or summary.get("device"),
        "precision": summary.get("precision"),
        "software": summary.get("software"),  # what it trained on: torch, CUDA, driver, ...
        "cpu": summary.get("cpu"),  # torch's CPU capability, threads, BLAS: what moves floats
        "real_tokens_per_step": summary.get("real_tokens_per_step"),
        "dev_ppl": round(summary["dev_ppl"], 3) if summary.get("dev_ppl") else None,
        "model": spec.get("model"),
        "train": spec.get("train"),
        "decode": decode,
    }


def score_record(score_path: str) -> dict:
    """The headline figures of one score file: BLEU (both protocols) and chrF, or EVALB's."""
    scores = read_record(score_path)
    if "per_seed" in scores.get("sacrebleu", {}):  # an experiment's record over its seeds
        return {
            "seeds": scores["seeds"],
            "sacrebleu_mean": round(scores["sacrebleu"]["mean"], 2),
            "sacrebleu_sd": round(scores["sacrebleu"]["sd"], 2),
            "tokenized_bleu_mean": round(scores["tokenized_bleu"]["mean"], 2),
            "p_vs_baseline": scores["test"].get("p_value"),
            "sentences": scores["sentences"],
        }
    if "evalb" in scores:
        evalb = scores["evalb"]["all"]
        return {
            "f1": round(evalb["f1"], 2),
            "precision": round(evalb["precision"], 2),
            "recall": round(evalb["recall"], 2),
            "sentences": scores["sentences"],
        }
    sacrebleu = scores["sacrebleu"]
    return {
        "sacrebleu": round(sacrebleu["score"], 2),
        "brevity_penalty": round(sacrebleu["brevity_penalty"], 3),
        "ref_len_13a": sacrebleu.get("ref_len"),
        "tokenized_bleu": round(scores["tokenized_bleu"]["score"], 2),
        "chrf": round(scores["chrf"]["score"], 2),
        "sentences": scores["sentences"],
    }


def run_record(
    study: str,
    configfiles: list[str],
    root: Path,
    experiments: dict[str, tuple[str, dict]],
    scores: list[str],
    seed_scores: list[str] = (),
    left_out: dict[str, str] | None = None,
    config_overrides: dict | None = None,
    versions: dict | None = None,
) -> dict:
    """The record of the snakemake invocation that (re)made the study's results; `experiments`
    maps each run to its train.json and its decode settings; `seed_scores` are the records over
    seeds of experiments trained with several; `versions` the code and settings that made them
    (aiayn.config.versions), which `aiayn results` compares with the checkout's."""
    argv, started = invocation()
    now = datetime.datetime.now(datetime.UTC)
    results = Path(paths.results_dir(study))
    return {
        "study": study,
        "command": command_line(argv),
        # as the command named them: relative to the working directory (where results/ is),
        # which is the checkout unless a deploying workflow runs this one as a module
        "configfiles": [os.path.relpath(f) for f in configfiles],
        "config_overrides": dict(config_overrides or {}),
        **commit_of(root),
        "finished": now.isoformat(timespec="seconds"),
        "invocation_seconds": round(now.timestamp() - started, 1),
        "host": {
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "cpu": cpu_model(),
            "kernel_variables": {
                name: os.environ[name] for name in KERNEL_VARIABLES if name in os.environ
            },
        },
        # this process's (the scores', the tables'); each experiment's own under it
        "software": package_versions(),
        "experiments": {
            name: experiment_record(summary, decode)
            for name, (summary, decode) in experiments.items()
        },
        "scores": by_name(scores, results / "scores"),
        **({"seed_scores": by_name(seed_scores, results / "seeds")} if seed_scores else {}),
        # optional datasets whose data was absent, and the experiments left out with them
        **({"left_out": dict(left_out)} if left_out else {}),
        **({"versions": versions} if versions else {}),
        "files": result_files(results),
    }


def result_files(folder: Path) -> dict[str, str]:
    """The sha256 of every file the study wrote beside its run record, by path in the
    checkout: `aiayn results` finds one edited by hand (or remade without the record)."""
    return {
        path.as_posix(): file_digest(path)
        for path in sorted(Path(folder).rglob("*"))
        if path.is_file() and path.name != Path(paths.run_record()).name
    }


def file_digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def by_name(score_paths: list[str], folder: Path) -> dict:
    """Each score file's headline figures, keyed by its path in `folder` without .json."""
    return {
        Path(path).relative_to(folder).with_suffix("").as_posix(): score_record(path)
        for path in score_paths
    }


def record_study(output: str, log: str, plan, root: Path, **invocation) -> None:
    """Rule run_record's job: the record of the study of `plan` (aiayn.config.plan.Plan), and a
    line in its log. `invocation`: configfiles, left_out and config_overrides, which only the
    workflow knows."""
    from aiayn.config.versions import study_versions  # it imports the plan, which imports paths

    runs = plan.runs
    record = write_run_record(
        output,
        study=plan.study,
        root=root,
        experiments={
            name: (paths.train_summary(name), runs.decode_settings(name)) for name in runs.names()
        },
        scores=plan.outputs.score_files(),
        seed_scores=plan.outputs.seed_score_files(),
        versions=study_versions(plan, root),
        **invocation,
    )
    Path(log).write_text(
        f"{output}: {len(record['experiments'])} experiments, {len(record['scores'])} "
        f"scores, commit {record['commit']}\n",
        encoding="utf-8",
    )


def write_run_record(output: str, **fields) -> dict:
    """Write the record next to the study's results, atomically (never a half-written file)."""
    record = run_record(**fields)
    with atomic_output(output) as handle:
        handle.write(json.dumps(record, indent=2, default=str) + "\n")
    return record
