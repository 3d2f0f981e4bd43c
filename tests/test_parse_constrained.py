"""decode.constrain: trees: beam search writes only well-formed trees over the input's words."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from aiayn.decode.search import beam_search
from aiayn.decode.settings import DecodeSettings
from aiayn.decode.translate import source_batch
from aiayn.parsing.constrained import (
    CLOSE,
    CONTINUATION,
    FORBIDDEN,
    LEAF,
    OPEN,
    TagLexicon,
    TreeConstrained,
    TreeVocabulary,
)
from aiayn.parsing.linearize import Linearization, delinearize

PIECES = ["<pad>", "<unk>", "<s>", "</s>", "▁(S", "▁)S", "▁(NP", "▁)NP", "▁NN", "▁DT", "▁the",
          "og", "▁d", "▁)"]  # fmt: skip
ID = {piece: index for index, piece in enumerate(PIECES)}


class Pieces:
    """The slice of sentencepiece's API that TreeVocabulary reads."""

    def get_piece_size(self):
        return len(PIECES)

    def id_to_piece(self, index):
        return PIECES[index]

    def is_control(self, index):
        return index in (0, 2, 3)

    def is_unknown(self, index):
        return index == 1

    SPELLING = {"the": ["▁the"], "dog": ["▁d", "og"], "DT": ["▁DT"], "NN": ["▁NN"]}

    def encode(self, text):
        return [ID[piece] for word in text.split() for piece in self.SPELLING[word]]

    def decode(self, ids):
        return "".join(PIECES[i] for i in ids).replace("▁", " ").strip()


class Preferring:
    """A step model that ranks the vocabulary the same way at every step, whatever came
    before: left alone, beam search writes what it prefers, not a tree."""

    def __init__(self, *order):
        scores = torch.full((len(PIECES),), -30.0)
        for rank, piece in enumerate(order):
            scores[ID[piece]] = -float(rank)
        self.log_probs_row = torch.log_softmax(scores, dim=0)

    def start(self, source, beam):
        pass

    def keep(self, rows):
        pass

    def log_probs(self, prefix):
        return self.log_probs_row.expand(prefix.size(0), -1).clone()


def trees(model, sources, constrained=True, lexicon=None, **settings):
    vocabulary = TreeVocabulary.from_processor(Pieces())
    stepper = TreeConstrained(model, vocabulary, lexicon) if constrained else model
    source, lengths = source_batch([np.array([ID[p] for p in s]) for s in sources])
    options = {"beam": 3, "max_length_offset": 30, **settings}
    found = beam_search(stepper, source, lengths, DecodeSettings(**options), drop_every=1)
    return ["".join(PIECES[t] for t in h.tokens).replace("▁", " ").strip() for h in found]


def test_the_pieces_are_read_as_brackets_leaves_and_continuations():
    vocabulary = TreeVocabulary.from_processor(Pieces())
    kinds = dict(zip(PIECES, vocabulary.kind.tolist(), strict=True))
    assert [kinds[p] for p in ("</s>", "▁(S", "▁)NP", "▁NN", "▁the", "og", "▁)")] == [
        FORBIDDEN, OPEN, CLOSE, LEAF, LEAF, CONTINUATION, CLOSE,
    ]  # fmt: skip
    label = vocabulary.label.tolist()
    assert label[ID["▁(NP"]] == label[ID["▁)NP"]] != label[ID["▁(S"]] == label[ID["▁)S"]]
    assert vocabulary.starts_word.tolist()[ID["og"]] is False
    assert vocabulary.starts_word.tolist()[ID["▁d"]] is True


def test_a_model_that_would_stop_at_once_writes_a_tree_over_every_word():
    model = Preferring("</s>", "▁NN", "▁(NP", "▁)NP", "▁(S", "▁)S", "▁DT")
    assert trees(model, [["▁the", "▁d", "og"]], constrained=False) == [""]
    (tree,) = trees(model, [["▁the", "▁d", "og"]])
    assert tree == "(NP NN NN )NP"  # two words (▁the, ▁d og): two leaves, then closed
    parsed, repairs = delinearize(tree, ["the", "dog"], Linearization(leaves="tags"))
    assert not repairs and [leaf.children[0] for leaf in parsed.preterminals()] == ["the", "dog"]


