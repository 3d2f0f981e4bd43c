"""The config schema: presets validate, typos are named, defaults agree with the code."""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from aiayn.config.experiments import resolve, resolve_evaluation
from aiayn.config.load import load_config
from aiayn.config.plan import Plan
from aiayn.config.study import compose_config
from aiayn.data.clean import CleanSettings
from aiayn.decode.settings import DecodeSettings
from aiayn.errors import InputError
from aiayn.model_config import TABLE3_ROWS
from aiayn.paper import paper_steps_per_minute
from aiayn.prepare.subword import SubwordSettings
from aiayn.train.batching import step_plan
from aiayn.train.settings import TrainSettings
from tests.conftest import PROJECT, run_snakemake

SCHEMA = str(PROJECT / "schemas" / "config.schema.yaml")


def load(name):
    """A study as its config files compose it (aiayn.config.study), not yet validated."""
    files = [] if name == "config.yaml" else [PROJECT / name]
    return compose_config(PROJECT / "config.yaml", files)


@pytest.mark.parametrize(
    "name",
    [
        "config.yaml",
        "configs/wmt14_en_de.yaml",
        "configs/wmt14_en_fr.yaml",
        "configs/multi30k.yaml",
        "configs/wmt14_en_de_sample.yaml",
        "configs/parsing.yaml",
        "configs/parsing_wsj.yaml",
        "configs/parsing_other_documents.yaml",
    ],
)
def test_presets_validate(name):
    config = load(name)
    validate(config, SCHEMA)
    used = {entry["dataset"] for entry in config["experiments"].values()}
    for name, dataset in config["datasets"].items():
        assert name in used | set(config["prepare"]) and "train" in dataset["splits"]


def test_the_wmt14_sample_is_evaluated_on_the_full_configs_test_sets():
    """The sample config stands in for configs/wmt14_en_de.yaml: only its training data differ."""
    full = load("configs/wmt14_en_de.yaml")["datasets"]["wmt14_en_de"]
    sample = load("configs/wmt14_en_de_sample.yaml")["datasets"]["wmt14_en_de_sample"]
    evaluation = {name: spec for name, spec in full["splits"].items() if name != "train"}
    assert {n: s for n, s in sample["splits"].items() if n != "train"} == evaluation
    assert sample["langs"] == full["langs"]
    assert sample["splits"]["train"]["detokenize"] == "moses"


def test_defaults_are_filled_and_agree_with_the_code():
    config = load("config.yaml")
    del config["datasets"]["toy"]["clean"]
    config["datasets"]["toy"]["subword"] = {}
    validate(config, SCHEMA)
    toy = config["datasets"]["toy"]
    assert toy["clean"] == dataclasses.asdict(CleanSettings())
    assert toy["subword"] == dataclasses.asdict(SubwordSettings())
    assert toy["root"] is None and toy["splits"]["train"]["seed"] == 1


def test_source_specific_defaults_apply_to_their_source_only():
    config = load("configs/wmt14_en_de.yaml")
    validate(config, SCHEMA)
    splits = config["datasets"]["wmt14_en_de"]["splits"]
    assert splits["train"]["streaming"] is True and splits["train"]["field"] == "translation"
    assert "streaming" not in splits["newstest2013"] and splits["newstest2013"]["langpair"] is None


@pytest.mark.parametrize(
    ("path", "bad_key"),
    [
        (("datasets", "toy", "clean"), "max_tokns"),
        (("datasets", "toy", "splits", "train"), "sise"),
        (("datasets", "toy"), "vocab_size"),
        ((), "datasetz"),
        (("experiments", "tiny", "train"), "max_step"),
    ],
)
def test_a_typo_is_an_error_that_names_the_key(path, bad_key):
    config = copy.deepcopy(load("config.yaml"))
    node = config
    for key in path:
        node = node[key]
    node[bad_key] = 1
    with pytest.raises(WorkflowError) as err:
        validate(config, SCHEMA)
    message = str(err.value)
    assert f"'{bad_key}' was unexpected" in message
    assert "On instance" + "".join(f"[{key!r}]" for key in path) + ":" in message


def test_wrong_types_and_missing_keys_are_errors():
    config = load("config.yaml")
    config["datasets"]["toy"]["splits"]["train"]["size"] = "many"
    with pytest.raises(WorkflowError, match="not of type 'integer'"):
        validate(config, SCHEMA)
    config = load("config.yaml")
    del config["datasets"]["toy"]["splits"]["train"]
    with pytest.raises(WorkflowError, match="'train' is a required property"):
        validate(config, SCHEMA)


