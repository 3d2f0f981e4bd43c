"""Each data, run and result file name is spelled once, in aiayn.config.paths, and means the same as a
rule's pattern and as a concrete file."""

from __future__ import annotations

import ast
import re

from aiayn.config import paths
from tests.conftest import PROJECT

# A string that is a path under one of the workflow's output folders (no spaces: not prose).
PATH_LITERAL = re.compile(r"^(data|runs|results)/\S*$")
FILE_NAMES = {"bpe.model", "averaged.safetensors", "train.json", "train.jsonl", "experiment.json"}


def test_patterns_and_concrete_names_agree():
    assert paths.split_text("raw", "{src}") == "data/{dataset}/raw/{split}.{src}-{tgt}.{src}"
    assert paths.split_sides("bin", "toy", "dev", ["en", "de"]) == [
        "data/toy/bin/dev.en-de.en",
        "data/toy/bin/dev.en-de.de",
    ]
    assert paths.split_record("clean", "toy", "train", "en-de") == "data/toy/clean/train.en-de.json"
    assert paths.subword_file("model", "toy") == "data/toy/spm/bpe.model"
    assert paths.averaged_model() == "runs/{experiment}/averaged.safetensors"
    assert paths.train_summary("tiny") == "runs/tiny/" + paths.TRAIN_SUMMARY
    assert paths.decode_output("hyp", "tiny", "last", "dev") == "runs/tiny/decode/last/dev.hyp"
    # results are the study's: results/<study>/...
    assert paths.score_file("tiny", "last", "dev", "toy") == "results/toy/scores/tiny/last/dev.json"
    assert paths.table_file("table2", "csv", "paper") == "results/paper/tables/table2.csv"
    assert (
        paths.attention_figure("word", "png", "tiny", "toy")
        == "results/toy/figures/attention/tiny.word.png"
    )
    assert paths.run_record("multi30k") == "results/multi30k/run.json"


def string_literals(path):
    """Every string constant of a Python file, f-strings by their literal parts."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(
                part.value if isinstance(part, ast.Constant) else "{}" for part in node.values
            )
            yield node.lineno, text


def test_no_rule_script_or_module_spells_a_file_name_of_its_own():
    """Rules and code name data, run and result files through aiayn.config.paths only, so a file name
    changes in one place (the rules' logs/ and benchmarks/ follow Snakemake's own layout)."""
    sources = [
        *(PROJECT / "src" / "aiayn").rglob("*.py"),
        *(PROJECT / "workflow_scripts").glob("*.py"),
    ]
    found = []
    for source in sources:
        if source.name == "paths.py":
            continue
        for line, text in string_literals(source):
            if PATH_LITERAL.match(text) or text in FILE_NAMES:
                found.append(f"{source.relative_to(PROJECT)}:{line}: {text!r}")
    rules = [PROJECT / "Snakefile", *(PROJECT / "rules").glob("*.smk")]
    for source in rules:
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"""f?["'](data|runs|results)/""", line):
                found.append(f"{source.relative_to(PROJECT)}:{number}: {line.strip()}")
    assert not found, "file names spelled outside aiayn.config.paths:\n" + "\n".join(found)
