"""Beam search that can only write well-formed trees over the input's words (`decode.constrain:
trees`).

A free-running parser loses its place: one leaf too many or too few, and every later tag lands
on the wrong word (docs/parsing.md). The constraint keeps, per hypothesis, how many words still
need a leaf and which constituents are open, and allows at each step only:
- an opening bracket, while some word still needs a leaf, and at most MAX_OPEN_RUN in a row;
- a leaf (a piece that starts a word), inside a constituent, while some word needs one; the
  pieces that continue a word (no `▁`) only right after a leaf, at most MAX_CONTINUATION;
- the closing bracket of the innermost open constituent (with close labels, that label; never
  right after its opening bracket, so no constituent is empty; the outermost one only once every
  word has its leaf);
- EOS, once every word has its leaf and every constituent is closed.
The model's probabilities are otherwise untouched: the constraint removes what can not be a tree
over these words, the model still chooses among the rest.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import torch

from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID

FORBIDDEN, OPEN, CLOSE, LEAF, CONTINUATION = range(5)
ANY_LABEL = -2  # a bare `)`: it closes whatever is open
MAX_DEPTH = 64  # the sample's deepest tree is 28 deep; a hypothesis can go no deeper
# Brackets opened in a row before a leaf: the sample's trees open at most 6; a model that kept
# opening would otherwise never finish.
MAX_OPEN_RUN = 10
# Pieces after a leaf's first: a tag is one piece but for rare ones (`▁S Y M`); bounded so
# that a model fond of a continuation piece still moves on.
MAX_CONTINUATION = 3


@dataclass
class TreeVocabulary:
    """What each id of the shared subword vocabulary is, read from its pieces."""

    kind: torch.Tensor  # (V,) FORBIDDEN, OPEN, CLOSE, LEAF or CONTINUATION
    label: torch.Tensor  # (V,) the bracket's label index (OPEN, CLOSE), else -1
    starts_word: torch.Tensor  # (V,) bool: a source piece that begins a word

    @classmethod
    def from_processor(cls, processor) -> TreeVocabulary:
        """From a sentencepiece model of the linearized trees: `▁(NP` opens NP, `▁)NP` closes it
        (`▁)` closes anything), other `▁` pieces begin a leaf, the rest continue one; control
        and unknown pieces are never written."""
        size = processor.get_piece_size()
        kind = torch.full((size,), FORBIDDEN, dtype=torch.long)
        label = torch.full((size,), -1, dtype=torch.long)
        labels: dict[str, int] = {}
        for index in range(size):
            if processor.is_control(index) or processor.is_unknown(index):
                continue
            piece = processor.id_to_piece(index)
            if piece.startswith("▁(") and len(piece) > 2:
                kind[index], label[index] = OPEN, labels.setdefault(piece[2:], len(labels))
            elif piece.startswith("▁)"):
                kind[index] = CLOSE
                name = piece[2:]
                label[index] = labels.setdefault(name, len(labels)) if name else ANY_LABEL
            elif piece.startswith("▁"):
                kind[index] = LEAF
            else:
                kind[index] = CONTINUATION
        starts_word = torch.tensor([
            processor.id_to_piece(i).startswith("▁") and not processor.is_control(i)
            for i in range(size)
        ])  # fmt: skip
        return cls(kind, label, starts_word)

    def to(self, device: torch.device) -> TreeVocabulary:
        return TreeVocabulary(self.kind.to(device), self.label.to(device),
                              self.starts_word.to(device))  # fmt: skip


class TagLexicon:
    """Which leaf each word may take (`decode.constrain: lexicon`, for `leaves: tags`): the tags
    it had in the training trees; a word never seen there, the tags of the words seen once (the
    open classes). Words are keyed as the subword model normalizes them."""

    def __init__(self, processor, word_lines: list[str], tree_lines: list[str]):
        self.processor = processor
        tags: dict[str, set[int]] = {}
        counts: Counter = Counter()
        normal: dict[str, str] = {}
        for words, tree in zip(word_lines, tree_lines, strict=True):
            leaves = [token for token in tree.split() if not token.startswith(("(", ")"))]
            if len(leaves) != len(words.split()):  # not a tree over these words: skipped
                continue
            for word, tag in zip(words.split(), leaves, strict=True):
                ids = processor.encode(tag)
                if len(ids) != 1:  # a tag of several pieces is never a leaf token
                    continue
                key = normal.setdefault(word, processor.decode(processor.encode(word)))
                tags.setdefault(key, set()).add(ids[0])
                counts[key] += 1
        self.tags = tags
        self.unknown = set().union(*(tags[word] for word, n in counts.items() if n == 1))

    def allowed(self, source: torch.Tensor, starts_word: torch.Tensor, size: int) -> torch.Tensor:
        """(B, W, V) bool: the leaves the w-th word of each source sentence may take."""
        sentences = [self.words(row, starts_word) for row in source.tolist()]
        longest = max((len(words) for words in sentences), default=0)
        table = torch.zeros(len(sentences), longest + 1, size, dtype=torch.bool)
        for b, words in enumerate(sentences):
            for w, word in enumerate(words):
                table[b, w, sorted(self.tags.get(word, self.unknown))] = True
        return table

    def words(self, row: list[int], starts_word: torch.Tensor) -> list[str]:
        """A source row's words, as the subword model spells them back."""
        words: list[list[int]] = []
        for token in row:
            if token in (PAD_ID, BOS_ID, EOS_ID):
                continue
            if starts_word[token] or not words:
                words.append([])
            words[-1].append(token)
        return [self.processor.decode(pieces) for pieces in words]


