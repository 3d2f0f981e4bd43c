"""Benchmark: how fast ours learns beside fairseq, on the same ids, shape and flags, over seeds.

Both toolkits train the `multi30k_small` shape of configs/multi30k.yaml (post-LN, 3+3 layers,
d_model 256, d_ff 1024, 4 heads, every embedding shared, dropout and label smoothing 0.1, Adam
(0.9, 0.98, 1e-9), the paper's warm-up then inverse square root) on the workflow's binarized
Multi30k, exported id for id to fairseq's format. Each seed of ours runs beside the same seed of
fairseq, one thread each, so the two share the machine alike and their speeds compare. Recorded
at every dev evaluation: the dev NLL per target token in nats (fairseq logs base 2: converted),
training tokens per second, peak memory. fairseq runs in its own environment (`--fairseq-python`),
never a dependency of ours; docs/benchmarks.md says how to make one.

    snakemake --cores all --configfile configs/multi30k.yaml --directory W --until binarize \\
        --config 'datasets={multi30k: {root: PATH/raw_gz}}'
    python bench/fairseq_learning.py --work W --fairseq-python VENV/bin/python --seeds 5 --resume
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from pathlib import Path

import benchlib
import numpy as np
import sentencepiece as spm
import yaml

from aiayn.prepare.binarize import IndexedDataset

PAIR, SPLITS = ("en", "de"), {"train": "train", "valid": "val"}
EXPERIMENT = "fairseq_peer"


# ---- the same ids, in fairseq's format ----------------------------------------------------


def pieces_dictionary(model: Path, out: Path) -> int:
    """fairseq's dict.txt listing our pieces from id 4 on: fairseq's specials take ids 0-3
    (<s>, <pad>, </s>, <unk>) as ours do (<pad>, <unk>, <s>, </s>), so every piece keeps its id."""
    processor = spm.SentencePieceProcessor(model_file=str(model))
    pieces = [processor.id_to_piece(i) for i in range(4, processor.get_piece_size())]
    out.write_text("".join(f"{piece} 1\n" for piece in pieces), encoding="utf-8")
    return processor.get_piece_size()


def export_split(prefix: Path, model: Path, out: Path) -> int:
    processor = spm.SentencePieceProcessor(model_file=str(model))
    data = IndexedDataset(prefix)
    with open(out, "w", encoding="utf-8") as text:
        for i in range(len(data)):
            text.write(" ".join(processor.id_to_piece(int(t)) for t in data[i]) + "\n")
    return len(data)


def export_to_fairseq(work: Path, dest: Path, fairseq_python: str) -> Path:
    """fairseq-preprocess on our pieces with our dictionary: data-bin holding our ids."""
    data_bin = dest / "data-bin"
    if (data_bin / "valid.en-de.de.bin").exists():
        return data_bin
    model, text = work / "data/multi30k/spm/bpe.model", dest / "text"
    text.mkdir(parents=True, exist_ok=True)
    vocab = pieces_dictionary(model, dest / "dict.txt")
    for name, split in SPLITS.items():
        for lang in PAIR:
            prefix = work / f"data/multi30k/bin/{split}.en-de.{lang}"
            export_split(prefix, model, text / f"{name}.{lang}")
    preprocess = [fairseq_python, "-m", "fairseq_cli.preprocess", "--source-lang", "en",
                  "--target-lang", "de", "--trainpref", text / "train", "--validpref",
                  text / "valid", "--destdir", data_bin, "--srcdict", dest / "dict.txt",
                  "--joined-dictionary", "--workers", "1"]  # fmt: skip
    subprocess.run([str(a) for a in preprocess], check=True, capture_output=True)
    fairseq_vocab = len((data_bin / "dict.en.txt").read_text().splitlines()) + 4
    if fairseq_vocab != vocab:
        raise SystemExit(f"fairseq's dictionary has {fairseq_vocab} entries, ours {vocab}")
    return data_bin


# ---- the two trainers -----------------------------------------------------------------------


def ours_config(work: Path, args, name: str = EXPERIMENT, **train) -> tuple[Path, dict]:
    """configs/multi30k.yaml's multi30k_small as experiment `name`, with this benchmark's steps,
    seeds and dev steps and any other `train` settings: the config file, and the experiment."""
    study = yaml.safe_load((benchlib.PROJECT / "configs/multi30k.yaml").read_text())
    experiment = study["experiments"]["multi30k_small"]
    experiment["seeds"] = args.seeds
    experiment["train"] |= {"max_steps": args.steps, "dev_every_steps": args.every,
                            "log_every_steps": 10, "checkpoint_every_steps": args.steps,
                            "average_last": 1} | train  # fmt: skip
    dataset = benchlib.PROJECT / "configs/data/multi30k.yaml"
    config = {"study": EXPERIMENT, "include": [str(dataset)],
              "experiments": {name: experiment}}  # fmt: skip
    if args.data_root:
        config["datasets"] = {"multi30k": {"root": str(Path(args.data_root).resolve())}}
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, experiment


def run_name(seed: int, name: str = EXPERIMENT) -> str:
    return name if seed == 1 else f"{name}.seed{seed}"


def ours_command(work: Path, config: Path, seed: int, name: str = EXPERIMENT) -> list[str]:
    """The workflow's train rule for one seed, one thread, as a user runs it."""
    return ["snakemake", "--cores", "1", "--set-threads", "train=1", "--configfile", str(config),
            "--directory", str(work), "--snakefile", str(benchlib.PROJECT / "Snakefile"),
            f"runs/{run_name(seed, name)}/train.json"]  # fmt: skip