def test_snakemake_cli_reports_a_typo_by_name(project_copy):
    """One short message naming the key and the nearest valid one, not the whole config."""
    data = project_copy / "configs" / "data" / "toy.yaml"  # included by config.yaml
    data.write_text(data.read_text().replace("max_ratio:", "max_raito:"))
    result = run_snakemake(project_copy, "-n", check=False)
    said = result.stdout + result.stderr
    assert result.returncode != 0
    assert first_line(said) == (
        "Error in the config: config: unknown key 'max_raito' under datasets.toy.clean: did you "
        "mean 'max_ratio'? valid keys: max_tokens, max_ratio"
    ), said
    assert len(said.splitlines()) < 5 and 'File "' not in said, said
    result = run_snakemake(project_copy, "-n", "--config", "experimens={}", check=False)
    assert first_line(result.stdout + result.stderr).startswith(
        "Error in the config: config: unknown key 'experimens' at the top level: did you mean "
        "'experiments'?"
    )


def first_line(said: str) -> str:
    """The first line of snakemake's output after its note on the profile it read."""
    return next(line for line in said.splitlines() if not line.startswith("Using workflow"))


# "nl\n": Python's `$` matches before a final newline, so a name ending in one passed
NAMES_THAT_LEAVE_THEIR_FOLDER = ["..", ".", "/", "a/b", "/tmp", "..hidden", "nl\n"]


@pytest.mark.parametrize("name", NAMES_THAT_LEAVE_THEIR_FOLDER)
@pytest.mark.parametrize("kind", ["study", "experiment", "dataset", "split"])
def test_no_name_that_becomes_a_path_can_leave_its_folder(kind, name):
    """Study, experiment, dataset and split names become folders and file names: each is held
    to the schema's $defs patterns in one check (aiayn.config.check), with the rule in the
    message."""
    from aiayn.config.check import check_config
    from aiayn.config.schema import schema

    config = load("config.yaml")
    if kind == "study":
        config["study"] = name
    elif kind == "experiment":
        config["experiments"][name] = config["experiments"]["tiny"]
    elif kind == "dataset":
        config["datasets"][name] = config["datasets"]["toy"]
    else:
        config["datasets"]["toy"]["splits"][name] = config["datasets"]["toy"]["splits"]["dev"]
    with pytest.raises(InputError, match="`.`, `..` and `/` would lead out of them"):
        check_config(config, schema())


def with_name(kind: str, name: str) -> dict:
    """The default config with one name of the kind replaced by `name`."""
    config = load("config.yaml")
    if kind == "study":
        config["study"] = name
    elif kind == "experiment":
        config["experiments"][name] = config["experiments"].pop("tiny")
    elif kind == "dataset":
        config["datasets"][name] = config["datasets"].pop("toy")
    else:
        config["datasets"]["toy"]["splits"][name] = config["datasets"]["toy"]["splits"]["dev"]
    return config


NAME_CHARACTERS = "abcXYZ019_"


@given(
    kind=st.sampled_from(["study", "experiment", "dataset", "split"]),
    name=st.text(NAME_CHARACTERS, min_size=1, max_size=400) | st.builds(
        lambda head, part, times: head + part * times,
        st.text(NAME_CHARACTERS, max_size=10), st.text(NAME_CHARACTERS, min_size=1, max_size=3),
        st.integers(15, 30),
    ),
)  # fmt: skip
@examples(max_examples=80, deadline=None, derandomize=True)
def test_a_name_is_refused_where_its_files_would_not_fit_or_snakemake_would_refuse_it(kind, name):
    """Names become folders and file names with suffixes (`<name>.seed100.log`) and wildcard
    values: one over 100 characters is refused with its length; one ending in a part repeated
    20 times, which Snakemake's own detector takes for a recursion, is refused naming the part;
    any other passes."""
    from snakemake.io import PeriodicityDetector

    from aiayn.config.check import check_config
    from aiayn.config.schema import schema

    if len(name) > 100:
        refusal = f"has {len(name)} characters, over 100: shorten it"
    elif (part := PeriodicityDetector().is_periodic(name)) is not None:
        refusal = f"ends in {part!r} .* times over, which Snakemake refuses"
    else:
        check_config(with_name(kind, name), schema())
        return
    with pytest.raises(InputError, match=refusal):
        check_config(with_name(kind, name), schema())


