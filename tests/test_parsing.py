"""Table 4's pieces: reading and cleaning treebank trees, linearization both ways with repairs,
EVALB's rules on hand-made tree pairs, and the `ptb` source's file selection and errors."""

from __future__ import annotations

import pytest

from aiayn.errors import InputError
from aiayn.parsing.evalb import evalb
from aiayn.parsing.linearize import Linearization, delinearize, linearize
from aiayn.parsing.score import score_trees
from aiayn.parsing.treebank import fetch_ptb, select_files
from aiayn.parsing.trees import clean_tree, read_trees
from tests.conftest import shared

RAW = """( (S
    (NP-SBJ (NNP Ms.) (NNP Haag) )
    (VP (VBZ plays)
      (NP (NNP Elianti) ))
    (-NONE- *T*-1)
    (. .) ))
"""
CLEAN = "(TOP (S (NP (NNP Ms.) (NNP Haag)) (VP (VBZ plays) (NP (NNP Elianti))) (. .)))"
WORDS = ["Ms.", "Haag", "plays", "Elianti", "."]


def tree(text):
    return next(iter(read_trees(text)))


def test_cleaning_drops_empty_elements_and_function_tags_and_names_the_root():
    cleaned = clean_tree(tree(RAW))
    assert str(cleaned) == CLEAN
    assert cleaned.words() == WORDS
    # A constituent that held only an empty element goes with it.
    assert str(clean_tree(tree("( (S (NP-SBJ (-NONE- *)) (VP (VB go))) )"))) == (
        "(TOP (S (VP (VB go))))"
    )
    # -LRB- keeps its leading dash; NP=2 and PRT|ADVP lose their suffixes.
    assert str(clean_tree(tree("( (X (NP=2 (-LRB- -LRB-)) (PRT|ADVP (RP up))) )"))) == (
        "(TOP (X (NP (-LRB- -LRB-)) (PRT (RP up))))"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("( (S (NP (NN a)) )\n( (S (NN b)) ))\n)", "line 3: a closing bracket with no open"),
        ("( (S (NP (NN a))\n", "line 1 is never closed"),
        ("( (S (NN a) b) )", "'b' follows other children"),
        ("word ( (S (NN a)) )", "'word' outside any tree"),
        ("( (S (NN a) (VP)) )", "empty bracket `(VP)`"),
    ],
)
def test_a_malformed_treebank_stops_with_the_file_and_line(text, message):
    with pytest.raises(InputError, match="wsj_0001.mrg") as caught:
        list(read_trees(text, "wsj_0001.mrg"))
    assert message in str(caught.value)


def test_linearization_settings():
    cleaned = clean_tree(tree(RAW))
    assert linearize(cleaned) == "(S (NP NNP NNP )NP (VP VBZ (NP NNP )NP )VP . )S"
    assert linearize(cleaned, Linearization(leaves="xx", close_labels=False)) == (
        "(S (NP XX XX ) (VP XX (NP XX ) ) XX )"
    )
    assert linearize(cleaned, Linearization(leaves="words")) == (
        "(S (NP Ms. Haag )NP (VP plays (NP Elianti )NP )VP . )S"
    )
    with pytest.raises(ValueError, match="tags, xx, words"):
        Linearization(leaves="drop")


@pytest.mark.parametrize("settings", [Linearization(), Linearization("tags", False)])
def test_a_well_formed_sequence_gives_back_the_tree_without_repairs(settings):
    cleaned = clean_tree(tree(RAW))
    rebuilt, repairs = delinearize(linearize(cleaned, settings), WORDS, settings)
    assert str(rebuilt) == CLEAN and not repairs


@pytest.mark.parametrize("leaves", ["xx", "words"])
def test_xx_and_word_leaves_come_back_as_xx_except_punctuation_evalb_deletes(leaves):
    settings = Linearization(leaves)
    cleaned = clean_tree(tree(RAW))
    # The input's words are used whatever the output says at their place.
    sequence = linearize(cleaned, settings).replace("Elianti", "Eliot")
    rebuilt, repairs = delinearize(sequence, WORDS, settings)
    assert str(rebuilt) == (
        "(TOP (S (NP (XX Ms.) (XX Haag)) (VP (XX plays) (NP (XX Elianti))) (. .)))"
    )
    assert not repairs


