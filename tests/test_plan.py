"""The workflow's plan of a config (aiayn.config.plan): the entries, names and file lists the rules ask
for, on the shipped config and presets, without Snakemake running."""

from __future__ import annotations

import copy

import pytest

from aiayn.config.load import load_config
from aiayn.config.plan import FIGURES, Plan
from aiayn.errors import InputError
from tests.conftest import PROJECT


@pytest.fixture(scope="module")
def default() -> dict:
    return load_config(PROJECT)


@pytest.fixture(scope="module")
def with_parser() -> dict:
    """The default study and the parsing preset composed: both kinds of experiment."""
    return load_config(PROJECT, [PROJECT / "config.yaml", PROJECT / "configs/parsing.yaml"])


def test_datasets_sides_and_sources(default):
    plan = Plan(default)
    assert plan.data.pair("toy") == "en-de"
    assert plan.data.split_sides("bin", "toy", "dev", (".bin",)) == [
        "data/toy/bin/dev.en-de.en.bin",
        "data/toy/bin/dev.en-de.de.bin",
    ]
    assert plan.data.split_source("toy", "test")["seed"] == 3
    with pytest.raises(ValueError, match=r"dataset 'toy' has no split 'valid' \(splits: "):
        plan.data.split_source("toy", "valid")
    with pytest.raises(ValueError, match=r"dataset 'wmt' is not defined .*defined: \['toy'\]"):
        plan.data.entry("wmt")


def test_prepared_data_are_the_bpe_model_and_every_binarized_split(default):
    files = Plan(default).data.prepared_files()
    assert files[0] == "data/toy/spm/bpe.model"
    assert len(files) == 1 + 3 * 4  # train, dev, test: two sides, .bin and .idx


def test_each_experiment_scores_averaged_dev_and_test_and_the_last_checkpoint_on_dev(default):
    plan = Plan(default)
    assert plan.runs.names()[0] == "tiny" and len(plan.runs.names()) == 4
    assert plan.runs.scored_decodes("tiny") == [
        ("averaged", "dev"),
        ("averaged", "test"),
        ("last", "dev"),
    ]
    assert plan.outputs.score_files("last", ["tiny"]) == ["results/toy/scores/tiny/last/dev.json"]
    assert len(plan.outputs.score_files()) == len(plan.outputs.translation_files()) == 4 * 3
    assert plan.runs.baseline_of("tiny_one_head") == plan.runs.baseline_of("tiny") == "tiny"


def test_the_rules_sheet_has_a_row_per_run_that_says_what_the_plan_says(with_parser):
    """The rules look a run's settings up in `runs.sheet()` (`lookup(dpath=...)`): each row holds
    the run's entry and what the plan says of its dataset, baseline and seeds."""
    config = copy.deepcopy(with_parser)
    config["experiments"]["tiny_one_head"]["seeds"] = 3
    plan = Plan(config)
    sheet = plan.runs.sheet()
    assert list(sheet) == plan.runs.names() and "tiny_one_head.seed3" in sheet
    for name, row in sheet.items():
        entry, data = plan.runs.entry(name), plan.data.entry(plan.runs.dataset(name))
        assert {key: row[key] for key in entry} == entry
        assert row["splits"] == data["splits"] and row["target_lang"] == data["langs"][1]
        assert row["linearization"] == data.get("linearization")
        assert row["seed_runs"] == plan.runs.seeds_of(name)
        seeds = [plan.runs.entry(run)["train"]["seed"] for run in row["seed_runs"]]
        assert row["train_seeds"] == seeds
        if name in plan.runs.translators():
            assert row["baseline"] == plan.runs.baseline_of(name)
            assert row["baseline_group"] == plan.runs.baseline_group(name)
        else:
            assert "baseline" not in row  # a parser is tested against nothing
    first = sheet["tiny_one_head"]["train"]["seed"]
    assert sheet["tiny_one_head"]["train_seeds"] == [first, first + 1, first + 2]
    assert any(row["linearization"] for row in sheet.values())


@pytest.mark.parametrize("sentences", [[], ["One sentence ."], ["One .", "Two .", "Three ."]])
def test_the_attention_figures_follow_the_sentences_and_none_are_asked_without_any(
    default, sentences
):
    config = copy.deepcopy(default)
    config["report"]["attention_sentences"] = sentences
    plan = Plan(config)
    drawn = plan.report.attention_figures()
    asked = [f for f in plan.report.run_record_inputs() if "/attention/" in f]
    assert len(drawn) == (2 * (len(sentences) + 1) if sentences else 0)
    assert len(asked) == (len(plan.runs.translators()) if sentences else 0)
    assert all(f.endswith(".sentence1.pdf") for f in asked)


