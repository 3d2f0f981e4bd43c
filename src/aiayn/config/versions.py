"""What made a study's results, as versions a checkout can recompute without running anything:
each stage's code (its workflow script and every `aiayn` module the script runs, by what the code
does: aiayn.config.code_meaning; the rules' rerun trigger is the same version) and each
dataset's, experiment's and the report's resolved settings. The study's run.json records them
(rule run_record), each file's version too; `aiayn results` recomputes them for the current
checkout and says which committed study the workflow would rewrite, from which stage on, and
which files moved.
"""

from __future__ import annotations

import ast
import hashlib
import json
import textwrap
from pathlib import Path

from aiayn.config.code_meaning import file_meaning_version, meaning_version
from aiayn.config.plan import Plan
from aiayn.config.workflow import imported_names, package_modules
from aiayn.software import PACKAGES, package_versions

# stage (rule) -> its workflow script, in the order of the DAG
STAGE_SCRIPTS = {
    "download": "download.py",
    "clean": "clean.py",
    "treebank": "treebank.py",
    "subword": "subword.py",
    "binarize": "binarize.py",
    "train": "train.py",
    "average": "average.py",
    "decode": "decode.py",
    "attention_maps": "attention_maps.py",
    "score": "score.py",
    "score_parse": "score_parse.py",
    "parse_baselines": "parse_baselines.py",
    "seed_scores": "seed_scores.py",
    "table": "report_table.py",
    "figure": "report_figure.py",
    "complexity": "complexity.py",
}
# stage (rule) -> the module its `run:` block calls: a rule that runs in Snakemake's own process
# (the run record, which needs the command typed and the config files given)
RUN_MODULES = {"run_record": "src/aiayn/report/run_record.py"}
# What a change of settings reruns first (everything after it follows)
SETTINGS_STAGE = {"datasets": "download", "train": "train", "evaluation": "decode"}


def code_versions(script: Path, root: Path) -> dict[str, str]:
    """The version by meaning (aiayn.config.code_meaning) of a workflow script and of every
    `aiayn` module it runs, keyed by their paths in the checkout (`src/aiayn/train/step.py`)."""
    root, script = Path(root).resolve(), Path(script).resolve()
    files = [script, *package_modules(script, root / "src")]
    return {path.relative_to(root).as_posix(): file_meaning_version(path) for path in files}


