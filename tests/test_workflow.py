"""The data stages through the real snakemake CLI: outputs, rerun granularity, failures, presets."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from aiayn.prepare.binarize import IndexedDataset
from aiayn.prepare.pieces import load
from tests.conftest import (
    PROJECT,
    STATEMENT_EDIT,
    copy_built,
    copy_project,
    edit_config,
    edit_toy_data,
    quick_experiment,
    run_snakemake,
    shared,
    stage_sacrebleu_cache,
)

pytestmark = pytest.mark.workflow


def snapshot(root: Path) -> dict[str, int]:
    """mtime (ns) of every file the data stages wrote."""
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in (root / "data").rglob("*")
        if p.is_file()
    }


def rewritten(before: dict[str, int], after: dict[str, int]) -> set[str]:
    return {path for path, mtime in after.items() if before.get(path) != mtime}


def files(stage: str, *splits: str, suffixes=("en", "de", "json")) -> set[str]:
    out = set()
    for split in splits:
        for suffix in suffixes:
            if stage == "bin" and suffix != "json":
                out |= {
                    f"data/toy/bin/{split}.en-de.{suffix}.bin",
                    f"data/toy/bin/{split}.en-de.{suffix}.idx",
                }
            else:
                out.add(f"data/toy/{stage}/{split}.en-de.{suffix}")
    return out


@pytest.fixture
def project_copy(project_copy):
    """The workflow copy with the data stages only: the default config's trainings left out."""
    edit_config(project_copy, lambda c: c.update(experiments={}))
    return project_copy


SPM = {"data/toy/spm/bpe.model", "data/toy/spm/bpe.vocab", "data/toy/spm/bpe.json"}
ALL_SPLITS = ("train", "dev", "test")


@pytest.fixture(scope="module")
def built_once(tmp_path_factory) -> Path:
    """The default config's data stages, run once for real for the tests of this module."""
    root = copy_project(tmp_path_factory.mktemp("built") / "project")
    edit_config(root, lambda c: c.update(experiments={}))
    run_snakemake(root)
    return root


@pytest.fixture
def built(built_once, tmp_path) -> Path:
    """A test's own copy of that build."""
    return copy_built(built_once, tmp_path / "built")


def test_default_run_builds_every_data_stage_for_the_toy_corpus(built):
    expected = (
        files("raw", *ALL_SPLITS) | files("clean", *ALL_SPLITS) | files("bin", *ALL_SPLITS) | SPM
    )
    assert set(snapshot(built)) == expected
    processor = load(built / "data/toy/spm/bpe.model")
    assert processor.get_piece_size() == 800
    german = IndexedDataset(built / "data/toy/bin/test.en-de.de")
    lines = (built / "data/toy/clean/test.en-de.de").read_text("utf-8").splitlines()
    assert len(german) == len(lines) == 500
    assert processor.decode(german[7].tolist()) == lines[7]
    record = json.loads((built / "data/toy/clean/train.en-de.json").read_text())
    assert record["input_pairs"] == 20000 and set(record["dropped"]) == {
        "empty",
        "too_long",
        "length_ratio",
    }
    for rule in ("download", "clean", "binarize"):
        assert (built / f"logs/{rule}/toy/train.en-de.log").exists()
    assert "INFO" in (built / "logs/subword/toy.log").read_text()
    assert (built / "benchmarks/subword/toy.tsv").exists()


def test_a_second_run_has_nothing_to_do(built):
    result = run_snakemake(built, "-n")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_clean_setting_reruns_training_clean_bpe_and_binarize_only(built):
    before = snapshot(built)
    edit_toy_data(built, lambda toy: toy["clean"].update(max_ratio=1.3))
    run_snakemake(built)
    assert rewritten(before, snapshot(built)) == files("clean", "train") | SPM | files(
        "bin", *ALL_SPLITS
    )


