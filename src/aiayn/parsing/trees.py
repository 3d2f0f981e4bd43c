"""Penn Treebank trees: read from bracketed text, cleaned as parsers train on them, written back.

The cleaning is the usual one of the parsers in the paper's Table 4 (Collins 1999, Petrov et al.
2006, Vinyals et al. 2015): empty elements (`-NONE-`) and the constituents left empty by their
removal are dropped, function tags and indices are cut from labels (`NP-SBJ-1` -> `NP`), and the
treebank's unlabelled outer bracket becomes `TOP`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from aiayn.errors import InputError

EMPTY_ELEMENT = "-NONE-"
ROOT = "TOP"
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclass
class Tree:
    """A constituent: its label and children; a preterminal has one child, the word (a str)."""

    label: str
    children: list[Tree | str] = field(default_factory=list)

    @property
    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def preterminals(self) -> Iterator[Tree]:
        """The (tag word) nodes, left to right."""
        if self.is_preterminal:
            yield self
            return
        for child in self.children:
            if isinstance(child, Tree):
                yield from child.preterminals()

    def words(self) -> list[str]:
        return [node.children[0] for node in self.preterminals()]

    def __str__(self) -> str:
        inside = " ".join(str(child) for child in self.children)
        return f"({self.label} {inside})"


def _tokens(text: str) -> Iterator[tuple[str, int]]:
    """Brackets and atoms with the line each is on."""
    line, counted_to = 1, 0
    for match in _TOKEN.finditer(text):
        line += text.count("\n", counted_to, match.start())
        counted_to = match.start()
        yield match.group(), line


def read_trees(text: str, where: str = "<text>") -> Iterator[Tree]:
    """Every tree of a bracketed text (an .mrg file, or one tree per line); a malformed tree
    stops with `where` and the line it is on."""
    stack: list[Tree] = []
    start_line = 1
    tokens = _tokens(text)
    label_next = False
    for token, line in tokens:
        if label_next and token not in "()":
            stack[-1].label = token
            label_next = False
            continue
        label_next = False
        if token == "(":
            start_line = start_line if stack else line
            stack.append(Tree(""))
            label_next = True
        elif token == ")":
            if not stack:
                raise InputError(
                    f"{where}, line {line}: a closing bracket with no open one; the file is not "
                    "a well-formed treebank file. Check the brackets near that line."
                )
            node = stack.pop()
            if not node.children:
                raise InputError(f"{where}, line {line}: an empty bracket `({node.label})`.")
            if stack:
                stack[-1].children.append(node)
            else:
                yield node
        elif not stack:
            raise InputError(
                f"{where}, line {line}: text {token!r} outside any tree; a treebank file holds "
                "bracketed trees only."
            )
        elif stack[-1].children:
            raise InputError(
                f"{where}, line {line}: {token!r} follows other children of "
                f"`({stack[-1].label}`; a word must be the only child of its tag."
            )
        else:
            stack[-1].children.append(token)
    if stack:
        raise InputError(
            f"{where}: the tree that starts on line {start_line} is never closed "
            f"({len(stack)} bracket(s) still open at the end); the file may be truncated."
        )


def tree_per_line(lines, where: str) -> list[Tree]:
    """The first tree of each line (gold trees files hold one per line), named `where, tree N`
    in errors."""
    return [
        next(iter(read_trees(line, f"{where}, tree {number}")))
        for number, line in enumerate(lines, start=1)
    ]


def bare_label(label: str) -> str:
    """`NP-SBJ-1` -> `NP`, `NP=2` -> `NP`, `PRT|ADVP` -> `PRT`; labels that start with `-`
    (`-NONE-`, `-LRB-`) are kept whole."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=|]", label, maxsplit=1)[0] or label


def clean_tree(tree: Tree) -> Tree | None:
    """The tree parsers train and are scored on (see the module's docstring); None when nothing
    but empty elements is left."""
    if tree.is_preterminal:
        return None if tree.label == EMPTY_ELEMENT else Tree(tree.label, list(tree.children))
    children = [clean_tree(child) for child in tree.children if isinstance(child, Tree)]
    kept = [child for child in children if child is not None]
    if not kept:
        return None
    return Tree(bare_label(tree.label) if tree.label else ROOT, kept)
