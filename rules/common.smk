"""What only Snakemake needs: the plan of the config, wildcard patterns, code versions and the
input, params and resources functions (taking `wildcards`) that give one job's files and
settings: named, so that every rule reads as a list of what it needs (Snakemake's best practices).

File names come from aiayn.config.paths, config look-ups from `plan` (aiayn.config.plan.Plan,
plain Python and unit-tested there), through its four parts: `plan.data` (datasets and splits),
`plan.runs` (experiments, seeds, settings, baselines), `plan.outputs` (models, translations,
scores) and `plan.report` (tables, figures, the run record).
"""

import os
import re
import sys
import tempfile
from pathlib import Path

# CHECKOUT: the Snakefile's folder; the Snakefile put its src/ first on sys.path, so that the
# package imported here is this checkout's, installed or not.
SRC_DIR = CHECKOUT / "src" / "aiayn"
SCRIPTS_DIR = CHECKOUT / "workflow_scripts"

from aiayn.config import paths
from aiayn.data.digests import source_digests
from aiayn.data.sources import is_url, local_files
from aiayn.errors import InputError
from aiayn.parsing.treebank import select_files
from aiayn.config.plan import FIGURES, PARSING_FIGURES, TABLES, Plan
from aiayn.report.front_page import front_page
from aiayn.report.run_record import remember_invocation, write_run_record
from aiayn.config.versions import code_version as script_code_version, study_versions
from aiayn.config.workflow import use_this_checkout

use_this_checkout(SRC_DIR.parent)
plan = Plan(config)
if workflow.is_main_process:
    # the command typed, for the run record (aiayn.report.run_record)
    remember_invocation(sys.argv)


wildcard_constraints:
    dataset=r"[A-Za-z0-9_]+",
    split=r"[A-Za-z0-9_]+",
    src=r"[a-z]{2,3}",
    tgt=r"[a-z]{2,3}",
    lang=r"[a-z]{2,3}",
    experiment=r"[A-Za-z0-9_][A-Za-z0-9_.]*",
    checkpoint=r"averaged|last",
    format=r"hf|ct2(-[a-z0-9_]+)?",  # ct2-<weight type>: the export checks CTranslate2's list


def code_version(script):
    """What workflow_scripts/{script} and the src/aiayn modules it runs do (not how they are
    written: aiayn.config.code_meaning), passed as a param so that a change of any of them
    reruns the rule (Snakemake's own code trigger sees the script's modification time only).
    """
    return script_code_version(SCRIPTS_DIR / script, CHECKOUT)