def test_the_longest_names_and_most_seeds_plan_files_a_file_system_holds(project_copy):
    """Every name at its limit and the most seeds: Snakemake's own plan (which also looks at
    each run's outputs as the workflow starts) names no file or folder over 255 bytes. A name
    Snakemake would refuse as a wildcard value is refused first, by our check, naming its key."""
    long = {kind: (kind + "_0123456789" * 10)[:100] for kind in ("s", "d", "e", "v")}
    config = with_name("dataset", long["d"])
    config.update(study=long["s"], prepare=[long["d"]])
    splits = config["datasets"][long["d"]]["splits"]
    splits[long["v"]] = splits["dev"]
    tiny = config["experiments"].pop("tiny")
    config["experiments"] = {long["e"]: {**tiny, "dataset": long["d"], "seeds": 100}}
    (project_copy / "long.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(project_copy, "-n", "--configfile=long.yaml")
    planned = re.findall(r"^\s+(?:output|log): (.+)$", result.stdout, flags=re.M)
    files = [path for line in planned for path in line.split(", ")]
    assert any(".seed100/" in path for path in files) and any(long["v"] in path for path in files)
    assert max(len(part.encode()) for path in files for part in path.split("/")) <= 255

    config["experiments"] = {"run_" + "a" * 20: config["experiments"][long["e"]]}
    (project_copy / "long.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(project_copy, "-n", "--configfile=long.yaml", check=False)
    assert (
        "config key experiments: 'run_aaaaaaaaaaaaaaaaaaaa' ends in 'a' 20 times" in result.stderr
    )
    assert "PeriodicWildcardError" not in result.stdout + result.stderr


def test_a_study_named_up_and_out_writes_nothing_outside_results(project_copy):
    result = run_snakemake(project_copy, "-n", "--config", "study=..", check=False)
    assert result.returncode != 0
    assert first_line(result.stdout + result.stderr).startswith(
        "Error in the config: config key study: '..' is not allowed: use letters"
    )
    (project_copy / "....yaml").write_text("include: [config.yaml]\n")  # its stem is the study
    result = run_snakemake(project_copy, "-n", "--configfile", "....yaml", check=False)
    assert "config key study: '...' is not allowed: use letters" in result.stdout + result.stderr
    assert not (project_copy / "tables").exists() and not (project_copy / "run.json").exists()


def test_a_value_that_breaks_another_pattern_is_told_the_pattern():
    from aiayn.config.check import check_config
    from aiayn.config.schema import schema

    config = load("config.yaml")
    config["datasets"]["toy"]["langs"] = ["EN", "de"]
    with pytest.raises(InputError, match=r"datasets.toy.langs.0: 'EN' is not allowed: it must"):
        check_config(config, schema())


def test_whole_number_floats_are_refused_naming_the_key():
    """jsonschema's `integer` takes 2.0; average_last: 2.0 then failed after the training."""
    from aiayn.config.check import check_config
    from aiayn.config.schema import schema

    config = load("config.yaml")
    config["experiments"]["tiny"]["train"]["average_last"] = 2.0
    with pytest.raises(InputError, match="experiments.tiny.train.average_last: 2.0 is not a whole"):
        check_config(config, schema())


@pytest.mark.parametrize(
    "value, said",
    [
        ("100", "'100' is text, not a whole number: write it without quotes"),
        (True, "true is a yes/no value, not a whole number"),
        (None, "the value is empty (null), not a whole number: write a whole number, or leave"),
        (2.5, "2.5 is not a whole number: write it without a decimal point"),
    ],
)
def test_a_value_where_a_whole_number_belongs_is_told_what_it_is(value, said):
    """A quoted number, `true` or `null` were all told to drop a decimal point they lacked."""
    from aiayn.config.check import check_config
    from aiayn.config.schema import schema

    config = load("config.yaml")
    config["experiments"]["tiny"]["train"]["max_steps"] = value
    with pytest.raises(InputError, match=re.escape(f"experiments.tiny.train.max_steps: {said}")):
        check_config(config, schema())


@given(
    text=st.from_regex(r"[-+]?[0-9_]{0,4}\.?[0-9]{0,3}([eE][-+]?[0-9]{1,4})?", fullmatch=True)
    | st.sampled_from(["010", "0o10", "0x1F", "12:30:00", "2026-12-07", "yes", "~", ".inf",
                       ".nan", "1.0e+400", "1.0e-400", "1e-400", "1e400", "toy"])
)  # fmt: skip
@examples(max_examples=300, deadline=None, derandomize=True)
def test_a_nested_command_line_scalar_reads_as_in_a_config_file_or_is_refused_by_key(text):
    """`--config 'experiments={tiny: {overrides: {d_model: 010}}}'` read 010 as 10.0 (a file
    reads it as text, refused as such) and was refused for "a decimal point" it did not have;
    `1e-400` became 0 without a word (a file refuses it), and `1.0e+400` was refused at "line 1"
    of no file. A scalar reads as in a file, but for a number with an exponent and no point
    (`1e-3`, text to YAML 1.1, a number here); one past a float is refused naming its key."""
    from aiayn.config.study import typed_scalars
    from aiayn.config.yaml_text import ConfigLoader

    where = "experiments.tiny.train.lr_scale"
    exponent_only = re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", text)
    try:
        in_a_file = yaml.load(f"key: {text}", Loader=ConfigLoader)["key"]  # noqa: S506
    except InputError:
        in_a_file = InputError
    except yaml.YAMLError:
        return  # not a scalar a file holds either
    try:
        read = typed_scalars(text, where)
    except InputError as err:
        assert str(err).startswith(f"--config {where}: {text} is beyond what a number holds")
        assert in_a_file is InputError or exponent_only
        return
    if exponent_only:
        mantissa = float(re.split("[eE]", text)[0])
        assert read == float(text) and (read != 0 or mantissa == 0)  # never 0 from 1e-400
    elif isinstance(in_a_file, bool | int | float) or in_a_file is None:
        assert read == in_a_file or (read != read and in_a_file != in_a_file)  # NaN
    else:
        assert read == text


def test_nested_command_line_values_are_read_as_in_a_config_file(tmp_path):
    """Snakemake reads `--config 'experiments={tiny: {train: {max_steps: 100}}}'` with YAML's
    BaseLoader: every nested scalar a string. They are read as a config file reads them."""
    from aiayn.config.study import compose_config, typed_scalars

    nested = {"experiments": {"tiny": {"train": {
        "max_steps": "100", "label_smoothing": "0.2", "sync_free": "true", "lr_scale": "1e-1",
        "max_minutes": ""}}}}  # fmt: skip
    train = compose_config(PROJECT / "config.yaml", (), nested)["experiments"]["tiny"]["train"]
    assert (train["max_steps"], train["label_smoothing"], train["sync_free"]) == (100, 0.2, True)
    assert (train["lr_scale"], train["max_minutes"]) == (0.1, None)
    assert typed_scalars(["0x", "a: b", "toy", "nan"], "x") == ["0x", "a: b", "toy", "nan"]
    study = tmp_path / "study.yaml"
    study.write_text(f"include: [{PROJECT / 'config.yaml'}]\nstudy: 2024\n")
    assert compose_config(PROJECT / "config.yaml", [study])["study"] == "2024"
    assert compose_config(PROJECT / "config.yaml", (), {"study": 2024})["study"] == "2024"


def test_snakemake_takes_nested_numbers_and_a_numeric_study_from_the_command_line(project_copy):
    """The README's `--config 'experiments={tiny: {train: {max_steps: 100}}}'` failed its
    check ('100' is not a whole number), and a study named 2024 ended in a TypeError."""
    result = run_snakemake(
        project_copy, "-n", "--config", "study=2024",
        "experiments={tiny: {train: {max_steps: 7, sync_free: true}}}",
    )  # fmt: skip
    assert "results/2024/tables/table2.md" in result.stdout
    assert re.search(r"\n  tiny +7 ", result.stdout)  # the plan's bill: 7 steps, the number
    refused = run_snakemake(project_copy, "-n", "--config", "study=1e5", check=False)
    assert refused.returncode != 0 and "results/100000.0" not in refused.stdout
    assert "--config study=1e5: snakemake reads it as the number 100000.0" in refused.stderr


@given(
    digits=st.from_regex(r"[+-]?(0|[0-9]{1,3}(_?[0-9]{1,3})*)(\.[0-9]*)?([eE][+-]?[0-9]{1,3})?",
                         fullmatch=True),
    quote=st.sampled_from(["", "'", '"']),
)  # fmt: skip
@examples(max_examples=200, deadline=None, derandomize=True)
def test_a_study_snakemake_reads_as_a_number_keeps_its_name_or_is_refused(digits, quote):
    """`--config study=1e5` named the study 100000.0 (and `02024`, `1.50`, `1_000` others):
    snakemake's own parser reads the value first; the name is what was typed, or refused."""
    from snakemake.cli import parse_config

    from aiayn.config.study import command_line_study

    typed = f"study={quote}{digits}{quote}"
    value = parse_config([typed])["study"]
    if not isinstance(value, int | float) or isinstance(value, bool):
        return  # text: taken as it is
    try:
        assert command_line_study(value, ["snakemake", "--config", typed]) == digits
    except InputError as err:
        assert str(err).startswith(f"--config {typed}: snakemake reads it as the number")
        assert str(value) != digits


def test_a_yaml_alias_bomb_is_refused_at_once(project_copy):
    """Aliases nested ten deep expand to 10^10 values: loading is quick, but printing the
    schema's error never ended. The expanded size is counted without expanding."""
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
        f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 10)}]" for k in range(1, 10)
    ]
    (project_copy / "bomb.yaml").write_text("\n".join([*rows, "prepare: *a9", ""]))
    result = run_snakemake(project_copy, "-n", "--configfile", "bomb.yaml", check=False)
    assert result.returncode != 0
    said = first_line(result.stdout + result.stderr)
    assert "bomb.yaml expands to 23,456,790,122 values, over 100,000" in said


