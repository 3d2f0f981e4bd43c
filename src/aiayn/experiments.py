"""From an experiment in the config to the trainer's experiment.json.

An experiment is a dataset, a model preset (tiny, base, big, or a Table 3 row) with overrides,
training settings, and the dev split used for dev loss during training.
"""

from __future__ import annotations

from dataclasses import asdict

from aiayn.decode_settings import DecodeSettings
from aiayn.errors import InputError
from aiayn.model_config import build_config
from aiayn.report.paper import TABLE3
from aiayn.train_settings import TrainSettings


def split_prefixes(
    dataset_name: str, langs: list[str], split: str, stage: str = "bin"
) -> list[str]:
    """data/{dataset}/{stage}/{split}.{src}-{tgt}.{lang} for both languages: the one place the
    data stages' file names are spelled."""
    pair = "-".join(langs)
    return [f"data/{dataset_name}/{stage}/{split}.{pair}.{lang}" for lang in langs]


def subword_model_path(dataset_name: str) -> str:
    """The dataset's sentencepiece model, shared by both languages."""
    return f"data/{dataset_name}/spm/bpe.model"


def averaged_model_path(experiment_name: str) -> str:
    """The experiment's averaged weights: the model that is decoded."""
    return f"runs/{experiment_name}/averaged.pt"


def dataset_of(experiment: dict, datasets: dict) -> dict:
    """The config's entry for the dataset an experiment names."""
    name, dataset_name = experiment["name"], experiment["dataset"]
    if dataset_name not in datasets:
        raise InputError(
            f"experiment {name!r}: dataset {dataset_name!r} is not defined under `datasets` "
            f"(defined: {sorted(datasets)})"
        )
    return datasets[dataset_name]


def resolve(experiment: dict, datasets: dict) -> dict:
    """The trainer's experiment spec (a JSON-able dict) for one experiment of the config."""
    name, dataset_name = experiment["name"], experiment["dataset"]
    dataset = dataset_of(experiment, datasets)
    dev = experiment.get("dev_split", "dev")
    if dev not in dataset["splits"] or dev == "train":
        raise InputError(
            f"experiment {name!r}: dev_split {dev!r} is not an evaluation split of dataset "
            f"{dataset_name!r} (splits: {sorted(dataset['splits'])})"
        )
    try:
        model = build_config(
            dataset["subword"]["vocab_size"],
            experiment.get("model", "base"),
            **experiment.get("overrides", {}),
        )
        train = TrainSettings(**experiment.get("train", {}))
    except (ValueError, TypeError) as err:
        raise InputError(f"experiment {name!r}: {err}") from None
    return {
        "name": name,
        "run_dir": f"runs/{name}",
        "data": {
            "train": split_prefixes(dataset_name, dataset["langs"], "train"),
            "dev": split_prefixes(dataset_name, dataset["langs"], dev),
        },
        "model": asdict(model),
        "train": asdict(train),
    }


def resolve_evaluation(experiment: dict, datasets: dict) -> dict:
    """Decoding settings, the splits to decode and score, and the paper's row to compare with.

    Kept apart from resolve(): changing how a model is decoded must not retrain it.
    """
    name, dataset = experiment["name"], dataset_of(experiment, datasets)
    splits = experiment.get("eval_splits") or [s for s in dataset["splits"] if s != "train"]
    unknown = [s for s in splits if s not in dataset["splits"] or s == "train"]
    if unknown:
        raise InputError(
            f"experiment {name!r}: eval_splits {unknown} are not evaluation splits of dataset "
            f"{experiment['dataset']!r} (splits: {sorted(dataset['splits'])})"
        )
    try:
        decode = DecodeSettings(**experiment.get("decode", {}))
    except (ValueError, TypeError) as err:
        raise InputError(f"experiment {name!r}: {err}") from None
    row = experiment.get("paper_row")
    if row is None and experiment.get("model", "base") in TABLE3:
        row = experiment.get("model", "base")
    if row is not None and row not in TABLE3:
        raise InputError(
            f"experiment {name!r}: paper_row {row!r} is not a row of the paper's Table 3 "
            f"({', '.join(TABLE3)})"
        )
    return {"decode": asdict(decode), "eval_splits": splits, "paper_row": row}
