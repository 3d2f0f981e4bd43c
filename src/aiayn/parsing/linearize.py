"""Trees as token sequences and back: parsing as translation (Vinyals et al. 2015).

A tree is written depth first: `(S (NP NNP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S` for
`(S (NP (NNP Ms.) (NNP Haag)) (VP (VBZ plays) (NP (DT the) (NN role))) (. .))`: one leaf token per
input word, and the words are put back from the input. Two settings: `close_labels` (`)NP` as in
Vinyals et al. and tensor2tensor's `wsj_parsing`, or a bare `)`), and `leaves`, what stands for
each word: `tags` (its part-of-speech tag, as tensor2tensor did for the paper), `xx` (XX for every
word, as Vinyals et al.) or `words` (the word itself, so the output copies the input between the
brackets: `(S (NP Ms. Haag )NP ...`). With `xx` and `words` the output trees' tags are XX, except
on the punctuation EVALB deletes (see PUNCTUATION_TAGS).

Reading an output back never fails: a malformed sequence is repaired into a tree over exactly the
input's words, and every repair is counted (`Repairs`), so a score can say how many trees needed
one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from aiayn.config.schema import defaults
from aiayn.parsing.trees import ROOT, Tree

UNKNOWN_TAG = "XX"
# A word's tag when the output gives none (xx, or a word the output left out): the Treebank tags
# of the punctuation EVALB leaves out of the score, for the forms that only ever carry that tag,
# so that an XX on a full stop does not make the sentence's length differ from the gold tree's.
PUNCTUATION_TAGS = {
    ",": ",",
    ".": ".",
    "?": ".",
    "!": ".",
    ":": ":",
    ";": ":",
    "--": ":",
    "-": ":",
    "...": ":",
    "``": "``",
    "`": "``",
    "''": "''",
}
_DELETED_TAGS = frozenset(PUNCTUATION_TAGS.values())
# The one form the Treebank tags both ways: a possessive (POS) or a closing quote (''). The
# output's tag is kept on it, right or wrong: no form-based rule can tell which.
EITHER_WAY = frozenset({"'"})
REPAIRS = (
    "unmatched_close",  # a closing bracket with nothing open: dropped
    "close_label_mismatch",  # `(NP ... )VP`: closes the open NP
    "unclosed",  # constituents still open at the end: closed there
    "extra_leaves",  # more leaves than input words: the extra ones dropped
    "missing_words",  # fewer leaves than words: the rest attached to the root
    "punctuation_tags",  # a punctuation tag on a word that is not, or the reverse: see below
    "empty_constituents",  # a constituent with no word: dropped
)


LEAVES = ("tags", "xx", "words")


DEFAULTS = defaults("linearization")  # schemas/config.schema.yaml


@dataclass(frozen=True)
class Linearization:
    leaves: str = DEFAULTS["leaves"]  # or "xx", "words"
    close_labels: bool = DEFAULTS["close_labels"]

    def __post_init__(self):
        if self.leaves not in LEAVES:
            raise ValueError(
                f"linearization.leaves must be one of {', '.join(LEAVES)}, not {self.leaves!r}"
            )


def linearize(tree: Tree, settings: Linearization = Linearization()) -> str:
    """The target side of one training pair; the root (TOP) is left out."""
    children = tree.children if tree.label == ROOT else [tree]
    return " ".join(token for child in children for token in _tokens(child, settings))


def _tokens(node: Tree, settings: Linearization):
    if node.is_preterminal:
        yield {"tags": node.label, "xx": UNKNOWN_TAG, "words": node.children[0]}[settings.leaves]
        return
    yield f"({node.label}"
    for child in node.children:
        yield from _tokens(child, settings)
    yield f"){node.label}" if settings.close_labels else ")"


def default_tag(word: str) -> str:
    return PUNCTUATION_TAGS.get(word, UNKNOWN_TAG)


def leaf_tag(tag: str, word: str, repairs: Counter) -> str:
    """The output's tag, unless it disagrees with the word about being punctuation EVALB
    deletes: a full stop not tagged `.` takes `.`; any other word tagged as such punctuation
    (`,` on a word with letters, or on `$`, `%`, `#`, which the Treebank tags $, NN, #) takes XX
    like any word. One such tag would make EVALB drop the whole sentence as a length mismatch."""
    expected = PUNCTUATION_TAGS.get(word)
    if expected is not None and tag != expected:
        repairs["punctuation_tags"] += 1
        return expected
    if expected is None and tag in _DELETED_TAGS and word not in EITHER_WAY:
        repairs["punctuation_tags"] += 1
        return UNKNOWN_TAG
    return tag


def delinearize(
    sequence: str, words: list[str], settings: Linearization = Linearization()
) -> tuple[Tree, Counter]:
    """A TOP-rooted tree over `words` from a (possibly malformed) output, and its repairs."""
    repairs: Counter = Counter()
    root = Tree(ROOT)
    stack = [root]
    position = 0
    for token in sequence.split():
        if token.startswith("(") and len(token) > 1:
            node = Tree(token[1:])
            stack[-1].children.append(node)
            stack.append(node)
        elif token.startswith(")"):
            if len(stack) == 1:
                repairs["unmatched_close"] += 1
                continue
            node = stack.pop()
            if len(token) > 1 and token[1:] != node.label:
                repairs["close_label_mismatch"] += 1
        elif position < len(words):
            word = words[position]
            if settings.leaves == "tags":
                tag = leaf_tag(token, word, repairs)
            else:
                tag = default_tag(word)
            stack[-1].children.append(Tree(tag, [word]))
            position += 1
        else:
            repairs["extra_leaves"] += 1
    if len(stack) > 1:
        repairs["unclosed"] += len(stack) - 1
    for word in words[position:]:
        repairs["missing_words"] += 1
        root.children.append(Tree(default_tag(word), [word]))
    return _without_empty(root, repairs) or Tree(ROOT), repairs


def _without_empty(node: Tree, repairs: Counter) -> Tree | None:
    if node.is_preterminal:
        return node
    kept = [k for k in (_without_empty(child, repairs) for child in node.children) if k]
    if not kept:
        repairs["empty_constituents"] += node.label != ROOT
        return None
    return Tree(node.label, kept)
