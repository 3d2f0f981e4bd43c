"""Which package files each rule hashes for its rerun trigger (aiayn.config.workflow.package_modules)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.config.code_meaning import meaning_version
from aiayn.config.workflow import package_modules
from tests.conftest import PROJECT, STATEMENT_EDIT, copy_project

SRC = PROJECT / "src"
PACKAGE = SRC / "aiayn"


def names(files: list[Path]) -> set[str]:
    return {file.relative_to(PACKAGE).as_posix() for file in files}


def loaded_on_import(modules: list[str]) -> dict[str, list[str]]:
    """For each module, the package's files that importing it loads, found by really importing
    it in a fresh process with every aiayn module dropped from sys.modules before each one."""
    script = """
import importlib, json, sys
loaded = {}
for name in sys.argv[1:]:
    for cached in [m for m in sys.modules if m == "aiayn" or m.startswith("aiayn.")]:
        del sys.modules[cached]
    importlib.import_module(name)
    loaded[name] = sorted(m.__file__ for n, m in sys.modules.items()
                          if (n == "aiayn" or n.startswith("aiayn.")) and m.__file__)
print(json.dumps(loaded))
"""
    result = subprocess.run(
        [sys.executable, "-c", script, *modules],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        cwd=PROJECT,
    )
    return json.loads(result.stdout.splitlines()[-1])


def test_every_module_the_import_system_loads_is_in_the_hashed_set(tmp_path):
    modules = [
        ".".join(("aiayn", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
            ".__init__"
        )
        for path in sorted(PACKAGE.rglob("*.py"))
    ]
    for module, files in loaded_on_import(modules).items():
        entry = tmp_path / "entry.py"
        entry.write_text(f"import {module}\n")
        assert names_of_files(files) <= names(package_modules(entry, SRC)), module


def names_of_files(files) -> set[str]:
    return names([Path(file) for file in files])


def test_imports_inside_functions_relative_imports_and_submodules_count(tmp_path):
    package = tmp_path / "src" / "aiayn"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "sub/__init__.py", "sub/leaf.py", "lazy.py", "unused.py"):
        (package / name).write_text("")
    (package / "sub" / "__init__.py").write_text("from . import leaf\nfrom ..lazy import x\n")
    (package / "lazy.py").write_text("def f():\n    import aiayn.unused\n")
    entry = tmp_path / "script.py"
    entry.write_text("import os\nfrom aiayn import sub\n")
    hashed = {p.relative_to(package).as_posix() for p in package_modules(entry, tmp_path / "src")}
    assert hashed == {"__init__.py", "sub/__init__.py", "sub/leaf.py", "lazy.py", "unused.py"}


LAUNCHES = {
    "a list": '["python", "-m", "aiayn.job", path]',
    "a tuple": '(sys.executable, "-m", "aiayn.job")',
    "a list inside a call": 'subprocess.run([sys.executable, "-u", "-m", "aiayn.job"])',
    "unpacked into another list": 'ARGS = ["-m", "aiayn.job"]\nCOMMAND = ["srun", *ARGS]',
}


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_module_launched_by_dash_m_counts_as_imported(tmp_path, launch):
    """A script that starts `python -m aiayn.job` runs job.py and what it imports, as if it
    imported it; a `-m` of another package's module, or not followed by a literal, adds none."""
    package = tmp_path / "src" / "aiayn"
    package.mkdir(parents=True)
    for name in ("__init__.py", "deep.py", "other.py"):
        (package / name).write_text("")
    (package / "job.py").write_text("from aiayn import deep\n")
    entry = tmp_path / "script.py"
    entry.write_text(
        "import subprocess, sys\n"
        f"{LAUNCHES[launch]}\n"
        'OTHERS = [sys.executable, "-m", "pip", "-m", name, "-m"]\n'
    )
    hashed = {p.relative_to(package).as_posix() for p in package_modules(entry, tmp_path / "src")}
    assert hashed == {"__init__.py", "job.py", "deep.py"}


def test_the_train_rule_hashes_the_trainer_it_launches_without_importing_it(tmp_path):
    """The rule's script starts `-m aiayn.train.trainer` (train/launch.py): its modules are
    the stage's whether or not the script also imports something from the trainer."""
    script = (PROJECT / "workflow_scripts" / "train.py").read_text()
    line = "from aiayn.train.trainer import STOP_SIGNALS\n"
    assert line in script
    alone = tmp_path / "train.py"
    alone.write_text(script.replace(line, "STOP_SIGNALS = ()\n"))
    hashed = names(package_modules(alone, SRC))
    assert hashed == names(package_modules(PROJECT / "workflow_scripts" / "train.py", SRC))
    assert {"train/trainer.py", "train/step.py", "train/schedule.py"} <= hashed


