"""A seeded generator of a small English -> German parallel corpus with real translation phenomena.

The German is real German grammar on a lexicon of a few hundred real words (aiayn.data.toy_lexicon)
drawn with Zipfian frequencies, so a tiny Transformer learns the grammar in minutes but must learn
each rare noun's gender and plural from few examples, and must attend to word order:
- case and gender agreement: articles and adjective endings depend on the noun's gender, number
  and case, and the case on its role ("the dog sees the cat" / "the cat sees the dog" -> "der Hund
  sieht die Katze" / "die Katze sieht den Hund": the same English words, different German words),
  on the verb (dative objects of helfen, danken) or on a preposition (mit, ohne);
- reordering: verb-final subordinate and relative clauses ("..., dass der Hund die Katze sieht"),
  the verb bracket of the perfect ("hat die Katze gesehen") and of modals ("kann die Katze
  sehen"), verb-second inversion after an adverb, and the recipient before the theme whatever
  the English order ("gives the book to the man" -> "gibt dem Mann das Buch");
- hyphenated compounds ("the Berlin marathon" -> "der Berlin-Marathon"), gendered by their head;
- long-range dependencies: English "it" becomes er / sie / es (ihn / sie / es) after the
  grammatical gender of an antecedent many words earlier, and a relative pronoun and the main
  verb agree with a subject across the clause between them.

Splits never share a sentence: every English sentence belongs to exactly one partition by a hash.
"""

from __future__ import annotations

import functools
import itertools
import random
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from aiayn.data.toy_lexicon import (
    ADJECTIVES,
    ADVERBS,
    ANIMALS,
    COMPOUND_HEADS,
    COMPOUND_MODIFIERS,
    DATIVE_VERBS,
    DITRANSITIVE,
    INTRANSITIVE,
    MATRIX,
    MODALS,
    PERSON_ONLY_TRANSITIVE,
    PERSONS,
    PREPOSITIONS,
    THINGS,
    TRANSITIVE,
    Noun,
    Verb,
)
from aiayn.errors import InputError

PARTITIONS = {"train": range(0, 8), "dev": range(8, 9), "test": range(9, 10)}

# A list's word of rank r (from 1) is drawn with weight 1 / r**ZIPF (chosen on dev among the
# candidates bench/toy_candidates.py tried: docs/benchmarks.md)
ZIPF = 1.0

DEFINITE = {
    "nom": {"m": "der", "f": "die", "n": "das", "p": "die"},
    "acc": {"m": "den", "f": "die", "n": "das", "p": "die"},
    "dat": {"m": "dem", "f": "der", "n": "dem", "p": "den"},
}
INDEFINITE = {
    "nom": {"m": "ein", "f": "eine", "n": "ein"},
    "acc": {"m": "einen", "f": "eine", "n": "ein"},
    "dat": {"m": "einem", "f": "einer", "n": "einem"},
}
WEAK_ENDING = {  # after a definite article (p: plural)
    "nom": {"m": "e", "f": "e", "n": "e", "p": "en"},
    "acc": {"m": "en", "f": "e", "n": "e", "p": "en"},
    "dat": {"m": "en", "f": "en", "n": "en", "p": "en"},
}
MIXED_ENDING = {  # after an indefinite article
    "nom": {"m": "er", "f": "e", "n": "es"},
    "acc": {"m": "en", "f": "e", "n": "es"},
    "dat": {"m": "en", "f": "en", "n": "en"},
}
PRONOUN = {"nom": {"m": "er", "f": "sie", "n": "es"}, "acc": {"m": "ihn", "f": "sie", "n": "es"}}
RELATIVE = {  # the relative pronoun takes its head's gender and number, and its own case
    "nom": {"m": "der", "f": "die", "n": "das", "p": "die"},
    "acc": {"m": "den", "f": "die", "n": "das", "p": "die"},
}


@dataclass(frozen=True)
class Phrase:
    """A noun phrase rendered in both languages, with what agreement needs to know."""

    en: str
    de: str
    gender: str
    plural: bool

    @property
    def agreement(self) -> str:
        return "p" if self.plural else self.gender


def dative_plural(noun: str) -> str:
    """German adds -n to a plural in the dative unless it ends in -n or -s."""
    return noun if noun.endswith(("n", "s")) else noun + "n"


class Ranked:
    """A word list drawn from with weight 1 / rank**zipf."""

    def __init__(self, words: Sequence, zipf: float):
        self.words = list(words)
        weights = (1 / rank**zipf for rank in range(1, len(words) + 1))
        self.cumulative = list(itertools.accumulate(weights))

    def draw(self, rng: random.Random):
        return rng.choices(self.words, cum_weights=self.cumulative)[0]


