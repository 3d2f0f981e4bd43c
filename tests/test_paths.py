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
    """The package names data, run and result files through aiayn.config.paths only, so a file
    name changes in one place for the code (the rules spell theirs: see the next test)."""
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
    assert not found, "file names spelled outside aiayn.config.paths:\n" + "\n".join(found)


# What the rules write that no code reads by name.
RULES_OWN = {"results/{study}/complexity/table1.json"}


def paths_patterns() -> set[str]:
    """Every file pattern aiayn.config.paths gives the workflow, wildcards as the rules name them."""
    found = {paths.split_record(stage) for stage in ("raw", "clean", "bin")}
    found |= {
        paths.split_text(stage, side)
        for stage in ("raw", "clean", "bin")
        for side in ("{src}", "{tgt}")
    }
    found |= {paths.subword_file(suffix) for suffix in ("model", "vocab", "json")}
    found |= {paths.decode_output(suffix) for suffix in ("hyp", "json", "trees")}
    tables = ("{table}", "table1")  # each as .md, .csv, .tex, and its detail as .md
    found |= {
        paths.table_file(table, suffix) for table in tables for suffix in ("md", "csv", "tex")
    }
    found |= {paths.table_file(f"{table}_detail") for table in tables}
    found |= {
        paths.figure_file(figure, suffix)
        for figure in ("{figure}", "complexity")
        for suffix in ("png", "pdf")
    }
    return found | {
        paths.gold_trees(), paths.train_summary(), paths.averaged_model(), paths.attention_weights(),
        paths.export_dir(), paths.score_file(), paths.seed_score_file(), paths.parse_baseline_file(),
        paths.run_record(),
    }  # fmt: skip


def rules_patterns() -> dict[str, str]:
    """Every data, run and result file pattern the Snakefile and the rules spell, as
    aiayn.config.paths would: `{lang}` as each side, a fixed or a run's split as `{split}`, an
    f-string's study as `{study}`; each with where it is."""
    found = {}
    for source in [PROJECT / "Snakefile", *sorted((PROJECT / "rules").glob("*.smk"))]:
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            for f, pattern in re.findall(r'(f?)"((?:data|runs|results)/[^"]*)"', line):
                if f:
                    pattern = pattern.replace("{plan.study}", "{study}").replace("{{", "{")
                    pattern = pattern.replace("}}", "}")
                if pattern.startswith("data/"):
                    pattern = re.sub(r"/(train|\{dev_split\})\.", "/{split}.", pattern)
                for side in ("{src}", "{tgt}"):
                    found[pattern.replace("{lang}", side)] = f"{source.name}:{number}"
    return found


def test_the_rules_spell_aiayn_config_paths_patterns():
    """A rule's files are readable in the rule, and each is the pattern by which the package
    finds the same file: a typo on either side fails here, not in a user's run."""
    spelled = rules_patterns()
    strays = {p: at for p, at in spelled.items() if p not in paths_patterns() | RULES_OWN}
    assert not strays, f"rules' patterns that aiayn.config.paths does not give: {strays}"
    assert paths_patterns() <= set(spelled), paths_patterns() - set(spelled)
    assert not RULES_OWN & {text for src in PROJECT.glob("src/aiayn/**/*.py")
                            for _, text in string_literals(src)}  # fmt: skip
