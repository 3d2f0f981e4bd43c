"""Scoring on the real newstest2014 (../shared/data): both BLEU protocols and chrF."""

import json
import shutil
import subprocess
import sys

import pytest

from aiayn.errors import InputError
from aiayn.score.bleu import paired_bootstrap, paper_tokenize, score, split_compounds
from tests.conftest import shared


@pytest.fixture(scope="module")
def newstest2014_de():
    path = shared("wmt14_newstest", "full", "newstest2014.en-de.de")
    return path, path.read_text(encoding="utf-8").splitlines()


def perturb(lines):
    """Drop every fifth word and swap the first two words of every third line."""
    out = []
    for index, line in enumerate(lines):
        words = [w for i, w in enumerate(line.split()) if i % 5 != 4]
        if index % 3 == 0 and len(words) > 1:
            words[0], words[1] = words[1], words[0]
        out.append(" ".join(words))
    return out


def test_the_reference_scores_100_against_itself(newstest2014_de):
    _, references = newstest2014_de
    figures = score(references, references, "de")
    assert figures["sentences"] == 3003
    assert figures["sacrebleu"]["score"] == pytest.approx(100.0)
    assert figures["tokenized_bleu"]["score"] == pytest.approx(100.0)
    assert figures["chrf"]["score"] == pytest.approx(100.0)


def test_sacrebleu_figures_equal_the_sacrebleu_command_line(newstest2014_de, tmp_path):
    reference_path, references = newstest2014_de
    hypotheses = perturb(references)
    hypothesis_path = tmp_path / "hyp.de"
    hypothesis_path.write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "sacrebleu", str(reference_path), "-i", str(hypothesis_path)]
    result = subprocess.run(
        [*command, "-m", "bleu", "chrf", "-w", "4"], capture_output=True, text=True, check=True
    )
    cli_bleu, cli_chrf = json.loads(result.stdout)
    figures = score(hypotheses, references, "de")
    assert 20 < figures["sacrebleu"]["score"] < 90  # perturbed, not trivial
    assert round(figures["sacrebleu"]["score"], 4) == pytest.approx(cli_bleu["score"])
    assert figures["sacrebleu"]["signature"] == cli_bleu["signature"]
    assert round(figures["chrf"]["score"], 4) == pytest.approx(cli_chrf["score"])
    assert figures["chrf"]["signature"] == cli_chrf["signature"]
    assert figures["tokenized_bleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:none")


