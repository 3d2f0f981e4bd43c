"""The config door, by generated input: any value at any key of the default config is either
taken, or refused in a few lines that name the key (or the file), before any job; never a
traceback, and never a YAML 1.1 scalar read as something it does not look like (`12:30:00` as
45000, `010` as 8, a date). Hypothesis draws the keys and values (derandomized: the same examples
every run); each counterexample it found is a named test below."""

from __future__ import annotations

import copy
import math
import re
import resource
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.config.load import load_config
from aiayn.config.plan import Plan
from aiayn.errors import InputError
from tests.conftest import PROJECT

DEFAULT = yaml.safe_load((PROJECT / "config.yaml").read_text(encoding="utf-8"))
PLACEHOLDER = "@@VALUE@@"
# Scalars YAML 1.1 reads as something they do not look like, or that are easy to mistype
NOT_WHAT_THEY_LOOK_LIKE = ["12:30:00", "3:30", "010", "2026-12-05", "2026-12-05 10:00:00"]
ODD_SCALARS = [*NOT_WHAT_THEY_LOOK_LIKE, "no", "yes", "on", "off", "~", "null", "1e5", "1e-9",
               ".inf", "-.inf", ".nan", "0x10", "0b11", "1_000", "-0.0", "''", "[]", "{}",
               "[1, 1]", "[[[[[[[[]]]]]]]]", "99999999999999999999", "!!str 5"]  # fmt: skip


def leaves(value, path=()):
    """Every leaf's path in a config (a list counts as one leaf)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    else:
        yield path


KEYS = list(leaves(DEFAULT))


def as_yaml(value) -> str:
    """A Python value as YAML flow text, as a user could write it."""
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10**6)
    return text.removesuffix("\n...\n").strip()


python_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=300),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),  # fmt: skip
    max_leaves=8,
)
VALUES = st.sampled_from(ODD_SCALARS) | python_values.map(as_yaml)


def config_text(key: tuple, value: str) -> str:
    """The default config with the value at `key` written as `value` (raw YAML)."""
    config = copy.deepcopy(DEFAULT)
    holder = config
    for part in key[:-1]:
        holder = holder[part]
    holder[key[-1]] = PLACEHOLDER
    return yaml.safe_dump(config, sort_keys=False).replace(f"'{PLACEHOLDER}'", value)


def planned(path) -> dict:
    """What the Snakefile reads of a config before any job: the composed, validated config and
    the plan's files and bill."""
    config = load_config(PROJECT, [path])
    plan = Plan(config)
    plan.runs.check()
    plan.data.prepared_files()
    plan.outputs.score_files()
    plan.report.files()
    plan.report.gpu_hours()
    plan.runs.warnings()
    return config


def value_at(config: dict, key: tuple):
    for part in key:
        config = config[part]
    return config


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(key=st.sampled_from(KEYS), value=VALUES)
def test_any_value_at_any_config_key_is_taken_or_refused_naming_it(tmp_path, key, value):
    path = tmp_path / "study.yaml"
    path.write_text(config_text(key, value), encoding="utf-8")
    try:
        config = planned(path)
    except InputError as err:
        message = str(err)
        assert len(message.splitlines()) <= 3, message
        named = {str(key[-1]), ".".join(map(str, key)), str(path), "include:"}
        assert any(name in message for name in named), (key, message)
        return
    if value in NOT_WHAT_THEY_LOOK_LIKE:  # taken only as the text it is
        try:
            taken = value_at(config, key)
        except (KeyError, TypeError):  # composed away (a list of includes, say)
            return
        assert not isinstance(taken, int | float) or isinstance(taken, bool), (key, taken)