WORDS = {
    "person": PERSONS,
    "animal": ANIMALS,
    "thing": THINGS,
    "head": COMPOUND_HEADS,
    "modifier": COMPOUND_MODIFIERS,
    "transitive": TRANSITIVE,
    "person_transitive": TRANSITIVE + PERSON_ONLY_TRANSITIVE,
    "dative_verb": DATIVE_VERBS,
    "intransitive": INTRANSITIVE,
    "ditransitive": DITRANSITIVE,
    "adjective": ADJECTIVES,
    "adverb": ADVERBS,
    "matrix": MATRIX,
}


@functools.cache
def ranked(zipf: float) -> dict[str, Ranked]:
    return {kind: Ranked(words, zipf) for kind, words in WORDS.items()}


# Which kind of noun fills a role, and how often
SUBJECTS = {"person": 1, "animal": 1}
OBJECTS = {"compound": 0.15, "person": 0.2, "animal": 0.2, "thing": 0.45}
IT_NOUNS = {"compound": 0.2, "animal": 0.25, "thing": 0.55}  # what English calls "it"


def conjugated(verb: Verb, plural: bool) -> tuple[str, str]:
    """The verb's English and German present-tense forms for a 3rd-person subject."""
    return (verb.en_base, verb.de_3pl) if plural else (verb.en_3sg, verb.de_3sg)


class Phrases:
    """Noun phrases and clauses in both languages, their words drawn from the ranked lexicon;
    all randomness comes from one seeded RNG."""

    def __init__(self, seed: int, zipf: float = ZIPF):
        self.rng = random.Random(seed)
        self.words = ranked(zipf)

    def pick(self, kind: str):
        return self.words[kind].draw(self.rng)

    def noun_phrase(self, noun: Noun, case: str, modifier: tuple[str, str] | None = None) -> Phrase:
        rng = self.rng
        plural = rng.random() < 0.3
        definite = plural or modifier is not None or rng.random() < 0.6
        adjective = self.pick("adjective") if rng.random() < 0.4 else None
        en_noun = noun.en_plural if plural else noun.en
        de_noun = noun.de_plural if plural else noun.de
        if plural and case == "dat":
            de_noun = dative_plural(de_noun)
        if modifier is not None:
            en_noun, de_noun = f"{modifier[0]} {en_noun}", f"{modifier[1]}-{de_noun}"
        agreement = "p" if plural else noun.gender
        if definite:
            en_words, de_words = ["the"], [DEFINITE[case][agreement]]
            ending = WEAK_ENDING[case][agreement]
        else:
            first = adjective[0] if adjective else en_noun
            en_words = ["an" if first[0] in "aeiou" else "a"]
            de_words, ending = [INDEFINITE[case][noun.gender]], MIXED_ENDING[case][noun.gender]
        if adjective:
            en_words.append(adjective[0])
            de_words.append(adjective[1] + ending)
        return Phrase(" ".join([*en_words, en_noun]), " ".join([*de_words, de_noun]), noun.gender,
                      plural)  # fmt: skip

    def noun_of(self, kinds: dict[str, float], case: str) -> tuple[Phrase, Noun]:
        """A noun phrase of a kind drawn with `kinds`' weights, and its noun."""
        kind = self.rng.choices(list(kinds), weights=list(kinds.values()))[0]
        if kind == "compound":
            head = self.pick("head")
            return self.noun_phrase(head, case, modifier=self.pick("modifier")), head
        noun = self.pick(kind)
        return self.noun_phrase(noun, case), noun

    def subject(self) -> Phrase:
        return self.noun_of(SUBJECTS, "nom")[0]

    def person(self, case: str = "nom") -> Phrase:
        return self.noun_phrase(self.pick("person"), case)

    def object_(self, case: str = "acc") -> Phrase:
        return self.noun_of(OBJECTS, case)[0]

    def thing(self) -> Phrase:
        """An object English calls "it": an animal, a thing or a compound."""
        return self.noun_of(IT_NOUNS, "acc")[0]

    def clause(self, subject: Phrase | None = None, person_subject: bool = False):
        """(English words, German subject, German verb, German rest) of a present-tense clause."""
        subject = subject or (self.person() if person_subject else self.subject())
        roll = self.rng.random()
        if roll < 0.15:
            verb, obj = self.pick("intransitive"), None
        elif roll < 0.25:  # the German object in the dative
            verb, obj = self.pick("dative_verb"), self.noun_of(SUBJECTS, "dat")[0]
        else:
            verb = self.pick("person_transitive" if person_subject else "transitive")
            obj = self.object_()
        en_verb, de_verb = conjugated(verb, subject.plural)
        en = [subject.en, en_verb] + ([obj.en] if obj else [])
        return en, subject.de, de_verb, [obj.de] if obj else []