def test_vocabulary_size_reruns_bpe_and_binarize_only(built):
    before = snapshot(built)
    edit_toy_data(built, lambda toy: toy["subword"].update(vocab_size=700))
    run_snakemake(built)
    assert rewritten(before, snapshot(built)) == SPM | files("bin", *ALL_SPLITS)
    assert load(built / "data/toy/spm/bpe.model").get_piece_size() == 700


def test_dev_split_size_reruns_that_split_only(built):
    before = snapshot(built)
    edit_toy_data(built, lambda toy: toy["splits"]["dev"].update(size=300))
    run_snakemake(built)
    assert rewritten(before, snapshot(built)) == files("raw", "dev") | files(
        "clean", "dev"
    ) | files("bin", "dev")
    assert len(IndexedDataset(built / "data/toy/bin/dev.en-de.en")) == 300


def test_editing_stage_code_reruns_that_stage(built):
    before = snapshot(built)
    with open(built / "src/aiayn/data/clean.py", "a") as handle:
        handle.write(STATEMENT_EDIT)
    run_snakemake(built)
    changed = rewritten(before, snapshot(built))
    assert files("clean", *ALL_SPLITS) <= changed and not files("raw", *ALL_SPLITS) & changed


def test_touch_records_an_edit_that_changes_no_result_without_rerunning(built):
    """The README's way to keep finished outputs after an update that cannot change them."""
    contents = {path: (built / path).read_bytes() for path in snapshot(built)}
    with open(built / "src/aiayn/data/clean.py", "a") as handle:
        handle.write(STATEMENT_EDIT)  # a statement that moves no result
    planned = run_snakemake(built, "-n")
    assert "Params have changed" in planned.stdout + planned.stderr
    run_snakemake(built, "--touch")
    assert {path: (built / path).read_bytes() for path in snapshot(built)} == contents
    result = run_snakemake(built, "-n")
    assert "Nothing to be done" in result.stdout + result.stderr


def use_only_dataset(root: Path, name: str, spec: dict) -> None:
    """Add a dataset to the config and make it the only one `snakemake` prepares."""
    edit_config(
        root, lambda c: c.update(prepare=[name], datasets={**c.get("datasets", {}), name: spec})
    )


def local_dataset(root: Path, source: list[str], target: list[str] | bytes) -> None:
    (root / "in").mkdir()
    (root / "in/train.en").write_text("".join(s + "\n" for s in source), encoding="utf-8")
    if isinstance(target, bytes):
        (root / "in/train.de").write_bytes(target)
    else:
        (root / "in/train.de").write_text("".join(s + "\n" for s in target), encoding="utf-8")
    use_only_dataset(
        root,
        "mine",
        {
            "langs": ["en", "de"],
            "root": "in",
            "splits": {"train": {"source": "local", "paths": {"en": "train.en", "de": "train.de"}}},
            "subword": {"vocab_size": 30},
        },
    )


def test_mismatched_local_files_fail_clean_with_the_reason_and_no_output(project_copy):
    local_dataset(project_copy, ["one", "two", "three"], ["eins", "zwei"])
    result = run_snakemake(project_copy, check=False)
    assert result.returncode != 0
    log = (project_copy / "logs/clean/mine/train.en-de.log").read_text()
    assert "train.en-de.en has 3 lines but" in log and "has 2" in log
    assert "fetched from: ['in/train.en', 'in/train.de']" in log
    assert not (project_copy / "data/mine/clean").exists() or not any(
        (project_copy / "data/mine/clean").iterdir()
    )


def test_a_source_replaced_with_its_old_mtime_is_found_by_its_content(project_copy):
    """`cp -p`, `rsync -a` and `tar x` keep a changed file's mtime, which is all Snakemake's
    mtime trigger looks at: the download's params hold each local file's sha256."""
    local_dataset(project_copy, ["one", "two"], ["eins", "zwei"])
    raw = "data/mine/raw/train.en-de.json"
    run_snakemake(project_copy, raw)
    source = project_copy / "in/train.en"
    times = source.stat()
    source.write_text("one\nthree\n", encoding="utf-8")  # the same size, as an edit may be
    os.utime(source, ns=(times.st_atime_ns, times.st_mtime_ns))
    planned = run_snakemake(project_copy, "-n", raw)
    assert "Params have changed since last execution" in planned.stdout + planned.stderr
    run_snakemake(project_copy, raw)
    assert (project_copy / "data/mine/raw/train.en-de.en").read_text() == "one\nthree\n"
    copied = project_copy / "copy.en"  # the same content copied over it: a new ctime, no rerun
    shutil.copy2(source, copied)
    os.replace(copied, source)
    unchanged = run_snakemake(project_copy, "-n", raw)
    assert "Nothing to be done" in unchanged.stdout + unchanged.stderr