@pytest.mark.parametrize(
    ("key", "value", "refusal"),
    [
        (("experiments", "tiny", "train", "checkpoint_every_minutes"), "12:30:00",
         "checkpoint_every_minutes: '12:30:00' is not of type"),
        (("experiments", "tiny", "train", "max_steps"), "010",
         "max_steps: '010' is text, not a whole number: YAML reads `010` as text"),
        (("experiments", "tiny", "train", "max_steps"), "1e5",
         "exponent without a decimal point and a sign as text: write 100000"),
        (("complexity", "lengths"), "[16, 32, 2026-12-05]", "'2026-12-05' is text"),
        (("report",), "&loop {again: *loop}", "refers to a structure that holds it (a loop)"),
        (("experiments", "tiny", "overrides"), "[" * 5000 + "]" * 5000, "nests its settings too"),
        (("experiments", "tiny", "train", "lr_scale"), "1.0e+400", "1.0e+400 is beyond what a number holds"),
        (("experiments", "tiny", "overrides"), "{dropout: 1.0e-400}", "1.0e-400 is beyond what a number holds"),
    ],
)  # fmt: skip
def test_what_yaml_1_1_would_misread_or_cannot_hold_is_refused(tmp_path, key, value, refusal):
    path = tmp_path / "study.yaml"
    path.write_text(config_text(key, value), encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(refusal)):
        planned(path)


@pytest.mark.parametrize(
    ("key", "value", "refusal"),
    [
        (("experiments", "tiny", "train", "adam_beta1"), "1.5", "adam_beta1: 1.5 is greater than or equal to the maximum of 1"),
        (("experiments", "tiny", "train", "adam_eps"), "0", "adam_eps: 0 is less than the minimum of 1e-16"),
        (("experiments", "tiny", "train", "seed"), "-1", "seed: -1 is less than the minimum of 0"),
        (("experiments", "tiny", "train", "seed"), str(2**70), "is greater than the maximum of 4294967295"),
        (("experiments", "tiny", "overrides"), "{dropout: 1}", "dropout: 1 is greater than or equal to the maximum of 1"),
        (("experiments", "tiny", "eval_splits"), "[]", "eval_splits: [] should be non-empty"),
        (("experiments", "tiny", "eval_splits"), "[test, test]", "has non-unique elements"),
        (("experiments", "tiny", "decode"), "{alpha: -1}", "alpha: -1 is less than the minimum of 0"),
        (("experiments", "tiny", "decode"), "{alpha: 1.0e+308}", "alpha: 1e+308 is greater than the maximum of 5"),
        (("experiments", "tiny", "train", "dev_bleu_alpha"), "5.5", "dev_bleu_alpha: 5.5 is greater than the maximum of 5"),
        (("complexity", "lengths"), "[16, 16, 32]", "complexity.lengths: [16, 16, 32] has non-unique"),
        (("complexity", "heads"), "3", "complexity.heads 3 does not divide 64, 32, 128, 256 (d and"),
        (("complexity", "r"), "1000000", "complexity.r: 1000000 is greater than the maximum of 4096"),
        (("complexity",), "{k: 1000000}", "complexity.k: 1000000 is greater than the maximum of 64"),
        (("complexity",), "{repeats: 10000}", "repeats: 10000 is greater than the maximum of 100"),
        (("study",), "toy\ndatasets: {toy: {splits: {train: {source: toy, size: 1000000000}}}}", "size: 1000000000 is greater than the maximum of 1000000"),
        (("study",), "toy\nreport: {bootstrap_resamples: 1000000000}", "bootstrap_resamples: 1000000000 is greater than the maximum of 10000"),
        (("experiments", "tiny", "expected_step_seconds"), "1.0e+300", "expected_step_seconds: 1e+300 is greater than the maximum of 86400"),
        (("experiments", "tiny", "processes"), "100000", "processes: 100000 is greater than the maximum of 64"),
        (("experiments", "tiny", "nodes"), "100000", "nodes: 100000 is greater than the maximum of 4096"),
        (("reproduction", "bleu"), "100", "reproduction.bleu: 100 is greater than or equal to the maximum of 100"),
    ],
)  # fmt: skip
def test_numbers_and_lists_past_what_reads_them_are_refused(tmp_path, key, value, refusal):
    """The schema's bounds are its readers': Adam's (betas below 1), numpy's and torch's
    generators (seeds from 0 to 2^32 - 1), dropout and smoothing below 1, sacreBLEU's resample
    table (10^9 x 500 indices asked for 3.6 TiB), Table 1's layers (heads that split d unevenly
    were a traceback; a kernel of 10^6 ran for hours), lists whose repeats would be measured twice
    or read as all splits (`eval_splits: []`), a plan's bill (a step of 10^300 seconds printed
    a 300-digit cost), more processes or machines than exist, and a tolerance as wide as the
    scale (any rerun reproduced)."""
    path = tmp_path / "study.yaml"
    path.write_text(config_text(key, value), encoding="utf-8")
    with pytest.raises(InputError) as refused:
        planned(path)
    assert refusal in str(refused.value)


