"""The toy corpus: deterministic, disjoint splits, and the translation phenomena it promises."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from aiayn.data import toy


def words(sentence: str) -> list[str]:
    return re.findall(r"[\w-]+|[.,]", sentence)


def sample(template, n=300, seed=7):
    """Word lists of `n` pairs from one template (its phrases split into words)."""
    grammar = toy.ToyGrammar(seed)
    pairs = (template(grammar) for _ in range(n))
    return [(words(" ".join(en)), words(" ".join(de))) for en, de in pairs]


FINITE = {v.de_3sg for v in toy.TRANSITIVE + toy.PERSON_ONLY_TRANSITIVE + toy.INTRANSITIVE} | {
    v.de_3pl for v in toy.TRANSITIVE + toy.PERSON_ONLY_TRANSITIVE + toy.INTRANSITIVE
}
PARTICIPLES = {v.de_participle for v in toy.TRANSITIVE}
IT_NOUNS = toy.ANIMALS + toy.THINGS + toy.COMPOUND_HEADS


def antecedent(en: list[str], de: list[str]) -> tuple[str, int]:
    """Gender ("m", "f", "n" or "pl") and German position of the one noun English calls "it".

    Number is read from whichever language marks it (Gipfel/Gipfel, sheep/sheep).
    """
    heads = [w.split("-")[-1] for w in de]
    for noun in IT_NOUNS:
        for form in (noun.de, noun.de_plural):
            if form in heads:
                if noun.en != noun.en_plural:
                    plural = noun.en_plural in en
                else:
                    plural = form == noun.de_plural
                return ("pl" if plural else noun.gender), heads.index(form)
    raise AssertionError(f"no antecedent in {de}")


def test_same_seed_same_corpus_and_sizes_exact():
    first = list(toy.generate(200, seed=3, partition="train"))
    assert first == list(toy.generate(200, seed=3, partition="train"))
    assert len(first) == len({en for en, _ in first}) == 200
    assert first != list(toy.generate(200, seed=4, partition="train"))


def test_partitions_are_disjoint_whatever_the_seeds():
    train = {en for en, _ in toy.generate(3000, seed=1, partition="train")}
    dev = {en for en, _ in toy.generate(300, seed=1, partition="dev")}
    test = {en for en, _ in toy.generate(300, seed=2, partition="test")}
    assert not train & dev and not train & test and not dev & test


def test_unknown_partition_is_rejected():
    with pytest.raises(ValueError, match="partition"):
        next(toy.generate(1, seed=1, partition="valid"))


def test_subordinate_clause_puts_the_finite_verb_last():
    for en, de in sample(toy.ToyGrammar.subordinate):
        tokens = [w.lower() for w in de]
        assert tokens[-1] == "." and tokens[-2] in FINITE, (en, de)
        assert "dass" in tokens and tokens[tokens.index("dass") - 1] == ","


def test_perfect_puts_the_participle_last():
    for en, de in sample(toy.ToyGrammar.perfect):
        assert de[-2] in PARTICIPLES and de[1] not in PARTICIPLES, (en, de)


def test_fronted_adverb_inverts_verb_and_subject():
    adverbs = {de for _, de in toy.ADVERBS}
    for en, de in sample(toy.ToyGrammar.fronted_adverb):
        sentence = " ".join(de)
        adverb = next(a for a in adverbs if sentence.startswith(a + " "))
        assert de[len(adverb.split())] in FINITE, (en, de)


def test_pronoun_agrees_with_the_gender_of_a_distant_antecedent():
    seen_genders = set()
    for en, de in sample(toy.ToyGrammar.pronoun_predicate, n=500):
        pronoun = de[de.index("dass") + 1]
        gender, position = antecedent(en, de)
        expected = "sie" if gender == "pl" else toy.PRONOUN["nom"][gender]
        assert pronoun == expected, (en, de)
        assert de.index("dass") - position >= 4, "the antecedent is not far from the pronoun"
        seen_genders.add(gender)
    assert seen_genders == {"m", "f", "n", "pl"}


def test_object_pronoun_takes_the_accusative():
    for en, de in sample(toy.ToyGrammar.pronoun_object, n=300):
        gender, _ = antecedent(en, de)
        expected = "sie" if gender == "pl" else toy.PRONOUN["acc"][gender]
        assert de[de.index("auch") - 1] == expected, (en, de)


def test_hyphenated_compounds_are_gendered_by_their_head():
    corpus = list(toy.generate(3000, seed=5, partition="train"))
    compounds = 0
    for en, de in corpus:
        for modifier, head in re.findall(r"\b(\w+)-(\w+)\b", de):
            noun = next(n for n in toy.COMPOUND_HEADS if head in (n.de, n.de_plural))
            english_modifier = next(e for e, g in toy.COMPOUND_MODIFIERS if g == modifier)
            assert (
                f"{english_modifier} {noun.en}" in en
                or f"{english_modifier} {noun.en_plural}" in en
            )
            compounds += 1
    assert compounds > 300


def test_word_order_decides_which_german_words_appear():
    """Sources with the same bag of words need different German words (case follows the role).

    "A bird has carried the cat" -> "einen Vogel"; "the bird has carried a cat" -> "ein ...":
    a model without positions sees the same input for both.
    """
    by_bag = defaultdict(set)
    for en, de in toy.generate(20000, seed=1, partition="train"):
        by_bag[tuple(sorted(words(en.lower())))].add(tuple(sorted(words(de.lower()))))
    ambiguous = sum(1 for german_bags in by_bag.values() if len(german_bags) > 1)
    assert ambiguous >= 30


def test_sentences_are_capitalised_and_punctuated():
    for en, de in toy.generate(500, seed=2, partition="dev"):
        for sentence in (en, de):
            assert sentence[0].isupper() and sentence.endswith(".")
            assert " ," not in sentence and " ." not in sentence


def test_more_sentences_than_the_grammar_gives_is_refused_naming_the_size(tmp_path):
    """A split larger than the grammar's distinct sentences ended in a ValueError traceback
    (and past 10^6 the schema refuses it first: every sentence is kept to tell it from the
    next)."""
    from aiayn.data.toy import generate
    from aiayn.errors import InputError

    with pytest.raises(InputError) as refused:
        list(generate(50, 1, "dev", max_draws_per_line=1))
    assert "the toy grammar cannot produce 50 distinct dev sentences" in str(refused.value)
    assert "lower this split's `size`" in str(refused.value)