def test_unknown_dataset_in_prepare_is_named(project_copy):
    result = run_snakemake(project_copy, "-n", "--config", "prepare=[toyy]", check=False)
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert "Error in the config: prepare names 'toyy', which is not a dataset under" in said
    assert "Traceback" not in said and "Snakefile" not in said  # it was a Snakefile traceback


def test_a_target_of_an_experiment_the_study_lacks_is_named(project_copy):
    """`snakemake runs/nope/averaged.safetensors`: Snakemake reports what our input function
    says, in its own frame (InputFunctionException, two lines of where), before any job."""
    result = run_snakemake(project_copy, "-n", "runs/nope/averaged.safetensors", check=False)
    said = result.stdout + result.stderr
    assert result.returncode != 0 and "InputFunctionException" in said
    assert "experiment 'nope' is not in the study's `experiments` (study 'toy'" in said


def test_an_experiment_naming_an_unknown_dataset_is_named(project_copy):
    config = (project_copy / "config.yaml").read_text()
    (project_copy / "config.yaml").write_text(config.replace("dataset: toy", "dataset: toyy", 1))
    result = run_snakemake(project_copy, "-n", check=False)
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert "experiment 'tiny': dataset 'toyy' is not defined under `datasets`" in said
    assert "(defined: ['toy'])" in said and "KeyError" not in said