def test_a_budget_of_any_size_is_planned_at_once(tmp_path):
    """`max_steps: 10^23` (a raise meant to be cut short by max_minutes, say) is planned in
    constant memory: the plan once counted the checkpoints by listing them, and the process
    was killed by the kernel."""
    value = (
        "{max_steps: 100000000000000000000000, checkpoint_every_steps: 1, "
        "checkpoint_every_minutes: null}"
    )
    path = tmp_path / "study.yaml"
    config = copy.deepcopy(DEFAULT)
    config["experiments"]["tiny"]["train"] = "@@VALUE@@"
    path.write_text(yaml.safe_dump(config, sort_keys=False).replace(f"'{PLACEHOLDER}'", value))
    status = Path("/proc/self/status").read_text()
    size = int(re.search(r"VmSize:\s+(\d+) kB", status).group(1)) * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), hard))  # a MemoryError, not a kill
    try:
        planned(path)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_a_study_named_by_a_number_keeps_it_as_written(tmp_path):
    """`study: 0x10` is the study `0x10` (results/0x10/), not 16; a date is its text too."""
    for written in ("0x10", "2024", "1.50", "2026-12-05"):
        path = tmp_path / "study.yaml"
        path.write_text(config_text(("study",), written), encoding="utf-8")
        assert planned(path)["study"] == written
    path.write_text(config_text(("study",), "[1, 1]"), encoding="utf-8")
    with pytest.raises(InputError, match=r"`study: \[1, 1\]` is not a name"):
        planned(path)


@pytest.mark.parametrize("written", ["off", "no", "false", "on", "yes", "true"])
@pytest.mark.parametrize(
    ("key", "word"),
    [(("experiments", "tiny", "train", "wandb"), "off"),
     (("experiments", "tiny_learned_positions", "overrides", "positions"), None)],
)  # fmt: skip
def test_a_yes_no_word_where_a_word_belongs_says_how_yaml_read_it(tmp_path, written, key, word):
    """`wandb: off` said `False is not one of ['off', 'offline', 'online']`: YAML 1.1 reads it as
    a yes/no value. The message says so, and which word to quote where one is meant."""
    path = tmp_path / "study.yaml"
    path.write_text(config_text(key, written), encoding="utf-8")
    with pytest.raises(InputError, match=r"a yes/no value \(YAML reads") as refused:
        planned(path)
    said = str(refused.value)
    meant = word is not None and written in ("off", "no", "false")
    assert (f"write '{word}' in quotes" in said) == meant, said