class TreeConstrained:
    """A step model for beam_search: the wrapped decoder's log probabilities with everything
    that cannot continue a tree over the input's words set to -inf."""

    def __init__(self, decoder, vocabulary: TreeVocabulary, lexicon: TagLexicon | None = None):
        self.decoder, self.vocabulary, self.lexicon = decoder, vocabulary, lexicon

    def start(self, source: torch.Tensor, beam: int) -> None:
        self.decoder.start(source, beam)
        self.vocabulary = self.vocabulary.to(source.device)
        words = self.vocabulary.starts_word[source].sum(dim=1)  # (B,)
        rows = words.repeat_interleave(beam)  # (R,)
        self.leaves_left = rows.clone()  # (R,) words still without a leaf
        self.depth = torch.zeros_like(rows)  # (R,) constituents open
        self.stack = torch.full((rows.numel(), MAX_DEPTH), -1, dtype=torch.long,
                                device=source.device)  # fmt: skip
        self.words = rows.clone()
        self.sentence = torch.arange(source.size(0), device=source.device).repeat_interleave(beam)
        if self.lexicon is not None:
            size = self.vocabulary.kind.numel()
            self.table = self.lexicon.allowed(source, self.vocabulary.starts_word, size).to(
                source.device
            )
        self.open_run = torch.zeros_like(rows)  # (R,) brackets opened since the last leaf
        self.continuation = torch.full_like(rows, MAX_CONTINUATION)  # (R,) pieces of this leaf

    def keep(self, rows: torch.Tensor) -> None:
        self.decoder.keep(rows)
        self.leaves_left, self.depth, self.stack = (
            self.leaves_left[rows], self.depth[rows], self.stack[rows],
        )  # fmt: skip
        self.open_run, self.continuation = self.open_run[rows], self.continuation[rows]
        self.words, self.sentence = self.words[rows], self.sentence[rows]

    def log_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        if prefix.size(1) > 1:  # the token the search just chose for each row
            self.advance(prefix[:, -1])
        log_probs = self.decoder.log_probs(prefix)
        return log_probs.masked_fill(~self.allowed(), -math.inf)

    def advance(self, token: torch.Tensor) -> None:
        kind = self.vocabulary.kind[token]  # (R,)
        rows = torch.arange(token.numel(), device=token.device)
        opens, closes = kind == OPEN, kind == CLOSE
        depth = self.depth.clamp(max=MAX_DEPTH - 1)
        self.stack[rows, depth] = torch.where(
            opens, self.vocabulary.label[token], self.stack[rows, depth]
        )
        self.depth = self.depth + opens.long() - closes.long()
        self.leaves_left = self.leaves_left - (kind == LEAF).long()
        self.open_run = torch.where(opens, self.open_run + 1, torch.zeros_like(self.open_run))
        self.continuation = torch.where(  # MAX_CONTINUATION: none may follow
            kind == LEAF,
            torch.zeros_like(self.continuation),
            torch.where(kind == CONTINUATION, self.continuation + 1, MAX_CONTINUATION),
        )

    def allowed(self) -> torch.Tensor:
        """(R, V): which tokens each row may take next."""
        kind, label = self.vocabulary.kind.unsqueeze(0), self.vocabulary.label.unsqueeze(0)
        words_left = (self.leaves_left > 0).unsqueeze(1)  # (R, 1)
        depth = self.depth.unsqueeze(1)
        top = self.stack.gather(1, (self.depth - 1).clamp(min=0).unsqueeze(1))  # (R, 1)
        open_run = self.open_run.unsqueeze(1)
        allowed = (kind == OPEN) & words_left & (depth < MAX_DEPTH) & (open_run < MAX_OPEN_RUN)
        leaf = (kind == LEAF) & words_left & (depth > 0)
        if self.lexicon is not None:
            word = (self.words - self.leaves_left).clamp(max=self.table.size(1) - 1)
            leaf &= self.table[self.sentence, word]
        allowed |= leaf
        allowed |= (kind == CONTINUATION) & (self.continuation < MAX_CONTINUATION).unsqueeze(1)
        closable = (depth > 1) | ((depth == 1) & ~words_left)  # the root closes last
        matches = (label == top) | (label == ANY_LABEL)
        allowed |= (kind == CLOSE) & closable & matches & (open_run == 0)  # none empty
        done = ~words_left & (depth == 0)
        allowed[:, EOS_ID] = done.squeeze(1)
        return allowed


def search_constraint(constrain: str, processor, lexicon_lines=None):
    """What the parsing task hands the decoder for `decode.constrain` (none, trees, lexicon): a
    function wrapping its step model in TreeConstrained, or None. lexicon_lines: the training
    split's words and linearized trees, each a list of lines, for `lexicon`."""
    if constrain == "none":
        return None
    vocabulary = TreeVocabulary.from_processor(processor)
    lexicon = None
    if constrain == "lexicon":
        if lexicon_lines is None:
            raise ValueError("decode.constrain: lexicon needs the training split's words and trees")
        lexicon = TagLexicon(processor, *lexicon_lines)
    return lambda decoder: TreeConstrained(decoder, vocabulary, lexicon)
