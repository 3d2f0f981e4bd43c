"""A parsing split's score: output sequences made trees (repairs counted), then EVALB."""

from __future__ import annotations

from collections import Counter

from aiayn.errors import InputError
from aiayn.parsing.evalb import evalb
from aiayn.parsing.linearize import REPAIRS, Linearization, delinearize
from aiayn.parsing.trees import Tree, tree_per_line


def score_trees(
    sequences: list[str],
    inputs: list[str],
    gold_lines: list[str],
    settings: Linearization,
    where: str = "gold trees",
) -> tuple[list[Tree], dict]:
    """The output trees, and a record of EVALB's figures, the repairs and the sentence count."""
    if not len(sequences) == len(inputs) == len(gold_lines):
        raise InputError(
            f"{len(sequences)} decoded sequences, {len(inputs)} input sentences and "
            f"{len(gold_lines)} gold trees ({where}): they must align line by line. Rerun the "
            "split's treebank and decode jobs (snakemake -R treebank)."
        )
    gold = tree_per_line(gold_lines, where)
    trees, repairs, repaired = [], Counter(), 0
    for sequence, words in zip(sequences, inputs, strict=True):
        tree, fixes = delinearize(sequence, words.split(), settings)
        trees.append(tree)
        repairs.update(fixes)
        repaired += bool(fixes)
    return trees, {
        "sentences": len(trees),
        "evalb": evalb(gold, trees),
        "repaired_trees": repaired,
        "well_formed_share": 1 - repaired / len(trees) if trees else 0.0,
        "repairs": {kind: repairs[kind] for kind in REPAIRS},
    }
