"""What made a study's results, as versions a checkout can recompute without running anything:
each stage's code (its workflow script and every `aiayn` module the script runs, as the rules
hash them for their rerun trigger) and each dataset's, experiment's and the report's resolved
settings. The study's run.json records them (rule run_record); `aiayn results` recomputes them
for the current checkout and says which committed study the workflow would rewrite, and from
which stage on.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from aiayn.config.plan import Plan
from aiayn.config.workflow import package_modules

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
}
# What a change of settings reruns first (everything after it follows)
SETTINGS_STAGE = {"datasets": "download", "train": "train", "evaluation": "decode"}


def modules_version(script: Path, src_dir: Path) -> str:
    """Hash of the src/aiayn modules a workflow script runs: the `code` param of its rule."""
    digest, src_dir = hashlib.sha256(), Path(src_dir).resolve()
    for path in package_modules(script, src_dir.parent):
        digest.update(path.relative_to(src_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def stage_version(root: Path, stage: str) -> str:
    """A stage's code: its script (Snakemake's own code trigger), the modules it runs, and the
    values its rule's `params:` sets as literals (`resamples=500` moves results as code does;
    a value from the config is in the settings' versions)."""
    script = root / "workflow_scripts" / STAGE_SCRIPTS[stage]
    digest = hashlib.sha256(script.read_bytes())
    digest.update(modules_version(script, root / "src" / "aiayn").encode())
    literals = literal_params(root / "rules", stage)
    if literals:  # a rule without any keeps the version it had before they counted
        digest.update(json.dumps(literals, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def literal_params(rules_dir: Path, rule: str) -> dict:
    """The params of `rule <rule>:` in rules/*.smk whose values are written as literals."""
    for path in sorted(Path(rules_dir).glob("*.smk")):
        lines = path.read_text(encoding="utf-8").splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith(f"rule {rule}:")]
        if starts:
            call = ast.parse("params(\n" + "\n".join(params_block(lines[starts[0] + 1 :])) + "\n)")
            found = {}
            for keyword in call.body[0].value.keywords:
                try:
                    found[keyword.arg] = ast.literal_eval(keyword.value)
                except ValueError:  # an expression: of the config, the plan or wildcards
                    continue
            return found
    return {}


def params_block(lines: list[str]) -> list[str]:
    """The lines of the `params:` directive among a rule's lines (the rule ends at a line that
    is not indented, the directive at the next line indented no deeper than it)."""
    block, indent = [], None
    for line in lines:
        if line.strip() and not line[0].isspace():
            break
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth if line.strip() == "params:" else None
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
    return [stage for stage in STAGE_SCRIPTS if stage in stages]


def settings_hash(value) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def without_location(entry: dict) -> dict:
    """A dataset's settings less where its files are (`root`): moving them changes nothing."""
    return {key: value for key, value in entry.items() if key != "root"}


def study_versions(plan: Plan, root: Path) -> dict:
    """The versions run.json records: per stage, per dataset, per run (training and
    evaluation apart) and the report's settings."""
    datasets = sorted({plan.runs.dataset(name) for name in plan.runs.names()})
    return {
        "code": {stage: stage_version(root, stage) for stage in study_stages(plan)},
        "datasets": {
            name: settings_hash(without_location(plan.data.entry(name))) for name in datasets
        },
        "train": {name: settings_hash(plan.runs.trainer_spec(name)) for name in plan.runs.names()},
        "evaluation": {
            name: settings_hash(plan.runs.evaluation(name)) for name in plan.runs.names()
        },
        "report": settings_hash(plan.config["report"]),
    }


def changes(recorded: dict, current: dict) -> list[str]:
    """What differs, each as `what (the stage it reruns first)`; none: the study is current."""
    code = current["code"].items()
    found = [
        f"code of {stage}" for stage, version in code if recorded["code"].get(stage) != version
    ]
    for kind in ("datasets", "train", "evaluation"):
        for name, version in current[kind].items():
            if recorded[kind].get(name) != version:
                found.append(f"{kind} settings of {name} ({SETTINGS_STAGE[kind]} on)")
        for name in sorted(set(recorded[kind]) - set(current[kind])):
            found.append(f"{name} is no longer in the study")
    if recorded["report"] != current["report"]:
        found.append("report settings (score on)")
    return found
