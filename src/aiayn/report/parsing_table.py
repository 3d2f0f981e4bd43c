"""Table 4 of the paper regenerated: its parsers beside ours, EVALB F1, labelled."""

from __future__ import annotations

import pandas as pd

from aiayn.paper import TABLE4
from aiayn.report.tables import OURS, PAPER, ExperimentResult

BASELINE = "baseline"

TABLE4_CAPTION = (
    "Table 4 in full. Rows marked paper are Vaswani et al. (2017): F1 on WSJ section 23 "
    "(2416 sentences). Rows marked ours are this run's averaged models on the test split named "
    "(its sentences and source files given), scored with EVALB's rules and COLLINS.prm "
    "(aiayn.parsing.evalb); precision, recall, the share of output trees that needed repair "
    "and EVALB's error sentences (words out of step with the gold tree: left out of the "
    "figures; the C program stops after 10 of them with COLLINS.prm, ours counts them all) "
    "beside the F1. Rows marked baseline are trees that read no input but its words, scored "
    "the same way on the same split (aiayn.parsing.baselines): a parser is evidence only "
    "where it beats them. Rows of a treebank sample are not comparable to WSJ 23: a smaller "
    "model, far less training data, other sentences."
)


def treebank_files(spec: dict) -> str:
    """`sections 02-21` or `documents 0001-0159` (or the path), from a `ptb` split's config."""
    chosen = [f"{key} {spec[key]}" for key in ("sections", "documents") if spec.get(key)]
    return ", ".join(chosen) or spec.get("path", "all files")


def describe_split(record: dict) -> str:
    spec = record.get("test_set") or {}
    return f"{record['split']} ({treebank_files(spec)}, {record['sentences']} sentences)"


def describe_training(train_split: dict, clean_record: dict, summary: dict) -> str:
    """What an experiment trained on: the files, the sentences kept, the steps."""
    return (
        f"{treebank_files(train_split)}: {clean_record['kept_pairs']} sentences, "
        f"{summary['steps']} steps"
    )


def table4(
    results: list[ExperimentResult], training: dict[str, str], baselines: list[dict] = ()
) -> pd.DataFrame:
    """The paper's rows, the trivial baselines of each test split, then each experiment's
    averaged model on each of its test splits; `training` describes each experiment's training
    data (e.g. its sentences and files)."""
    paper = [
        {
            "source": PAPER,
            "parser": parser,
            "training": setting,
            "test set": "WSJ 23",
            "F1": f1,
            "precision": None,
            "recall": None,
            "repaired trees (%)": None,
            "error sentences": None,
        }
        for parser, setting, f1 in TABLE4
    ]
    ours = []
    for result in results:
        for (checkpoint, split), record in result.scores.items():
            if checkpoint != "averaged" or split == result.dev_split:
                continue
            figures = record["evalb"]["all"]
            model = result.model
            ours.append(
                {
                    "source": OURS,
                    "parser": f"{result.name} (N={model['n_layers']}, d_model={model['d_model']})",
                    "training": training[result.name],
                    "test set": describe_split(record),
                    "F1": round(figures["f1"], 2),
                    "precision": round(figures["precision"], 2),
                    "recall": round(figures["recall"], 2),
                    "repaired trees (%)": round(
                        100 * record["repaired_trees"] / record["sentences"], 1
                    ),
                    "error sentences": figures["counts"]["error_sentences"],
                }
            )
    return pd.DataFrame(paper + baseline_rows(baselines) + ours)


BASELINE_NAMES = {
    "right-branching": "right-branching ({top} over nested {right_branching})",
    "flat": "flat (every word under one {top})",
}


def baseline_rows(records: list[dict]) -> list[dict]:
    """Each baseline of each split, as Table 4 rows labelled baseline."""
    rows = []
    for record in records:
        for name, scores in record["baselines"].items():
            figures = scores["all"]
            rows.append(
                {
                    "source": BASELINE,
                    "parser": BASELINE_NAMES[name].format(**record["labels"]),
                    "training": "none (the top label is the training trees' most frequent)",
                    "test set": describe_split(record),
                    "F1": round(figures["f1"], 2),
                    "precision": round(figures["precision"], 2),
                    "recall": round(figures["recall"], 2),
                    "repaired trees (%)": None,
                    "error sentences": figures["counts"]["error_sentences"],
                }
            )
    return rows
