"""Splits that read the same data: a model tuned or tested on what it trained on, or taught to
copy. Found from the config alone, before any job: the same file, hub split, test set, toy
partition or treebank documents named twice."""

from __future__ import annotations

import os

from aiayn.errors import InputError

LAST_DOCUMENT = 9999  # wsj_SSDD: section SS, document SSDD


def check_splits_apart(name: str, dataset: dict) -> None:
    """Refuse a local split whose two sides are one file, and any split that reads what the
    `train` split reads (two evaluation splits may share data: newstest2014 and its filtered
    subset)."""
    root = dataset.get("root")
    for split, spec in dataset["splits"].items():
        if spec["source"] == "local":
            check_sides_apart(name, split, spec, dataset["langs"], root)
    train = dataset["splits"].get("train")
    if train is None:
        return
    for split, spec in dataset["splits"].items():
        shared = split != "train" and shared_data(("train", train), (split, spec), root)
        if shared:
            raise InputError(
                f"dataset {name!r}: its {split!r} split reads {shared}, which `train` reads "
                f"too: a model would be tuned or tested on sentences it trained on. Give "
                f"{split!r} data of its own"
            )


def check_sides_apart(name: str, split: str, spec: dict, langs: list, root: str | None) -> None:
    files = [local_file(spec["paths"][lang], root) for lang in langs]
    if files[0] == files[1]:
        raise InputError(
            f"dataset {name!r}, split {split!r}: `paths.{langs[0]}` and `paths.{langs[1]}` are "
            f"one file ({spec['paths'][langs[1]]}): the target would be the source, and a model "
            f"would learn to copy. Point `paths.{langs[1]}` at the {langs[1]} file"
        )


def shared_data(first: tuple[str, dict], second: tuple[str, dict], root: str | None) -> str | None:
    """What two splits ((name, entry) each) both read, in words; None: nothing."""
    (first_name, one), (second_name, other) = first, second
    if one["source"] != other["source"]:
        return None
    source = one["source"]
    if source == "local":
        files = {local_file(path, root) for path in one["paths"].values()}
        same = [path for path in other["paths"].values() if local_file(path, root) in files]
        return f"the file {same[0]}" if same else None
    if source == "toy":  # a partition's sentences, whatever the seed
        partition = other.get("partition") or second_name
        same = (one.get("partition") or first_name) == partition
        return f"the toy's {partition!r} partition" if same else None
    if source == "ptb":
        return shared_documents(one, other, root)
    keys = {"hf": ("path", "name", "split", "data_files"), "sacrebleu": ("test_set", "langpair")}
    if all(one.get(key) == other.get(key) for key in keys[source]):
        return f"the same {source} data ({', '.join(str(other.get(k)) for k in keys[source])})"
    return None


def local_file(path: str, root: str | None) -> str:
    """A local path or URL as one name for one file: links and `..` resolved."""
    from aiayn.data.sources import is_url, resolve_location

    location = resolve_location(os.path.expanduser(path), root and os.path.expanduser(root))
    return location if is_url(location) else os.path.realpath(location)


def shared_documents(one: dict, other: dict, root: str | None) -> str | None:
    """Treebank documents both splits select from the same folder, as a range."""
    from aiayn.parsing.treebank import treebank_folder

    folders = {os.path.realpath(treebank_folder(spec, root)) for spec in (one, other)}
    if len(folders) > 1:
        return None
    (first, last), (other_first, other_last) = document_range(one), document_range(other)
    low, high = max(first, other_first), min(last, other_last)
    return f"documents {low:04d}-{high:04d}" if low <= high else None


def document_range(spec: dict) -> tuple[int, int]:
    """The documents a split's `sections` and `documents` select, as one inclusive range."""
    from aiayn.parsing.treebank import parse_range

    first, last = 0, LAST_DOCUMENT
    if spec.get("sections") is not None:
        sections = parse_range(spec["sections"], 2, "sections")
        first, last = sections[0] * 100, sections[1] * 100 + 99
    if spec.get("documents") is not None:
        documents = parse_range(spec["documents"], 4, "documents")
        first, last = max(first, documents[0]), min(last, documents[1])
    return first, last


def check_tuned_apart(experiment: str, dataset: dict, dev: str, evaluated: list[str]) -> None:
    """Refuse an evaluation split that reads what the experiment's dev split reads under
    another name: the checkpoints and settings chosen on dev would be scored on the same data
    as if it were unseen. (Scoring the dev split itself, by its name, is a dev score.)"""
    splits, root = dataset["splits"], dataset.get("root")
    for split in evaluated:
        shared = split != dev and shared_data((dev, splits[dev]), (split, splits[split]), root)
        if shared:
            raise InputError(
                f"experiment {experiment!r}: its evaluation split {split!r} reads {shared}, "
                f"which its dev split {dev!r} reads too: what is chosen on dev would be scored "
                f"as if unseen. Give {split!r} data of its own, or take it out of `eval_splits`"
            )
