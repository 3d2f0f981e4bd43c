"""Rule figure: one figure of results/<study>/figures/ as PNG and PDF."""

from pathlib import Path

from aiayn.config import paths
from aiayn.logs import run_stage
from aiayn.report import figures
from aiayn.report.output import save_figure
from aiayn.textio import read_record
from aiayn.train.curves import check_reaches


def learning_rate():
    schedules = {
        spec["name"]: {
            "d_model": spec["model"]["d_model"],
            "warmup_steps": spec["train"]["warmup_steps"],
            "lr_scale": spec["train"]["lr_scale"],
            "max_steps": spec["train"]["max_steps"],
        }
        for spec in snakemake.params.experiments
    }
    return figures.learning_rate(schedules)


def train_logs() -> dict[str, Path]:
    """Each experiment's train.jsonl, beside the train.json the rule reads, which it must reach."""
    logs = {}
    for spec, path in zip(snakemake.params.experiments, snakemake.input.summaries, strict=True):
        logs[spec["name"]] = Path(path).with_name(paths.TRAIN_LOG)
        steps = read_record(path, "steps")["steps"]
        check_reaches(logs[spec["name"]], Path(path), steps)
    return logs


def loss_curves():
    return figures.loss_curves(train_logs())


def parse_curves():
    baselines = {}
    for path in snakemake.input.baselines:
        record = read_record(path, "dataset", "split", "baselines")
        label = f"{record['dataset']} {record['split']}"
        baselines[label] = {
            name: scores["all"]["f1"] for name, scores in record["baselines"].items()
        }
    return figures.parse_curves(train_logs(), baselines)


def averaging():
    records = [read_record(p) for p in snakemake.input.scores]
    bleu = {}
    for spec in snakemake.params.experiments:
        by_checkpoint = {
            r["checkpoint"]: r["tokenized_bleu"]["score"]
            for r in records
            if r["experiment"] == spec["name"] and r["split"] == spec["dev_split"]
        }
        bleu[spec["name"]] = (by_checkpoint["last"], by_checkpoint["averaged"])
    splits = sorted({spec["dev_split"] for spec in snakemake.params.experiments})
    return figures.averaging(bleu, "/".join(splits))


def main():
    draw = {
        "learning_rate": learning_rate,
        "loss_curves": loss_curves,
        "averaging": averaging,
        "parse_curves": parse_curves,
    }
    save_figure(draw[snakemake.wildcards.figure](), snakemake.output.png, snakemake.output.pdf)


run_stage(main, snakemake.log[0])
