"""Helpers shared by the rules: config look-ups, file names, and code versions for rerun triggers."""

import hashlib
import re
import sys
from pathlib import Path

SRC_DIR = Path(workflow.basedir) / "src" / "aiayn"
SCRIPTS_DIR = Path(workflow.basedir) / "workflow_scripts"
# The Snakefile itself imports the package from this checkout, installed or not.
sys.path.insert(0, str(SRC_DIR.parent))

from aiayn.data.sources import is_url, local_files
from aiayn.errors import InputError
from aiayn.experiments import (
    averaged_model_path,
    resolve,
    resolve_evaluation,
    split_prefixes,
    subword_model_path,
)
from aiayn.parsing.treebank import select_files
from aiayn.workflow import package_modules, use_this_checkout

use_this_checkout(SRC_DIR.parent)


wildcard_constraints:
    dataset=r"[A-Za-z0-9_]+",
    split=r"[A-Za-z0-9_]+",
    src=r"[a-z]{2,3}",
    tgt=r"[a-z]{2,3}",
    lang=r"[a-z]{2,3}",
    experiment=r"[A-Za-z0-9_.]+",
    checkpoint=r"averaged|last",


def code_version(script):
    """Hash of the src/aiayn modules that workflow_scripts/{script} runs, passed as a param so
    that editing any of them reruns the rule (Snakemake's code trigger sees the script only).
    """
    digest = hashlib.sha256()
    for path in package_modules(SCRIPTS_DIR / script, SRC_DIR.parent):
        digest.update(path.relative_to(SRC_DIR).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
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


def treebank_datasets():
    """Datasets whose splits are Penn Treebank files: parsed (Table 4), not translated."""
    names = []
    for name, spec in config["datasets"].items():
        sources = {split["source"] for split in spec["splits"].values()}
        if "ptb" in sources and sources != {"ptb"}:
            raise ValueError(
                f"dataset {name!r} mixes `ptb` splits with {sorted(sources - {'ptb'})} ones: "
                "every split of a parsing dataset must come from treebank files (its gold "
                "trees are read from them); put the other splits in a dataset of their own"
            )
        if "ptb" in sources:
            names.append(name)
    return names


def names_pattern(names):
    """A wildcard regex matching exactly these names (nothing when there are none)."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def other_names_pattern(names, characters):
    """A wildcard regex matching any name of `characters` but these."""
    if not names:
        return f"[{characters}]+"
    return f"(?!(?:{names_pattern(names)})(?![{characters}]))[{characters}]+"


def treebank_files(wildcards):
    """The .mrg files of a treebank split, so that Snakemake reruns it when they change; none
    when they cannot be found (the job then says why)."""
    try:
        return select_files(split_spec(wildcards), dataset(wildcards.dataset)["root"])
    except InputError:
        return []


def split_files(stage, name, split, suffixes=("",)):
    """The files of one split at one stage, both languages, each with every suffix."""
    prefixes = split_prefixes(name, langs(name), split, stage)
    return [prefix + suffix for prefix in prefixes for suffix in suffixes]


def prepared_data_files():
    """The BPE model and binarized splits of every dataset in `prepare` or used by an experiment."""
    files = []
    used = [entry["dataset"] for entry in config.get("experiments", [])]
    for name in dict.fromkeys(config.get("prepare", []) + used):
        files.append(subword_model_path(name))
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
    return [averaged_model_path(name) for name in names]


def check_experiments():
    """Resolve every experiment once at start-up, so a bad one is reported before any job runs."""
    for entry in config.get("experiments", []):
        resolve(entry, config["datasets"])
        resolve_evaluation(entry, config["datasets"])
    baseline = config["report"].get("baseline")
    if baseline is not None and baseline not in experiment_names():
        raise InputError(
            f"report.baseline {baseline!r} is not an experiment of the config "
            f"(experiments: {experiment_names()}); name one, or leave it out to test each "
            "experiment against the first of its dataset"
        )


def evaluation(name):
    """Decode settings, evaluation splits and paper row of an experiment."""
    return resolve_evaluation(experiment(name), config["datasets"])


def experiment_names():
    return [entry["name"] for entry in config.get("experiments", [])]


def parsing_experiments():
    """Experiments that parse (Table 4): scored by EVALB, not BLEU."""
    treebanks = treebank_datasets()
    return [
        e["name"] for e in config.get("experiments", []) if e["dataset"] in treebanks
    ]


def translation_experiments():
    """Experiments that translate (Tables 2 and 3, the figures)."""
    parsing = parsing_experiments()
    return [name for name in experiment_names() if name not in parsing]


def evaluations(name):
    """(checkpoint, split) pairs scored for an experiment: the averaged model on the dev split and
    every evaluation split (Table 2), the last checkpoint on the dev split (Table 3, as the paper:
    no averaging; beside the averaged one it makes the averaging figure)."""
    dev = experiment(name)["dev_split"]
    splits = dict.fromkeys([dev, *evaluation(name)["eval_splits"]])
    return [("averaged", split) for split in splits] + [("last", dev)]


def baseline_of(name):
    """The experiment a translation experiment's scores are tested against: `report.baseline`
    where it translates the same dataset, else the dataset's first experiment."""
    dataset_name = experiment(name)["dataset"]
    same_data = [
        other
        for other in translation_experiments()
        if experiment(other)["dataset"] == dataset_name
    ]
    chosen = config["report"].get("baseline")
    return chosen if chosen in same_data else same_data[0]


def baseline_hypotheses(wildcards):
    """The baseline's output on the same split by the same kind of model, for the paired test;
    none for the baseline itself or where it does not decode that split."""
    if wildcards.experiment in parsing_experiments():
        return []
    baseline = baseline_of(wildcards.experiment)
    if baseline == wildcards.experiment:
        return []
    if (wildcards.checkpoint, wildcards.split) not in evaluations(baseline):
        return []
    return [f"runs/{baseline}/decode/{wildcards.checkpoint}/{wildcards.split}.hyp"]


def score_files(checkpoint=None, names=None):
    """Score files of every experiment (or of `names`), or of its averaged or last model only."""
    files = []
    for name in experiment_names() if names is None else names:
        for kind, split in evaluations(name):
            if checkpoint in (None, kind):
                files.append(f"results/scores/{name}/{kind}/{split}.json")
    return files


def dev_score_files():
    """The last checkpoint's and the averaged model's scores on each experiment's dev split."""
    return [
        f"results/scores/{name}/{kind}/{experiment(name)['dev_split']}.json"
        for name in translation_experiments()
        for kind in ("last", "averaged")
    ]


def decode_model(wildcards):
    """The averaged model, or train.json (which names the last checkpoint's weights)."""
    if wildcards.checkpoint == "averaged":
        return averaged_model_path(wildcards.experiment)
    return f"runs/{wildcards.experiment}/train.json"


def decode_source(wildcards):
    """The binarized source side of the split being decoded."""
    name = experiment(wildcards.experiment)["dataset"]
    prefix = split_prefixes(name, langs(name), wildcards.split, "bin")[0]
    return [f"{prefix}.bin", f"{prefix}.idx"]


def reference_text(wildcards):
    """The target side of the split, as the clean stage passed it through (verbatim)."""
    name = experiment(wildcards.experiment)["dataset"]
    return split_prefixes(name, langs(name), wildcards.split, "clean")[1]


def input_words(wildcards):
    """The source side of a parsing split (the words the trees are built over)."""
    name = experiment(wildcards.experiment)["dataset"]
    return split_prefixes(name, langs(name), wildcards.split, "clean")[0]


def experiment_linearization(name):
    """How the trees of a parsing experiment's dataset are written as sequences."""
    return dataset(experiment(name)["dataset"])["linearization"]


def gold_trees(wildcards):
    """The cleaned treebank trees of a parsing split, written beside its raw text."""
    name = experiment(wildcards.experiment)["dataset"]
    return f"data/{name}/raw/{wildcards.split}.{pair(name)}.trees"


def split_spec_of(name, split):
    """Where an experiment's split comes from (named in the score files and tables)."""
    return dataset(experiment(name)["dataset"])["splits"][split]


def subword_model(wildcards):
    return subword_model_path(experiment(wildcards.experiment)["dataset"])


def report_files():
    """Tables and figures of the trained experiments (none when the config trains nothing):
    Tables 2 and 3 and the figures of those that translate, Table 4 of those that parse.
    """
    files = ["results/tables/table4.md"] if parsing_experiments() else []
    names = translation_experiments()
    if not names:
        return files
    files += [f"results/tables/{table}.md" for table in ("table2", "table3")]
    files += [
        f"results/figures/{figure}.pdf"
        for figure in ("learning_rate", "loss_curves", "averaging")
    ]
    files += [f"results/figures/attention/{name}.sentence1.pdf" for name in names]
    return files


def report_experiments(names=None):
    """What the tables need to know of each experiment (or of `names`) besides its files."""
    described = []
    for name in translation_experiments() if names is None else names:
        spec = experiment_spec(name)
        described.append(
            {
                "name": name,
                "pair": pair(experiment(name)["dataset"]),
                "dev_split": experiment(name)["dev_split"],
                "paper_row": evaluation(name)["paper_row"],
                "model": spec["model"],
                "train": spec["train"],
            }
        )
    return described