def test_conda_environment_pins_match_pyproject_and_install_the_checkout(tmp_path):
    """The pins are pyproject's; the package itself comes from $AIAYN_CHECKOUT, which the
    Snakefile sets and pip expands in the requirements file conda writes (checked with pip:
    conda is not installable here)."""
    pyproject = tomllib.loads((PROJECT / "pyproject.toml").read_text())
    env = yaml.safe_load((PROJECT / "rules" / "envs" / "aiayn.yaml").read_text())
    *pins, package = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    assert pins == pyproject["project"]["dependencies"]
    assert all("==" in requirement for requirement in pins)
    assert package == "-e ${AIAYN_CHECKOUT}"
    requirements = tmp_path / "condaenv.requirements.txt"
    requirements.write_text(package + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "-r", requirements],
        capture_output=True,
        text=True,
        env={**os.environ, "AIAYN_CHECKOUT": str(PROJECT)},
    )
    assert result.returncode == 0, result.stderr
    assert "Would install aiayn-" in result.stdout


def merged(*names):
    """A study of config.yaml alone or of presets composed, validated as snakemake and
    `aiayn translate` do (aiayn.config.load)."""
    assert names[0] == "config.yaml", names
    return load_config(PROJECT, [PROJECT / name for name in names[1:]])


def study_of(name: str) -> dict:
    return load_config(PROJECT, [PROJECT / name])


def entries(config: dict) -> list[dict]:
    """The study's experiments, each with its name."""
    plan = Plan(config)
    return [plan.runs.entry(name) for name in plan.runs.names()]


@pytest.mark.parametrize(
    "names",
    [
        ("config.yaml",),
        ("config.yaml", "configs/wmt14_en_de.yaml"),
        ("config.yaml", "configs/wmt14_en_fr.yaml"),
        ("config.yaml", "configs/wmt14_en_de.yaml", "configs/table3.yaml"),
        ("config.yaml", "configs/multi30k.yaml", "configs/multi30k_gpu.yaml"),
        ("config.yaml", "configs/paper.yaml"),
        ("config.yaml", "configs/parsing.yaml"),
        ("config.yaml", "configs/parsing_wsj.yaml"),
    ],
)
def test_every_preset_experiment_resolves(names):
    config = merged(*names)
    specs = [resolve(entry, config["datasets"]) for entry in entries(config)]
    assert specs and all(spec["data"]["dev"] for spec in specs)


def test_the_multi30k_gpu_overlay_only_swaps_the_experiments_for_ones_within_budget():
    """configs/multi30k_gpu.yaml keeps the CPU config's data and BPE; every experiment stops
    by its time budget, under the 10 minutes the GPU row promises."""
    config = merged("config.yaml", "configs/multi30k_gpu.yaml")
    assert config["study"] == "multi30k_gpu" and list(config["datasets"]) == ["multi30k"]
    assert config["datasets"] == merged("config.yaml", "configs/multi30k.yaml")["datasets"]
    for entry in entries(config):
        train = resolve(entry, config["datasets"])["train"]
        assert 0 < train["max_minutes"] <= 10 and entry["dataset"] == "multi30k"