@pytest.mark.parametrize(
    ("sequence", "expected", "repairs"),
    [
        # A stray closing bracket first, then a label mismatch: `(NP ... )VP` closes the NP.
        (
            ")S (S (NP NNP NNP )VP VBZ NNP . )S",
            "(TOP (S (NP (NNP Ms.) (NNP Haag)) (VBZ plays) (NNP Elianti) (. .)))",
            {"unmatched_close": 1, "close_label_mismatch": 1},
        ),
        # Never closed, and two tags short: the missing words go under the root.
        (
            "(S (NP NNP NNP (VP VBZ",
            "(TOP (S (NP (NNP Ms.) (NNP Haag) (VP (VBZ plays)))) (XX Elianti) (. .))",
            {"unclosed": 3, "missing_words": 2},
        ),
        # Too many tags, and an empty constituent.
        (
            "(S (ADVP )ADVP NNP NNP VBZ NNP . NN NN )S",
            "(TOP (S (NNP Ms.) (NNP Haag) (VBZ plays) (NNP Elianti) (. .)))",
            {"extra_leaves": 2, "empty_constituents": 1},
        ),
        # Tags out of step with the words: a comma tag on "Haag", a noun tag on the full stop.
        (
            "(S (NP NNP , )NP VBZ NNP NNP )S",
            "(TOP (S (NP (NNP Ms.) (XX Haag)) (VBZ plays) (NNP Elianti) (. .)))",
            {"punctuation_tags": 2},
        ),
        # `$` and `%` have no letter or digit, but EVALB keeps them (tagged $ and NN): a comma
        # or full-stop tag on them is repaired like one on a word; `'` keeps the output's tag
        # (a possessive or a closing quote: its form cannot tell).
        (
            "(S , CD . '' )S",
            "(TOP (S (XX $) (CD 5) (XX %) ('' ')))",
            {"punctuation_tags": 2},
        ),
        # Nothing usable at all: every word under the root.
        (
            "",
            "(TOP (XX Ms.) (XX Haag) (XX plays) (XX Elianti) (. .))",
            {"missing_words": 5},
        ),
    ],
)
def test_malformed_output_is_repaired_over_the_input_words_and_counted(sequence, expected, repairs):
    words = ["$", "5", "%", "'"] if sequence.startswith("(S , CD") else WORDS
    rebuilt, counted = delinearize(sequence, words)
    assert str(rebuilt) == expected
    assert rebuilt.words() == words
    assert dict(counted) == repairs


# EVALB on hand-made pairs. Gold: 4 scored brackets, S(0,4) NP(0,2) VP(2,4) NP(3,4); the
# full stop and TOP are deleted.
GOLD = CLEAN


def evalb_of(gold: str, test: str) -> dict:
    return evalb([tree(gold)], [tree(test)])["all"]


def test_identical_trees_score_100():
    figures = evalb_of(GOLD, GOLD)
    assert figures["f1"] == figures["precision"] == figures["recall"] == 100.0
    assert figures["counts"]["gold_brackets"] == 4  # TOP and the full stop are not scored
    assert figures["complete_match"] == 100.0 and figures["tagging_accuracy"] == 100.0


def test_one_wrong_label_loses_one_bracket_on_both_sides():
    figures = evalb_of(GOLD, GOLD.replace("(VP", "(ADJP"))
    assert figures["counts"]["matched_brackets"] == 3
    assert figures["precision"] == figures["recall"] == 75.0
    assert figures["complete_match"] == 0.0


