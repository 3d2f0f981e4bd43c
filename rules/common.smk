"""Helpers shared by the rules: config look-ups, the files each rule reads, and code versions.

File names come from aiayn.paths; the config's entries are read here and nowhere else in the
rules. Helpers named `*_entry` return a config entry, `*_files` lists of files for targets, and
input functions (taking `wildcards`) the inputs of one job.
"""

import hashlib
import re
import sys
from pathlib import Path

SRC_DIR = Path(workflow.basedir) / "src" / "aiayn"
SCRIPTS_DIR = Path(workflow.basedir) / "workflow_scripts"
# The Snakefile itself imports the package from this checkout, installed or not.
sys.path.insert(0, str(SRC_DIR.parent))

from aiayn import paths
from aiayn.data.sources import is_url, local_files
from aiayn.errors import InputError
from aiayn.experiments import resolve, resolve_evaluation
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


def names_pattern(names):
    """A wildcard regex matching exactly these names (nothing when there are none)."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def other_names_pattern(names, characters):
    """A wildcard regex matching any name of `characters` but these."""
    if not names:
        return f"[{characters}]+"
    return f"(?!(?:{names_pattern(names)})(?![{characters}]))[{characters}]+"


# ---- datasets ---------------------------------------------------------------------------


def dataset_entry(name):
    try:
        return config["datasets"][name]
    except KeyError:
        raise ValueError(
            f"dataset {name!r} is not defined under `datasets` in the config "
            f"(defined: {sorted(config['datasets'])})"
        ) from None


def dataset_pair(name):
    """The dataset's language pair as file names spell it: en-de."""
    return "-".join(dataset_entry(name)["langs"])


def split_sides(stage, name, split, suffixes=("",)):
    """The files of one split at one stage, source side then target, each with every suffix."""
    sides = paths.split_sides(stage, name, split, dataset_entry(name)["langs"])
    return [side + suffix for side in sides for suffix in suffixes]


def split_source(name, split):
    """Where a split comes from (its `splits` entry), also named in score files and tables."""
    try:
        return dataset_entry(name)["splits"][split]
    except KeyError:
        raise ValueError(
            f"dataset {name!r} has no split {split!r} "
            f"(splits: {sorted(dataset_entry(name)['splits'])})"
        ) from None


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


def prepared_data_files():
    """The BPE model and binarized splits of every dataset in `prepare` or used by an experiment."""
    files = []
    used = [entry["dataset"] for entry in config["experiments"]]
    for name in dict.fromkeys(config["prepare"] + used):
        files.append(paths.subword_file("model", name))
        for split in dataset_entry(name)["splits"]:
            files += split_sides("bin", name, split, (".bin", ".idx"))
    return files


# ---- experiments ------------------------------------------------------------------------


def experiment_names():
    return [entry["name"] for entry in config["experiments"]]


def experiment_entry(name):
    for entry in config["experiments"]:
        if entry["name"] == name:
            return entry
    raise ValueError(
        f"experiment {name!r} is not in `experiments` (defined: {experiment_names()})"
    )


def experiment_dataset(name):
    """The name of the dataset an experiment trains and is scored on."""
    return experiment_entry(name)["dataset"]


def trainer_spec(name):
    """What the trainer reads (runs/{name}/experiment.json): model, training settings, data."""
    return resolve(experiment_entry(name), config["datasets"])


def evaluation_settings(name):
    """Decode settings, evaluation splits and paper row of an experiment."""
    return resolve_evaluation(experiment_entry(name), config["datasets"])


def check_experiments():
    """Resolve every experiment once at start-up, so a bad one is reported before any job runs."""
    names = experiment_names()
    if len(set(names)) != len(names):
        raise InputError(f"experiment names must be unique: {names}")
    for entry in config["experiments"]:
        resolve(entry, config["datasets"])
        resolve_evaluation(entry, config["datasets"])
    baseline = config["report"]["baseline"]
    if baseline is not None and baseline not in names:
        raise InputError(
            f"report.baseline {baseline!r} is not an experiment of the config "
            f"(experiments: {names}); name one, or leave it out to test each "
            "experiment against the first of its dataset"
        )