def test_an_edit_within_one_process_is_seen_by_the_imports_and_the_version(tmp_path):
    """Both are cached per file by modification time and size (the Snakefile's rules walk the
    same modules): an edited file is parsed again, also when the process has read it before."""
    import os

    from aiayn.config.code_meaning import file_meaning_version

    package = tmp_path / "src" / "aiayn"
    package.mkdir(parents=True)
    for name in ("__init__.py", "first.py", "second.py"):
        (package / name).write_text("")
    entry = tmp_path / "script.py"
    entry.write_text("from aiayn import first\n")
    version = file_meaning_version(entry)

    def hashed() -> set[str]:
        return {p.relative_to(package).as_posix() for p in package_modules(entry, package.parent)}

    assert hashed() == {"__init__.py", "first.py"}
    entry.write_text("from aiayn import second\n")  # the same size: the time tells them apart
    os.utime(entry, ns=(entry.stat().st_atime_ns, entry.stat().st_mtime_ns + 1_000_000))
    assert hashed() == {"__init__.py", "second.py"}
    assert file_meaning_version(entry) != version


@pytest.fixture
def new_process(monkeypatch, tmp_path):
    """Starts code versioning as a new process would, with a cache folder of the test's own:
    call it again for the next process (what the last one kept is read from the cache)."""
    from aiayn.config import code_meaning, workflow

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def start() -> code_meaning.KeptFacts:
        code_meaning.cached_facts.cache_clear()
        workflow.cached_imported_names.cache_clear()
        kept = code_meaning.KeptFacts()
        monkeypatch.setattr(code_meaning, "KEPT", kept)
        return kept

    yield start
    code_meaning.cached_facts.cache_clear()
    workflow.cached_imported_names.cache_clear()


def every_stage_version() -> dict:
    from aiayn.config.versions import code_versions

    scripts = sorted((PROJECT / "workflow_scripts").glob("*.py"))
    return {script.name: code_versions(script, PROJECT) for script in scripts}


