"""What only Snakemake needs: the study's plan, the wildcards' patterns, and the functions with
real logic that give one job its files and settings.

The rules write their file patterns themselves (aiayn.config.paths writes the same ones for the
package; tests/test_paths.py checks that they agree) and look settings up with `lookup()`: a
dataset's `within=config`, a training run's `within=runs`, one row per run with its dataset's
splits, its baseline and its seeds (aiayn.config.plan, plain Python and unit-tested there).
"""

import re
import sys
from pathlib import Path

from aiayn.config.plan import FIGURES, PARSING_FIGURES, TABLES, Plan
from aiayn.config.versions import RUN_MODULES, stage_version
from aiayn.config.versions import code_version as script_code_version
from aiayn.config.workflow import use_this_checkout
from aiayn.data.digests import source_digests
from aiayn.data.sources import is_url, local_files
from aiayn.errors import InputError
from aiayn.parsing.treebank import select_files
from aiayn.report.run_record import record_study, remember_invocation

# CHECKOUT: the Snakefile's folder, whose src/ the Snakefile put first on sys.path
use_this_checkout(CHECKOUT / "src")
plan = Plan(config)
runs = plan.runs.sheet()
if workflow.is_main_process:
    # the command typed, for the run record (aiayn.report.run_record)
    remember_invocation(sys.argv)


wildcard_constraints:
    study=re.escape(plan.study),
    dataset=r"[A-Za-z0-9_]+",
    split=r"[A-Za-z0-9_]+",
    src=r"[a-z]{2,3}",
    tgt=r"[a-z]{2,3}",
    experiment=r"[A-Za-z0-9_][A-Za-z0-9_.]*",
    checkpoint=r"averaged|last",
    format=r"hf|ct2(-[a-z0-9_]+)?",  # ct2-<weight type>: the export checks CTranslate2's list


def code_version(script):
    """What workflow_scripts/{script} and the src/aiayn modules it runs do (not how
    they are written: aiayn.config.code_meaning): each such rule's `code` param."""
    return script_code_version(CHECKOUT / "workflow_scripts" / script, CHECKOUT)


def names_pattern(names):
    """A wildcard regex matching exactly these names (nothing when there are none)."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def other_names_pattern(names, characters):
    """A wildcard regex matching any name of `characters` but these."""
    if not names:
        return f"[{characters}]+"
    return f"(?!(?:{names_pattern(names)})(?![{characters}]))[{characters}]+"


# ---- a dataset's files ----------------------------------------------------------------------


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
    files = local_files(spec, entry["langs"], entry["root"])
    return [f for f in files if not is_url(f)]


def local_contents(wildcards):
    """The sha256 of each local file, a param: a file replaced with its old mtime
    (`cp -p`, `rsync -a`) reruns the download too. Not where they are (`root`)."""
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


def of_dataset(pattern, suffixes=("",)):
    """An input function: `pattern` with the wildcards, the language pair ({src}, {tgt}) of the
    job's dataset (its `{dataset}`, or its `{experiment}`'s) and a run's `{dev_split}` filled
    in; `{lang}` stands for each side, source first, each with every suffix."""

    def files(wildcards):
        known = dict(wildcards.items())
        if "experiment" in known:
            entry = plan.runs.entry(wildcards.experiment)
            known.update(dataset=entry["dataset"], dev_split=entry["dev_split"])
        known["src"], known["tgt"] = langs = plan.data.entry(known["dataset"])["langs"]
        sides = langs if "{lang}" in pattern else [""]
        found = [
            pattern.format(**known, lang=x) + end for x in sides for end in suffixes
        ]
        return found[0] if len(found) == 1 else found

    return files


def cleaning_filters(wildcards):
    """The dataset's cleaning filters for its training split; none for the others,
    passed through checked: a filter's edit reruns the training split's job only."""
    if wildcards.split != "train":
        return {}
    return config["datasets"][wildcards.dataset]["clean"]


def is_training_split(wildcards):
    return wildcards.split == "train"


# ---- a run's files and settings -------------------------------------------------------------


def dev_monitor_inputs(wildcards):
    """The files the experiment's dev monitor reads as it trains (a parser's dev parses, a
    translation's dev BLEU: aiayn.config.experiments.dev_monitor)."""
    monitor = plan.runs.trainer_spec(wildcards.experiment).get("dev_monitor", {})
    return monitor.get("inputs", [])


def trainer_spec(wildcards):
    """What the trainer reads (runs/{experiment}/experiment.json), every setting resolved."""
    return plan.runs.trainer_spec(wildcards.experiment)


def train_gres(wildcards):
    """The GPUs per node that SLURM allocates to the training job."""
    return f"gpu:{runs[wildcards.experiment]['processes']}"


def decode_model(wildcards):
    """The averaged model, or train.json (which names the last checkpoint's weights)."""
    if wildcards.checkpoint == "averaged":
        return "runs/{experiment}/averaged.safetensors".format(**wildcards)
    return "runs/{experiment}/train.json".format(**wildcards)


def tag_lexicon_sources(wildcards):
    """The training split's words and linearized trees, which `decode.constrain: lexicon` reads
    each word's tags from; nothing for other decodes."""
    if runs[wildcards.experiment]["decode"].get("constrain") != "lexicon":
        return []
    return of_dataset("data/{dataset}/clean/train.{src}-{tgt}.{lang}")(wildcards)


def hypotheses(names, wildcards):
    pattern = "runs/{experiment}/decode/{checkpoint}/{split}.hyp"
    return [pattern.format(**{**wildcards, "experiment": name}) for name in names]


def seed_hypotheses(wildcards):
    """Every seed's output of the experiment on the split being summarised."""
    return hypotheses(runs[wildcards.experiment]["seed_runs"], wildcards)


def baseline_hypotheses(seeds):
    """An input function: the baseline's output on the job's split by the same kind of model,
    its run of the same seed for the paired test or, with `seeds`, all its runs for the seed
    test; none for the baseline itself or where it does not decode that split."""

    def files(wildcards):
        baseline = runs[wildcards.experiment]["baseline_group" if seeds else "baseline"]
        decode = (wildcards.checkpoint, wildcards.split)
        if baseline == wildcards.experiment or decode not in plan.runs.scored_decodes(
            baseline
        ):
            return []
        return hypotheses(
            runs[baseline]["seed_runs"] if seeds else [baseline], wildcards
        )

    return files


# ---- report ---------------------------------------------------------------------------------


def shown_experiments(wildcards):
    """What the table or figure shows of each of its experiments."""
    name = wildcards.get("table") or wildcards.get("figure")
    return plan.report.described(plan.report.shown(name))


def training_sources(wildcards):
    """Each shown experiment's training split source (Table 4 names each parser's treebank)."""
    shown = plan.report.shown(wildcards.table)
    return {name: runs[name]["splits"]["train"] for name in shown}


def report_inputs(wildcards):
    """What a table or figure is drawn from: training summaries, scores, training records."""
    return plan.report.inputs(wildcards.get("table") or wildcards.get("figure"))