def test_paper_experiments_have_the_paper_settings():
    specs = {
        e["name"]: resolve(e, merged("config.yaml", "configs/wmt14_en_de.yaml")["datasets"])
        for e in entries(merged("config.yaml", "configs/wmt14_en_de.yaml"))
    }
    base, big = specs["base_en_de"], specs["big_en_de"]
    assert (base["model"]["d_model"], base["model"]["vocab_size"], base["train"]["max_steps"]) == (
        512,
        37000,
        100000,
    )
    assert (big["model"]["d_model"], big["model"]["dropout"], big["train"]["max_steps"]) == (
        1024,
        0.3,
        300000,
    )
    assert (base["train"]["average_last"], big["train"]["average_last"]) == (5, 20)
    assert (
        base["train"]["checkpoint_every_steps"] == 1389 and base["train"]["label_smoothing"] == 0.1
    )
    assert base["data"]["dev"][0].endswith("newstest2013.en-de.en")
    big_fr = [
        e
        for e in entries(merged("config.yaml", "configs/wmt14_en_fr.yaml"))
        if e["name"] == "big_en_fr"
    ]
    assert (
        resolve(big_fr[0], merged("config.yaml", "configs/wmt14_en_fr.yaml")["datasets"])["model"][
            "dropout"
        ]
        == 0.1
    )


def test_the_parsing_preset_has_the_papers_table4_settings():
    """Section 6.3: 4 layers, d_model 1024, 16K vocabulary, WSJ 02-21 / 22 / 23, beam 21,
    alpha 0.3, input length + 300."""
    config = merged("config.yaml", "configs/parsing_wsj.yaml")
    (entry,) = entries(config)
    spec = resolve(entry, config["datasets"])
    assert (spec["model"]["n_layers"], spec["model"]["d_model"], spec["model"]["vocab_size"]) == (
        4,
        1024,
        16000,
    )
    assert (spec["model"]["d_ff"], spec["model"]["n_heads"]) == (2048, 8)  # the base model's
    decode = resolve_evaluation(entry, config["datasets"])["decode"]
    assert (decode.beam, decode.alpha, decode.max_length_offset) == (21, 0.3, 300)
    splits = config["datasets"]["wsj"]["splits"]
    assert [splits[s]["sections"] for s in ("train", "dev", "test")] == ["02-21", 22, 23]


PAPER_PRESETS = [
    ("configs/wmt14_en_de.yaml",),
    ("configs/wmt14_en_fr.yaml",),
    ("configs/wmt14_en_de.yaml", "configs/table3.yaml"),
    ("configs/paper.yaml",),
]


@pytest.mark.parametrize("presets", PAPER_PRESETS)
def test_the_paper_presets_train_clean_and_decode_as_the_paper(presets):
    """Real-token steps of 25000 with room for padding, checkpoints every 10 of the paper's
    minutes counted in its steps (not ours), Moses' ratio filter, the paper's beam rule,
    GPU-sized decode batches, and a BPE sample sized for WMT."""
    config = merged("config.yaml", *presets)
    for entry in entries(config):
        spec = resolve(entry, config["datasets"])
        train, size = spec["train"], "big" if entry["model"] == "big" else "base"
        assert train["tokens_per_step"] == 25000
        accumulation, share = step_plan(25000, train["tokens_per_batch"], entry["processes"])
        assert train["tokens_per_batch"] >= 1.25 * share, entry["name"]
        assert train["checkpoint_every_minutes"] is None
        assert train["keep_states"] == 2, entry["name"]  # a damaged state must not cost the run
        assert train["checkpoint_every_steps"] == round(10 * paper_steps_per_minute(size))
        decode = resolve_evaluation(entry, config["datasets"])["decode"]
        assert decode.finalize == "t2t"
        if not entry["name"].startswith("table3_"):  # Table 3 decodes only the dev split
            assert decode.batch_tokens >= 16000
    for name in {entry["dataset"] for entry in entries(config)}:
        dataset = config["datasets"][name]
        assert dataset["clean"]["max_ratio"] == 9
        assert 1_000_000 <= dataset["subword"]["input_sentence_size"] < 9_000_000
    assert round(10 * paper_steps_per_minute("base")) == 1389
    assert round(10 * paper_steps_per_minute("big")) == 595