def test_one_wrong_span():
    # VP over "plays Elianti ." vs the gold's "plays Elianti": the full stop is deleted before
    # spans are compared, so the spans are equal and it still matches.
    test = "(TOP (S (NP (NNP Ms.) (NNP Haag)) (VP (VBZ plays) (NP (NNP Elianti)) (. .))))"
    assert evalb_of(GOLD, test)["f1"] == 100.0
    # NP over "Haag plays": a wrong span, which also crosses the gold's NP(0,2) and VP(2,4).
    test = "(TOP (S (NNP Ms.) (NP (NNP Haag) (VBZ plays)) (NP (NNP Elianti)) (. .)))"
    figures = evalb_of(GOLD, test)
    counts = figures["counts"]
    assert (counts["gold_brackets"], counts["test_brackets"], counts["matched_brackets"]) == (
        4,
        3,
        2,
    )
    assert figures["recall"] == 50.0 and figures["precision"] == pytest.approx(200 / 3)
    assert figures["f1"] == pytest.approx(2 * 50 * (200 / 3) / (50 + 200 / 3))
    assert counts["crossing"] == 1


def test_a_dollar_sign_tagged_as_a_comma_no_longer_costs_evalb_the_sentence():
    """Before the repair, `(, $)` made EVALB delete `$` from the output tree only: a length
    mismatch, and the whole sentence left out of the score as an error."""
    (gold,) = read_trees("(TOP (S (NP ($ $) (CD 5)) (VP (VBD rose))))")
    words = gold.words()
    rebuilt, repairs = delinearize("(S (NP , CD )NP (VP VBD )VP )S", words)
    assert repairs == {"punctuation_tags": 1}
    counts = evalb([gold], [rebuilt])["all"]["counts"]
    assert counts["error_sentences"] == 0 and counts["matched_brackets"] == 3
    (unrepaired,) = read_trees("(TOP (S (NP (, $) (CD 5)) (VP (VBD rose))))")
    assert evalb([gold], [unrepaired])["all"]["counts"]["error_sentences"] == 1


def test_punctuation_is_deleted_by_each_trees_own_tags():
    # The test tree tags the full stop NN: it is not deleted there, so the lengths differ and
    # EVALB counts an error sentence, left out of the totals.
    result = evalb([tree(GOLD)], [tree(GOLD.replace("(. .)", "(NN .)"))])
    assert result["all"]["counts"]["error_sentences"] == 1
    assert result["all"]["counts"]["gold_brackets"] == 0
    assert result["first_errors"][0]["reason"] == "length differs (4 | 5)"
    # A bracket that covers only punctuation covers no word: it is not scored.
    test = GOLD.replace("(. .)", "(PRN (. .))")
    assert evalb_of(GOLD, test)["counts"]["test_brackets"] == 4


def test_unary_chains_match_as_a_multiset():
    # (NP (NP x)) in the gold: two NP brackets over the same span; a test tree with one of
    # them matches one.
    gold = "(TOP (S (NP (NP (NNP Ms.) (NNP Haag))) (VP (VBZ plays)) (. .)))"
    test = "(TOP (S (NP (NNP Ms.) (NNP Haag)) (VP (VBZ plays)) (. .)))"
    counts = evalb_of(gold, test)["counts"]
    assert (counts["gold_brackets"], counts["test_brackets"], counts["matched_brackets"]) == (
        4,
        3,
        3,
    )


def test_function_tags_advp_prt_and_words():
    assert evalb_of(GOLD, GOLD.replace("(NP (NNP Ms.)", "(NP-SBJ-1 (NNP Ms.)"))["f1"] == 100.0
    gold = "(TOP (S (VP (VB give) (PRT (RP up)))))"
    assert evalb_of(gold, gold.replace("PRT", "ADVP"))["f1"] == 100.0
    # Different words: an error sentence, as EVALB's "Words unmatch".
    result = evalb([tree(GOLD)], [tree(GOLD.replace("Haag", "Hague"))])
    assert result["first_errors"][0]["reason"] == "words differ (Haag | Hague)"


def test_sentences_over_40_words_are_left_out_of_the_short_figures():
    long_gold = "(TOP (S " + " ".join(f"(NN w{i})" for i in range(41)) + " (-NONE- *)))"
    result = evalb([tree(GOLD), tree(long_gold)], [tree(GOLD), tree(long_gold)])
    assert result["all"]["counts"]["sentences"] == 2
    assert result["length_le_40"]["counts"]["sentences"] == 1


