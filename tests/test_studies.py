"""Studies (aiayn.config.study): config files that add up without leaking the toy study, a name defined
twice refused with both files named, results/<study>/ per study, the paper in one dry run with
its GPU-hours, and two presets' pairs in one Table 2 (a real run on toy-sized stand-ins)."""

from __future__ import annotations

import json
import tempfile
from importlib.metadata import version
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from aiayn.config.gpu_hours import training_cost
from aiayn.config.load import load_config
from aiayn.config.plan import Plan
from aiayn.config.study import compose_config
from aiayn.errors import InputError
from tests.conftest import PROJECT, copy_project, run_snakemake


def write(path: Path, settings: dict) -> Path:
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


def study(*names: str, overrides: dict | None = None) -> dict:
    return load_config(PROJECT, [PROJECT / name for name in names], overrides)


def test_without_config_files_the_study_is_the_toy_one_and_a_preset_never_sees_it():
    toy = study()
    assert toy["study"] == "toy" and list(toy["datasets"]) == ["toy"]
    multi30k = study("configs/multi30k.yaml")
    assert multi30k["study"] == "multi30k" and list(multi30k["experiments"]) == ["multi30k_small"]
    assert "toy" not in multi30k["datasets"] and multi30k["prepare"] == []


def test_presets_on_one_command_line_add_up_into_one_study():
    both = study("configs/wmt14_en_de.yaml", "configs/wmt14_en_fr.yaml")
    assert both["study"] == "wmt14_en_de+wmt14_en_fr"
    assert list(both["experiments"]) == ["base_en_de", "big_en_de", "base_en_fr", "big_en_fr"]
    assert (
        Plan(both).report.table_file("table2") == "results/wmt14_en_de+wmt14_en_fr/tables/table2.md"
    )
    named = study("configs/wmt14_en_de.yaml", "configs/wmt14_en_fr.yaml", overrides={"study": "t2"})
    assert named["study"] == "t2"


def test_a_name_defined_twice_with_different_settings_names_both_files(tmp_path):
    experiment = {"dataset": "toy", "model": "tiny", "train": {"max_steps": 10}}
    first = write(tmp_path / "first.yaml", {"include": [str(PROJECT / "configs/data/toy.yaml")],
                                           "experiments": {"small": experiment}})  # fmt: skip
    same = write(tmp_path / "same.yaml", {"experiments": {"small": experiment}})
    assert list(compose_config(PROJECT / "config.yaml", [first, same])["experiments"]) == ["small"]
    longer = {**experiment, "train": {"max_steps": 20}}
    other = write(tmp_path / "other.yaml", {"experiments": {"small": longer}})
    with pytest.raises(InputError) as error:
        compose_config(PROJECT / "config.yaml", [first, other])
    message = str(error.value)
    assert "experiment 'small' is defined twice with different settings" in message
    assert str(first) in message and str(other) in message


def test_a_file_refines_what_it_includes_and_includes_are_checked(tmp_path):
    refined = write(
        tmp_path / "short.yaml",
        {
            "include": [str(PROJECT / "configs/multi30k.yaml")],
            "experiments": {"multi30k_small": {"train": {"max_steps": 7}}},
        },
    )
    config = load_config(PROJECT, [refined])
    assert config["study"] == "short"  # a file without `study:` is named after itself
    train = config["experiments"]["multi30k_small"]["train"]
    assert train["max_steps"] == 7 and train["warmup_steps"] == 600  # the rest is the preset's
    write(tmp_path / "a.yaml", {"include": ["b.yaml"]})
    write(tmp_path / "b.yaml", {"include": ["a.yaml"]})
    with pytest.raises(InputError, match="include each other in a circle"):
        compose_config(PROJECT / "config.yaml", [tmp_path / "a.yaml"])
    listed = write(tmp_path / "old.yaml", {"experiments": [{"name": "x", "dataset": "toy"}]})
    with pytest.raises(InputError, match="`experiments` is a list; it is keyed by name"):
        compose_config(PROJECT / "config.yaml", [listed])


def test_a_copied_preset_finds_the_presets_it_includes(tmp_path):
    """A preset copied out of the checkout keeps its `include: [data/multi30k.yaml]`, written
    relative to configs/: the include is found there."""
    copy = tmp_path / "mine.yaml"
    copy.write_text((PROJECT / "configs/multi30k.yaml").read_text())
    assert load_config(PROJECT, [copy])["datasets"]["multi30k"]["langs"] == ["en", "de"]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(name=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=60))