class ToyGrammar(Phrases):
    """Draws sentence pairs from templates of those phrases. Each template returns (English
    words, German words), punctuation as separate tokens."""

    def main_clause(self):
        en, subj, verb, rest = self.clause(person_subject=self.rng.random() < 0.3)
        return en + ["."], [subj, verb, *rest, "."]

    def perfect(self):
        subject = self.subject()
        if self.rng.random() < 0.15:
            verb, obj = self.pick("dative_verb"), self.noun_of(SUBJECTS, "dat")[0]
        else:
            verb, obj = self.pick("transitive"), self.object_()
        en_aux, de_aux = ("have", "haben") if subject.plural else ("has", "hat")
        return (
            [subject.en, en_aux, verb.en_participle, obj.en, "."],
            [subject.de, de_aux, obj.de, verb.de_participle, "."],
        )

    def fronted_adverb(self):
        en_adv, de_adv = self.pick("adverb")
        en, subj, verb, rest = self.clause()
        return [en_adv, *en, "."], [de_adv, verb, subj, *rest, "."]

    def subordinate(self):
        en_matrix, de_matrix = self.pick("matrix")
        en, subj, verb, rest = self.clause()
        return [en_matrix, "that", *en, "."], [de_matrix, ",", "dass", subj, *rest, verb, "."]

    def because(self):
        en1, subj1, verb1, rest1 = self.clause()
        en2, subj2, verb2, rest2 = self.clause()
        return (
            [*en1, "because", *en2, "."],
            [subj1, verb1, *rest1, ",", "weil", subj2, *rest2, verb2, "."],
        )

    def pronoun_predicate(self):
        """Antecedent early, "it"/"they" many words later, German pronoun by its gender."""
        first, second = self.person(), self.person()
        en_verb, de_verb = conjugated(self.pick("person_transitive"), first.plural)
        antecedent = self.thing()
        en_adj, de_adj = self.pick("adjective")
        say_en, say_de = ("say", "sagen") if second.plural else ("says", "sagt")
        en_pron, de_pron = (
            ("they", "sie") if antecedent.plural else ("it", PRONOUN["nom"][antecedent.gender])
        )
        en_be, de_be = ("are", "sind") if antecedent.plural else ("is", "ist")
        en = [first.en, en_verb, antecedent.en, ",", "and", second.en, say_en, "that", en_pron]
        de = [first.de, de_verb, antecedent.de, ",", "und", second.de, say_de, ",", "dass"]
        return [*en, en_be, en_adj, "."], [*de, de_pron, de_adj, de_be, "."]

    def pronoun_object(self):
        """An object pronoun after a full stop: "... a lamp. Later the man buys it too."

        German: "... eine Lampe. Später kauft der Mann sie auch." (accusative by gender).
        """
        first, second = self.person(), self.person()
        antecedent = self.thing()
        verb1 = self.pick("person_transitive")
        verb2 = next(v for v in iter(lambda: self.pick("person_transitive"), None) if v != verb1)
        en_pron, de_pron = (
            ("them", "sie") if antecedent.plural else ("it", PRONOUN["acc"][antecedent.gender])
        )
        en_v1, de_v1 = conjugated(verb1, first.plural)
        en_v2, de_v2 = conjugated(verb2, second.plural)
        return (
            [first.en, en_v1, antecedent.en, ".", "later", second.en, en_v2, en_pron, "too", "."],
            [first.de, de_v1, antecedent.de, ".", "später", de_v2, second.de, de_pron, "auch", "."],
        )

    def ditransitive(self):
        """Recipient and theme: German puts the dative recipient first, in either English order."""
        subject = self.subject()
        en_verb, de_verb = conjugated(self.pick("ditransitive"), subject.plural)
        recipient = self.noun_of(SUBJECTS, "dat")[0]
        theme = self.thing()
        if self.rng.random() < 0.5:
            en = [subject.en, en_verb, recipient.en, theme.en, "."]
        else:
            en = [subject.en, en_verb, theme.en, "to", recipient.en, "."]
        return en, [subject.de, de_verb, recipient.de, theme.de, "."]

    def relative(self, head: Phrase) -> tuple[list[str], list[str]]:
        """A relative clause on `head`: the German pronoun takes the head's gender and number and
        its own role in the clause (subject or object), and the clause's verb goes last."""
        verb = self.pick("transitive")
        if self.rng.random() < 0.5:  # "the dog that sees the cat": the head is the subject
            obj = self.object_()
            en_verb, de_verb = conjugated(verb, head.plural)
            return ["that", en_verb, obj.en], [",", RELATIVE["nom"][head.agreement], obj.de,
                                               de_verb, ","]  # fmt: skip
        inner = self.subject()  # "the dog that the cat sees": the head is the object
        en_verb, de_verb = conjugated(verb, inner.plural)
        return ["that", inner.en, en_verb], [",", RELATIVE["acc"][head.agreement], inner.de,
                                             de_verb, ","]  # fmt: skip

    def relative_subject(self):
        """The subject carries a relative clause; the main verb agrees with it across it."""
        subject = self.subject()
        en_rel, de_rel = self.relative(subject)
        en, _, verb, rest = self.clause(subject=subject)
        return [en[0], *en_rel, *en[1:], "."], [subject.de, *de_rel, verb, *rest, "."]

    def modal(self):
        """Modal + infinitive: the German infinitive goes to the end of the clause."""
        subject = self.subject()
        en_3sg, en_plural, de_3sg, de_plural = self.rng.choice(MODALS)
        verb, obj = self.pick("transitive"), self.object_()
        en_modal, de_modal = (en_plural, de_plural) if subject.plural else (en_3sg, de_3sg)
        return (
            [subject.en, en_modal, verb.en_base, obj.en, "."],
            [subject.de, de_modal, obj.de, verb.de_3pl, "."],
        )

    def prepositional(self):
        """A prepositional phrase: its German case is the preposition's, not the role's."""
        en, subj, verb, rest = self.clause()
        en_prep, de_prep, case = self.rng.choice(PREPOSITIONS)
        phrase = self.object_(case)
        return [*en, en_prep, phrase.en, "."], [subj, verb, *rest, de_prep, phrase.de, "."]

    def coordinated(self):
        """Two subjects: the verb is plural in both languages."""
        first, second = self.subject(), self.subject()
        if self.rng.random() < 0.3:
            verb, obj = self.pick("intransitive"), None
        else:
            verb, obj = self.pick("transitive"), self.object_()
        en = [first.en, "and", second.en, verb.en_base] + ([obj.en] if obj else [])
        de = [first.de, "und", second.de, verb.de_3pl] + ([obj.de] if obj else [])
        return en + ["."], de + ["."]

    TEMPLATES = (
        (main_clause, 2),
        (perfect, 2),
        (fronted_adverb, 2),
        (subordinate, 2),
        (because, 1),
        (pronoun_predicate, 2),
        (pronoun_object, 2),
        (ditransitive, 2),
        (relative_subject, 2),
        (modal, 2),
        (prepositional, 2),
        (coordinated, 1),
    )

    def pair(self) -> tuple[str, str]:
        functions, weights = zip(*self.TEMPLATES, strict=True)
        template = self.rng.choices(functions, weights=weights)[0]
        en, de = template(self)
        return detokenize(en), detokenize(de)