def test_invalid_utf8_fails_with_file_and_line(project_copy):
    local_dataset(project_copy, ["one", "two"], b"eins\nzw\xe4i\n")
    result = run_snakemake(project_copy, check=False)
    assert result.returncode != 0
    log = (project_copy / "logs/clean/mine/train.en-de.log").read_text()
    assert re.search(r"raw/train\.en-de\.de, line 2: invalid UTF-8 \(byte 0xe4", log)


def job_counts(dry_run_output: str) -> dict[str, int]:
    table = dry_run_output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_wmt14_preset_plans_every_stage(project_copy):
    result = run_snakemake(project_copy, "-n", "--configfile", "configs/wmt14_en_de.yaml")
    counts = job_counts(result.stdout)
    assert counts == {
        "download": 4,
        "clean": 4,
        "subword": 1,
        "binarize": 4,
        "train": 2,
        "average": 2,
        "decode": 8,  # 2 models x (averaged on 3 splits + last checkpoint on newstest2013)
        "score": 8,
        "attention_maps": 2,
        "table": 3,  # params, Tables 2 and 3
        "figure": 3,  # learning rate, loss curves, averaging
        "run_record": 1,
        "all": 1,
        "total": 43,
    }
    assert "data/wmt14_en_de/bin/newstest2014_filtered.en-de.de.idx" in result.stdout
    assert (
        "results/wmt14_en_de/scores/big_en_de/averaged/newstest2014_filtered.json" in result.stdout
    )
    assert "results/wmt14_en_de/scores/base_en_de/last/newstest2013.json" in result.stdout
    assert "data/toy/" not in result.stdout


def test_real_wmt_data_through_local_and_sacrebleu_sources(project_copy, tmp_path):
    """10k real WMT pairs (local files) and newstest2014 through sacrebleu's real extraction."""
    opennmt = shared("opennmt_toy_ende")
    cache = stage_sacrebleu_cache(tmp_path / "sacrebleu")
    use_only_dataset(
        project_copy,
        "wmt",
        {
            "langs": ["en", "de"],
            "root": str(opennmt),
            "splits": {
                "train": {
                    "source": "local",
                    "paths": {"en": "src-train.txt", "de": "tgt-train.txt"},
                },
                "newstest2014": {"source": "sacrebleu", "test_set": "wmt14/full"},
            },
            "subword": {"vocab_size": 2000},
        },
    )
    run_snakemake(project_copy, env={"SACREBLEU": str(cache)})
    record = json.loads((project_copy / "data/wmt/bin/newstest2014.en-de.json").read_text())
    assert record["en"]["sentences"] == record["de"]["sentences"] == 3003
    full = shared("wmt14_newstest", "full", "newstest2014.en-de.de")
    assert (project_copy / "data/wmt/clean/newstest2014.en-de.de").read_bytes() == full.read_bytes()
    clean = json.loads((project_copy / "data/wmt/clean/train.en-de.json").read_text())
    assert clean["input_pairs"] == 10000 and clean["kept_pairs"] < 10000