def test_a_process_reads_what_the_last_one_parsed_and_gets_the_same_versions(
    new_process, monkeypatch
):
    """A file's version and imports are kept by its content: the next process parses none of
    the files versioned before, and every stage's versions and module set are the same."""
    import ast

    from aiayn.config import code_meaning

    new_process()
    parsed = every_stage_version()
    code_meaning.KEPT.save()
    new_process()

    parse, files_parsed = ast.parse, []

    def parse_and_count(source, filename="<unknown>", *args, **kwargs):
        files_parsed.append(filename)
        return parse(source, filename, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", parse_and_count)
    again = every_stage_version()
    assert files_parsed == []
    assert again == parsed


def test_an_edit_keeping_size_and_time_is_seen_by_the_next_process(new_process, tmp_path):
    import os

    from aiayn.config import code_meaning
    from aiayn.config.code_meaning import file_meaning_version

    module = tmp_path / "module.py"
    module.write_text("from a import b\nX = 1\n")
    stamp = module.stat().st_mtime_ns
    new_process()
    before = file_meaning_version(module)
    code_meaning.KEPT.save()
    module.write_text("from a import c\nX = 2\n")
    os.utime(module, ns=(stamp, stamp))
    new_process()
    assert file_meaning_version(module) == meaning_version(module.read_text()) != before
    assert code_meaning.file_imports(module) == [["from", 0, "a", ["c"]]]


DAMAGED_CACHES = [
    "{",
    "[]",
    '{"tool": "TOOL", "files": []}',
    '{"tool": "TOOL", "files": {"FILE": {"meaning": 5, "imports": []}}}',
    '{"tool": "TOOL", "files": {"FILE": {"meaning": "0", "imports": [["import", "aiayn"]]}}}',
    '{"tool": "TOOL", "files": {"FILE": {"meaning": "0", "imports": [["from", "1", "", []]]}}}',
    '{"tool": "TOOL", "files": {"FILE": {"meaning": "0"}}}',
    '{"tool": "another parser", "files": {"FILE": {"meaning": "0", "imports": []}}}',
]


@pytest.mark.parametrize("damaged", DAMAGED_CACHES)
def test_a_damaged_or_foreign_cache_is_not_trusted_and_is_mended(new_process, damaged):
    """Entries of another shape, or kept by another version of the parser or Python, give way
    to parsing; the process then writes its own."""
    import hashlib

    from aiayn.textio import read_cache

    kept = new_process()
    expected = every_stage_version()
    script = PROJECT / "workflow_scripts" / "train.py"
    content = hashlib.sha256(script.read_bytes()).hexdigest()
    kept.path.parent.mkdir(parents=True)
    kept.path.write_text(damaged.replace("TOOL", kept.tool).replace("FILE", content))
    kept = new_process()
    assert every_stage_version() == expected
    kept.save()
    mended = read_cache(kept.path)
    assert mended["tool"] == kept.tool
    assert mended["files"][content]["meaning"] == meaning_version(script.read_text())


def test_a_cache_folder_that_cannot_be_written_costs_only_the_parse(
    new_process, monkeypatch, read_only_folder
):
    expected = (new_process(), every_stage_version())[1]
    monkeypatch.setenv("XDG_CACHE_HOME", str(read_only_folder))
    kept = new_process()
    assert every_stage_version() == expected
    kept.save()  # nothing written, nothing raised
    assert not any(read_only_folder.iterdir())


def test_each_rule_hashes_the_modules_its_stage_runs_and_not_other_stages():
    scripts = PROJECT / "workflow_scripts"
    train = names(package_modules(scripts / "train.py", SRC))
    assert {
        "train/trainer.py",
        "train/loader.py",
        "train/batching.py",
        "model.py",
        "train/checkpoint.py",
    } <= train
    # Decoding one position at a time is decode-only code: changing it must not retrain.
    decode_only = {"decode/search.py", "decode/incremental.py", "decode/translate.py"}
    assert not {*decode_only, "score/bleu.py", "report/tables.py", "data/clean.py"} & train
    # a parser's training parses dev for its learning curve (a plug-in the trainer loads by
    # name): editing the decoder or the parser still does not retrain
    assert not {name for name in train if name.startswith("parsing/")}, train
    assert "decode/dev_translation.py" not in train  # dev BLEU: a plug-in too (#65)
    assert not decode_only & names(package_modules(scripts / "average.py", SRC))
    decode = names(package_modules(scripts / "decode.py", SRC))
    assert {*decode_only, "model.py", "vocab.py"} <= decode
    # decoding pads as training does (vocab.round_up): editing training's batching keeps it
    assert not {"train/trainer.py", "train/batching.py"} & decode
    assert "data/clean.py" in names(package_modules(scripts / "clean.py", SRC))
    assert "data/clean.py" not in names(package_modules(scripts / "download.py", SRC))


def test_editing_the_bpe_trainer_or_the_report_reruns_neither_training_nor_decoding():
    """The special token ids live in vocab.py, so only the stages that train or apply BPE hash
    prepare/subword.py; the paper's numbers live in paper.py, so resolving the config reaches no report
    module."""
    scripts = PROJECT / "workflow_scripts"
    for script in ("train.py", "average.py", "decode.py"):
        hashed = names(package_modules(scripts / script, SRC))
        assert "vocab.py" in hashed or script == "average.py", script
        assert "prepare/subword.py" not in hashed, script
        assert not {name for name in hashed if name.startswith("report/")}, script
    assert "prepare/subword.py" in names(package_modules(scripts / "subword.py", SRC))
    # binarize reads the trained model (an input, so a new model reruns it), not the trainer
    assert "prepare/subword.py" not in names(package_modules(scripts / "binarize.py", SRC))
    assert "prepare/pieces.py" in names(package_modules(scripts / "binarize.py", SRC))
    resolution = names(package_modules(PACKAGE / "config" / "experiments.py", SRC))
    assert not {name for name in resolution if name.startswith("report/")}, resolution


BASE_MODULE = '''"""A module."""

import math
from os import path, sep


def rate(step: int, warmup: int = 4000) -> float:
    """The schedule."""
    # a comment
    return min(step**-0.5, step * warmup**-1.5)
'''

SAME_MEANING = {
    "docstrings edited or gone": BASE_MODULE.replace('"""A module."""', "").replace(
        '"""The schedule."""', '"""The schedule, said better."""'
    ),
    "comments and blank lines": BASE_MODULE.replace("# a comment", "# another\n\n\n# and one"),
    "line breaks, parentheses, quotes and trailing commas": BASE_MODULE.replace(
        "def rate(step: int, warmup: int = 4000) -> float:",
        "def rate(\n    step: int,\n    warmup: int = (4000),\n) -> float:",
    ).replace(
        "min(step**-0.5, step * warmup**-1.5)",
        "min(\n        step ** -0.5,\n        (step * warmup ** -1.5),\n    )",
    ),
    "imports reordered": BASE_MODULE.replace(
        "import math\nfrom os import path, sep", "from os import sep, path\nimport math"
    ),
    "a no-op statement": BASE_MODULE + "\n\npass\n...\n",
    "the float written otherwise": BASE_MODULE.replace("-0.5", "-.50"),
}

OTHER_MEANING = {
    "a constant": BASE_MODULE.replace("-1.5", "-1.25"),
    "a default": BASE_MODULE.replace("4000", "8000"),
    "a signature": BASE_MODULE.replace("warmup: int = 4000", "*, warmup: int = 4000"),
    "a statement": BASE_MODULE.replace("return min(", "return max("),
    "an import": BASE_MODULE.replace("from os import path, sep", "from os import path"),
    "a string that is a value, not a docstring": BASE_MODULE + 'NAME = "a"\n',
}


# What cannot change a number: the text of messages, annotations, local names, the order of
# definitions. What is formatted into a message, the exception's type, a parameter's name, a
# dataclass field's type and prints to stdout still count.
STAGE_MODULE = """import logging
import sys
from dataclasses import dataclass

from aiayn.logs import progress

log = logging.getLogger("aiayn")
NAME = "x"


@dataclass
class Settings:
    beam: int = 4


def scale(values: list[float], factor: float = 2.0) -> list[float]:
    total = 0.0
    for value in progress(values, desc="scale", unit=" values"):
        total += value * factor
    if total < 0:
        raise ValueError(f"a negative total {total:.2f}: check the input " + NAME)
    assert total >= 0, "unreachable"
    log.info("scaled %d values to %s", len(values), total)
    print(f"total {total}", file=sys.stderr)
    return [value / total for value in values]


def shift(values):
    return [value + 1 for value in values]
"""
SAME_TEXT = {
    "an error's message": ("check the input ", "see the input file "),
    "an error's message format": ("{total:.2f}", "{total:.3f}"),
    "an assert's message": ('"unreachable"', '"never"'),
    "a log line": ("scaled %d values to %s", "%d values scaled: %s"),
    "a stderr print": ('f"total {total}"', 'f"the total: {total}"'),
    "a progress bar's label": ('desc="scale", unit=" values"', 'desc="scaling", unit=" v"'),
    "annotations": (
        "values: list[float], factor: float = 2.0) -> list[float]",
        "values, factor=2.0)",
    ),
    "a local's name": ("total", "sum_"),
    "the order of functions": (
        "def scale(",
        "def shift(values):\n    return [value + 1 for value in values]\n\n\ndef scale(",
    ),
}
OTHER_TEXT = {
    "what a message formats": ("{total:.2f}", "{values}"),
    "the exception raised": ("raise ValueError", "raise TypeError"),
    "a print to stdout": (", file=sys.stderr)", ")"),
    "a parameter's name": ("factor", "weight"),
    "a dataclass field's type": ("beam: int = 4", "beam: float = 4"),
    "a local renamed onto a global": ("total", "NAME"),
    "a logged value": ("len(values), total", "len(values), -total"),
}


def edited(replacements: tuple[str, str]) -> str:
    old, new = replacements
    if old == "def scale(":  # move shift() above scale(), removing it from the end
        return STAGE_MODULE.replace(
            "\n\ndef shift(values):\n    return [value + 1 for value in values]\n", ""
        ).replace(old, new)
    assert old in STAGE_MODULE, old
    return STAGE_MODULE.replace(old, new)


@pytest.mark.parametrize("edit", SAME_TEXT)
def test_a_message_an_annotation_a_local_name_or_the_order_of_functions_keeps_the_version(edit):
    changed = edited(SAME_TEXT[edit])
    assert changed != STAGE_MODULE
    compile(changed, "<edited>", "exec")
    assert meaning_version(changed) == meaning_version(STAGE_MODULE)


@pytest.mark.parametrize("edit", OTHER_TEXT)
def test_what_a_message_formats_and_what_surrounds_it_still_change_the_version(edit):
    assert meaning_version(edited(OTHER_TEXT[edit])) != meaning_version(STAGE_MODULE)


def test_imports_or_functions_binding_one_name_twice_keep_their_order():
    imports = "from os.path import join\nfrom posixpath import join\n"
    swapped = "from posixpath import join\nfrom os.path import join\n"
    assert meaning_version(imports) != meaning_version(swapped)
    functions = "def f():\n    return 1\n\n\ndef f():\n    return 2\n"
    assert meaning_version(functions) != meaning_version(
        functions.replace("1", "3").replace("2", "1").replace("3", "2")
    )
    decorated = "@register\ndef a():\n    return 1\n\n\n@register\ndef b():\n    return 2\n"
    reordered = "@register\ndef b():\n    return 2\n\n\n@register\ndef a():\n    return 1\n"
    assert meaning_version(decorated) != meaning_version(reordered)  # a registry's order


@pytest.mark.parametrize("edit", SAME_MEANING)
def test_writing_the_same_code_otherwise_keeps_its_version(edit):
    assert meaning_version(SAME_MEANING[edit]) == meaning_version(BASE_MODULE)


@pytest.mark.parametrize("edit", OTHER_MEANING)
def test_changing_what_the_code_does_changes_its_version(edit):
    assert meaning_version(OTHER_MEANING[edit]) != meaning_version(BASE_MODULE)


def test_ruff_format_of_a_module_mangled_by_hand_keeps_its_version(tmp_path):
    """The formatter users run: a real module of ours, its layout mangled, then `ruff format`."""
    original = (PACKAGE / "train" / "schedule.py").read_text()
    mangled = original.replace("    ", "        ").replace('"', "'")
    module = tmp_path / "schedule.py"
    module.write_text(mangled)
    subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(module)], check=True)
    assert mangled != original
    assert meaning_version(mangled) == meaning_version(original)
    assert meaning_version(module.read_text()) == meaning_version(original)