def test_an_include_that_is_no_file_is_refused_naming_the_file_that_names_it(name):
    """Any name that is no file beside the config, in the checkout or in its configs/: one
    refusal that names the including file and the name, never a traceback."""
    assume(not any((place / name).is_file() for place in (PROJECT, PROJECT / "configs")))
    with tempfile.TemporaryDirectory() as folder:
        including = write(Path(folder) / "mine.yaml", {"include": [name]})
        with pytest.raises(InputError) as refused:
            compose_config(PROJECT / "config.yaml", [including], workflow_dir=PROJECT)
    message = str(refused.value)
    assert message.startswith(f"{including}: the include ") and "is not a file at" in message
    assert len(message.splitlines()) == 1


def test_the_paper_study_leaves_out_the_wsj_until_its_path_is_given(tmp_path):
    paper = study("configs/paper.yaml")
    plan = Plan(paper)
    assert "parser_wsj" not in paper["experiments"] and "wsj" not in paper["datasets"]
    assert {"base_en_de", "big_en_de", "base_en_fr", "big_en_fr"} <= set(paper["experiments"])
    rows = {entry["model"] for entry in paper["experiments"].values()}
    assert {"A_h1", "B_dk16", "C_N2", "C_dff4096", "D_drop0.0", "E_learned"} <= rows
    assert "table3_base" not in paper["experiments"]  # Table 3's base row is base_en_de's run
    assert {"results/paper/tables/table2.md", "results/paper/tables/table3.md"} <= set(
        plan.report.files()
    )
    with_wsj = study("configs/paper.yaml", overrides={"datasets": {"wsj": {"root": str(tmp_path)}}})
    assert "parser_wsj" in with_wsj["experiments"]
    assert "results/paper/tables/table4.md" in Plan(with_wsj).report.files()


def test_gpu_hours_follow_the_papers_step_times_or_a_stated_one():
    paper = Plan(study("configs/paper.yaml"))
    base = training_cost("base_en_de", paper.runs.entry("base_en_de"),
                         paper.runs.trainer_spec("base_en_de"))  # fmt: skip
    assert base.gpu_hours == pytest.approx(12 * 8)  # the paper: 12 hours on 8 P100s
    big = training_cost("big_en_de", paper.runs.entry("big_en_de"),
                        paper.runs.trainer_spec("big_en_de"))  # fmt: skip
    assert big.gpu_hours == pytest.approx(3.5 * 24 * 8)
    stated = {**paper.runs.entry("base_en_de"), "expected_step_seconds": 0.18}
    cost = training_cost("base_en_de", stated, paper.runs.trainer_spec("base_en_de"))
    assert cost.basis == "stated" and cost.gpu_hours == pytest.approx(100000 * 0.18 / 3600)
    report = paper.report.gpu_hours()
    assert "base_en_fr" in report and "table3_C_N8" in report and "total:" in report


def test_the_bill_counts_what_a_finished_training_still_has_to_run(tmp_path):
    """A trained experiment whose max_steps was raised resumes: its remaining steps are still
    to pay (the bill said `(trained)` and 0.0 still to train while the job was planned; #77)."""
    from aiayn.config import paths
    from aiayn.config.gpu_hours import report

    paper = Plan(study("configs/paper.yaml"))
    entry, spec = paper.runs.entry("base_en_de"), paper.runs.trainer_spec("base_en_de")
    summary = tmp_path / paths.train_summary("base_en_de")
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"steps": 100000, "ended_by": "max_steps"}))
    assert training_cost("base_en_de", entry, spec, tmp_path).trained
    raised = {**spec, "train": {**spec["train"], "max_steps": 150000}}
    cost = training_cost("base_en_de", entry, raised, tmp_path)
    assert not cost.trained and cost.remaining_hours == pytest.approx(12 * 8 / 2)
    assert "(trained to step 100000: resumes)" in report([cost])
    assert "48.0 of them still to train" in report([cost])
    summary.write_text(json.dumps({"steps": 4000, "ended_by": "early_stopping: dev_bleu ..."}))
    assert training_cost("base_en_de", entry, raised, tmp_path).remaining_hours == 0


