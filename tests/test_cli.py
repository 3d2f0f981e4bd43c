"""The `aiayn` command's errors, without a trained model: each says what is wrong and what to do.
Translation itself is tested on the default run's model in tests/test_workflow_train.py."""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.cli import main, parser, study_state
from aiayn.errors import InputError
from tests.conftest import (
    CHECKED_FILES,
    PROJECT,
    copy_project,
    edit_toy_data,
    quick_experiment,
    run_snakemake,
)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return copy_project(tmp_path_factory.mktemp("cli") / "project")


def translate(project: Path, capsys, *args: str) -> str:
    """Run `aiayn translate` in `project`; it must fail with one line, no traceback, which is
    returned."""
    assert main(["translate", "--workdir", str(project), *args]) == 1
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and " ERROR aiayn: " in error, error
    return error


def test_an_experiment_not_trained_yet_names_the_command_that_trains_it(project, capsys):
    error = translate(project, capsys, "--experiment", "tiny")
    assert "experiment 'tiny' has no averaged model yet" in error
    assert "`snakemake --cores all runs/tiny/averaged.safetensors`" in error


def test_an_unknown_experiment_lists_the_defined_ones(project, capsys):
    error = translate(project, capsys, "--experiment", "tinny")
    assert "experiment 'tinny' is not in the study's `experiments` (study 'toy'" in error
    assert "'tiny_one_head'" in error and "--configfile" in error


def test_a_preset_brings_its_experiments_and_bad_overrides_are_named(project, capsys):
    preset = ("-e", "multi30k_small", "--configfile", "configs/multi30k.yaml")
    assert "experiment 'multi30k_small' has no averaged model yet" in translate(
        project, capsys, *preset
    )
    error = translate(project, capsys, "-e", "tiny", "--beam", "0")
    assert "decode.beam must be >= 1, not 0" in error


def test_a_missing_config_or_workflow_folder_is_named(tmp_path, project, capsys):
    error = translate(tmp_path, capsys, "-e", "tiny")
    assert "has no config.yaml: run this from the workflow's folder" in error
    error = translate(project, capsys, "-e", "tiny", "--configfile", "configs/nope.yaml")
    assert "config file" in error and "nope.yaml does not exist" in error


