"""A seeded generator of a small English -> German parallel corpus with real translation phenomena.

The German is real German grammar on a small lexicon, so a tiny Transformer learns it in minutes,
but only by attending to word order:
- case and gender agreement: articles and adjective endings depend on the noun's gender, number
  and role ("the dog sees the cat" / "the cat sees the dog" -> "der Hund sieht die Katze" /
  "die Katze sieht den Hund": the same English words, different German words);
- reordering: verb-final subordinate clauses ("..., dass der Hund die Katze sieht"), the verb
  bracket of the perfect ("hat die Katze gesehen") and verb-second inversion after an adverb;
- hyphenated compounds ("the Berlin marathon" -> "der Berlin-Marathon"), gendered by their head;
- a long-range dependency: English "it" becomes er / sie / es (ihn / sie / es) after the
  grammatical gender of an antecedent many words earlier, which English does not mark.

Splits never share a sentence: every English sentence belongs to exactly one partition by a hash.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from aiayn.errors import InputError

PARTITIONS = {"train": range(0, 8), "dev": range(8, 9), "test": range(9, 10)}


@dataclass(frozen=True)
class Noun:
    en: str
    en_plural: str
    de: str
    de_plural: str
    gender: str  # "m", "f" or "n"
    person: bool = False  # English uses he/she for persons, "it" for everything else


@dataclass(frozen=True)
class Verb:
    en_3sg: str
    en_base: str
    en_participle: str
    de_3sg: str
    de_3pl: str
    de_participle: str


PERSONS = [
    Noun("man", "men", "Mann", "Männer", "m", True),
    Noun("woman", "women", "Frau", "Frauen", "f", True),
    Noun("king", "kings", "König", "Könige", "m", True),
    Noun("queen", "queens", "Königin", "Königinnen", "f", True),
    Noun("father", "fathers", "Vater", "Väter", "m", True),
    Noun("mother", "mothers", "Mutter", "Mütter", "f", True),
    Noun("brother", "brothers", "Bruder", "Brüder", "m", True),
    Noun("sister", "sisters", "Schwester", "Schwestern", "f", True),
]
ANIMALS = [
    Noun("dog", "dogs", "Hund", "Hunde", "m"),
    Noun("cat", "cats", "Katze", "Katzen", "f"),
    Noun("horse", "horses", "Pferd", "Pferde", "n"),
    Noun("bird", "birds", "Vogel", "Vögel", "m"),
    Noun("mouse", "mice", "Maus", "Mäuse", "f"),
    Noun("sheep", "sheep", "Schaf", "Schafe", "n"),
]
THINGS = [
    Noun("table", "tables", "Tisch", "Tische", "m"),
    Noun("lamp", "lamps", "Lampe", "Lampen", "f"),
    Noun("book", "books", "Buch", "Bücher", "n"),
    Noun("letter", "letters", "Brief", "Briefe", "m"),
    Noun("bottle", "bottles", "Flasche", "Flaschen", "f"),
    Noun("picture", "pictures", "Bild", "Bilder", "n"),
    Noun("chair", "chairs", "Stuhl", "Stühle", "m"),
    Noun("door", "doors", "Tür", "Türen", "f"),
    Noun("window", "windows", "Fenster", "Fenster", "n"),
]
COMPOUND_MODIFIERS = [  # (English, German)
    ("Berlin", "Berlin"),
    ("Paris", "Paris"),
    ("EU", "EU"),
    ("UN", "UN"),
    ("NATO", "NATO"),
    ("Rome", "Rom"),
]
COMPOUND_HEADS = [
    Noun("marathon", "marathons", "Marathon", "Marathons", "m"),
    Noun("summit", "summits", "Gipfel", "Gipfel", "m"),
    Noun("concert", "concerts", "Konzert", "Konzerte", "n"),
    Noun("election", "elections", "Wahl", "Wahlen", "f"),
    Noun("report", "reports", "Bericht", "Berichte", "m"),
    Noun("debate", "debates", "Debatte", "Debatten", "f"),
]
TRANSITIVE = [
    Verb("sees", "see", "seen", "sieht", "sehen", "gesehen"),
    Verb("hears", "hear", "heard", "hört", "hören", "gehört"),
    Verb("finds", "find", "found", "findet", "finden", "gefunden"),
    Verb("likes", "like", "liked", "mag", "mögen", "gemocht"),
    Verb("carries", "carry", "carried", "trägt", "tragen", "getragen"),
    Verb("searches for", "search for", "searched for", "sucht", "suchen", "gesucht"),
]
PERSON_ONLY_TRANSITIVE = [
    Verb("buys", "buy", "bought", "kauft", "kaufen", "gekauft"),
    Verb("paints", "paint", "painted", "malt", "malen", "gemalt"),
]
INTRANSITIVE = [
    Verb("sleeps", "sleep", "slept", "schläft", "schlafen", "geschlafen"),
    Verb("waits", "wait", "waited", "wartet", "warten", "gewartet"),
    Verb("plays", "play", "played", "spielt", "spielen", "gespielt"),
]
ADJECTIVES = [
    ("big", "groß"),
    ("small", "klein"),
    ("old", "alt"),
    ("new", "neu"),
    ("red", "rot"),
    ("beautiful", "schön"),
    ("heavy", "schwer"),
]
ADVERBS = [
    ("today", "heute"),
    ("now", "jetzt"),
    ("in the morning", "am Morgen"),
    ("in the evening", "am Abend"),
    ("on Sunday", "am Sonntag"),
]
MATRIX = [  # (English subject + verb, German subject + verb): introduces a "that"-clause
    ("I know", "ich weiß"),
    ("we think", "wir denken"),
    ("she says", "sie sagt"),
    ("he hopes", "er hofft"),
    ("they believe", "sie glauben"),
]

DEFINITE = {
    "nom": {"m": "der", "f": "die", "n": "das"},
    "acc": {"m": "den", "f": "die", "n": "das"},
}
INDEFINITE = {
    "nom": {"m": "ein", "f": "eine", "n": "ein"},
    "acc": {"m": "einen", "f": "eine", "n": "ein"},
}
WEAK_ENDING = {"nom": {"m": "e", "f": "e", "n": "e"}, "acc": {"m": "en", "f": "e", "n": "e"}}
MIXED_ENDING = {"nom": {"m": "er", "f": "e", "n": "es"}, "acc": {"m": "en", "f": "e", "n": "es"}}
PRONOUN = {"nom": {"m": "er", "f": "sie", "n": "es"}, "acc": {"m": "ihn", "f": "sie", "n": "es"}}


@dataclass(frozen=True)
class Phrase:
    """A noun phrase rendered in both languages, with what agreement needs to know."""

    en: str
    de: str
    gender: str
    plural: bool


class ToyGrammar:
    """Draws sentence pairs from a few templates; all randomness comes from one seeded RNG."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def noun_phrase(self, noun: Noun, case: str, modifier: tuple[str, str] | None = None) -> Phrase:
        rng = self.rng
        plural = rng.random() < 0.3
        definite = plural or modifier is not None or rng.random() < 0.6
        adjective = rng.choice(ADJECTIVES) if rng.random() < 0.4 else None
        en_noun = noun.en_plural if plural else noun.en
        de_noun = noun.de_plural if plural else noun.de
        if modifier is not None:
            en_noun, de_noun = f"{modifier[0]} {en_noun}", f"{modifier[1]}-{de_noun}"
        en_words, de_words = [], []
        if plural:
            en_words, de_words = ["the"], ["die"]
            de_adj_ending = "en"
        elif definite:
            en_words, de_words = ["the"], [DEFINITE[case][noun.gender]]
            de_adj_ending = WEAK_ENDING[case][noun.gender]
        else:
            first = adjective[0] if adjective else en_noun
            en_words = ["an" if first[0] in "aeiou" else "a"]
            de_words = [INDEFINITE[case][noun.gender]]
            de_adj_ending = MIXED_ENDING[case][noun.gender]
        if adjective:
            en_words.append(adjective[0])
            de_words.append(adjective[1] + de_adj_ending)
        en_words.append(en_noun)
        de_words.append(de_noun)
        return Phrase(" ".join(en_words), " ".join(de_words), noun.gender, plural)

    def subject(self, case: str = "nom") -> Phrase:
        return self.noun_phrase(self.rng.choice(PERSONS + ANIMALS), case)

    def person(self) -> Phrase:
        return self.noun_phrase(self.rng.choice(PERSONS), "nom")

    def object_(self) -> Phrase:
        if self.rng.random() < 0.2:
            head = self.rng.choice(COMPOUND_HEADS)
            return self.noun_phrase(head, "acc", modifier=self.rng.choice(COMPOUND_MODIFIERS))
        return self.noun_phrase(self.rng.choice(PERSONS + ANIMALS + THINGS), "acc")

    def thing(self) -> tuple[Phrase, Noun]:
        """An object English calls "it": an animal, a thing or a compound."""
        if self.rng.random() < 0.25:
            head = self.rng.choice(COMPOUND_HEADS)
            modifier = self.rng.choice(COMPOUND_MODIFIERS)
            return self.noun_phrase(head, "acc", modifier=modifier), head
        noun = self.rng.choice(ANIMALS + THINGS)
        return self.noun_phrase(noun, "acc"), noun

    def clause(self, subject: Phrase | None = None, person_subject: bool = False):
        """(English words, German subject, German verb, German rest) of a present-tense clause."""
        subject = subject or (self.person() if person_subject else self.subject())
        verbs = TRANSITIVE + (PERSON_ONLY_TRANSITIVE if person_subject else [])
        if self.rng.random() < 0.2:
            verb, obj = self.rng.choice(INTRANSITIVE), None
        else:
            verb, obj = self.rng.choice(verbs), self.object_()
        en_verb = verb.en_base if subject.plural else verb.en_3sg
        de_verb = verb.de_3pl if subject.plural else verb.de_3sg
        en = [subject.en, en_verb] + ([obj.en] if obj else [])
        return en, subject.de, de_verb, [obj.de] if obj else []

    # Templates: each returns (English words, German words), punctuation as separate tokens.
    def main_clause(self):
        en, subj, verb, rest = self.clause()
        return en + ["."], [subj, verb, *rest, "."]

    def perfect(self):
        subject = self.subject()
        verb = self.rng.choice(TRANSITIVE)
        obj = self.object_()
        en_aux, de_aux = ("have", "haben") if subject.plural else ("has", "hat")
        return (
            [subject.en, en_aux, verb.en_participle, obj.en, "."],
            [subject.de, de_aux, obj.de, verb.de_participle, "."],
        )

    def fronted_adverb(self):
        en_adv, de_adv = self.rng.choice(ADVERBS)
        en, subj, verb, rest = self.clause()
        return [en_adv, *en, "."], [de_adv, verb, subj, *rest, "."]

    def subordinate(self):
        en_matrix, de_matrix = self.rng.choice(MATRIX)
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
        first = self.person()
        verb = self.rng.choice(TRANSITIVE + PERSON_ONLY_TRANSITIVE)
        antecedent, _ = self.thing()
        second = self.person()
        en_adj, de_adj = self.rng.choice(ADJECTIVES)
        en_verb = verb.en_base if first.plural else verb.en_3sg
        de_verb = verb.de_3pl if first.plural else verb.de_3sg
        say_en, say_de = ("say", "sagen") if second.plural else ("says", "sagt")
        en_pron, de_pron = (
            ("they", "sie") if antecedent.plural else ("it", PRONOUN["nom"][antecedent.gender])
        )
        en_be, de_be = ("are", "sind") if antecedent.plural else ("is", "ist")
        return (
            [
                first.en,
                en_verb,
                antecedent.en,
                ",",
                "and",
                second.en,
                say_en,
                "that",
                en_pron,
                en_be,
                en_adj,
                ".",
            ],
            [
                first.de,
                de_verb,
                antecedent.de,
                ",",
                "und",
                second.de,
                say_de,
                ",",
                "dass",
                de_pron,
                de_adj,
                de_be,
                ".",
            ],
        )

    def pronoun_object(self):
        """An object pronoun after a full stop: "... a lamp. Later the man buys it too."

        German: "... eine Lampe. Später kauft der Mann sie auch." (accusative by gender).
        """
        first = self.person()
        antecedent, _ = self.thing()
        verb1, verb2 = self.rng.sample(TRANSITIVE + PERSON_ONLY_TRANSITIVE, 2)
        second = self.person()
        en_pron, de_pron = (
            ("them", "sie") if antecedent.plural else ("it", PRONOUN["acc"][antecedent.gender])
        )
        en_v1 = verb1.en_base if first.plural else verb1.en_3sg
        de_v1 = verb1.de_3pl if first.plural else verb1.de_3sg
        en_v2 = verb2.en_base if second.plural else verb2.en_3sg
        de_v2 = verb2.de_3pl if second.plural else verb2.de_3sg
        return (
            [first.en, en_v1, antecedent.en, ".", "later", second.en, en_v2, en_pron, "too", "."],
            [first.de, de_v1, antecedent.de, ".", "später", de_v2, second.de, de_pron, "auch", "."],
        )

    TEMPLATES = (
        (main_clause, 3),
        (perfect, 2),
        (fronted_adverb, 2),
        (subordinate, 2),
        (because, 1),
        (pronoun_predicate, 2),
        (pronoun_object, 2),
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
    size: int, seed: int, partition: str, max_draws_per_line: int = 1000, grammar=ToyGrammar
) -> Iterator[tuple[str, str]]:
    """Yield `size` distinct (English, German) pairs of `grammar` (called with the seed) that
    belong to `partition`."""
    if partition not in PARTITIONS:
        raise ValueError(f"toy partition must be one of {sorted(PARTITIONS)}, not {partition!r}")
    grammar = grammar(seed)
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