def parsing_experiments():
    """Experiments that parse (Table 4): scored by EVALB, not BLEU."""
    treebanks = treebank_datasets()
    return [
        name for name in experiment_names() if experiment_dataset(name) in treebanks
    ]


def translation_experiments():
    """Experiments that translate (Tables 2 and 3, the figures)."""
    parsing = parsing_experiments()
    return [name for name in experiment_names() if name not in parsing]


def averaged_models():
    """The averaged model of every experiment."""
    return [paths.averaged_model(name) for name in experiment_names()]


def scored_decodes(name):
    """(checkpoint, split) pairs scored for an experiment: the averaged model on the dev split and
    every evaluation split (Table 2), the last checkpoint on the dev split (Table 3, as the paper:
    no averaging; beside the averaged one it makes the averaging figure)."""
    dev = experiment_entry(name)["dev_split"]
    splits = dict.fromkeys([dev, *evaluation_settings(name)["eval_splits"]])
    return [("averaged", split) for split in splits] + [("last", dev)]


def baseline_of(name):
    """The experiment a translation experiment's scores are tested against: `report.baseline`
    where it translates the same dataset, else the dataset's first experiment."""
    same_data = [
        other
        for other in translation_experiments()
        if experiment_dataset(other) == experiment_dataset(name)
    ]
    chosen = config["report"]["baseline"]
    return chosen if chosen in same_data else same_data[0]


def score_files(checkpoint=None, names=None):
    """Score files of every experiment (or of `names`), or of its averaged or last model only."""
    files = []
    for name in experiment_names() if names is None else names:
        for kind, split in scored_decodes(name):
            if checkpoint in (None, kind):
                files.append(paths.score_file(name, kind, split))
    return files


def translation_files():
    """The translations (or linearized trees) behind every score file: a deliverable of their
    own, so that one deleted (a forced decode killed midway) is made again though its score
    file is still there."""
    return [
        paths.decode_output("hyp", name, kind, split)
        for name in experiment_names()
        for kind, split in scored_decodes(name)
    ]


# ---- input functions: the files one job reads ---------------------------------------------


def checked_split_source(wildcards):
    """The split's source, after checking the file name's language pair against the dataset."""
    langs = dataset_entry(wildcards.dataset)["langs"]
    if [wildcards.src, wildcards.tgt] != langs:
        raise ValueError(
            f"dataset {wildcards.dataset!r} translates {dataset_pair(wildcards.dataset)}, "
            f"not {wildcards.src}-{wildcards.tgt}"
        )
    return split_source(wildcards.dataset, wildcards.split)


def local_inputs(wildcards):
    """Local files of a `local` split, so that Snakemake reruns the download when they change."""
    spec = checked_split_source(wildcards)
    if spec["source"] != "local":
        return []
    entry = dataset_entry(wildcards.dataset)
    return [
        f for f in local_files(spec, entry["langs"], entry["root"]) if not is_url(f)
    ]


def treebank_files(wildcards):
    """The .mrg files of a treebank split, so that Snakemake reruns it when they change; none
    when they cannot be found (the job then says why)."""
    try:
        spec = checked_split_source(wildcards)
        return select_files(spec, dataset_entry(wildcards.dataset)["root"])
    except InputError:
        return []


def trainer_data(wildcards):
    """The binarized train and dev splits an experiment reads."""
    name = experiment_dataset(wildcards.experiment)
    dev = experiment_entry(wildcards.experiment)["dev_split"]
    return {
        "train_data": split_sides("bin", name, "train", (".bin", ".idx")),
        "dev_data": split_sides("bin", name, dev, (".bin", ".idx")),
    }


def decode_model(wildcards):
    """The averaged model, or train.json (which names the last checkpoint's weights)."""
    if wildcards.checkpoint == "averaged":
        return paths.averaged_model(wildcards.experiment)
    return paths.train_summary(wildcards.experiment)


def decode_source(wildcards):
    """The binarized source side of the split being decoded."""
    name = experiment_dataset(wildcards.experiment)
    return split_sides("bin", name, wildcards.split, (".bin", ".idx"))[:2]