def test_multi30k_preset_with_its_root_pointed_at_local_copies(project_copy):
    """The preset as users run it, with the one-line override tests and offline users need.

    Only its data stages are asked for: its three seeds train for half an hour each
    (test_real_multi30k runs a CI-sized version of it).
    """
    (project_copy / "config.yaml").write_text((PROJECT / "config.yaml").read_text())
    root = shared("multi30k", "raw_gz")
    splits = ("train", "val", "test_2016_flickr")
    run_snakemake(
        project_copy,
        "--configfile",
        "configs/multi30k.yaml",
        "--config",
        f"datasets={{multi30k: {{root: {root}}}}}",
        "--",
        "data/multi30k/spm/bpe.model",
        *(f"data/multi30k/bin/{split}.en-de.json" for split in splits),
    )
    raw = json.loads((project_copy / "data/multi30k/raw/test_2016_flickr.en-de.json").read_text())
    assert raw["files"] == [f"{root}/test_2016_flickr.en.gz", f"{root}/test_2016_flickr.de.gz"]
    assert not (project_copy / "data/toy").exists() and not (project_copy / "runs").exists()
    for split, count in zip(splits, (None, 1014, 1000), strict=True):
        record = json.loads((project_copy / f"data/multi30k/bin/{split}.en-de.json").read_text())
        assert record["en"]["sentences"] == record["de"]["sentences"]
        assert count is None or record["de"]["sentences"] == count
    assert load(project_copy / "data/multi30k/spm/bpe.model").get_piece_size() == 8000


def test_parameter_table_and_the_snakemake_report(project_copy):
    """The parameter table, and `snakemake --report` over what was made; it needs every file
    marked for the report that the plan holds, Table 1 too (rule complexity, seconds)."""
    run_snakemake(project_copy, "results/toy/tables/params.md", "results/toy/tables/table1.md")
    markdown = (project_copy / "results/toy/tables/params.md").read_text()
    assert "| base | 6 | 512 |" in markdown and "nan" not in markdown
    assert "paper: Table 3 of Vaswani et al. 2017" in markdown
    assert "params at" not in markdown  # no experiment here: no trained vocabulary to count at
    assert (project_copy / "results/toy/tables/params.tex").read_text().startswith("\\begin{table}")
    run_snakemake(project_copy, "--report", "report.html")
    report = (project_copy / "report.html").read_text(errors="replace")
    assert "params.md" in report and "table1.md" in report


TREE = "( (S (NP-SBJ (NNP Ms.) (NNP Haag) ) (VP (VBZ plays) (NP (NNP Elianti) )) (. .) ))\n"


def fake_wsj(folder: Path, sections=(2, 3, 22, 23)) -> Path:
    """The LDC release's layout (wsj/SS/wsj_SSDD.mrg), two one-tree documents per section."""
    for section in sections:
        for document in (1, 2):
            path = folder / f"{section:02d}" / f"wsj_{section:02d}{document:02d}.mrg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(TREE.replace("Haag", f"Haag{section}x{document}"))
    return folder


def test_wsj_preset_plans_table4_and_no_translation_tables(project_copy, tmp_path):
    root = fake_wsj(tmp_path / "wsj")
    config = f"datasets={{wsj: {{root: {root}}}}}"
    result = run_snakemake(
        project_copy, "-n", "--configfile", "configs/parsing_wsj.yaml", "--config", config
    )
    assert job_counts(result.stdout) == {
        "treebank": 3,
        "clean": 3,
        "subword": 1,
        "binarize": 3,
        "train": 1,
        "average": 1,
        "decode": 3,  # averaged on dev and test, last checkpoint on dev
        "score_parse": 3,
        "parse_baselines": 1,  # right-branching and flat trees on the test split
        "table": 2,  # params, Table 4
        "run_record": 1,
        "all": 1,
        "total": 23,
    }


def test_the_paper_study_plans_table4_once_the_wsj_path_is_given(project_copy, tmp_path):
    root = fake_wsj(tmp_path / "wsj")
    config = f"datasets={{wsj: {{root: {root}}}}}"
    result = run_snakemake(
        project_copy, "-n", "--configfile", "configs/paper.yaml", "--config", config
    )
    said = result.stdout + result.stderr
    assert "left out" not in said and "runs/parser_wsj/train.json" in said
    assert "results/paper/tables/table4.md" in said and "results/paper/tables/table2.md" in said
    counts = job_counts(result.stdout)
    assert counts["train"] == 23 and counts["treebank"] == 3 and counts["table"] == 4