def test_score_trees_counts_repairs_and_checks_alignment():
    sequences = ["(S (NP NNP NNP )NP (VP VBZ (NP NNP )NP )VP . )S", "(S NNP NNP"]
    trees, record = score_trees(sequences, [" ".join(WORDS)] * 2, [GOLD, GOLD], Linearization())
    assert record["repaired_trees"] == 1 and record["repairs"]["missing_words"] == 3
    assert record["repairs"]["punctuation_tags"] == 0
    assert str(trees[0]) == GOLD
    assert str(trees[1]) == "(TOP (S (NNP Ms.) (NNP Haag)) (XX plays) (XX Elianti) (. .))"
    # The second tree's only bracket, S over "Ms. Haag", is the gold's NP span: no match.
    counts = record["evalb"]["all"]["counts"]
    assert (counts["gold_brackets"], counts["test_brackets"], counts["matched_brackets"]) == (
        8,
        5,
        4,
    )
    with pytest.raises(InputError, match="align line by line"):
        score_trees(sequences, [" ".join(WORDS)], [GOLD, GOLD], Linearization())


def write_documents(folder, numbers):
    for number in numbers:
        section = folder / f"{number // 100:02d}"
        section.mkdir(parents=True, exist_ok=True)
        (section / f"wsj_{number:04d}.mrg").write_text(RAW.replace("Haag", f"Haag{number}"))


def test_files_are_chosen_by_section_or_document_number(tmp_path):
    write_documents(tmp_path, [1, 2, 101, 2201, 2301, 2302])
    names = lambda spec: [p.rsplit("/", 1)[1] for p in select_files(spec, str(tmp_path))]  # noqa: E731
    assert names({"sections": "22-23"}) == ["wsj_2201.mrg", "wsj_2301.mrg", "wsj_2302.mrg"]
    assert names({"sections": 23}) == ["wsj_2301.mrg", "wsj_2302.mrg"]
    assert names({"documents": "0002-0101"}) == ["wsj_0002.mrg", "wsj_0101.mrg"]
    with pytest.raises(InputError, match="holds sections 00, 01, 22, 23"):
        select_files({"sections": "02-21"}, str(tmp_path))
    with pytest.raises(InputError, match="not a number or a range"):
        select_files({"sections": "two"}, str(tmp_path))
    with pytest.raises(InputError, match="does not exist"):
        select_files({"path": "missing"}, str(tmp_path))


def test_the_ptb_source_writes_aligned_words_sequences_and_gold_trees(tmp_path):
    write_documents(tmp_path / "wsj", [1, 2])
    outputs = tuple(str(tmp_path / name) for name in ("words", "trees", "gold"))
    record = fetch_ptb({"path": "wsj"}, outputs, "train", root=str(tmp_path))
    words, sequences, gold = (open(path).read().splitlines() for path in outputs)
    assert words == ["Ms. Haag1 plays Elianti .", "Ms. Haag2 plays Elianti ."]
    assert sequences[0] == "(S (NP NNP NNP )NP (VP VBZ (NP NNP )NP )VP . )S"
    assert gold[1] == CLEAN.replace("Haag", "Haag2")
    assert record["lines"] == 2 and record["files"] == 2


def test_the_nltk_sample_reads_whole_and_round_trips():
    folder = shared("ptb_nltk_sample", "combined")
    files = select_files({"documents": "0001-0179"}, str(folder))
    assert len(files) == 179
    trees = [clean_tree(t) for path in files for t in read_trees(open(path).read(), path)]
    assert len(trees) == 3669 and all(trees)
    changed = []
    for cleaned in trees:
        rebuilt, repairs = delinearize(linearize(cleaned), cleaned.words())
        if str(rebuilt) != str(cleaned) or repairs:
            changed.append((str(rebuilt), dict(repairs)))
    # One annotation error of the sample, (, Wa), is taken for a misplaced comma tag.
    assert len(changed) == 1 and "(XX Wa)" in changed[0][0]
    assert changed[0][1] == {"punctuation_tags": 1}