@pytest.mark.parametrize("preset", ["configs/table3.yaml", "configs/paper.yaml"])
def test_table3_preset_has_every_row(preset):
    experiments = entries(merged("config.yaml", preset))
    models = {e["model"] for e in experiments if e["dataset"] == "wmt14_en_de"}
    assert set(TABLE3_ROWS) | {"base", "big"} == models
    smoothing = sorted(
        e["train"]["label_smoothing"] for e in experiments if e["name"].startswith("table3_D_ls")
    )
    assert smoothing == [0.0, 0.2]
    rows = [e for e in experiments if e["name"].startswith("table3_")]
    assert all(e["train"]["average_last"] == 1 for e in rows)


def test_training_defaults_agree_with_the_code():
    config = load("config.yaml")
    config["experiments"] = {"x": {"dataset": "toy"}}
    validate(config, SCHEMA)
    assert config["experiments"]["x"]["train"] == dataclasses.asdict(TrainSettings())
    assert config["experiments"]["x"]["model"] == "base"
    assert config["experiments"]["x"]["processes"] == 1


def test_decode_defaults_agree_with_the_code_and_are_the_papers():
    config = load("config.yaml")
    config["experiments"] = {"x": {"dataset": "toy"}}
    validate(config, SCHEMA)
    entry = Plan(config).runs.entry("x")
    assert entry["decode"] == dataclasses.asdict(DecodeSettings())
    assert (entry["decode"]["beam"], entry["decode"]["alpha"]) == (4, 0.6)
    assert entry["decode"]["max_length_offset"] == 50 and entry["nodes"] == 1
    evaluation = resolve_evaluation(entry, config["datasets"])
    assert evaluation["eval_splits"] == ["dev", "test"] and evaluation["paper_row"] == "base"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"eval_splits": ["valid"]}, "eval_splits \\['valid'\\] are not evaluation splits"),
        ({"eval_splits": ["train"]}, "eval_splits \\['train'\\] are not evaluation splits"),
        ({"paper_row": "A_h3"}, "paper_row 'A_h3' is not a row of the paper's Table 3"),
        ({"decode": {"search": "sample"}}, "decode.search must be 'beam' or 'greedy'"),
    ],
)
def test_bad_evaluation_settings_are_named(change, message):
    config = merged("config.yaml")
    entry = {**Plan(config).runs.entry("tiny"), **change}
    with pytest.raises(InputError, match=f"experiment 'tiny': {message}"):
        resolve_evaluation(entry, config["datasets"])


def test_paper_rows_of_the_presets():
    config = merged("config.yaml", "configs/table3.yaml")
    rows = {
        e["name"]: resolve_evaluation(e, config["datasets"])["paper_row"] for e in entries(config)
    }
    assert rows["table3_A_h1"] == "A_h1" and rows["table3_big"] == "big"
    assert rows["table3_D_ls0.2"] == "D_ls0.2"
    toy = {name: e.get("paper_row") for name, e in load("config.yaml")["experiments"].items()}
    assert toy == {
        "tiny": "base",
        "tiny_one_head": "A_h1",
        "tiny_learned_positions": "E_learned",
        "tiny_one_layer": "C_N2",
    }


def test_each_settings_object_has_exactly_its_schema_sections_properties_and_defaults():
    """The schema states each default once; the dataclasses carrying the settings to the code
    have the same fields and take their defaults from it."""
    from aiayn.config.schema import defaults, section_properties
    from aiayn.parsing.linearize import Linearization

    for section, settings in (
        ("train", TrainSettings),
        ("decode", DecodeSettings),
        ("clean", CleanSettings),
        ("subword", SubwordSettings),
        ("linearization", Linearization),
    ):
        fields = [field.name for field in dataclasses.fields(settings)]
        assert fields == list(section_properties(section)), section
        assert dataclasses.asdict(settings()) == defaults(section), section


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda config: config["experiments"].update({"tiny; rm -rf ~": {"dataset": "toy"}}),
            re.escape("'tiny; rm -rf ~' does not match '^[A-Za-z0-9_][A-Za-z0-9_.]{0,99}\\"),
        ),
        (
            lambda config: config["datasets"].update({"my data": config["datasets"]["toy"]}),
            re.escape("'my data' does not match any of the regexes: '^[A-Za-z0-9_]{1,100}\\"),
        ),
        (
            lambda config: config["experiments"]["tiny"].update(model="huge"),
            r"experiment 'tiny': unknown model preset 'huge'; choose from \['base', 'big'",
        ),
    ],
)
def test_names_a_shell_would_split_and_unknown_presets_are_refused_before_any_job(edit, message):
    """File names are made of dataset and experiment names, so the schema admits letters,
    digits, _ (and . in experiment names) only; a preset must exist. Both are checked when the
    config is loaded, before anything is written."""
    config = load("config.yaml")
    edit(config)
    with pytest.raises((WorkflowError, InputError), match=message):
        validate(config, SCHEMA)
        for entry in entries(config):
            resolve(entry, config["datasets"])


