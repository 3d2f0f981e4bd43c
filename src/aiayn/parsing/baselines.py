"""Trivial parsers of the same words, scored beside ours in Table 4: a parser that does not read
its input can still reach their F1, so ours is evidence only where it beats them.

- flat: every word under one constituent labelled with the training trees' most frequent top
  label (S);
- right-branching: that label over all the words, then a nested constituent over each suffix
  (words 2..n, 3..n, ...), the usual baseline for English, whose phrases mostly branch to the
  right. The nested ones are labelled VP, chosen on the sample's dev documents (0160-0169) among
  NP (the most frequent phrase label; dev F1 12.4), VP (14.4), VP over NP (13.3) and PP (10.0).

Leaves carry the tag a form alone gives (punctuation EVALB deletes gets its own, any other word
XX), so the baselines lose no sentence to EVALB's length check and score no tags.
"""

from __future__ import annotations

from collections import Counter

from aiayn.parsing.linearize import default_tag
from aiayn.parsing.trees import ROOT, Tree

RIGHT_BRANCHING_LABEL = "VP"


def top_label(trees: list[Tree]) -> str:
    """The most frequent label of a root's child (a sentence's top constituent) in `trees`."""
    tops = Counter(
        child.label for tree in trees for child in tree.children if not child.is_preterminal
    )
    return tops.most_common(1)[0][0]


def leaves(words: list[str]) -> list[Tree]:
    return [Tree(default_tag(word), [word]) for word in words]


def flat_tree(words: list[str], label: str) -> Tree:
    return Tree(ROOT, [Tree(label, leaves(words))])


def right_branching_tree(words: list[str], top: str, inner: str = RIGHT_BRANCHING_LABEL) -> Tree:
    nodes = leaves(words)
    tail = nodes[-1]
    for node in reversed(nodes[1:-1]):
        tail = Tree(inner, [node, tail])
    return Tree(ROOT, [Tree(top, [nodes[0], tail] if len(nodes) > 1 else nodes)])


BASELINES = {
    "right-branching": right_branching_tree,
    "flat": flat_tree,
}


def baseline_trees(name: str, sentences: list[list[str]], top: str) -> list[Tree]:
    """One baseline's tree over each sentence's words."""
    return [BASELINES[name](words, top) for words in sentences]