def test_table4_puts_the_papers_rows_first_then_the_baselines_and_labels_ours():
    from aiayn.report.parsing_table import describe_training, table4
    from aiayn.report.tables import ExperimentResult

    counts = {"error_sentences": 2}
    evalb_figures = {"f1": 50.123, "precision": 60.0, "recall": 43.0, "counts": counts}
    record = {
        "split": "test",
        "sentences": 168,
        "repaired_trees": 42,
        "test_set": {"source": "ptb", "documents": "0170-0179"},
        "evalb": {"all": evalb_figures},
    }
    result = ExperimentResult(
        name="p",
        group="p",
        pair="en-ptb",
        dev_split="dev",
        paper_row=None,
        model={"n_layers": 3, "d_model": 256},
        train={},
        summary={"steps": 1200},
        scores={("averaged", "test"): record, ("averaged", "dev"): record, ("last", "dev"): record},
    )
    training = describe_training({"documents": "0001-0159"}, {"kept_pairs": 3396}, result.summary)
    baseline = {
        "split": "test",
        "sentences": 168,
        "test_set": record["test_set"],
        "labels": {"top": "S", "right_branching": "VP"},
        "baselines": {
            "right-branching": {"all": {**evalb_figures, "f1": 19.3}},
            "flat": {"all": {**evalb_figures, "f1": 9.7}},
        },
    }
    table = table4([result], {"p": training}, [baseline])
    assert list(table["source"]) == ["paper"] * 12 + ["baseline"] * 2 + ["ours"]
    right, flat = table.iloc[12], table.iloc[13]
    assert right["parser"] == "right-branching (S over nested VP)" and right["F1"] == 19.3
    assert flat["parser"] == "flat (every word under one S)" and flat["F1"] == 9.7
    assert right["test set"] == "test (documents 0170-0179, 168 sentences)"
    ours = table.iloc[-1]
    assert ours["error sentences"] == 2
    assert ours["parser"] == "p (N=3, d_model=256)"
    assert ours["training"] == "documents 0001-0159: 3396 sentences, 1200 steps"
    assert ours["test set"] == "test (documents 0170-0179, 168 sentences)"
    assert (ours["F1"], ours["repaired trees (%)"]) == (50.12, 25.0)
    paper = table[table["parser"] == "Transformer (4 layers)"]
    assert list(paper["F1"]) == [91.3, 92.7]


def test_baseline_trees_cover_the_words_as_their_names_say():
    from aiayn.parsing.baselines import flat_tree, right_branching_tree, top_label

    words = ["Ms.", "Haag", "plays", "Elianti", "."]
    assert (
        str(flat_tree(words, "S")) == "(TOP (S (XX Ms.) (XX Haag) (XX plays) (XX Elianti) (. .)))"
    )
    assert str(right_branching_tree(words, "S")) == (
        "(TOP (S (XX Ms.) (VP (XX Haag) (VP (XX plays) (VP (XX Elianti) (. .))))))"
    )
    assert str(right_branching_tree(["Yes"], "S")) == "(TOP (S (XX Yes)))"
    trees = list(read_trees("(TOP (S (NP (NN a)))) (TOP (S (VB b))) (TOP (FRAG (NN c)))"))
    assert top_label(trees) == "S"


def test_right_branching_beats_flat_on_the_sample_and_both_lose_no_sentence():
    """On the sample's dev documents (where the VP label was chosen): the figures
    docs/parsing.md quotes."""
    from aiayn.parsing.baselines import baseline_trees

    files = select_files({"documents": "0160-0169"}, str(shared("ptb_nltk_sample", "combined")))
    gold = [clean_tree(t) for path in files for t in read_trees(open(path).read(), path)]
    gold = [tree for tree in gold if tree]
    sentences = [tree.words() for tree in gold]
    right = evalb(gold, baseline_trees("right-branching", sentences, "S"))["all"]
    flat = evalb(gold, baseline_trees("flat", sentences, "S"))["all"]
    assert (round(right["f1"], 1), round(flat["f1"], 1)) == (14.4, 9.3)
    assert right["counts"]["error_sentences"] <= 1 and flat["counts"]["error_sentences"] <= 1