def test_the_en_fr_preset_says_its_vocabulary_is_bpe_not_the_papers_word_pieces():
    """The paper's EN-FR vocabulary was 32000 word-pieces; ours is sentencepiece BPE of that size,
    and the preset must say so rather than call it word-pieces."""
    config = study_of("configs/wmt14_en_fr.yaml")
    assert config["datasets"]["wmt14_en_fr"]["subword"]["vocab_size"] == 32000
    for name in ("configs/wmt14_en_fr.yaml", "configs/data/wmt14_en_fr.yaml"):
        text = (PROJECT / name).read_text()
        assert "BPE" in text and "a 32000 word-piece vocabulary" not in text, name
    assert "has no WordPiece trainer" in (PROJECT / "configs/data/wmt14_en_fr.yaml").read_text()


@pytest.mark.parametrize(
    "text, said",
    [
        ("1: x\n", "config key (top level): the key 1 is not text (YAML reads it as int)"),
        ("experiments:\n  2024: {dataset: toy}\n", "experiments: the key 2024 is not text"),
        ("datasets:\n  toy:\n    splits:\n      on: {}\n", "toy.splits: a key YAML reads as true"),
        ("study: caf\xe9\n", "is not UTF-8 text (byte 0xe9 at offset 10): re-encode it"),
    ],
)
def test_keys_yaml_reads_as_numbers_and_files_not_in_utf8_are_named(tmp_path, text, said):
    """A split named 2014, an experiment named 2024 or a key `on:` ended in a TypeError, a
    Latin-1 config file in a UnicodeDecodeError."""
    path = tmp_path / "study.yaml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match=re.escape(said)):
        load_config(PROJECT, [path])


def test_averaging_more_checkpoints_than_the_run_writes_is_warned_of(project_copy, capsys):
    """average_last 100 where checkpoints every 10 steps to 750 make 75: the final model would
    average 75, so `aiayn config` (and a dry run, through the same plan) says so; 75 is quiet."""
    from aiayn.cli import main

    def study(average_last, every=10):
        (project_copy / "averaging.yaml").write_text(
            "include: [config.yaml]\nexperiments:\n  tiny:\n    train: {average_last: "
            f"{average_last}, checkpoint_every_steps: {every}}}\n"
        )
        return ["config", "--workdir", str(project_copy), "--configfile", "averaging.yaml"]

    assert main(study(100)) == 0
    said = capsys.readouterr().err
    assert (
        "warning: experiment 'tiny': average_last 100 but the run writes 75 checkpoints (every 10 "
        "steps, to max_steps 750): its final model averages 75. Lower average_last to at most 75, "
        "or save more often (checkpoint_every_steps)" in said
    )
    assert main(study(75)) == 0
    assert "average_last" not in capsys.readouterr().err
    # saving at every step already: only more steps would write more checkpoints
    assert main(study(1000, every=1)) == 0
    said = capsys.readouterr().err
    assert "averages 750. Lower average_last to at most 750, or train more steps" in said
    assert "save more often" not in said


def test_early_stopping_that_cannot_stop_before_max_steps_is_warned_of(project_copy, capsys):
    """Patience 7 at dev every 100 steps stops at step 800 at the earliest: not before the
    toy's max_steps 750, so a dry run and `aiayn config` say so (and still plan the run: a
    larger max_steps may continue it); at dev every 50 steps it can stop at 400, and nothing
    is said."""
    from aiayn.cli import main

    def study(dev_every_steps):
        (project_copy / "stopping.yaml").write_text(
            "include: [config.yaml]\nexperiments:\n  tiny:\n    train: {early_stopping_metric: "
            f"dev_loss, early_stopping_patience: 7, dev_every_steps: {dev_every_steps}}}\n"
        )
        return ["--configfile", "stopping.yaml"]

    warning = (
        "experiment 'tiny': early stopping on dev_loss cannot end it before max_steps 750: dev "
        "is evaluated every 100 steps (dev_every_steps) and the earliest stop is 7 evaluations "
        "after the first (early_stopping_patience), at step 800"
    )
    dry_run = run_snakemake(project_copy, "-n", *study(100))
    said = dry_run.stdout + dry_run.stderr
    assert warning in said and "rule train:" in said, said
    assert main(["config", "--workdir", str(project_copy), *study(100)]) == 0
    assert f"warning: {warning}" in capsys.readouterr().err
    assert main(["config", "--workdir", str(project_copy), *study(50)]) == 0
    assert "early stopping" not in capsys.readouterr().err