def test_parsers_and_translators_are_told_apart_and_reported_in_their_own_tables(with_parser):
    plan = Plan(with_parser)
    assert plan.data.treebanks() == ["ptb_sample"]
    seeds = ["parser_sample", "parser_sample.seed2", "parser_sample.seed3"]  # seeds: 3
    assert plan.runs.parsers() == seeds
    assert not set(seeds) & set(plan.runs.translators())
    files = plan.report.files()
    assert plan.study == "toy+ptb_sample"
    results = "results/toy+ptb_sample"
    assert f"{results}/tables/table4.md" in files and f"{results}/tables/table2.md" in files
    assert all(f"{results}/figures/{figure}.pdf" in files for figure in FIGURES)
    assert plan.report.shown("params") == []
    inputs = plan.report.inputs("table4")
    assert inputs["scores"] == [
        f"{results}/scores/{run}/averaged/{split}.json"
        for run in seeds
        for split in ("dev", "test")
    ]
    # one per parser (a row of Table 4 each), zipped with them by the table's script
    assert inputs["train_records"] == ["data/ptb_sample/clean/train.en-ptb.json"] * 3
    assert set(plan.report.vocabulary_sizes()) == {"toy"}  # the parser's vocabulary is not counted


def test_a_parser_that_parses_dev_as_it_trains_reads_those_files_and_gets_its_curves(
    with_parser,
):
    plan = Plan(with_parser)
    lexicon = ["data/ptb_sample/clean/train.en-ptb.en", "data/ptb_sample/clean/train.en-ptb.ptb"]
    read = ["data/ptb_sample/clean/dev.en-ptb.en", "data/ptb_sample/raw/dev.en-ptb.trees",
            "data/ptb_sample/spm/bpe.model"]  # fmt: skip
    assert plan.runs.trainer_spec("parser_sample")["dev_monitor"] == {
        "monitor": "aiayn.parsing.dev_parse:DevParser",  # the plug-in the trainer loads
        "words": read[0],
        "gold_trees": read[1],
        "subword": read[2],
        "lexicon": lexicon,
        "linearization": {"leaves": "tags", "close_labels": True},
        "inputs": [*read, *lexicon],  # what the train rule waits for
    }
    results = "results/toy+ptb_sample"
    assert plan.report.shown("parse_curves") == plan.runs.parsers()  # each seed a curve
    assert f"{results}/figures/parse_curves.pdf" in plan.report.files()
    assert plan.report.inputs("parse_curves")["baselines"] == [
        f"{results}/baselines/ptb_sample/dev.json"
    ]
    tiny = plan.runs.trainer_spec("tiny")["dev_monitor"]  # the toy default scores dev BLEU
    assert tiny["monitor"] == "aiayn.decode.dev_translation:DevTranslator"
    config = copy.deepcopy(with_parser)
    config["experiments"]["parser_sample"]["train"]["dev_parse_sentences"] = 0
    quiet = Plan(config)
    assert "dev_monitor" not in quiet.runs.trainer_spec("parser_sample")
    assert not any("parse_curves" in path for path in quiet.report.files())
    config["experiments"]["tiny"]["train"]["dev_parse_sentences"] = 5
    with pytest.raises(InputError, match="experiment 'tiny': train.dev_parse_sentences is for"):
        Plan(config).runs.trainer_spec("tiny")
    config["experiments"]["tiny"]["train"]["dev_parse_sentences"] = 0
    config["experiments"]["parser_sample"]["train"]["dev_bleu_sentences"] = 5
    with pytest.raises(InputError, match="dev_bleu_sentences is for translation experiments"):
        Plan(config).runs.trainer_spec("parser_sample")