def fairseq_command(data_bin: Path, seed: int, experiment: dict, args) -> list[str]:
    """fairseq-train with ours' shape and flags, read from the experiment. --warmup-init-lr is
    the paper's rate at step 1, so that both schedules give the same rate at every step
    (fairseq's own default starts at 0); --max-tokens is set so that a step holds as many target
    tokens as ours."""
    from aiayn.model_config import build_config
    from aiayn.train.settings import TrainSettings

    # the vocabulary is the exported dictionary; its size changes nothing read here
    model = build_config(8000, experiment["model"], **experiment["overrides"])
    train = TrainSettings(**experiment["train"])
    peak = model.d_model**-0.5 * train.warmup_steps**-0.5 * train.lr_scale
    sides = [f"--{side}-{key}={value}" for side in ("encoder", "decoder") for key, value in (
        ("layers", model.n_layers), ("embed-dim", model.d_model),
        ("ffn-embed-dim", model.d_ff), ("attention-heads", model.n_heads))]  # fmt: skip
    return [args.fairseq_python, "-m", "fairseq_cli.train", str(data_bin), "--cpu",
            "--arch", "transformer", *sides, "--share-all-embeddings",
            f"--dropout={model.dropout}", f"--attention-dropout={model.attention_dropout}",
            "--criterion", "label_smoothed_cross_entropy",
            f"--label-smoothing={train.label_smoothing}", "--optimizer", "adam",
            f"--adam-betas=({train.adam_beta1}, {train.adam_beta2})",
            f"--adam-eps={train.adam_eps}", "--lr-scheduler", "inverse_sqrt",
            f"--warmup-updates={train.warmup_steps}", f"--lr={peak!r}",
            f"--warmup-init-lr={peak / train.warmup_steps!r}",
            f"--max-tokens={args.fairseq_max_tokens}", f"--max-update={args.steps}",
            f"--validate-interval-updates={args.every}", "--validate-interval", "1000",
            "--no-save", "--log-format", "json", "--log-interval", "10", f"--seed={seed}",
            "--num-workers", "0", "--no-progress-bar"]  # fmt: skip


THREADS_A_RUN = 1
ONE_THREAD = {"OMP_NUM_THREADS": str(THREADS_A_RUN), "MKL_NUM_THREADS": str(THREADS_A_RUN)}