@pytest.mark.parametrize(
    ("change", "restarts"),
    [({"model": {"d_ff": 4096}}, True), ({"train": {"label_smoothing": 0.2}}, True),
     ({"train": {"seed": 2}}, True), ({"train": {"max_steps": 150000}}, False),
     ({"train": {"checkpoint_every_steps": 500}}, False), ({"code": "edited"}, True),
     ({"code": None}, False)],
)  # fmt: skip
def test_the_bill_counts_no_step_of_a_run_whose_settings_changed(tmp_path, change, restarts):
    """A trained run of other settings or other training code is moved aside and trained from
    step 0: the bill said `0.0 still to train` while it planned that training. A larger budget
    or another interval keeps the run (its steps count), and so does a bill that does not know
    the code (`code` None)."""
    from aiayn.config import paths
    from aiayn.config.gpu_hours import report

    paper = Plan(study("configs/paper.yaml"))
    entry, spec = paper.runs.entry("base_en_de"), paper.runs.trainer_spec("base_en_de")
    summary = tmp_path / paths.train_summary("base_en_de")
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"steps": 100000, "ended_by": "max_steps"}))
    identity = {"identity": "0", "model": spec["model"], "train": spec["train"],
                "trajectory": {"code": ["trained", None]}}  # fmt: skip
    (summary.parent / "identity.json").write_text(json.dumps(identity))
    changed = {part: {**spec[part], **change.get(part, {})} for part in ("model", "train")}
    code = change.get("code", "trained")
    cost = training_cost("base_en_de", entry, {**spec, **changed}, tmp_path, code)
    left = cost.steps - (0 if restarts else 100000)
    assert cost.remaining_hours == pytest.approx(left * cost.step_seconds * cost.gpus / 3600)
    assert ("(trained with other settings or code: from step 0)" in report([cost])) == restarts


@pytest.mark.workflow
def test_the_paper_dry_run_plans_both_pairs_every_table3_row_and_the_gpu_hours(tmp_path):
    project = copy_project(tmp_path / "project")
    result = run_snakemake(project, "-n", "--configfile", "configs/paper.yaml")
    said = result.stdout + result.stderr
    assert "left out parser_wsj: dataset 'wsj' has no data" in said
    assert "--config 'datasets={wsj: {root: /path/to/it}}'" in said
    for name in ("base_en_de", "big_en_fr", "table3_A_h16", "table3_D_ls0.2"):
        assert f"runs/{name}/train.json" in said
    assert "results/paper/tables/table2.md" in said and "results/paper/figures/" in said
    assert "  base_en_de                 100000   0.432    8     96.0  paper base" in said
    assert "total: " in said and " GPU-hours" in said


TOY_SIZED = {"train": 1500, "dev": 60, "test": 60}
QUICK_TRAINING = {
    "max_steps": 30,
    "warmup_steps": 20,
    "tokens_per_step": 1000,
    "tokens_per_batch": 1400,
    "pad_to_multiple": 1,
    "checkpoint_every_steps": 10,
    "checkpoint_every_minutes": None,
    "average_last": 2,
    "log_every_steps": 10,
    "dev_every_steps": 10,
}


def stand_in_preset(project: Path, pair: tuple[str, str], seeds: int = 1) -> Path:
    """A preset like configs/wmt14_en_<x>.yaml at toy size: its own dataset (toy sentences, the
    target side named after the pair) and one small model compared with the paper's base,
    trained with `seeds` seeds."""
    from aiayn.data.toy import generate

    name = f"stand_in_{pair[1]}"
    splits = {}
    for seed, (split, size) in enumerate(TOY_SIZED.items(), start=1):
        partition = "train" if split == "train" else split
        pairs = list(generate(size, seed, partition))
        folder = project / "stand_in" / name
        folder.mkdir(parents=True, exist_ok=True)
        for side, lang in enumerate(pair):
            (folder / f"{split}.{lang}").write_text("".join(p[side] + "\n" for p in pairs))
        splits[split] = {"source": "local", "paths": {lang: f"{split}.{lang}" for lang in pair}}
    dataset = {"langs": list(pair), "root": str(folder), "splits": splits,
               "subword": {"vocab_size": 500}}  # fmt: skip
    experiment = {"dataset": name, "model": "tiny", "paper_row": "base", "train": QUICK_TRAINING,
                  "overrides": {"d_model": 32, "d_ff": 64, "n_heads": 2},
                  "decode": {"search": "greedy", "max_length_offset": 5}, "seeds": seeds}  # fmt: skip
    preset = {
        "study": name,
        "datasets": {name: dataset},
        "experiments": {f"small_{pair[1]}": experiment},
    }
    return write(project / f"{name}.yaml", preset)