@given(
    mantissa=st.from_regex(r"[1-9][0-9]{0,8}(\.[0-9]{1,8})?", fullmatch=True),
    exponent=st.integers(-400, 400),
)
@settings(max_examples=200, derandomize=True, deadline=None)
def test_the_advice_for_an_exponent_yaml_reads_as_text_gives_back_the_same_number(
    mantissa, exponent
):
    """`1e5` is text to YAML 1.1: the advice writes a number YAML reads as exactly the number
    meant (it rounded to two digits: 1.234e20 became 1.2e+20); one past what a float holds
    (1e400, 1e-400) is said to be, not advised as `inf` or 0."""
    from aiayn.config.check import how_to_write_a_number
    from aiayn.config.yaml_text import ConfigLoader

    text = f"{mantissa}e{exponent}"
    try:
        if not isinstance(yaml.load(text, Loader=ConfigLoader), str):  # noqa: S506 - SafeLoader
            return  # YAML reads it as a number (`1.5e-7`: a point and a sign): no advice needed
    except InputError:  # a number past a float's range, refused where it is read
        return
    advice = how_to_write_a_number(text, "a number")
    meant = float(text)
    if meant in (0.0, float("inf")):
        assert advice.startswith(f"{text} is beyond what a number holds here"), advice
    else:
        written = advice.rsplit("write ", 1)[1]
        assert yaml.load(written, Loader=ConfigLoader) == meant, (text, advice)  # noqa: S506


def other_split(kind: str, shared: bool, spelling: str) -> tuple[dict, dict]:
    """A `train` split of a source kind, and a `dev` split that reads the same data (`shared`)
    or its own, the same data spelled as `spelling` says where a path can be spelled."""
    if kind == "local":
        same = {"plain": "train.en", "absolute": "{root}/train.en", "dotdot": "x/../train.en",
                "link": "alias.en"}[spelling]  # fmt: skip
        paths = {"en": same if shared else "dev.en", "de": "dev.de"}
        return {"source": "local", "paths": {"en": "train.en", "de": "train.de"}}, {
            "source": "local", "paths": paths}  # fmt: skip
    if kind == "toy":
        return {"source": "toy", "size": 10}, {"source": "toy", "size": 10, "seed": 7,
                                               "partition": "train" if shared else "dev"}  # fmt: skip
    if kind == "hf":  # the first rows of the same hub split
        train = {"source": "hf", "path": "wmt/wmt14", "name": "de-en", "split": "train"}
        return train, train | {"split": "train" if shared else "validation", "max_pairs": 100}
    if kind == "sacrebleu":
        return {"source": "sacrebleu", "test_set": "wmt13"}, {
            "source": "sacrebleu", "test_set": "wmt13" if shared else "wmt14"}  # fmt: skip
    dev = {
        "plain": {"sections": "21-23"},
        "absolute": {"documents": "2150-2160"},
        "dotdot": {"sections": 20},
        "link": {"sections": "01-02", "documents": "0150-0250"},
    }
    train = {"source": "ptb", "sections": "02-21"}
    return train, {"source": "ptb", **(dev[spelling] if shared else {"sections": 22})}


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(kind=st.sampled_from(["local", "toy", "hf", "sacrebleu", "ptb"]), shared=st.booleans(),
       spelling=st.sampled_from(["plain", "absolute", "dotdot", "link"]))  # fmt: skip
def test_a_split_that_reads_the_training_data_is_refused_by_name(tmp_path, kind, shared, spelling):
    """A dev or test split that reads what `train` reads (the same file however its path is
    spelled, the same hub split, test set or toy partition, overlapping treebank documents)
    would tune or test a model on sentences it trained on: refused before any job, naming the
    dataset, the split and what they share. Splits of their own are taken."""
    root = tmp_path / "data"
    (root / "x").mkdir(parents=True, exist_ok=True)
    for name in ("train.en", "train.de", "dev.en", "dev.de"):
        (root / name).write_text("a\n")
    if not (root / "alias.en").is_symlink():
        (root / "alias.en").symlink_to(root / "train.en")
    train, dev = other_split(kind, shared, spelling)
    if kind == "local":
        dev["paths"] = {lang: path.format(root=root) for lang, path in dev["paths"].items()}
    config = copy.deepcopy(DEFAULT)
    langs = ["en", "ptb"] if kind == "ptb" else ["en", "de"]
    config["datasets"] = {"d": {"langs": langs, "root": str(root),
                                "splits": {"train": train, "dev": dev}}}  # fmt: skip
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    if not shared:
        planned(path)
        return
    with pytest.raises(InputError) as refused:
        planned(path)
    said = str(refused.value)
    assert said.startswith("dataset 'd': its 'dev' split reads "), said
    assert "which `train` reads too" in said and len(said.splitlines()) == 1


