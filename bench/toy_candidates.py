"""Benchmark: how hard a toy corpus is, on dev, before it becomes the default's.

A candidate (aiayn.data.toy's grammar with its words drawn by Zipf, `--zipf` the exponent) is
written out as a local dataset with the default's split sizes, seeds and BPE size, and
config.yaml's experiments train on it through the workflow as the default run does (same
steps, rate and averaging); it chose the toy's exponent. Recorded per candidate and
experiment: dev sacreBLEU and chrF of the averaged model on the whole dev split, the dev curve
the trainer logs (100 sentences) and the training time, with the baseline of copying the source
beside them. Its test split is never made: every choice is made on dev.

    python bench/toy_candidates.py --work W --zipf 1.0 1.2 --save
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import benchlib
import yaml

from aiayn.data import toy as toy_corpus

LANGS = ("en", "de")
EXPERIMENTS = ("tiny", "tiny_one_head", "tiny_learned_positions", "tiny_one_layer")


SPLITS = ("train", "dev")


def write_corpus(folder: Path, zipf: float, toy: dict) -> None:
    """The candidate's train and dev, with the default toy's sizes and seeds, as text files;
    one already holding its text is not written again (its time would retrain every run, where
    more `--seeds` should train only the new ones)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        spec = toy["splits"][split]
        pairs = list(toy_corpus.generate(spec["size"], spec["seed"], split, zipf=zipf))
        for side, lang in enumerate(LANGS):
            text = "".join(pair[side] + "\n" for pair in pairs)
            path = folder / f"{split}.{lang}"
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")  # the same text left alone: no rerun


def candidate_config(folder: Path, corpus: Path, experiments: list[str], seeds: int) -> Path:
    """config.yaml's experiments on the candidate, as a local dataset, decoding dev only."""
    default = yaml.safe_load((benchlib.PROJECT / "config.yaml").read_text())
    toy = default_toy()
    splits = {split: {"source": "local", "paths": {lang: f"{split}.{lang}" for lang in LANGS}}
              for split in SPLITS}  # fmt: skip
    dataset = {key: value for key, value in toy.items() if key != "splits"}
    chosen = {name: default["experiments"][name] | {"dataset": "toy_candidate", "seeds": seeds,
                                                      "eval_splits": ["dev"]}
              for name in experiments}  # fmt: skip
    config = {"study": "toy_candidate", "prepare": ["toy_candidate"],
              "datasets": {"toy_candidate": dataset | {"root": str(corpus), "splits": splits}},
              "experiments": chosen, "complexity": {"enabled": False}}  # fmt: skip
    path = folder / "candidate.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return path


def default_toy() -> dict:
    """configs/data/toy.yaml's dataset: its split sizes and seeds, cleaning and BPE size."""
    return yaml.safe_load((benchlib.PROJECT / "configs/data/toy.yaml").read_text())["datasets"][
        "toy"
    ]


def run_names(experiments: list[str], seeds: int) -> list[str]:
    """The workflow's run names of each experiment's seeds."""
    from aiayn.config.plan.runs import seed_runs

    return list(seed_runs({name: {"seeds": seeds} for name in experiments}))


def train_and_score(folder: Path, config: Path, runs: list[str]) -> float:
    """The workflow's train, decode and score of dev for `runs`; its wall time in seconds."""
    targets = [f"results/toy_candidate/scores/{run}/averaged/dev.json" for run in runs]
    snakefile = str(benchlib.PROJECT / "Snakefile")
    command = ["snakemake", "--cores", "all", "--configfile", str(config), "--directory",
               str(folder), "--snakefile", snakefile, *targets]  # fmt: skip
    started = time.perf_counter()
    with open(folder / "snakemake.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
    return time.perf_counter() - started


def figures(folder: Path, run: str) -> dict:
    """Dev figures of one run: the averaged model's on all of dev, the trainer's dev curve."""
    path = folder / f"results/toy_candidate/scores/{run}/averaged/dev.json"
    scores = json.loads(path.read_text())
    lines = [json.loads(line) for line in (folder / f"runs/{run}/train.jsonl").open()]
    curve = {line["step"]: round(line["dev_bleu"], 2) for line in lines if "dev_bleu" in line}
    return {"dev_sacrebleu": round(scores["sacrebleu"]["score"], 2),
            "dev_chrf": round(scores["chrf"]["score"], 2), "dev_bleu_curve_100": curve}  # fmt: skip


def kernels(folder: Path, runs: list[str]) -> list[str]:
    """The CPU kernels torch trained the runs with, as their train.json records them
    (ATEN_CPU_CAPABILITY chooses them): the same candidate may order its rows otherwise."""
    summaries = (json.loads((folder / f"runs/{run}/train.json").read_text()) for run in runs)
    return sorted({summary["cpu"]["capability"] for summary in summaries})


def copy_baseline(corpus: Path) -> float:
    """Dev sacreBLEU of the English source copied as the translation, scored as ours are."""
    from aiayn.score.bleu import score

    source, reference = ((corpus / f"dev.{lang}").read_text(encoding="utf-8").splitlines()
                         for lang in LANGS)  # fmt: skip
    return round(score(source, reference, "de", resamples=0)["sacrebleu"]["score"], 2)


def corpus_facts(corpus: Path) -> dict:
    """How large the candidate's German is: word types, and how many are seen at most 5 times."""
    import re
    from collections import Counter

    counts = Counter(re.findall(r"[\w-]+", (corpus / "train.de").read_text(encoding="utf-8")))
    return {"german_types": len(counts), "seen_at_most_5": sum(c <= 5 for c in counts.values())}


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--work", type=Path, required=True, help="a folder for the runs")
    parser.add_argument("--zipf", type=float, nargs="+", default=[toy_corpus.ZIPF])
    parser.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS))
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    toy = default_toy()
    record = benchlib.header("toy_candidates") | {"candidates": []}
    for zipf in args.zipf:
        folder = args.work.resolve() / f"zipf{zipf}"
        write_corpus(folder / "corpus", zipf, toy)
        config = candidate_config(folder, folder / "corpus", args.experiments, args.seeds)
        names = run_names(args.experiments, args.seeds)
        seconds = train_and_score(folder, config, names)
        facts = corpus_facts(folder / "corpus") | {
            "copy_source_dev_sacrebleu": copy_baseline(folder / "corpus"),
            "seconds": round(seconds),
            "kernels": kernels(folder, names),
        }
        runs = {run: figures(folder, run) for run in names}
        record["candidates"].append({"zipf": zipf, **facts, "runs": runs})
        print(json.dumps(record["candidates"][-1], indent=1))
    benchlib.finish(record, args)


if __name__ == "__main__":
    main()