def code_version(script: Path, root: Path) -> str:
    """What a workflow script does, with every module it runs: the `code` param of its rule,
    and (with the rule's literal params) the stage's version in run.json. A comment, docstring
    or reformatting changes nothing; a changed statement anywhere in the set changes it."""
    text = json.dumps(sorted(code_versions(script, root).items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stage_version(root: Path, stage: str) -> str:
    """A stage's code (`code_version` of its script) and the values its rule's `params:` sets
    as literals (`resamples=500` moves results as code does; a value from the config is in the
    settings' versions): `stage_files` as one hash."""
    return files_version(stage_files(root, stage))


def files_version(files: dict[str, str]) -> str:
    """`stage_files`' versions as one."""
    text = json.dumps(sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rule_lines(rules_dir: Path, rule: str) -> tuple[Path | None, list[str]]:
    """The rules file that defines `rule` (None: none does) and the lines after its header."""
    for path in sorted(Path(rules_dir).glob("*.smk")):
        lines = path.read_text(encoding="utf-8").splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith(f"rule {rule}:")]
        if starts:
            return path, lines[starts[0] + 1 :]
    return None, []


def literal_params(lines: list[str]) -> dict:
    """The literal params among a rule's lines (`rule_lines`)."""
    call = ast.parse("params(\n" + "\n".join(directive_block(lines)) + "\n)")
    found = {}
    for keyword in call.body[0].value.keywords:
        try:
            found[keyword.arg] = ast.literal_eval(keyword.value)
        except ValueError:  # an expression: of the config, the plan or wildcards
            continue
    return found


def stage_entry(root: Path, stage: str) -> Path:
    """What a stage runs: its workflow script, or the module its rule's `run:` block calls."""
    if stage in RUN_MODULES:
        return Path(root) / RUN_MODULES[stage]
    return Path(root) / "workflow_scripts" / STAGE_SCRIPTS[stage]


def stage_files(root: Path, stage: str) -> dict[str, str]:
    """`code_versions` of what the stage runs, and its rule's literal params and `run:` block as
    more entries (`rules/score.smk: params of score`) where it has them."""
    root = Path(root)
    found = code_versions(stage_entry(root, stage), root)
    rules_file, lines = rule_lines(root / "rules", stage)
    where = rules_file and rules_file.resolve().relative_to(root.resolve()).as_posix()
    literals = literal_params(lines)
    if literals:
        found[f"{where}: params of {stage}"] = settings_hash(literals)
    block = directive_block(lines, "run")
    if block:
        found[f"{where}: run of {stage}"] = meaning_version(textwrap.dedent("\n".join(block)))
    return found


def directive_block(lines: list[str], directive: str = "params") -> list[str]:
    """The lines of a directive (`params:`) among a rule's lines (the rule ends at a line that
    is not indented, the directive at the next line indented no deeper than it)."""
    block, indent = [], None
    for line in lines:
        if line.strip() and not line[0].isspace():
            break
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth if line.strip() == f"{directive}:" else None
            continue
        if line.strip() and depth <= indent:
            break
        block.append(line)
    return block


def study_stages(plan: Plan) -> list[str]:
    """The stages whose jobs make this study's results."""
    stages = {"download", "clean", "subword", "binarize", "train", "average", "decode", "table"}
    if plan.runs.translators():
        stages |= {"score", "figure"}
    if plan.runs.parsers():
        stages |= {"treebank", "score_parse", "parse_baselines", "figure"}
    if plan.runs.seeded_groups():
        stages.add("seed_scores")
    if plan.report.attention_figures():
        stages.add("attention_maps")
    if plan.config.get("complexity", {}).get("enabled"):
        stages.add("complexity")
    stages.add("run_record")  # every study's run.json
    return [stage for stage in [*STAGE_SCRIPTS, *RUN_MODULES] if stage in stages]


def settings_hash(value) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def without_location(entry: dict) -> dict:
    """A dataset's settings less where its files are (`root`): moving them changes nothing."""
    return {key: value for key, value in entry.items() if key != "root"}


def study_versions(plan: Plan, root: Path) -> dict:
    """The versions run.json records: per stage, per file of the stages' code (to say which file
    moved), per dataset, per run (training and evaluation apart) and the report's settings."""
    datasets = sorted({plan.runs.dataset(name) for name in plan.runs.names()})
    stages = study_stages(plan)
    files = {stage: stage_files(root, stage) for stage in stages}
    modules = {}
    for found in files.values():
        modules.update(found)
    return {
        "code": {stage: files_version(found) for stage, found in files.items()},
        "modules": dict(sorted(modules.items())),
        "datasets": {
            name: settings_hash(without_location(plan.data.entry(name))) for name in datasets
        },
        "train": {name: settings_hash(plan.runs.trainer_spec(name)) for name in plan.runs.names()},
        "evaluation": {
            name: settings_hash(plan.runs.evaluation(name)) for name in plan.runs.names()
        },
        "report": settings_hash(plan.config["report"]),
        **(
            {"complexity": settings_hash(plan.config["complexity"])}
            if "complexity" in stages
            else {}
        ),
    }


def changes(recorded: dict, current: dict, root: Path) -> list[str]:
    """What differs, each as `what (the stage it reruns first)`; none: the study is current.
    A stage whose code moved names the files that moved, where run.json recorded them."""
    found = [
        code_change(stage, recorded.get("modules"), root)
        for stage, version in current["code"].items()
        if recorded["code"].get(stage) != version
    ]
    for kind in ("datasets", "train", "evaluation"):
        for name, version in current[kind].items():
            if recorded[kind].get(name) != version:
                found.append(f"{kind} settings of {name} ({SETTINGS_STAGE[kind]} on)")
        for name in sorted(set(recorded[kind]) - set(current[kind])):
            found.append(f"{name} is no longer in the study")
    if recorded["report"] != current["report"]:
        found.append("report settings (score on)")
    if recorded.get("complexity") != current.get("complexity"):
        found.append("complexity settings (complexity on)")
    for stage in recorded["code"]:
        if stage not in current["code"]:
            found.append(f"stage {stage} is no longer in the study")
    return found


def code_change(stage: str, recorded_files: dict | None, root: Path) -> str:
    """`code of <stage>`, naming the files of its code (and its rule's literal params) whose
    version differs from the recorded one or that it did not run then."""
    if recorded_files is None:  # a run.json from before files were recorded
        return f"code of {stage}"
    moved = [
        name
        for name, version in stage_files(root, stage).items()
        if recorded_files.get(name) != version
    ]
    return f"code of {stage} ({', '.join(moved) or 'a module it no longer runs'})"


def package_changes(recorded: dict | None, stages: list[str], root: Path) -> list[str]:
    """Each package whose output a stage's numbers depend on (aiayn.software.PACKAGES) installed
    at another version than the study recorded, with the first of its stages whose code imports
    it: `sacrebleu 2.5.1 here, 2.6.0 recorded (score on)`. The plan does not rerun for these
    (docs/development.md, "What reruns what"): `aiayn results` says which stage to force."""
    here, found = package_versions(), []
    for name in PACKAGES:
        if not recorded or name not in recorded or recorded[name] == here[name]:
            continue
        users = [stage for stage in stages if name in stage_imports(root, stage)]
        where = f"{users[0]} on" if users else "no stage imports it"
        found.append(f"{name} {here[name]} here, {recorded[name]} recorded ({where})")
    return found


def stage_imports(root: Path, stage: str) -> set[str]:
    """The top-level packages that the stage's script and modules import."""
    root = Path(root).resolve()
    entry = stage_entry(root, stage)
    files = [entry, *package_modules(entry, root / "src")]
    return {name.split(".")[0] for path in files for name in imported_names(path, root / "src")}