def reference_text(wildcards):
    """The target side of the split being scored, as the clean stage passed it (verbatim)."""
    name = experiment_dataset(wildcards.experiment)
    return split_sides("clean", name, wildcards.split)[1]


def parser_words(wildcards):
    """The source side of a parsing split: the words the output trees are built over."""
    name = experiment_dataset(wildcards.experiment)
    return split_sides("clean", name, wildcards.split)[0]


def gold_trees(wildcards):
    name = experiment_dataset(wildcards.experiment)
    return paths.gold_trees(name, wildcards.split, dataset_pair(name))


def subword_model(wildcards):
    return paths.subword_file("model", experiment_dataset(wildcards.experiment))


def baseline_hypotheses(wildcards):
    """The baseline's output on the same split by the same kind of model, for the paired test;
    none for the baseline itself or where it does not decode that split."""
    baseline = baseline_of(wildcards.experiment)
    if baseline == wildcards.experiment:
        return []
    if (wildcards.checkpoint, wildcards.split) not in scored_decodes(baseline):
        return []
    return [paths.decode_output("hyp", baseline, wildcards.checkpoint, wildcards.split)]


# ---- report -------------------------------------------------------------------------------

TABLES = ("params", "table2", "table3", "table4")
FIGURES = ("learning_rate", "loss_curves", "averaging")


def attention_figures():
    """The attention maps' output patterns: each sentence's heads, and the chosen word's."""
    count = len(config["report"]["attention_sentences"])
    views = [f"sentence{i + 1}" for i in range(count)] + ["word"]
    return [
        paths.attention_figure(view, suffix)
        for view in views
        for suffix in ("png", "pdf")
    ]


def report_files():
    """Tables and figures of the trained experiments: Tables 2 and 3 and the figures of those
    that translate, Table 4 of those that parse, and the parameter counts always."""
    files = [paths.table_file("params")]
    if parsing_experiments():
        files.append(paths.table_file("table4"))
    names = translation_experiments()
    if names:
        files += [paths.table_file(table) for table in ("table2", "table3")]
        files += [paths.figure_file(figure) for figure in FIGURES]
        files += [
            paths.attention_figure("sentence1", experiment=name) for name in names
        ]
    return files


def report_experiments(names):
    """What the tables and figures need to know of each experiment besides its files."""
    described = []
    for name in names:
        spec = trainer_spec(name)
        described.append(
            {
                "name": name,
                "pair": dataset_pair(experiment_dataset(name)),
                "dev_split": experiment_entry(name)["dev_split"],
                "paper_row": evaluation_settings(name)["paper_row"],
                "model": spec["model"],
                "train": spec["train"],
            }
        )
    return described


def reported_experiments(name):
    """The experiments a table or figure shows: Table 4 the parsers, the parameter table none
    (it counts the presets), the others the translators."""
    if name == "params":
        return []
    return parsing_experiments() if name == "table4" else translation_experiments()


def report_inputs(wildcards):
    """What a table or figure is drawn from: training summaries, scores, training records."""
    name = wildcards.get("table") or wildcards.get("figure")
    names = reported_experiments(name)
    inputs = {"summaries": [paths.train_summary(n) for n in names]}
    if name in ("table2", "table4"):
        inputs["scores"] = score_files("averaged", names)
    elif name == "table3":
        inputs["scores"] = score_files("last", names)
    elif name == "averaging":
        inputs["scores"] = [
            paths.score_file(n, kind, experiment_entry(n)["dev_split"])
            for n in names
            for kind in ("last", "averaged")
        ]
    if name == "table4":
        inputs["train_records"] = [
            paths.split_record(
                "clean",
                experiment_dataset(n),
                "train",
                dataset_pair(experiment_dataset(n)),
            )
            for n in names
        ]
    return inputs


def vocabulary_sizes():
    """The BPE vocabulary size of each dataset an experiment translates, for the parameter
    counts beside the paper's (which are at the paper's vocabulary)."""
    used = dict.fromkeys(experiment_dataset(name) for name in translation_experiments())
    return {name: dataset_entry(name)["subword"]["vocab_size"] for name in used}
