"""Rule parse_baselines: right-branching and flat trees of a split's words, scored by EVALB's
rules against its gold trees."""

import logging

from aiayn.logs import run_stage, save_record
from aiayn.parsing.baselines import BASELINES, RIGHT_BRANCHING_LABEL, baseline_trees, top_label
from aiayn.parsing.evalb import evalb
from aiayn.parsing.trees import tree_per_line
from aiayn.textio import read_lines


def trees_of(path: str) -> list:
    return tree_per_line(read_lines(path), path)


def main():
    gold = trees_of(snakemake.input.gold_trees)
    top = top_label(trees_of(snakemake.input.train_trees))
    sentences = [tree.words() for tree in gold]
    figures = {name: evalb(gold, baseline_trees(name, sentences, top)) for name in BASELINES}
    for name, scores in figures.items():
        logging.getLogger("aiayn").info("%s: F1 %.2f", name, scores["all"]["f1"])
    save_record(
        snakemake.output.scores,
        {
            "dataset": snakemake.wildcards.dataset,
            "split": snakemake.wildcards.split,
            "test_set": snakemake.params.test_set,
            "sentences": len(gold),
            "labels": {"top": top, "right_branching": RIGHT_BRANCHING_LABEL},
            "baselines": figures,
        },
    )


run_stage(main, snakemake.log[0])