def test_treebank_stage_writes_aligned_sides_and_stops_on_a_malformed_file(project_copy, tmp_path):
    root = fake_wsj(tmp_path / "wsj")
    config = f"datasets={{wsj: {{root: {root}}}}}"
    args = ("--configfile", "configs/parsing_wsj.yaml", "--config", config)
    run_snakemake(project_copy, "data/wsj/raw/train.en-ptb.json", *args)
    raw = project_copy / "data/wsj/raw"
    words = (raw / "train.en-ptb.en").read_text().splitlines()
    assert words == [f"Ms. Haag{s}x{d} plays Elianti ." for s in (2, 3) for d in (1, 2)]
    assert (raw / "train.en-ptb.ptb").read_text().splitlines()[0] == (
        "(S (NP NNP NNP )NP (VP VBZ (NP NNP )NP )VP . )S"
    )
    assert (raw / "train.en-ptb.trees").read_text().splitlines()[0].startswith("(TOP (S (NP ")
    record = json.loads((raw / "train.en-ptb.json").read_text())
    assert (record["sections"], record["files"], record["lines"]) == ("02-21", 4, 4)

    broken = root / "23" / "wsj_2302.mrg"
    broken.write_text("\n" + TREE + TREE.replace(" ))\n", "\n"))
    result = run_snakemake(project_copy, "data/wsj/raw/test.en-ptb.json", *args, check=False)
    assert result.returncode != 0
    log = (project_copy / "logs/treebank/wsj/test.en-ptb.log").read_text()
    assert f"{broken}: the tree that starts on line 3 is never closed" in log
    assert not (raw / "test.en-ptb.en").exists() and not (raw / "test.en-ptb.trees").exists()


def test_a_dataset_mixing_treebank_and_text_splits_is_named(project_copy):
    def mix(toy):
        toy["splits"]["test"] = {"source": "ptb", "sections": 23}

    edit_toy_data(project_copy, mix)
    result = run_snakemake(project_copy, "-n", check=False)
    assert result.returncode != 0
    assert "dataset 'toy' mixes `ptb` splits with ['toy'] ones" in result.stdout + result.stderr


def test_a_report_folder_this_user_cannot_write_warns_and_plans_on(project_copy):
    """The report's front page is written into .snakemake/aiayn by the main process, even in a
    dry run; a colleague's folder there (umask 077 on a group folder) killed `snakemake -n`
    with a PermissionError (#77). Now the page goes to the user's temporary folder, said once.
    (Root may write anywhere: a file where the folder belongs makes it unwritable here.)"""
    (project_copy / ".snakemake").mkdir()
    (project_copy / ".snakemake" / "aiayn").write_text("not a folder")
    result = run_snakemake(project_copy, "-n")
    said = result.stdout + result.stderr
    assert "the report's front page cannot be written to" in said and "instead" in said
    assert "data/toy/raw/train.en-de.en" in said  # and it planned the run


def test_a_training_across_machines_without_slurm_is_refused_before_any_job(project_copy):
    """`nodes: 2` run here (no cluster profile, no allocation): refused as the run starts, with
    the experiment and both ways out, before the data is prepared (the train job refused it,
    after every job before it); a dry run still plans it."""
    quick_experiment(project_copy, name="wide", max_steps=20)
    edit_config(project_copy, lambda config: config["experiments"]["wide"].update(nodes=2))
    result = run_snakemake(project_copy, "runs/wide/train.json", check=False)
    assert result.returncode != 0
    assert "experiment 'wide' trains on nodes: 2, which needs a SLURM allocation" in result.stderr
    assert "--profile profiles/slurm" in result.stderr and not (project_copy / "data").exists()
    planned = run_snakemake(project_copy, "-n", "runs/wide/train.json")
    assert re.search(r"^train\s+1$", planned.stdout, re.MULTILINE), planned.stdout