@pytest.mark.parametrize("spelling", ["de.txt", "./de.txt", "sub/../de.txt", "link.txt"])
def test_a_local_split_whose_two_sides_are_one_file_is_refused(tmp_path, spelling):
    """Both sides one file (a path pasted twice): the model would learn to copy."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "de.txt").write_text("a\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "de.txt")
    config = copy.deepcopy(DEFAULT)
    split = {"source": "local", "paths": {"en": spelling, "de": "de.txt"}}
    config["datasets"] = {"d": {"langs": ["en", "de"], "root": str(tmp_path),
                                "splits": {"train": split}}}  # fmt: skip
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(InputError, match="`paths.en` and `paths.de` are one file") as refused:
        planned(path)
    assert "a model would learn to copy" in str(refused.value)


@given(
    mantissa=st.from_regex(r"[-+]?[0-9]{1,3}\.[0-9]{0,4}", fullmatch=True),
    exponent=st.integers(-420, 420),
)
@settings(max_examples=300, derandomize=True, deadline=None)
def test_a_float_in_a_config_file_is_read_as_written_or_refused_at_its_line(mantissa, exponent):
    """PyYAML reads `1.0e+400` as infinity and `1.0e-400` as 0: a number that is not what it
    looks like. Every float a config file spells is read as exactly Python's reading of it, or
    refused naming its line and why."""
    from aiayn.config.yaml_text import load_yaml

    text = f"{mantissa}e{exponent:+d}"
    meant = float(text)
    vanished = meant == 0 and re.search("[1-9]", mantissa)
    try:
        read = load_yaml(f"study: s\nvalue: {text}\n", "study.yaml")
    except InputError as err:
        assert math.isinf(meant) or vanished, (text, str(err))
        assert str(err) == f"study.yaml, line 2: {text} is beyond what a number holds here " \
            "(the largest about 1.8e+308, the smallest above 0 about 4.9e-324)"  # fmt: skip
        return
    assert read["value"] == meant and not vanished and math.isfinite(meant), text


@pytest.mark.parametrize(
    ("test_split", "eval_splits", "refusal"),
    [
        ({"source": "toy", "size": 500, "seed": 3, "partition": "dev"}, None,
         "experiment 'tiny': its evaluation split 'test' reads the toy's 'dev' partition, which its dev split 'dev' reads too"),
        ({"source": "toy", "size": 500, "seed": 3}, ["dev", "test"], None),
        ({"source": "toy", "size": 500, "seed": 3, "partition": "dev"}, ["dev"], None),
    ],
)  # fmt: skip
def test_an_evaluation_split_that_reads_the_dev_data_is_refused(
    tmp_path, test_split, eval_splits, refusal
):
    """A test split that reads what an experiment tunes on under another name (here the toy's
    dev partition again, with another seed) would score what was chosen on dev as if unseen:
    refused naming the experiment and both splits. Scoring the dev split itself by its name is
    a dev score, taken; so is a shared split left out of `eval_splits`."""
    config = copy.deepcopy(DEFAULT)
    toy = yaml.safe_load((PROJECT / "configs/data/toy.yaml").read_text())["datasets"]["toy"]
    toy["splits"]["test"] = test_split
    config["datasets"] = {"toy": toy}
    config["include"] = []
    if eval_splits is not None:
        for experiment in config["experiments"].values():
            experiment["eval_splits"] = eval_splits
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    if refusal is None:
        planned(path)
        return
    with pytest.raises(InputError, match=re.escape(refusal)):
        planned(path)
