"""Labelled bracket precision, recall and F1 by EVALB's rules with its COLLINS.prm parameters.

EVALB (Sekine and Collins 1997) is the scorer of every parser in the paper's Table 4. It is a C
program without a maintained Python package (PYEVALB implements none of COLLINS.prm's deletions),
so its rules are written here and tested against hand-made tree pairs (tests/test_parsing.py):

- the words of preterminals labelled TOP, -NONE-, `,` `:` `` `` `` `''` `.` are deleted with their
  brackets, each tree by its own tags (DELETE_LABEL); brackets with these labels are not scored;
- a sentence's length for the <= 40 words figures counts every word but -NONE- ones;
- labels are cut at their first `-` or `=` (`NP-SBJ` is `NP`); ADVP and PRT are the same label;
- a bracket that covers no word after the deletions is not scored;
- brackets match as a multiset of (label, first word, last word): each gold bracket takes the
  first unmatched test bracket with its span and label;
- a sentence whose two trees differ in length or words after the deletions is an error sentence,
  counted apart and left out of the totals (as EVALB does); a test tree with no word is skipped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from aiayn.parsing.trees import Tree

DELETE_LABELS = frozenset({"TOP", "-NONE-", ",", ":", "``", "''", "."})
DELETE_FOR_LENGTH = frozenset({"-NONE-"})
EQUIVALENT_LABELS = (frozenset({"ADVP", "PRT"}),)
CUTOFF_LENGTH = 40


def same_label(a: str, b: str) -> bool:
    return a == b or any(a in pair and b in pair for pair in EQUIVALENT_LABELS)


def scored_label(label: str) -> str:
    """EVALB's modify_label: everything from the first `-` or `=` is cut."""
    for position, character in enumerate(label):
        if character in "-=":
            return label[:position]
    return label


@dataclass
class Bracketing:
    """What EVALB reads from one tree: words with their tags, and labelled spans."""

    terminals: list[tuple[str, str]] = field(default_factory=list)  # (word, tag)
    spans: list[tuple[str, int, int]] = field(default_factory=list)  # (label, start, end)
    length: int = 0  # words but -NONE-, for the length cut-off

    @classmethod
    def of(cls, tree: Tree) -> Bracketing:
        bracketing = cls()
        bracketing._walk(tree)
        return bracketing

    def _walk(self, node: Tree) -> None:
        if node.is_preterminal:
            self.length += node.label not in DELETE_FOR_LENGTH
            if node.label not in DELETE_LABELS:
                self.terminals.append((node.children[0], node.label))
            return
        start = len(self.terminals)
        for child in node.children:
            self._walk(child)
        label = scored_label(node.label)
        if len(self.terminals) > start and label not in DELETE_LABELS:
            self.spans.append((label, start, len(self.terminals)))


@dataclass
class SentenceResult:
    status: str  # ok, error (length or words differ), skip (empty test tree)
    length: int  # of the gold tree
    gold: int = 0
    test: int = 0
    matched: int = 0
    crossing: int = 0
    words: int = 0
    correct_tags: int = 0
    reason: str = ""


def score_sentence(gold_tree: Tree, test_tree: Tree) -> SentenceResult:
    gold, test = Bracketing.of(gold_tree), Bracketing.of(test_tree)
    if not test.terminals:
        return SentenceResult("skip", gold.length, reason="the test tree has no word")
    if len(gold.terminals) != len(test.terminals):
        reason = f"length differs ({len(gold.terminals)} | {len(test.terminals)})"
        return SentenceResult("error", gold.length, reason=reason)
    for (gold_word, _), (test_word, _) in zip(gold.terminals, test.terminals, strict=True):
        if gold_word != test_word:
            reason = f"words differ ({gold_word} | {test_word})"
            return SentenceResult("error", gold.length, reason=reason)
    unmatched = list(test.spans)
    matched = 0
    for label, start, end in gold.spans:
        for index, (test_label, test_start, test_end) in enumerate(unmatched):
            if (test_start, test_end) == (start, end) and same_label(label, test_label):
                del unmatched[index]
                matched += 1
                break
    crossing = sum(
        any(gs < ts < ge < te or ts < gs < te < ge for _, gs, ge in gold.spans)
        for _, ts, te in test.spans
    )
    tags = sum(
        same_label(g, t) for (_, g), (_, t) in zip(gold.terminals, test.terminals, strict=True)
    )
    return SentenceResult(
        "ok",
        gold.length,
        len(gold.spans),
        len(test.spans),
        matched,
        crossing,
        len(gold.terminals),
        tags,
    )


@dataclass
class Summary:
    """EVALB's summary block for a set of sentences."""

    sentences: int = 0
    error_sentences: int = 0
    skipped_sentences: int = 0
    gold_brackets: int = 0
    test_brackets: int = 0
    matched_brackets: int = 0
    complete_match: int = 0
    no_crossing: int = 0
    crossing: int = 0
    words: int = 0
    correct_tags: int = 0

    def add(self, result: SentenceResult) -> None:
        self.sentences += 1
        if result.status != "ok":
            self.error_sentences += result.status == "error"
            self.skipped_sentences += result.status == "skip"
            return
        self.gold_brackets += result.gold
        self.test_brackets += result.test
        self.matched_brackets += result.matched
        self.complete_match += result.gold == result.test == result.matched
        self.no_crossing += result.crossing == 0
        self.crossing += result.crossing
        self.words += result.words
        self.correct_tags += result.correct_tags

    def figures(self) -> dict:
        """Percentages as EVALB prints them, beside the counts."""
        valid = self.sentences - self.error_sentences - self.skipped_sentences
        recall = _percent(self.matched_brackets, self.gold_brackets)
        precision = _percent(self.matched_brackets, self.test_brackets)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {
            "recall": recall,
            "precision": precision,
            "f1": f1,
            "complete_match": _percent(self.complete_match, valid),
            "average_crossing": self.crossing / valid if valid else 0.0,
            "no_crossing": _percent(self.no_crossing, valid),
            "tagging_accuracy": _percent(self.correct_tags, self.words),
            "counts": asdict(self),
        }


def _percent(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def evalb(gold_trees: list[Tree], test_trees: list[Tree]) -> dict:
    """EVALB's figures for all sentences and for those of at most 40 words, and the first few
    error sentences with their reason."""
    if len(gold_trees) != len(test_trees):
        raise ValueError(
            f"{len(gold_trees)} gold trees but {len(test_trees)} test trees: one tree per sentence"
        )
    everything, short = Summary(), Summary()
    errors = []
    for number, (gold, test) in enumerate(zip(gold_trees, test_trees, strict=True), start=1):
        result = score_sentence(gold, test)
        everything.add(result)
        if result.length <= CUTOFF_LENGTH:
            short.add(result)
        if result.status != "ok" and len(errors) < 10:
            errors.append({"sentence": number, "status": result.status, "reason": result.reason})
    return {
        "all": everything.figures(),
        f"length_le_{CUTOFF_LENGTH}": short.figures(),
        "first_errors": errors,
        "parameters": "COLLINS.prm (DELETE_LABEL TOP -NONE- , : `` '' .; EQ_LABEL ADVP PRT)",
    }
