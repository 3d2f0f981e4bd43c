"""Helpers shared by the rules: config look-ups, file names, and code versions for rerun triggers."""

import hashlib
import sys
from pathlib import Path

SRC_DIR = Path(workflow.basedir) / "src" / "aiayn"
# The Snakefile itself imports the package from this checkout, installed or not.
sys.path.insert(0, str(SRC_DIR.parent))

from aiayn.data.sources import is_url, local_files
from aiayn.experiments import resolve, split_prefixes
from aiayn.workflow import use_this_checkout

use_this_checkout(SRC_DIR.parent)


wildcard_constraints:
    dataset=r"[A-Za-z0-9_]+",
    split=r"[A-Za-z0-9_]+",
    src=r"[a-z]{2,3}",
    tgt=r"[a-z]{2,3}",
    lang=r"[a-z]{2,3}",
    experiment=r"[A-Za-z0-9_.]+",


def code_version(*modules):
    """Hash of the named src/aiayn modules, passed as a param so that editing them reruns the rule.

    Snakemake's code trigger sees only the script file, not what it imports.
    """
    digest = hashlib.sha256()
    for module in modules:
        digest.update((SRC_DIR / module).read_bytes())
    return digest.hexdigest()[:16]


def dataset(name):
    try:
        return config["datasets"][name]
    except KeyError:
        raise ValueError(
            f"dataset {name!r} is not defined under `datasets` in the config "
            f"(defined: {sorted(config['datasets'])})"
        ) from None


def langs(name):
    return dataset(name)["langs"]


def pair(name):
    return "{}-{}".format(*langs(name))


def split_spec(wildcards):
    """The config entry of a split, after checking the file name's language pair against it."""
    spec = dataset(wildcards.dataset)
    if [wildcards.src, wildcards.tgt] != spec["langs"]:
        raise ValueError(
            f"dataset {wildcards.dataset!r} translates {pair(wildcards.dataset)}, "
            f"not {wildcards.src}-{wildcards.tgt}"
        )
    try:
        return spec["splits"][wildcards.split]
    except KeyError:
        raise ValueError(
            f"dataset {wildcards.dataset!r} has no split {wildcards.split!r} "
            f"(splits: {sorted(spec['splits'])})"
        ) from None


def local_inputs(wildcards):
    """Local files of a `local` split, so that Snakemake reruns the download when they change."""
    spec = split_spec(wildcards)
    if spec["source"] != "local":
        return []
    root = dataset(wildcards.dataset)["root"]
    return [
        f for f in local_files(spec, langs(wildcards.dataset), root) if not is_url(f)
    ]


def split_files(stage, name, split, suffixes=("",)):
    """The files of one split at one stage, both languages, each with every suffix."""
    prefixes = split_prefixes(name, langs(name), split, stage)
    return [prefix + suffix for prefix in prefixes for suffix in suffixes]


def prepared_data_files():
    """The BPE model and binarized splits of every dataset in `prepare` or used by an experiment."""
    files = []
    used = [entry["dataset"] for entry in config.get("experiments", [])]
    for name in dict.fromkeys(config.get("prepare", []) + used):
        files.append(f"data/{name}/spm/bpe.model")
        for split in dataset(name)["splits"]:
            files += split_files("bin", name, split, (".bin", ".idx"))
    return files


def clean_settings(wildcards):
    """Only the training split is filtered, so only its job depends on the clean settings."""
    return dataset(wildcards.dataset)["clean"] if wildcards.split == "train" else {}


def experiment(name):
    for entry in config.get("experiments", []):
        if entry["name"] == name:
            return entry
    raise ValueError(
        f"experiment {name!r} is not in `experiments` "
        f"(defined: {[e['name'] for e in config.get('experiments', [])]})"
    )


def experiment_spec(name):
    """What the trainer reads (runs/{name}/experiment.json): model, training settings, data."""
    return resolve(experiment(name), config["datasets"])


def experiment_data(name, role):
    """The binarized train or dev split an experiment reads."""
    entry = experiment(name)
    split = "train" if role == "train" else entry["dev_split"]
    return split_files("bin", entry["dataset"], split, (".bin", ".idx"))


def experiment_files():
    """The averaged model of every experiment."""
    names = [entry["name"] for entry in config.get("experiments", [])]
    if len(set(names)) != len(names):
        raise ValueError(f"experiment names must be unique: {names}")
    return [f"runs/{name}/averaged.pt" for name in names]


def check_experiments():
    """Resolve every experiment once at start-up, so a bad one is reported before any job runs."""
    for entry in config.get("experiments", []):
        resolve(entry, config["datasets"])