def detokenize(words: list[str]) -> str:
    """Join words into a sentence: punctuation attached, each sentence capitalised."""
    text = " ".join(words).replace(" ,", ",").replace(" .", ".")
    sentences = [s[:1].upper() + s[1:] for s in text.split(". ")]
    return ". ".join(sentences)


def partition_of(english: str) -> str:
    bucket = zlib.crc32(english.encode("utf-8")) % 10
    return next(name for name, buckets in PARTITIONS.items() if bucket in buckets)


def generate(
    size: int, seed: int, partition: str, zipf: float = ZIPF, max_draws_per_line: int = 1000
) -> Iterator[tuple[str, str]]:
    """Yield `size` distinct (English, German) pairs of the grammar, its words drawn with
    exponent `zipf`, that belong to `partition`."""
    if partition not in PARTITIONS:
        raise ValueError(f"toy partition must be one of {sorted(PARTITIONS)}, not {partition!r}")
    grammar = ToyGrammar(seed, zipf)
    seen: set[str] = set()
    draws = 0
    while len(seen) < size:
        en, de = grammar.pair()
        draws += 1
        if draws > max_draws_per_line * (size + 1):
            raise InputError(
                f"the toy grammar cannot produce {size} distinct {partition} sentences (it "
                f"drew {draws - 1} for {len(seen)}): lower this split's `size`"
            )
        if en in seen or partition_of(en) != partition:
            continue
        seen.add(en)
        yield en, de
