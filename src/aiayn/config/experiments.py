"""From an experiment in the validated config to what its stages read.

An experiment is a dataset, a model preset (tiny, base, big, or a Table 3 row) with overrides,
training settings, and the dev split used for dev loss during training. The config has been
validated against the schema, which filled in every default, so nothing here has its own.
"""

from __future__ import annotations

from dataclasses import asdict

from aiayn.config import paths
from aiayn.config.workflow import module_version
from aiayn.decode.settings import DecodeSettings
from aiayn.errors import InputError
from aiayn.model_config import build_config
from aiayn.paper import TABLE3
from aiayn.train.settings import TrainSettings


def dataset_of(experiment: dict, datasets: dict) -> dict:
    """The config's entry for the dataset an experiment names."""
    name, dataset_name = experiment["name"], experiment["dataset"]
    if dataset_name not in datasets:
        raise InputError(
            f"experiment {name!r}: dataset {dataset_name!r} is not defined under `datasets` "
            f"(defined: {sorted(datasets)}): define it there, or `include:` the file that "
            f"does (configs/data/<name>.yaml)"
        )
    return datasets[dataset_name]


def resolve(experiment: dict, datasets: dict) -> dict:
    """The trainer's experiment spec (a JSON-able dict) for one experiment of the config."""
    name, dataset_name = experiment["name"], experiment["dataset"]
    dataset = dataset_of(experiment, datasets)
    dev = experiment["dev_split"]
    if dev not in dataset["splits"] or dev == "train":
        raise InputError(
            f"experiment {name!r}: dev_split {dev!r} is not an evaluation split of dataset "
            f"{dataset_name!r} (splits: {sorted(dataset['splits'])})"
        )
    try:
        model = build_config(
            dataset["subword"]["vocab_size"],
            experiment["model"],
            **experiment["overrides"],
        )
        train = TrainSettings(**experiment["train"])
    except (ValueError, TypeError) as err:
        raise InputError(f"experiment {name!r}: {err}") from None
    return {
        "name": name,
        "run_dir": paths.run_dir(name),
        "data": {
            "train": paths.split_sides("bin", dataset_name, "train", dataset["langs"]),
            "dev": paths.split_sides("bin", dataset_name, dev, dataset["langs"]),
            "subword": paths.subword_file("model", dataset_name),
        },
        "model": asdict(model),
        "train": asdict(train),
        **dev_monitor(name, dataset_name, dataset, dev, train),
    }


def dev_monitor(name: str, dataset_name: str, dataset: dict, dev: str, train) -> dict:
    """What measures the model at each dev evaluation beside the dev loss, and the files it
    reads (`inputs`, which the train rule waits for): a parser's dev parses
    (train.dev_parse_sentences), a translation's dev BLEU and chrF (train.dev_bleu_sentences).
    The trainer loads it by name. Where early stopping or best-N averaging reads its figures it
    decides the weights: its code's version (`code`, aiayn.config.workflow.module_version) is
    then part of the spec, so editing the decoder it runs reruns training. Otherwise it only
    watches the model: editing the decoder does not retrain, and the curves stay as the run's
    decoder measured them."""
    treebank = all(split["source"] == "ptb" for split in dataset["splits"].values())
    for setting, wanted in (("dev_parse_sentences", True), ("dev_bleu_sentences", False)):
        if getattr(train, setting) and treebank != wanted:
            kind = "parsing" if wanted else "translation"
            raise InputError(
                f"experiment {name!r}: train.{setting} is for {kind} experiments, and dataset "
                f"{dataset_name!r} is {'not ' if wanted else ''}a treebank; set it to 0 (or "
                "leave it out)"
            )
    for setting in ("early_stopping_metric", "average_best_by"):
        metric = getattr(train, setting)
        if metric in ("dev_bleu", "dev_chrf") and not train.dev_bleu_sentences:
            raise InputError(
                f"experiment {name!r}: train.{setting} {metric} needs dev BLEU while training: "
                "set train.dev_bleu_sentences (e.g. 500), or use dev_loss"
            )
    langs, subword = dataset["langs"], paths.subword_file("model", dataset_name)
    if train.dev_bleu_sentences:
        reference = paths.split_sides("clean", dataset_name, dev, langs)[1]
        monitor = "aiayn.decode.dev_translation:DevTranslator"
        decides = {train.early_stopping_metric, train.average_best_by} & {"dev_bleu", "dev_chrf"}
        return {"dev_monitor": {
            "monitor": monitor,
            **({"code": module_version(monitor.split(":")[0])} if decides else {}),
            "sentences": train.dev_bleu_sentences,
            "decode": {"beam": train.dev_bleu_beam, "alpha": train.dev_bleu_alpha},
            "subword": subword,
            "reference": reference,
            "inputs": [subword, reference],
        }}  # fmt: skip
    if not train.dev_parse_sentences:
        return {}
    words = paths.split_sides("clean", dataset_name, dev, langs)[0]
    gold = paths.gold_trees(dataset_name, dev, "-".join(langs))
    lexicon = train.dev_parse_constrain == "lexicon"
    lexicon_files = paths.split_sides("clean", dataset_name, "train", langs) if lexicon else []
    return {"dev_monitor": {
        "monitor": "aiayn.parsing.dev_parse:DevParser",
        "words": words,
        "gold_trees": gold,
        "subword": subword,
        "lexicon": lexicon_files,
        "linearization": dataset["linearization"],
        "inputs": [words, gold, subword, *lexicon_files],
    }}  # fmt: skip


def resolve_evaluation(experiment: dict, datasets: dict) -> dict:
    """Decoding settings (checked), the splits to decode and score, and the paper's row.

    Kept apart from resolve(): changing how a model is decoded must not retrain it.
    """
    name, dataset = experiment["name"], dataset_of(experiment, datasets)
    splits = experiment["eval_splits"] or [s for s in dataset["splits"] if s != "train"]
    unknown = [s for s in splits if s not in dataset["splits"] or s == "train"]
    if unknown:
        raise InputError(
            f"experiment {name!r}: eval_splits {unknown} are not evaluation splits of dataset "
            f"{experiment['dataset']!r} (splits: {sorted(dataset['splits'])})"
        )
    try:
        decode = DecodeSettings(**experiment["decode"])
    except (ValueError, TypeError) as err:
        raise InputError(f"experiment {name!r}: {err}") from None
    row = experiment["paper_row"]
    if row is None and experiment["model"] in TABLE3:
        row = experiment["model"]
    if row is not None and row not in TABLE3:
        raise InputError(
            f"experiment {name!r}: paper_row {row!r} is not a row of the paper's Table 3 "
            f"({', '.join(TABLE3)})"
        )
    return {"decode": decode, "eval_splits": splits, "paper_row": row}