def start(command: list[str], log_path: Path) -> tuple[subprocess.Popen, object]:
    """A run at one thread, its output to `log_path`."""
    log = open(log_path, "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               env=os.environ | ONE_THREAD)  # fmt: skip
    return process, log


def peak_gib(process: subprocess.Popen, log) -> float:
    """Wait for a started run; its peak resident memory in GiB. wait4's usage covers the process
    and the descendants it waited for (ours: the train rule's Python under snakemake), so
    ru_maxrss is the largest of them."""
    _, status, usage = os.wait4(process.pid, 0)
    log.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {log.name}")
    return usage.ru_maxrss / 2**20


RUNS_AT_ONCE = 2  # one thread each: the 2-core machine the records were measured on


def run_side_by_side(
    work: Path, config: Path, data_bin: Path, jobs: list[tuple[int, str]], experiment: dict, args
) -> dict:
    """The runs `jobs` ((seed, side) each) side by side, logging under logs/fairseq_peer/;
    each one's peak memory in GiB."""
    logs = work / "logs" / "fairseq_peer"
    logs.mkdir(parents=True, exist_ok=True)
    commands = {
        "ours": lambda seed: ours_command(work, config, seed),
        "fairseq": lambda seed: fairseq_command(data_bin, seed, experiment, args),
    }
    running = {(seed, side): start(commands[side](seed), logs / f"{side}.seed{seed}.log")
               for seed, side in jobs}  # fmt: skip
    return {job: peak_gib(*run) for job, run in running.items()}


# ---- what each run logged -------------------------------------------------------------------


def ours_curve(work: Path, seed: int) -> dict:
    """Dev NLL (nats) by step and the median training speed, from the run's train.jsonl."""
    lines = [json.loads(line) for line in (work / f"runs/{run_name(seed)}/train.jsonl").open()]
    dev = {line["step"]: line["dev_nll"] for line in lines if "dev_nll" in line}
    speeds = [line["target_tokens_per_s"] for line in lines if "target_tokens_per_s" in line]
    summary = json.loads((work / f"runs/{run_name(seed)}/train.json").read_text())
    return {"dev_nll": dev, "target_tokens_per_s": float(np.median(speeds[1:])),
            "target_tokens_per_step": summary["real_tokens_per_step"]["target"]}  # fmt: skip


FAIRSEQ_LINE = re.compile(r"\| (valid|train_inner) \| (\{.*\})$")


def fairseq_curve(log: Path) -> dict:
    """The same from fairseq's JSON log: its nll_loss is in bits per target token."""
    dev, speeds, sizes = {}, [], []
    for line in log.read_text().splitlines():
        match = FAIRSEQ_LINE.search(line)
        if match is None:
            continue
        fields = json.loads(match[2])
        if match[1] == "valid":
            dev[int(fields["valid_num_updates"])] = float(fields["valid_nll_loss"]) * math.log(2)
        else:
            speeds.append(float(fields["wps"]))
            sizes.append(float(fields["wpb"]))
    return {"dev_nll": dev, "target_tokens_per_s": float(np.median(speeds[1:])),
            "target_tokens_per_step": round(float(np.mean(sizes)), 1)}  # fmt: skip


def compared(runs: dict, alpha: float = 0.05) -> list[dict]:
    """Per dev step: each side's mean and sd over seeds, and ours - fairseq with Welch's t-test.
    A difference is marked where Holm's adjustment over the steps keeps the family-wise error
    at `alpha`: one verdict for the whole curve, not one chance of a false alarm per step."""
    from scipy import stats
    from statsmodels.stats.multitest import multipletests

    # by step as a number: a record read back keys its kept seeds' steps by strings
    curves = {side: [{int(step): nll for step, nll in run["dev_nll"].items()}
                     for run in runs[side]] for side in SIDES}  # fmt: skip
    steps = sorted(set.intersection(*(set(curve) for side in SIDES for curve in curves[side])))
    rows = []
    for step in steps:
        ours, theirs = ([curve[step] for curve in curves[side]] for side in SIDES)
        row = {"step": step, "ours": mean_sd(ours), "fairseq": mean_sd(theirs),
               "difference": round(float(np.mean(ours) - np.mean(theirs)), 4)}  # fmt: skip
        if min(len(ours), len(theirs)) > 1:
            test = stats.ttest_ind(ours, theirs, equal_var=False)
            low, high = test.confidence_interval(1 - alpha)
            row |= {"p": float(test.pvalue), "ci95": [round(float(low), 4), round(float(high), 4)]}
        rows.append(row)
    tested = [row for row in rows if "p" in row]
    if tested:
        reject = multipletests([row["p"] for row in tested], alpha, method="holm")[0]
        for row, differs in zip(tested, reject, strict=True):
            row["differs"] = bool(differs)
    return rows


SIDES = ("ours", "fairseq")


def mean_sd(values: list[float]) -> dict:
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else None
    return {"mean": round(float(np.mean(values)), 4), "sd": sd and round(sd, 4), "n": len(values)}


# ---- the record and its figure ------------------------------------------------------------

RECORD = benchlib.RESULTS / "fairseq_learning-cpu.json"


def provenance(work: Path, fairseq_versions: dict) -> dict:
    """What each side's figures depend on beyond the seed: the binarized data both read, and
    ours' train stage code version (as the workflow computes it: by meaning, over every module
    the trainer runs) and torch, or fairseq's own versions (`toolkit_versions`). A resumed
    record keeps a seed of a side only where these are the same, so it need not keep the folder
    the seed was trained in, and an edit of ours never costs fairseq's seeds."""
    import hashlib

    import torch

    from aiayn.config.versions import code_version

    data = hashlib.sha256()
    for path in sorted((work / "data/multi30k/bin").glob("*")):
        data.update(path.name.encode() + path.read_bytes())
    data = data.hexdigest()[:16]
    train_code = code_version(benchlib.PROJECT / "workflow_scripts/train.py", benchlib.PROJECT)
    return {"ours": {"train_code": train_code, "torch": torch.__version__, "data": data},
            "fairseq": fairseq_versions | {"data": data}}  # fmt: skip


def toolkit_versions(fairseq_python: str) -> dict:
    """fairseq's and its torch's versions, from its own environment."""
    probe = "import fairseq, torch; print(fairseq.__version__, torch.__version__)"
    versions = subprocess.run([fairseq_python, "-c", probe], check=True, capture_output=True,
                              text=True).stdout.split()  # fmt: skip
    return dict(zip(("fairseq", "torch"), versions, strict=True))


def kept_runs(now: dict, args) -> dict:
    """With --resume, the record's runs of each side measured with the provenance of `now`
    (`provenance`); a run measured with another is named and left out, to be measured again.
    Refused: a record of other steps, whose curves would not compare."""
    if not args.resume or not RECORD.exists():
        return {side: [] for side in SIDES}
    record = json.loads(RECORD.read_text())
    if (record["steps"], record["every"]) != (args.steps, args.every):
        raise SystemExit(f"{RECORD} was measured with --steps {record['steps']} --every "
                         f"{record['every']}: resume with those, or start again without "
                         "--resume")  # fmt: skip
    kept = {}
    for side in SIDES:
        kept[side] = []
        for run in record["runs"][side]:
            then = run.get("provenance", {})
            changed = [key for key in now[side] if then.get(key) != now[side][key]]
            if changed:
                print(f"seed {run['seed']} of {side} was measured with another "
                      f"{' and '.join(changed)} ({then or 'not recorded'}; now {now[side]}): "
                      "measured again")  # fmt: skip
            else:
                kept[side].append(run)
    return kept


def speed_ratio(runs: dict) -> float | None:
    """Ours' median training speed over fairseq's, over the seeds the two ran side by side
    (sharing the machine alike); None where no seed did."""
    paired = {run["seed"] for run in runs["ours"] if run.get("beside") == "fairseq"}
    speeds = [np.median([run["target_tokens_per_s"] for run in runs[side]
                         if run["seed"] in paired]) for side in SIDES]  # fmt: skip
    return round(float(speeds[0] / speeds[1]), 3) if paired else None


def draw(record: dict, out: Path) -> None:
    """Dev NLL against step: each toolkit's mean over seeds, its seeds' range as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 3.6))
    for side, colour in zip(SIDES, ("tab:blue", "tab:orange"), strict=True):
        runs = record["runs"][side]
        if not runs:
            continue
        steps = sorted(set.intersection(*(set(map(int, run["dev_nll"])) for run in runs)))
        values = np.array([[run["dev_nll"][str(s)] for s in steps] for run in runs])
        label = f"{side} ({len(runs)} seed{'s' * (len(runs) > 1)})"
        axes.plot(steps, values.mean(0), color=colour, label=label)
        axes.fill_between(steps, values.min(0), values.max(0), color=colour, alpha=0.25)
    axes.set(xlabel="optimizer step", ylabel="dev NLL per target token (nats)", yscale="log",
             title="Multi30k, multi30k_small's shape: ours beside fairseq")  # fmt: skip
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def main() -> None:
    parser = benchlib.parser(__doc__, saves=False)  # the record is written after each seed
    parser.add_argument(
        "--work",
        type=Path,
        required=True,
        help="a workflow folder holding data/multi30k/bin (see above)",
    )
    parser.add_argument(
        "--fairseq-python",
        required=True,
        help="the Python of an environment with fairseq (docs/benchmarks.md)",
    )
    parser.add_argument("--data-root", help="Multi30k's raw files, when not the config's URL")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--every", type=int, default=250, help="steps between dev evaluations")
    parser.add_argument("--fairseq-max-tokens", type=int, default=3300,
                        help="fairseq's batch size in padded tokens: 3300 gives ours' 2,900 "
                        "target tokens a step")  # fmt: skip
    parser.add_argument("--resume", action="store_true",
                        help="keep each side's seeds measured with these steps and that "
                        "side's code and data (`provenance`); train the rest")  # fmt: skip
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES),
                        help="measure only these toolkits' missing seeds (fairseq's outlive "
                        "edits of ours)")  # fmt: skip
    args = parser.parse_args()
    work = args.work.resolve()
    data_bin = export_to_fairseq(work, work / "fairseq", args.fairseq_python)
    config, experiment = ours_config(work, args)
    now = provenance(work, toolkit_versions(args.fairseq_python))
    record = benchlib.header("fairseq_learning", threads_a_run=THREADS_A_RUN) | {
        "steps": args.steps,
        "every": args.every,
        "runs": kept_runs(now, args),
    }
    batches = planned(record["runs"], args.seeds, args.sides)
    if not batches:
        raise SystemExit(f"{RECORD} already holds seeds 1-{args.seeds}: more with --seeds")
    for together in batches:
        measure(record, together, now, (work, config, data_bin, experiment, args))
        benchlib.write_json(RECORD, record)
    draw(json.loads(RECORD.read_text()), RECORD.with_suffix(".png"))
    print(json.dumps(record.get("dev_nll"), indent=1))


def planned(runs: dict, seeds: int, sides: list[str]) -> list[list[tuple[int, str]]]:
    """The missing (seed, side) runs of seeds 1-`seeds`, RUNS_AT_ONCE at a time: a seed both
    toolkits miss as a pair (sharing the machine alike, their speeds compare), then the rest."""
    missing = {side: [seed for seed in range(1, seeds + 1)
                      if seed not in {run["seed"] for run in runs[side]}]
               for side in SIDES if side in sides}  # fmt: skip
    pairs = sorted(set.intersection(*map(set, missing.values()))) if len(missing) > 1 else []
    rest = sorted((seed, side) for side, side_seeds in missing.items() for seed in side_seeds
                  if seed not in pairs)  # fmt: skip
    return [[(seed, side) for side in SIDES] for seed in pairs] + [
        rest[first : first + RUNS_AT_ONCE] for first in range(0, len(rest), RUNS_AT_ONCE)
    ]


def beside(job: tuple[int, str], together: list[tuple[int, str]]) -> str | None:
    """The run that shared the machine with `job`: the other toolkit's name where it ran the
    same seed (a pair, whose speeds compare), else `<side> seed <n>`; None: it ran alone."""
    other = next((o for o in together if o != job), None)
    if other is None:
        return None
    return other[1] if other[0] == job[0] else f"{other[1]} seed {other[0]}"


def measure(record: dict, together: list[tuple[int, str]], now: dict, setup: tuple) -> None:
    """Train the runs `together` side by side and add their curves to `record`."""
    work, config, data_bin, experiment, args = setup
    peaks = run_side_by_side(work, config, data_bin, together, experiment, args)
    curves = {
        "ours": lambda seed: ours_curve(work, seed),
        "fairseq": lambda seed: fairseq_curve(work / f"logs/fairseq_peer/fairseq.seed{seed}.log"),
    }
    for seed, side in together:
        record["runs"][side].append({"seed": seed, **curves[side](seed), "commit": record["commit"],
                                     "peak_rss_gib": round(peaks[seed, side], 3),
                                     "beside": beside((seed, side), together),
                                     "device": record["device"],
                                     "provenance": now[side]})  # fmt: skip
        record["runs"][side].sort(key=lambda run: run["seed"])
    if all(record["runs"][side] for side in SIDES):
        record["dev_nll"] = compared(record["runs"])
    record["speed_ours_over_fairseq"] = speed_ratio(record["runs"])


if __name__ == "__main__":
    main()