def sacrebleu_cli(reference_path, tmp_path, systems: list[list[str]], *options: str):
    """sacreBLEU's own command line on these systems' outputs, as JSON."""
    paths = []
    for index, lines in enumerate(systems):
        paths.append(tmp_path / f"system{index}.de")
        paths[-1].write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "sacrebleu", str(reference_path), "-i", *map(str, paths)]
    result = subprocess.run(
        [*command, "-m", "bleu", "-w", "4", "-f", "json", *options],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def test_confidence_intervals_are_sacrebleus(newstest2014_de, tmp_path):
    reference_path, references = newstest2014_de
    hypotheses = perturb(references)
    cli = sacrebleu_cli(reference_path, tmp_path, [hypotheses], "--confidence")
    bootstrap = score(hypotheses, references, "de")["sacrebleu"]["bootstrap"]
    assert round(bootstrap["mean"], 4) == pytest.approx(cli["confidence_mean"])
    assert round(bootstrap["ci95"], 4) == pytest.approx(cli["confidence_var"])
    assert 0.05 < bootstrap["ci95"] < 1.0 and bootstrap["signature"] == cli["signature"]
    assert "bootstrap" not in score(hypotheses, references, "de", resamples=1)["sacrebleu"]


def test_the_paired_test_is_sacrebleus_and_sees_a_real_difference(newstest2014_de, tmp_path):
    reference_path, references = newstest2014_de
    baseline = perturb(references)
    # The last word of every other line dropped: about 1 BLEU worse, far beyond the noise.
    worse = [line if i % 2 else " ".join(line.split()[:-1]) for i, line in enumerate(baseline)]
    _, cli = sacrebleu_cli(reference_path, tmp_path, [baseline, worse], "--paired-bs")
    test = paired_bootstrap(worse, baseline, references)
    assert test["p_value"] == pytest.approx(cli["BLEU"]["p_value"]) and test["p_value"] < 0.01
    assert test["difference"] == pytest.approx(cli["BLEU"]["score"] - test["baseline_score"])
    assert test["difference"] < -0.5


def test_identical_outputs_are_not_a_significant_difference(newstest2014_de):
    _, references = newstest2014_de
    hypotheses = perturb(references)
    test = paired_bootstrap(hypotheses, list(hypotheses), references)
    assert test["p_value"] == 1.0 and test["difference"] == 0.0 and test["identical"]
    with pytest.raises(InputError, match="both systems must translate the same test set"):
        paired_bootstrap(hypotheses[:10], hypotheses, references)


def test_compound_splitting_follows_the_perl_one_liner():
    assert split_compounds("Test-Satz") == "Test ##AT##-##AT## Satz"
    assert split_compounds("a - b") == "a - b"
    # Like perl's s///g: matches do not overlap, so the second hyphen of a-b-c stays.
    assert split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
    assert split_compounds("US-Präsident 2013-14") == (
        "US ##AT##-##AT## Präsident 2013 ##AT##-##AT## 14"
    )


# perl -ple without -C reads bytes: the second byte of à is a non-space, so after `s-à` matched,
# `à-v` matches too; a no-break space (C2 A0) is two non-space bytes, not whitespace.
PERL_BYTE_CASES = {
    "vis-à-vis": "vis ##AT##-##AT## à ##AT##-##AT## vis",
    "é-é-é": "é ##AT##-##AT## é ##AT##-##AT## é",
    "a\u00a0-b": "a\u00a0 ##AT##-##AT## b",
    "a-b-c": "a ##AT##-##AT## b-c",
}


@pytest.mark.parametrize(("line", "split"), PERL_BYTE_CASES.items())
def test_compound_splitting_works_on_bytes_as_perl_does(line, split):
    assert split_compounds(line) == split
    if shutil.which("perl") is not None:
        perl = subprocess.run(
            ["perl", "-ple", r"s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g"],
            input=(line + "\n").encode("utf-8"),
            capture_output=True,
            check=True,
        )
        assert perl.stdout.decode("utf-8") == split + "\n"


def test_compound_splitting_matches_perl_on_the_real_test_set(newstest2014_de, tmp_path):
    if shutil.which("perl") is None:
        pytest.skip("perl is not installed")
    _, references = newstest2014_de
    tokenized = [line for line in paper_tokenize(references, "de")]
    unsplit = tmp_path / "tok.de"
    unsplit.write_text(
        "\n".join(line.replace(" ##AT##-##AT## ", "-") for line in tokenized) + "\n",
        encoding="utf-8",
    )
    perl = subprocess.run(
        ["perl", "-ple", r"s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g"],
        stdin=unsplit.open("rb"),
        capture_output=True,
        check=True,
    )
    assert perl.stdout.decode("utf-8").splitlines() == tokenized
    assert sum("##AT##" in line for line in tokenized) > 300


def test_the_paper_protocol_splits_both_sides(newstest2014_de):
    _, references = newstest2014_de
    # Joining every compound in the hypothesis costs exactly the split tokens of the reference.
    hypotheses = [line.replace("-", "") for line in references]
    figures = score(hypotheses, references, "de")["tokenized_bleu"]
    reference_tokens = sum(len(line.split()) for line in paper_tokenize(references, "de"))
    hypothesis_tokens = sum(len(line.split()) for line in paper_tokenize(hypotheses, "de"))
    assert figures["ref_len"] == reference_tokens
    assert figures["hyp_len"] == hypothesis_tokens
    assert figures["hyp_len"] < figures["ref_len"]
    assert figures["score"] < 100.0


def test_a_hypothesis_file_of_another_length_is_refused():
    with pytest.raises(InputError, match="2 hypotheses for 3 references"):
        score(["a", "b"], ["a", "b", "c"], "de")