def names_pattern(names):
    """A wildcard regex matching exactly these names (nothing when there are none)."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def other_names_pattern(names, characters):
    """A wildcard regex matching any name of `characters` but these."""
    if not names:
        return f"[{characters}]+"
    return f"(?!(?:{names_pattern(names)})(?![{characters}]))[{characters}]+"


# ---- input functions: the files one job reads ---------------------------------------------


def checked_split_source(wildcards):
    """The split's source, after checking the file name's language pair against the dataset."""
    langs = plan.data.entry(wildcards.dataset)["langs"]
    if [wildcards.src, wildcards.tgt] != langs:
        raise ValueError(
            f"dataset {wildcards.dataset!r} translates {plan.data.pair(wildcards.dataset)}, "
            f"not {wildcards.src}-{wildcards.tgt}"
        )
    return plan.data.split_source(wildcards.dataset, wildcards.split)


def local_inputs(wildcards):
    """Local files of a `local` split, so that Snakemake reruns the download when they change."""
    spec = checked_split_source(wildcards)
    if spec["source"] != "local":
        return []
    entry = plan.data.entry(wildcards.dataset)
    return [
        f for f in local_files(spec, entry["langs"], entry["root"]) if not is_url(f)
    ]


def local_contents(wildcards):
    """The sha256 of each local file, a param: a file replaced with its old mtime (`cp -p`,
    `rsync -a`) reruns the download too. Where the files are (`root`) is not part of it.
    """
    return source_digests(local_inputs(wildcards))


def treebank_files(wildcards):
    """The .mrg files of a treebank split, so that Snakemake reruns it when they change; none
    when they cannot be found (the job then says why)."""
    try:
        spec = checked_split_source(wildcards)
        return select_files(spec, plan.data.entry(wildcards.dataset)["root"])
    except InputError:
        return []


def treebank_contents(wildcards):
    """The sha256 of each .mrg file, as local_contents."""
    return source_digests(treebank_files(wildcards))


def trainer_data(wildcards):
    """The binarized train and dev splits an experiment reads, and the files its dev monitor
    reads (a parser's dev parses, a translation's dev BLEU: experiments.dev_monitor)."""
    name = plan.runs.dataset(wildcards.experiment)
    dev = plan.runs.entry(wildcards.experiment)["dev_split"]
    monitor = plan.runs.trainer_spec(wildcards.experiment).get("dev_monitor", {})
    return {
        "train_data": plan.data.split_sides("bin", name, "train", (".bin", ".idx")),
        "dev_data": plan.data.split_sides("bin", name, dev, (".bin", ".idx")),
        "subword": paths.subword_file("model", name),  # its hash goes into the weights
        "dev_monitor": monitor.get("inputs", []),
    }


def decode_model(wildcards):
    """The averaged model, or train.json (which names the last checkpoint's weights)."""
    if wildcards.checkpoint == "averaged":
        return paths.averaged_model(wildcards.experiment)
    return paths.train_summary(wildcards.experiment)


def decode_source(wildcards):
    """The binarized source side of the split being decoded."""
    name = plan.runs.dataset(wildcards.experiment)
    return plan.data.split_sides("bin", name, wildcards.split, (".bin", ".idx"))[:2]


def reference_text(wildcards):
    """The target side of the split being scored, as the clean stage passed it (verbatim)."""
    name = plan.runs.dataset(wildcards.experiment)
    return plan.data.split_sides("clean", name, wildcards.split)[1]


def parser_words(wildcards):
    """The source side of a parsing split: the words the output trees are built over."""
    name = plan.runs.dataset(wildcards.experiment)
    return plan.data.split_sides("clean", name, wildcards.split)[0]


def gold_trees(wildcards):
    name = plan.runs.dataset(wildcards.experiment)
    return paths.gold_trees(name, wildcards.split, plan.data.pair(name))


def tag_lexicon_sources(wildcards):
    """The training split's words and linearized trees, which `decode.constrain: lexicon` reads
    each word's tags from; nothing for other decodes."""
    decode = plan.runs.entry(wildcards.experiment)["decode"]
    if decode.get("constrain") != "lexicon":
        return []
    dataset = plan.runs.dataset(wildcards.experiment)
    return plan.data.split_sides("clean", dataset, "train")


def subword_model(wildcards):
    return paths.subword_file("model", plan.runs.dataset(wildcards.experiment))


def baseline_hypotheses(wildcards):
    """The baseline's output on the same split by the same kind of model, for the paired test;
    none for the baseline itself or where it does not decode that split."""
    baseline = plan.runs.baseline_of(wildcards.experiment)
    if not tested_against(baseline, wildcards):
        return []
    return [paths.decode_output("hyp", baseline, wildcards.checkpoint, wildcards.split)]


def tested_against(baseline, wildcards):
    """Whether the experiment of `wildcards` has a baseline other than itself that decodes the
    same split with the same kind of model."""
    if baseline == wildcards.experiment:
        return False
    return (wildcards.checkpoint, wildcards.split) in plan.runs.scored_decodes(baseline)


def seed_outputs(group, wildcards):
    """Every seed's output of an experiment on the split being summarised."""
    return [
        paths.decode_output("hyp", run, wildcards.checkpoint, wildcards.split)
        for run in plan.runs.seeds_of(group)
    ]


def baseline_seed_outputs(wildcards):
    """The baseline experiment's outputs, every seed, for the seed-aware test; none for the
    baseline itself or where it does not decode that split."""
    baseline = plan.runs.baseline_group(wildcards.experiment)
    if not tested_against(baseline, wildcards):
        return []
    return seed_outputs(baseline, wildcards)


# ---- params and resources: one job's settings ---------------------------------------------


def dataset_root(wildcards):
    """Where the dataset's local files are (its `root`)."""
    return plan.data.entry(wildcards.dataset)["root"]


def is_training_split(wildcards):
    return wildcards.split == "train"


def clean_settings(wildcards):
    """The dataset's cleaning filters for its training split; none for the others, which are
    passed through checked, so that a filter's edit reruns the training split's job only.
    """
    if wildcards.split != "train":
        return {}
    return plan.data.entry(wildcards.dataset)["clean"]


def training_text(wildcards):
    """Both sides of the dataset's cleaned training split (what its BPE is learned from)."""
    return plan.data.split_sides("clean", wildcards.dataset, "train")


def subword_settings(wildcards):
    return plan.data.entry(wildcards.dataset)["subword"]


def binarized_prefixes(wildcards):
    return plan.data.split_sides("bin", wildcards.dataset, wildcards.split)


def treebank_linearization(wildcards):
    return plan.data.entry(wildcards.dataset)["linearization"]


def treebank_gold_trees(wildcards):
    return paths.gold_trees(
        wildcards.dataset, wildcards.split, plan.data.pair(wildcards.dataset)
    )


def treebank_training_trees(wildcards):
    return paths.gold_trees(
        wildcards.dataset, "train", plan.data.pair(wildcards.dataset)
    )


def dataset_test_set(wildcards):
    """The source spec of the dataset's split (what a score names as its test set)."""
    return plan.data.split_source(wildcards.dataset, wildcards.split)


def trainer_spec(wildcards):
    return plan.runs.trainer_spec(wildcards.experiment)


def train_processes(wildcards):
    """Processes (GPUs) per node of the experiment's training."""
    return plan.runs.entry(wildcards.experiment)["processes"]


def train_nodes(wildcards):
    return plan.runs.entry(wildcards.experiment)["nodes"]


def train_gres(wildcards):
    """The GPUs per node that SLURM allocates to the training job."""
    return f"gpu:{train_processes(wildcards)}"


def averaged_checkpoints(wildcards):
    """How many of the last checkpoints rule average averages."""
    return plan.runs.entry(wildcards.experiment)["train"]["average_last"]


def decode_settings(wildcards):
    return plan.runs.entry(wildcards.experiment)["decode"]


def experiment_test_set(wildcards):
    """The source spec of the split an experiment's decode is scored on."""
    return plan.data.split_source(
        plan.runs.dataset(wildcards.experiment), wildcards.split
    )


def experiment_linearization(wildcards):
    return plan.data.entry(plan.runs.dataset(wildcards.experiment))["linearization"]


def target_language(wildcards):
    """The language an experiment translates into (sacreBLEU's tokenizer follows it)."""
    return plan.data.entry(plan.runs.dataset(wildcards.experiment))["langs"][1]


def baseline_experiment(wildcards):
    return plan.runs.baseline_of(wildcards.experiment)


def baseline_group(wildcards):
    return plan.runs.baseline_group(wildcards.experiment)


def group_seed_outputs(wildcards):
    """Every seed's output of the experiment being summarised."""
    return seed_outputs(wildcards.experiment, wildcards)


def seed_runs(wildcards):
    return plan.runs.seeds_of(wildcards.experiment)


def run_seeds(wildcards):
    """The training seed of each of seed_runs, in the same order."""
    return [plan.runs.entry(run)["train"]["seed"] for run in seed_runs(wildcards)]


def shown_experiments(wildcards):
    """What the table or figure shows of each of its experiments."""
    name = wildcards.get("table") or wildcards.get("figure")
    return plan.report.described(plan.report.shown(name))


def training_sources(wildcards):
    """Each shown experiment's training split source (Table 4 names each parser's treebank)."""
    return {
        name: plan.data.split_source(plan.runs.dataset(name), "train")
        for name in plan.report.shown(wildcards.table)
    }


# ---- report -------------------------------------------------------------------------------


def record_study_run(output, log):
    """Write the study's run record, with the command the main process remembered."""
    record = write_run_record(
        output,
        study=plan.study,
        configfiles=[
            str(f) for f in workflow.configfiles
        ],  # a deploying workflow's too
        root=CHECKOUT,
        experiments={
            name: (paths.train_summary(name), plan.runs.decode_settings(name))
            for name in plan.runs.names()
        },
        scores=plan.outputs.score_files(),
        seed_scores=plan.outputs.seed_score_files(),
        left_out=absent,  # optional datasets without data (the Snakefile's)
        config_overrides=dict(workflow.config_settings.config),  # --config
        versions=study_versions(plan, CHECKOUT),
    )
    Path(log).write_text(
        f"{output}: {len(record['experiments'])} experiments, {len(record['scores'])} "
        f"scores, commit {record['commit']}\n",
        encoding="utf-8",
    )


def report_front_page():
    """The HTML report's front page for this study (aiayn.report.front_page), written where
    Snakemake keeps its own state; the main process writes it (only when it changed), its jobs
    only name it. Where that folder is a colleague's that this user cannot write (umask 077 on
    a shared folder), the page goes to this user's temporary folder instead, with a warning:
    a dry run or a run must not die of the report's front page."""
    page = Path.cwd() / ".snakemake" / "aiayn" / f"report_{plan.study}.rst"
    if not workflow.is_main_process:
        return str(page)
    text = front_page(plan.study, plan.runs.groups(), Path.cwd())
    try:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(text, encoding="utf-8")
    except OSError as err:
        fallback = (
            Path(tempfile.gettempdir()) / f"aiayn-{os.getuid()}-report_{plan.study}.rst"
        )
        fallback.write_text(text, encoding="utf-8")
        logger.warning(
            f"the report's front page cannot be written to {page} ({err.strerror}); it is "
            f"{fallback} instead (make {page.parent} writable for you to keep it there)"
        )
        return str(fallback)
    return str(page)


def report_inputs(wildcards):
    """What a table or figure is drawn from: training summaries, scores, training records."""
    return plan.report.inputs(wildcards.get("table") or wildcards.get("figure"))