@pytest.mark.workflow
def test_two_presets_composed_put_both_pairs_in_one_table2(tmp_path):
    """The German stand-in trains two seeds: its rows show their mean and spread."""
    project = copy_project(tmp_path / "project")
    german = stand_in_preset(project, ("en", "de"), seeds=2)
    french = stand_in_preset(project, ("en", "fr"))
    run_snakemake(project, "--configfile", german.name, french.name)
    results = project / "results" / "stand_in_de+stand_in_fr"
    table2 = pd.read_csv(results / "tables" / "table2.csv")
    ours = table2[table2["source"] == "ours"]
    assert sorted(ours["pair"]) == ["en-de", "en-fr"]  # each on its test split
    assert list(ours.sort_values("pair")["seeds"]) == [2, 1]
    over_seeds = json.loads((results / "seeds/small_de/averaged/test.json").read_text())
    assert over_seeds["runs"] == ["small_de", "small_de.seed2"]
    assert over_seeds["train_seeds"] == [1, 2] and len(over_seeds["sacrebleu"]["per_seed"]) == 2
    german_row = ours[ours["pair"] == "en-de"].iloc[0]
    assert german_row["sacreBLEU"] == pytest.approx(over_seeds["sacrebleu"]["mean"], abs=0.01)
    assert german_row["sacreBLEU sd over seeds"] == pytest.approx(
        over_seeds["sacrebleu"]["sd"], abs=0.01
    )
    seed_one = json.loads((project / "runs/small_de/experiment.json").read_text())
    seed_two = json.loads((project / "runs/small_de.seed2/experiment.json").read_text())
    assert (seed_one["train"]["seed"], seed_two["train"]["seed"]) == (1, 2)
    paper = table2[table2["source"] == "paper"]
    assert {"en-de", "en-fr"} <= set(paper["pair"])  # the paper's rows of both pairs beside ours
    table3 = pd.read_csv(results / "tables" / "table3.csv")
    assert {"small_de", "small_fr"} <= set(table3["row"])
    record = json.loads((results / "run.json").read_text())
    assert record["study"] == "stand_in_de+stand_in_fr" and set(record["experiments"]) == {
        "small_de",
        "small_de.seed2",
        "small_fr",
    }
    command = "snakemake --cores 2 --configfile stand_in_de.yaml stand_in_fr.yaml"
    assert record["command"] == command and record["invocation_seconds"] > 10
    assert not (project / "results" / "toy").exists()  # the toy study was never touched
    again = run_snakemake(project, "--configfile", german.name, french.name)
    assert "Nothing to be done" in again.stdout + again.stderr  # the record too is up to date


def test_the_run_record_reads_every_kind_of_score_file(tmp_path):
    """BLEU figures from a translation's score file, EVALB's from a parser's (committed ones)."""
    from aiayn.report.run_record import score_record

    bleu = score_record(str(PROJECT / "results/toy/scores/tiny/averaged/test.json"))
    assert set(bleu) >= {"sacrebleu", "tokenized_bleu", "chrf", "brevity_penalty", "sentences"}
    parsed = score_record(
        str(PROJECT / "results/ptb_sample/scores/parser_sample/averaged/test.json")
    )
    assert parsed["sentences"] == 168 and 0 <= parsed["f1"] <= 100


def test_a_study_emptied_by_an_absent_optional_dataset_is_an_error(tmp_path):
    """A mistyped root of the only dataset ended as an empty study, exit 0, with one warning
    among many lines; the run record of a study that left some out says which."""
    overlay = tmp_path / "typo.yaml"
    overlay.write_text(
        f"include: [{PROJECT / 'configs/parsing_wsj.yaml'}]\n"
        "datasets: {wsj: {optional: true, root: /nonexistent/treebank_3/parsed/mrg/wjs}}\n"
    )
    with pytest.raises(InputError, match="nothing is left of the study: every experiment"):
        load_config(PROJECT, [overlay])


def test_the_run_record_says_what_was_left_out(tmp_path, monkeypatch):
    from aiayn.report.run_record import INVOCATION, run_record

    monkeypatch.setenv(INVOCATION, '{"argv": ["snakemake", "--cores", "all"], "started": 0}')
    said = "left out parser_wsj: dataset 'wsj' has no data at treebank_3/..."
    record = run_record(
        study="paper", configfiles=[], root=PROJECT, experiments={}, scores=[],
        left_out={"wsj": said},
    )  # fmt: skip
    assert record["left_out"] == {"wsj": said}
    software = record["software"]  # read from the packages' metadata, torch not imported
    assert software["sacrebleu"] == version("sacrebleu") and software["torch"] == version("torch")
    assert "left_out" not in run_record(
        study="paper", configfiles=[], root=PROJECT, experiments={}, scores=[]
    )


def test_the_run_record_names_the_kernel_variables_set(monkeypatch):
    """What chooses the CPU's kernels besides the CPU: ATEN_CPU_CAPABILITY, MKL's and oneDNN's
    caps, a preloaded library (.ci/regenerate --as-intel's answer to MKL's vendor check)."""
    from aiayn.report.run_record import INVOCATION, KERNEL_VARIABLES, run_record

    monkeypatch.setenv(INVOCATION, '{"argv": ["snakemake", "--cores", "all"], "started": 0}')
    for name in KERNEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/libmkl_intel_cpu.so")
    record = run_record(study="paper", configfiles=[], root=PROJECT, experiments={}, scores=[])
    assert record["host"]["kernel_variables"] == {
        "ATEN_CPU_CAPABILITY": "default", "LD_PRELOAD": "/tmp/libmkl_intel_cpu.so"
    }  # fmt: skip