@pytest.mark.parametrize("words", [1, 2, 5])
def test_every_output_closes_what_it_opened_and_has_one_leaf_per_word(words):
    """A model that likes opening brackets best and never likes closing them still ends with
    one leaf per word, the innermost bracket closed first, the root last."""
    model = Preferring("▁(NP", "▁(S", "▁DT", "▁NN", "</s>", "▁)S", "▁)NP", "▁)", "og")
    source = ["▁the"] * words
    (tree,) = trees(model, [source], max_length_offset=200)  # MAX_OPEN_RUN before each leaf
    tokens = tree.split()
    assert sum(t in ("DT", "NN") for t in tokens) == words
    stack = []
    for token in tokens:
        if token.startswith("("):
            stack.append(token[1:])
        elif token.startswith(")"):
            assert stack and token[1:] in ("", stack.pop())
    assert not stack
    _, repairs = delinearize(tree, ["w"] * words, Linearization(leaves="tags"))
    assert not repairs


def test_a_continuation_piece_only_follows_a_leaf_and_sentences_keep_their_own_count():
    model = Preferring("og", "▁(S", "▁NN", "</s>", "▁)S")
    found = trees(model, [["▁the"], ["▁the", "▁d", "og", "▁the"]])
    assert found[0] == "(S NNogogog )S"  # a leaf of at most 1 + MAX_CONTINUATION pieces
    assert found[1] == "(S NNogogog NNogogog NNogogog )S"
    for tree, words in zip(found, (1, 3), strict=True):
        assert tree.split().count("NNogogog") == words


def test_the_constraint_only_removes_choices_the_model_ranks_among_the_rest():
    """Where the model's best continuation is allowed, it is taken: the search's scores are
    the model's own log probabilities of the tree it wrote."""
    model = Preferring("▁DT", "▁(S", "▁)S", "</s>")
    (tree,) = trees(model, [["▁the"]], beam=1)
    assert tree == "(S DT )S"
    steps = [ID["▁(S"], ID["▁DT"], ID["▁)S"], 3]
    expected = sum(model.log_probs_row[t].item() for t in steps)
    vocabulary = TreeVocabulary.from_processor(Pieces())
    source, lengths = source_batch([np.array([ID["▁the"]])])
    settings = DecodeSettings(beam=1, alpha=0.0, max_length_offset=30)
    (found,) = beam_search(TreeConstrained(model, vocabulary), source, lengths, settings)
    assert found.log_prob == pytest.approx(expected, abs=1e-5) and math.isfinite(found.score)


def test_with_the_lexicon_each_word_takes_a_tag_it_had_in_training():
    """`the` was a DT and `dog` an NN in the training trees: a model that prefers NN for every
    word writes DT for `the`; a word never seen takes an open-class tag (of words seen once)."""
    lexicon = TagLexicon(Pieces(), ["the dog", "the the"], ["(S (NP DT NN )NP )S", "(S DT DT )S"])
    assert lexicon.tags == {"the": {ID["▁DT"]}, "dog": {ID["▁NN"]}}
    assert lexicon.unknown == {ID["▁NN"]}  # dog, the only word seen once
    model = Preferring("▁NN", "▁DT", "▁(S", "▁)S", "</s>")
    source = ["▁the", "▁d", "og"]
    assert trees(model, [source]) == ["(S NN NN )S"]
    assert trees(model, [source], lexicon=lexicon) == ["(S DT NN )S"]
    table = lexicon.allowed(torch.tensor([[ID["▁d"], ID["og"], ID["▁the"], 3, 0]]),
                            TreeVocabulary.from_processor(Pieces()).starts_word, len(PIECES))  # fmt: skip
    assert table.shape == (1, 3, len(PIECES))
    assert table[0, 0].nonzero().flatten().tolist() == [ID["▁NN"]]
    assert table[0, 1].nonzero().flatten().tolist() == [ID["▁DT"]]


def test_a_tag_lexicon_needs_the_tree_constraint_and_the_settings_check_it():
    with pytest.raises(ValueError, match="decode.constrain must be none, trees or lexicon"):
        DecodeSettings(constrain="tags")