def parsed_rules(tmp_path: Path) -> dict[str, tuple[str | None, str | None, bool]]:
    """Each rule as Snakemake parsed the workflow: its script, its `code` param and whether it
    runs Python of its own (a `run:` block: no script, shell, wrapper or notebook)."""
    wrapper = tmp_path / "Snakefile"
    wrapper.write_text(
        f'include: "{PROJECT / "Snakefile"}"\n'
        "import json\n"
        'print("RULES", json.dumps({r.name: [r.script, dict(r.params.items()).get("code"), '
        "not r.norun and not any((r.script, r.shellcmd, r.wrapper, r.notebook))] "
        "for r in workflow.rules}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(wrapper), "--list-rules"],
        cwd=PROJECT, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RULES "))
    return {name: tuple(value) for name, value in json.loads(line[6:]).items()}


def test_every_rule_that_runs_code_has_its_code_version_as_its_code_param(tmp_path):
    """The Snakefile gives each rule that runs a workflow script the version of what the script
    and the modules it imports do, and each rule with a `run:` block that of the block and the
    module it calls (versions.RUN_MODULES): none is left out of the rerun trigger, a new rule
    included."""
    from aiayn.config.versions import RUN_MODULES, code_version, stage_version

    rules = parsed_rules(tmp_path)
    scripted = {name: script for name, (script, _, _) in rules.items() if script}
    assert {"download", "train", "average", "decode", "score", "table", "export"} <= set(scripted)
    for name, script in scripted.items():
        expected = code_version(PROJECT / "workflow_scripts" / Path(script).name, PROJECT)
        assert rules[name][1] == expected, name
    run_blocks = {name for name, (_, _, own) in rules.items() if own}
    assert "run_record" in run_blocks and run_blocks <= set(RUN_MODULES)
    for name in run_blocks:
        assert rules[name][1] == stage_version(PROJECT, name), name
    assert set(rules) - set(scripted) - run_blocks == {"all"}


def test_the_run_records_block_and_module_are_its_version(tmp_path):
    """run.json is written by a `run:` block calling aiayn.report.run_record: a changed argument
    in the block or a changed statement in the module changes the run_record stage's version
    (its figures are what `--compare` checks), a comment in either does not."""
    from aiayn.config.versions import stage_version

    copy_project(tmp_path, ["rules", "src"])
    rules, module = tmp_path / "rules/report.smk", tmp_path / "src/aiayn/report/run_record.py"
    originals = {path: path.read_text() for path in (rules, module)}
    before = stage_version(tmp_path, "run_record")
    rules.write_text(originals[rules].replace("    run:\n", "    run:\n        # a comment\n"))
    module.write_text(originals[module] + "\n# a comment\n")
    assert stage_version(tmp_path, "run_record") == before
    rules.write_text(originals[rules].replace("left_out=absent,", "left_out=[],"))
    assert stage_version(tmp_path, "run_record") != before
    rules.write_text(originals[rules])
    module.write_text(originals[module] + STATEMENT_EDIT)
    assert stage_version(tmp_path, "run_record") != before