def test_a_translation_that_scores_dev_bleu_as_it_trains_reads_its_references(with_parser):
    """train.dev_bleu_sentences: the dev monitor the trainer loads, its decode settings apart
    from the experiment's decode block, and the files the train rule waits for; early stopping
    and best-N averaging by dev BLEU need it."""
    config = copy.deepcopy(with_parser)
    config["experiments"]["tiny"]["train"] |= {"dev_bleu_sentences": 50, "dev_bleu_beam": 1}
    monitor = Plan(config).runs.trainer_spec("tiny")["dev_monitor"]
    assert monitor == {
        "monitor": "aiayn.decode.dev_translation:DevTranslator",
        "sentences": 50,
        "decode": {"beam": 1, "alpha": 0.6},
        "subword": "data/toy/spm/bpe.model",
        "reference": "data/toy/clean/dev.en-de.de",
        "inputs": ["data/toy/spm/bpe.model", "data/toy/clean/dev.en-de.de"],
    }
    for setting in ("early_stopping_metric", "average_best_by"):
        config["experiments"]["tiny"]["train"] |= {"dev_bleu_sentences": 0, setting: "dev_chrf"}
        with pytest.raises(InputError, match=f"train.{setting} dev_chrf needs dev BLEU"):
            Plan(config).runs.trainer_spec("tiny")
        config["experiments"]["tiny"]["train"][setting] = "dev_loss"  # always measured
        assert "dev_monitor" not in Plan(config).runs.trainer_spec("tiny")


def test_a_dev_monitor_that_decides_the_weights_puts_its_code_version_in_the_spec(with_parser):
    """Early stopping or best-N averaging by dev BLEU or chrF: the monitor's code (and every
    module it runs) is in the spec, so editing it reruns training; a monitor that only draws the
    curve leaves the spec alone."""
    from aiayn.config.workflow import module_version

    config = copy.deepcopy(with_parser)
    config["experiments"]["tiny"]["train"] |= {"dev_bleu_sentences": 50}
    assert "code" not in Plan(config).runs.trainer_spec("tiny")["dev_monitor"]
    for setting in ("early_stopping_metric", "average_best_by"):
        train = config["experiments"]["tiny"]["train"]
        train |= {"early_stopping_metric": None, "average_best_by": None, setting: "dev_bleu"}
        monitor = Plan(config).runs.trainer_spec("tiny")["dev_monitor"]
        assert monitor["code"] == module_version("aiayn.decode.dev_translation")


def test_a_module_loaded_by_name_is_versioned_with_what_it_imports(tmp_path, monkeypatch):
    """module_version follows the module's own imports: a statement in a module it imports
    changes it, a comment there does not."""
    from aiayn.config.workflow import module_version

    package = tmp_path / "monitors"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text("SENTENCES = 100\n")
    (package / "monitor.py").write_text("from monitors.helper import SENTENCES\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    version = module_version("monitors.monitor")
    (package / "helper.py").write_text("SENTENCES = 100  # how many\n")
    assert module_version("monitors.monitor") == version
    (package / "helper.py").write_text("SENTENCES = 2000\n")
    assert module_version("monitors.monitor") != version


def test_the_other_documents_overlay_scores_the_same_trained_parser_on_wsj_0180_0199():
    alone = Plan(load_config(PROJECT, [PROJECT / "configs/parsing.yaml"]))
    other = Plan(load_config(PROJECT, [PROJECT / "configs/parsing_other_documents.yaml"]))
    assert other.runs.trainer_spec("parser_sample") == alone.runs.trainer_spec("parser_sample")
    assert ("averaged", "other") in other.runs.scored_decodes("parser_sample")
    assert other.data.split_source("ptb_sample", "other")["documents"] == "0180-0199"
    assert other.outputs.parse_baselines() == [
        "results/parsing_other_documents/baselines/ptb_sample/test.json",
        "results/parsing_other_documents/baselines/ptb_sample/other.json",
    ]


def test_a_dataset_mixing_treebank_and_text_splits_is_refused(with_parser):
    config = copy.deepcopy(with_parser)
    config["datasets"]["ptb_sample"]["splits"]["dev"] = {"source": "toy", "size": 5, "seed": 1}
    with pytest.raises(ValueError, match="mixes `ptb` splits with \\['toy'\\] ones"):
        Plan(config).data.treebanks()


def test_check_experiments_names_an_unknown_experiment_and_an_unknown_baseline(default):
    with pytest.raises(InputError, match=r"experiment 'tinny' is not in the study's .*'toy'"):
        Plan(default).runs.entry("tinny")
    config = copy.deepcopy(default)
    config["report"]["baseline"] = "tinny"
    with pytest.raises(InputError, match="report.baseline 'tinny' is not an experiment"):
        Plan(config).runs.check()