def test_the_console_command_is_installed():
    command = Path(sys.executable).parent / "aiayn"
    result = subprocess.run([str(command), "translate", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--experiment" in result.stdout


def test_a_reader_that_stops_early_gets_no_traceback(project):
    """`aiayn config | head -1`: the pipe's read end is closed before anything is written, so
    every write meets a closed pipe, as the lines after head's first do."""
    command = Path(sys.executable).parent / "aiayn"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([str(command), "config", "--workdir", str(project)],
                                stdout=write_end, stderr=subprocess.PIPE, text=True)  # fmt: skip
    finally:
        os.close(write_end)
    assert result.returncode == 1 and result.stderr == ""


def test_config_prints_the_validated_config_with_every_default(project, capsys):
    assert main(["config", "--workdir", str(project), "--configfile", "configs/multi30k.yaml"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["study"] == "multi30k" and list(config["experiments"]) == ["multi30k_small"]
    experiment = config["experiments"]["multi30k_small"]
    assert experiment["decode"]["beam"] == 4  # the schema's default, filled in
    bad = project / "bad.yaml"
    bad.write_text("include: [config.yaml]\nexperiments: {x: {dataset: toy, modle: tiny}}\n")
    assert main(["config", "--workdir", str(project), "--configfile", "bad.yaml"]) == 1
    error = capsys.readouterr().err
    assert "unknown key 'modle' under experiments.x: did you mean 'model'?" in error


@pytest.mark.parametrize(
    ("experiment", "said"),
    [
        ("{dataset: toy, model: tinyy}", "experiment 'x': unknown model preset 'tinyy'"),
        ("{dataset: toyy, model: tiny}", "experiment 'x': dataset 'toyy' is not defined"),
        ("{dataset: toy, model: tiny, dev_split: devv}", "experiment 'x': dev_split 'devv'"),
        ("{dataset: toy, model: tiny, eval_splits: [tset]}", "eval_splits ['tset'] are not"),
        ("{dataset: toy, model: tiny, seeds: 2.0}", "experiments.x.seeds: 2.0 is not a whole"),
        (
            "{dataset: toy, model: tiny, decode: {alpha: .nan}}",
            "experiments.x.decode.alpha: nan is not a finite number",
        ),
        # NaN and infinity pass every bound of the schema: refused wherever they are (#77)
        (
            "{dataset: toy, model: tiny, train: {early_stopping_min_improvement: .nan}}",
            "experiments.x.train.early_stopping_min_improvement: nan is not a finite number",
        ),
        (
            "{dataset: toy, model: tiny, train: {early_stopping_min_improvement: .inf}}",
            "early_stopping_min_improvement: inf is not a finite number",
        ),
        (
            "{dataset: toy, model: tiny, train: {dev_bleu_alpha: -.inf}}",
            "experiments.x.train.dev_bleu_alpha: -inf is not a finite number",
        ),
    ],
)
def test_config_refuses_what_the_workflow_refuses(project, capsys, experiment, said):
    """`aiayn config` runs the Snakefile's checks, all of them, not only the schema."""
    bad = project / "bad.yaml"
    bad.write_text(f"include: [config.yaml]\nexperiments: {{x: {experiment}}}\n")
    assert main(["config", "--workdir", str(project), "--configfile", "bad.yaml"]) == 1
    assert said in capsys.readouterr().err


COMPLEXITY_LIMITS = {"lengths": 4096, "n": 4096, "widths": 8192, "d": 8192, "path_lengths": 1024}


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)  # capsys: read each time
@given(key=st.sampled_from(sorted(COMPLEXITY_LIMITS)), excess=st.integers(1, 10**12))
def test_table_1s_grid_is_bounded_before_any_job(project, capsys, key, excess):
    """A length or width past what one machine measures is refused where the config is read,
    naming the key (a length of 10^6 grew the job to 6.4 GB; 10^5 path lengths and a width of
    10^6 were allocation tracebacks)."""
    value = COMPLEXITY_LIMITS[key] + excess
    listed = key in ("lengths", "widths", "path_lengths")
    setting = f"[16, 32, {value}]" if listed else str(value)
    bad = project / "bad.yaml"
    bad.write_text(f"include: [config.yaml]\ncomplexity: {{{key}: {setting}}}\n")
    assert main(["config", "--workdir", str(project), "--configfile", "bad.yaml"]) == 1
    error = capsys.readouterr().err
    where = f"complexity.{key}.2" if listed else f"complexity.{key}"
    assert f"config key {where}: {value} is greater than the maximum of" in error


def test_bad_translate_arguments_are_refused_before_any_work(project, capsys, tmp_path):
    """Checked before the model loads: a missing --output folder would otherwise lose every
    translation at the end, and a folder as --input or a device that is not there a traceback."""
    missing = tmp_path / "missing" / "out.txt"
    error = translate(project, capsys, "-e", "tiny", "--output", str(missing))
    assert f"--output {missing}: the folder {missing.parent} does not exist" in error
    # a folder no file can be made in, even by root (sysfs); a read-only one likewise (#77)
    error = translate(project, capsys, "-e", "tiny", "--output", "/sys/out.txt")
    assert "--output /sys/out.txt: the folder /sys cannot be written" in error
    error = translate(project, capsys, "-e", "tiny", "--input", str(tmp_path))
    assert f"--input {tmp_path} is a folder: name a text file" in error
    error = translate(project, capsys, "-e", "tiny", "--device", "foo")
    assert "--device 'foo' is not a device: use auto, cpu, cuda or cuda:N" in error
    if not torch.cuda.is_available():
        error = translate(project, capsys, "-e", "tiny", "--device", "cuda")
        assert "--device cuda: this machine has 0 CUDA device(s); use --device cpu" in error
    for alpha in ("nan", "-0.5", "1e308"):
        error = translate(project, capsys, "-e", "tiny", "--alpha", alpha)
        assert f"decode.alpha must be a number from 0 to 5, not {float(alpha)}" in error


def test_a_parser_is_refused_by_translate_with_the_workflow_command(project, capsys):
    """A parser decodes under its task's search constraint, which the workflow hands in;
    translate would have failed with a traceback."""
    preset = ("-e", "parser_sample", "--configfile", "configs/parsing.yaml")
    error = translate(project, capsys, *preset)
    assert "experiment 'parser_sample' parses (decode.constrain: lexicon)" in error
    assert "runs/parser_sample/decode/averaged/test.trees" in error


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(threads=st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=8)))
def test_lengths_takes_threads_from_one_to_the_machines_cpus(capsys, threads):
    """torch refused 0 or fewer threads with a traceback, and 10^5 crashed the process."""
    command = ["lengths", "-e", "tiny", "--threads", str(threads)]
    if isinstance(threads, int) and 1 <= threads <= os.cpu_count():
        assert parser().parse_args(command).threads == threads
        return
    with pytest.raises(SystemExit) as refused:
        parser().parse_args(command)
    assert refused.value.code == 2
    assert f"give a whole number from 1 to {os.cpu_count()}" in capsys.readouterr().err


def test_lengths_names_what_is_missing_before_any_work(project, capsys):
    """`aiayn lengths` needs a trained experiment and a split the workflow binarized: each gap
    is one line that says what to run."""

    def lengths(*args: str) -> str:
        assert main(["lengths", "--workdir", str(project), "-e", "tiny", *args]) == 1
        return capsys.readouterr().err

    assert "experiment 'tiny' has no averaged model yet" in lengths()
    for alpha in ("nan", "-1", "1e308"):
        error = lengths("--alphas", "1", alpha)
        assert f"--alphas: each must be a number from 0 to 5, not {float(alpha)}" in error
    made = [project / "runs/tiny/averaged.safetensors", project / "data/toy/spm/bpe.model"]
    made[0].mkdir(parents=True)  # a folder where the model belongs: the way out must not be
    error = lengths()  # a command that plans nothing (snakemake takes a folder as the output)
    assert "averaged.safetensors is not a file, where experiment 'tiny''s averaged" in error
    assert "move it away, then `snakemake --cores all runs/tiny/averaged.safetensors`" in error
    made[0].rmdir()
    made[0].touch()
    made[1].mkdir(parents=True)
    assert "bpe.model is not a file: move it away, then `snakemake --cores all --force" in (
        lengths()
    )
    made[1].rmdir()
    assert "bpe.model is gone: `snakemake --cores all --force" in lengths()
    made[1].touch()
    assert "bpe.model is not a readable sentencepiece model" in lengths()
    small_bpe(made[1])
    try:
        error = lengths("--split", "nope")
        assert "--split nope: dataset toy has no such split (it has train, dev, test)" in error
        error = lengths("--split", "dev")
        assert "split dev of toy is not binarized" in error and "decode rule" in error
    finally:
        for path in made:
            path.unlink()


def test_lengths_tests_the_best_alpha_against_each_other_with_sacrebleus_paired_bootstrap():
    """Outputs that match every reference beat word salad beyond chance (p at the bootstrap's
    floor, 1/1001); an alpha whose outputs are the best's is a tie (p 1); each alpha but the
    best has its p, and its p Holm-adjusted over the sweep (the smallest times the two tests)."""
    from aiayn.decode.lengths import best_against_others

    references = [f"a short caption number {i} of a dog on the grass" for i in range(60)]
    salad = [" ".join(reversed(line.split())) for line in references]
    decoded = {1.0: (references, {}), 0.6: (salad, {}), 1.4: (list(references), {})}
    assert best_against_others(decoded, 1.0, references) == {
        "best_alpha_paired_p": {"0.6": 0.001, "1.4": 1.0},
        "best_alpha_paired_p_holm": {"0.6": 0.002, "1.4": 1.0},
    }


def test_input_lines_are_split_on_newlines_only(tmp_path):
    """U+2028, U+0085, a form feed, U+001C and a lone CR are text inside a line, as the data
    stages read it (str.splitlines broke 6 lines into 11, misaligned with their input)."""
    from aiayn.cli import read_input

    path = tmp_path / "in.txt"
    path.write_bytes("\ufeffa\u2028b\nc\x85d\ne\x0cf\ng\x1ch\ni\rj\r\nk\n".encode())
    assert read_input(path) == ["a\u2028b", "c\x85d", "e\x0cf", "g\x1ch", "i\rj", "k"]
    path.write_bytes(b"no final newline\n\nlast")
    assert read_input(path) == ["no final newline", "", "last"]


@pytest.mark.timeout(300)
def test_a_wheel_installed_into_a_fresh_environment_works_outside_a_checkout(tmp_path, project):
    """`pip install .` (not editable) must give a working package: it reads its defaults from
    the schema it carries, not from a checkout's schemas/. The fresh environment sees the
    dependencies installed where these tests run (a .pth file naming their site-packages, which
    works whether that is the machine's Python or a virtual environment, where
    --system-site-packages would show the base interpreter's instead) but gets the wheel's aiayn
    first."""
    source = tmp_path / "source"  # built from a copy: setuptools writes build/ beside it
    shutil.copytree(PROJECT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist")]
    subprocess.run([*build, str(source)], check=True)
    [wheel] = (tmp_path / "dist").glob("aiayn-*.whl")
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python, aiayn = venv / "bin" / "python", venv / "bin" / "aiayn"
    ours = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    venv_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(venv_site) / "dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    install = [str(python), "-m", "pip", "-q", "install", "--no-deps", "--no-index", str(wheel)]
    subprocess.run(install, check=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def run(*command: str) -> subprocess.CompletedProcess:
        result = subprocess.run(command, cwd=outside, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    where = run(str(python), "-c", "import aiayn, aiayn.train.settings as t; print(aiayn.__file__)")
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel's, not the checkout's
    assert "--experiment" in run(str(aiayn), "translate", "--help").stdout
    config = yaml.safe_load(run(str(aiayn), "config", "--workdir", str(project)).stdout)
    assert set(config["experiments"]) >= {"tiny", "tiny_one_head"}


def test_the_snakefile_validates_against_the_schema_the_package_carries():
    from aiayn.config.schema import SCHEMA, SCHEMA_FILE

    assert 'validate(config, "schemas/config.schema.yaml")' in (PROJECT / "Snakefile").read_text()
    assert (PROJECT / SCHEMA).resolve() == SCHEMA_FILE


def test_lines_longer_than_any_training_sentence_are_warned_of_in_tokens(caplog):
    """A 3000-token line would come back as a few words: say so, with the line, its length in
    tokens (a long line without spaces is one word but many tokens) and the remedy."""
    from aiayn.decode.translate import warn_of_long_lines

    lengths = [(1, 3), (2, 3000), (4, 251)]  # (line number, tokens); line 3 was empty
    with caplog.at_level("WARNING", logger="aiayn"):
        assert warn_of_long_lines(lengths, 250) == [2, 4]
    assert "2 line(s) have more than 250 tokens" in caplog.text
    assert "line 2: 3,000 tokens, line 4: 251 tokens" in caplog.text
    assert "Split such text into sentences" in caplog.text
    caplog.clear()
    assert warn_of_long_lines(lengths[:1], 250) == [] and not caplog.text


def test_an_output_naming_an_open_descriptor_is_written_to_it_not_replaced(tmp_path):
    """`-o /dev/stdout >> app.log` (or inside `{ ...; } > f`, or `-o /dev/fd/3 3>> f`): the
    file behind the descriptor keeps what it held and gets the text appended, as the shell
    opened it; replacing the file through the link lost its earlier lines."""
    write = ("from pathlib import Path; import sys; from aiayn.cli import write_output; "
             "write_output(Path(sys.argv[1]), 'ein Satz\\n')")  # fmt: skip
    log = tmp_path / "app.log"
    log.write_text("earlier line\n")
    for shell in (
        f'"$PY" -c "$CODE" /dev/stdout >> {log}',
        f'{{ echo between; "$PY" -c "$CODE" /dev/stdout; }} >> {log}',
        f'"$PY" -c "$CODE" /dev/fd/3 3>> {log}',
    ):
        subprocess.run(["sh", "-c", shell], check=True,
                       env={"PY": sys.executable, "CODE": write, "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert log.read_text() == "earlier line\nein Satz\nbetween\nein Satz\nein Satz\n"
    plain = tmp_path / "out.txt"  # a file named as such is still written whole, atomically
    subprocess.run([sys.executable, "-c", write, str(plain)], check=True)
    assert plain.read_text() == "ein Satz\n"


def test_aiayn_results_names_a_study_it_cannot_check_and_checks_the_others(tmp_path, capsys):
    """A study whose config file is gone (or a folder without the workflow's code, as one
    deploying it as a module) is named with what is missing; the other studies are still checked
    (one missing file stopped them all with a traceback; #77)."""
    copy_project(tmp_path, [*CHECKED_FILES, "results/toy", "results/multi30k"])
    (tmp_path / "configs" / "multi30k.yaml").unlink()
    assert main(["results", "--workdir", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(
        f"results/multi30k: cannot be checked here: config file {tmp_path}/configs/multi30k.yaml "
        "does not exist. Restore what is named"
    )
    assert lines[1] == f"results/toy: {study_state(PROJECT, PROJECT / 'results/toy/run.json')}"


def small_bpe(path: Path) -> None:
    """A real sentencepiece model, quickly: the commands check that the BPE model loads."""
    from aiayn.data.toy import generate
    from aiayn.prepare.subword import SubwordSettings, train_bpe

    text = path.with_suffix(".txt")
    text.write_text(
        "".join(f"{en}\n{de}\n" for en, de in generate(1000, seed=1, partition="train"))
    )
    train_bpe([str(text)], str(path), SubwordSettings(vocab_size=500))
    text.unlink()


@given(st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\0", b"\xc3\xa9", b"\xc3", b"\xff",
                                 "\u2028".encode(), b"\xe2\x82"]), max_size=40))  # fmt: skip
@settings(max_examples=300, derandomize=True, deadline=None)
def test_input_is_its_lines_or_refused_at_the_first_byte_that_is_not_text(tmp_path_factory, data):
    """Whatever the bytes (split across the reader's chunks too): the lines of their UTF-8 text,
    or a refusal naming the file and the byte where text ends (a NUL, invalid UTF-8)."""
    from aiayn import cli
    from aiayn.cli import read_input

    raw = b"".join(data)
    path = tmp_path_factory.mktemp("input") / "in.txt"
    path.write_bytes(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        text, first_bad = None, err.start
    if text is not None and "\0" not in text:
        expected = text.removeprefix("\ufeff").split("\n")
        expected = expected[:-1] if expected[-1] == "" else expected
        assert read_input(path) == [line.removesuffix("\r") for line in expected]
        return
    nul = raw.find(b"\0")
    where = nul if text is not None or 0 <= nul < first_bad else first_bad
    for chunk in (1 << 20, 3):  # one chunk, and a multibyte character cut by a chunk's end
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cli, "INPUT_CHUNK", chunk)
            with pytest.raises(InputError, match=rf"^{re.escape(str(path))} is not") as refused:
                read_input(path)
        said = str(refused.value)
        assert f"text (byte {where})" in said or f"at byte {where} " in said, (raw, chunk, said)


@pytest.mark.parametrize(
    ("device", "said"),
    [("/dev/zero", "is not text: a NUL byte at byte 0"), ("/dev/urandom", "is not")],
)
def test_an_endless_device_as_input_is_refused_at_its_first_bytes(device, said):
    """`-i /dev/zero` filled memory until a MemoryError; any device's first chunk decides."""
    from aiayn.cli import read_input

    with pytest.raises(InputError, match=f"^{device} {said}"):
        read_input(Path(device))


def hostile_paths(root: Path) -> list[str]:
    """Paths that are no usable file or folder for most options, and one that is."""
    (root / "folder").mkdir(exist_ok=True)
    (root / "binary").write_bytes(bytes(range(256)) * 4)
    (root / "lines.txt").write_text("ein Hund\n", encoding="utf-8")
    return [str(root / "missing" / "x"), str(root / "folder"), str(root / "binary"),
            str(root / "lines.txt"), str(root / "lines.txt" / "under_a_file"), "/dev/null",
            "/dev/zero", "/proc/version", "", "-", str(root / ("n" * 300)),
            os.fsdecode(bytes(root / "caf") + b"\xe9")]  # fmt: skip


def option_value(action: argparse.Action, paths: list[str], project: str):
    """A strategy for one option's value: its choices and neighbours, numbers at and beyond any
    range, paths that are no file, any text; and values that pass argparse, so that the command
    behind it is reached too."""
    numbers = st.sampled_from(["0", "-1", "1", "nan", "inf", "-inf", "1e309", "1e308", "1e5",
                               "100000", "0.5", "99999999999999999999", "0x10", " 4",
                               "4 "])  # fmt: skip
    # any text an argv can hold: no NUL (execve cannot pass one), no lone surrogate but those
    # of bytes that are not UTF-8 (os.fsdecode's surrogateescape: in `paths`)
    text = st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"]))
    strategies = [numbers, text, st.sampled_from(paths)]
    if action.type in (int, float):
        strategies.append(st.integers(-2, 5000).map(str))
    if action.type is float:
        strategies.append(st.floats().map(str))
    if action.choices:
        strategies.append(st.sampled_from([*map(str, action.choices), "CT2", "ct2-float32", ""]))
    if action.dest == "experiment":
        strategies.append(
            st.sampled_from(["tiny", "quick", "../quick", "tiny_learned_positions", "."])
        )
    if action.dest == "workdir":
        strategies.append(st.just(project))
    return st.one_of(*strategies)


# A value each option takes in the trained project, for every option but the one drawn hostile
USABLE = {"beam": "2", "alpha": "0.6", "batch_tokens": "100", "device": "cpu", "split": "dev",
          "alphas": "1.0", "threads": "1", "quantization": "int8"}  # fmt: skip


def command_lines(paths: list[str], project: str, experiment: str):
    """argv for any `aiayn` command: some of its options, one of them (or none) with a drawn
    hostile value, the others with a value they take (USABLE, `experiment`, an input file, a
    new output, a choice), so that the command gets past argparse to its work."""
    commands = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))

    def value(data, name, action, hostile: bool):
        if hostile:
            return data(option_value(action, paths, project))
        if action.dest == "experiment":
            return experiment
        if action.dest in USABLE:
            return USABLE[action.dest]
        if action.choices:
            return data(st.sampled_from(sorted(map(str, action.choices))))
        if action.dest == "input":
            return next(p for p in paths if p.endswith("lines.txt"))
        if action.dest == "output":  # a file per translation or record, a folder per export
            return f"{paths[0].rsplit('/', 2)[0]}/{name}{data(st.integers(0, 10**9))}"
        return project  # workdir

    @st.composite
    def draw(data):
        name = data(st.sampled_from(sorted(commands.choices)))
        options = [a for a in commands.choices[name]._actions
                   if a.option_strings and a.dest not in ("help", "configfile")]  # fmt: skip
        hostile = data(st.sampled_from([None, *(a.dest for a in options)]))
        argv = [name]
        for action in options:
            if not action.required and action.dest != hostile and not data(st.booleans()):
                continue
            if action.nargs == 0:  # a flag
                argv.append(action.option_strings[0])
                continue
            count = data(st.integers(1, 3)) if action.nargs in ("+", "*") else 1
            values = [value(data, name, action, action.dest == hostile) for _ in range(count)]
            if count == 1:  # `--opt=value`, so that a value such as "-1" is not an option
                argv.append(f"{action.option_strings[-1]}={values[0]}")
            else:
                argv += [action.option_strings[-1], *values]
        return argv

    return draw()


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A project whose one experiment, `quick`, is trained and averaged (a few steps of a very
    small model; a dev split of 20 pairs), so that every command gets past "not trained yet"."""
    root = copy_project(tmp_path_factory.mktemp("trained") / "project")
    quick_experiment(root)
    edit_toy_data(root, lambda toy: toy["splits"]["dev"].update(size=20))
    run_snakemake(root, "runs/quick/averaged.safetensors")
    return root


@pytest.mark.parametrize(("study", "examples"), [("untrained", 200), ("trained", 80)])
def test_any_command_line_is_taken_or_refused_in_a_few_lines(request, tmp_path_factory, study,
                                                             examples):  # fmt: skip
    """Every option of every command, drawn by Hypothesis (numbers beyond any range, text of
    every category, paths that are folders, devices, missing or under a file): the command runs,
    or argparse names the option, or one refusal of at most three lines; never a traceback, and
    stdin is never waited on. In a project with nothing trained, and in one with a trained
    experiment, where the values reach the model (a length penalty of 1e308 overflowed in the
    search; `lengths --threads -1` was torch's traceback)."""
    import contextlib
    import io

    project = request.getfixturevalue("project" if study == "untrained" else "trained")
    paths = hostile_paths(tmp_path_factory.mktemp("doors"))
    outcomes = collections.Counter()

    experiment = "tiny" if study == "untrained" else "quick"

    @given(argv=command_lines(paths, str(project), experiment))
    @settings(max_examples=examples, derandomize=True, deadline=None)
    def run(argv):
        out, err = io.StringIO(), io.StringIO()
        with (
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err),
            pytest.MonkeyPatch.context() as patch,
        ):  # fmt: skip
            patch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ein Hund\n")))
            patch.chdir(project)
            try:
                code = main(argv)
            except SystemExit as exit_:  # argparse's usage error, naming the option
                outcomes["argparse refused"] += 1
                said = err.getvalue()
                assert exit_.code == 2 and re.search(r"aiayn( \w+)?: error: ", said), said
                return
        said = err.getvalue().strip().splitlines()
        outcomes[f"{argv[0]} exit {code}"] += 1
        assert "Traceback" not in err.getvalue(), (argv, err.getvalue())
        if code != 0:
            errors = [line for line in said if " ERROR aiayn: " in line]
            assert errors and len(said) - said.index(errors[0]) <= 3, (argv, said)

    run()
    commands = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in commands.choices:  # every command was reached past argparse, not only refused
        assert any(key.startswith(f"{name} exit") for key in outcomes), outcomes
    assert study == "untrained" or outcomes["translate exit 0"], outcomes  # it translated
