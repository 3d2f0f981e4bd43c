"""A rerun checked against what was committed (`aiayn results --compare`).

After a user reruns a study, each figure of the working tree's results/<study>/run.json (every
score's sacreBLEU, paper BLEU, chrF or F1, and each experiment's dev perplexity) is set beside
the same figure in git's HEAD: "reproduced" within the study's stated tolerance, or "differs".
The data scored (sentence counts, reference lengths) must be the same exactly: otherwise the two
runs did not score the same thing. What the two records say of the hardware and software that
made them (CPU, threads, precision, package versions) is listed where it differs, since that is
what moves floats.

A tolerance comes from the spread over training seeds (`tolerance_from_seeds`): a rerun on
other kernels changes a training run about as much as another seed does, so the difference of
two runs has the standard deviation sqrt(2) x the seeds' sd. The band is the prediction band of
that difference with the sd pooled over experiments (Student's t on the pooled degrees of
freedom), two-sided and Bonferroni-corrected over the figures a study compares, so that a study
reproduced in full is called so with at least 95% probability as a whole, not figure by figure
(tests/test_compare.py simulates it).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

from aiayn.config import paths
from aiayn.errors import InputError

# run.json's score fields compared within a tolerance, and the tolerance each uses (chrF has
# its own: its spread over seeds is not BLEU's)
SCORE_FIGURES = {"sacrebleu": "bleu", "tokenized_bleu": "bleu", "chrf": "chrf", "f1": "f1"}
SCORED = set(SCORE_FIGURES.values())
# fields that name the data scored: a difference means the two runs scored other data
SAME_DATA = ("sentences", "ref_len_13a")
# `aiayn results --compare`'s exit code for a record of other code, settings or packages
NOT_A_RERUN = 3
# the recorded environment, compared where both records have it
ENVIRONMENT = ("host", "software")
EXPERIMENT_ENVIRONMENT = ("device", "precision", "processes", "software", "cpu")


@dataclass(frozen=True)
class Verdict:
    """One figure, here and committed, and the tolerance it was held to (None: exact)."""

    name: str
    here: float | int | None
    committed: float | int | None
    tolerance: float | None
    kind: str  # "bleu", "chrf", "f1", "perplexity" (relative) or "data"

    @property
    def difference(self) -> float | None:
        """How far here is from committed, in the tolerance's terms: points, or for perplexity
        a fraction of the committed value (None: one is missing)."""
        if self.here is None or self.committed is None:
            return None
        difference = abs(self.here - self.committed)
        return difference / abs(self.committed) if self.kind == "perplexity" else difference

    @property
    def reproduced(self) -> bool:
        if self.difference is None:
            return False
        if self.tolerance is None:
            return self.here == self.committed
        return self.difference <= self.tolerance + 1e-9  # a figure rounded onto its edge holds

    def line(self) -> str:
        if self.here is None or self.committed is None:
            where = "here" if self.here is None else "in the committed record"
            return f"{self.name}: differs: missing {where}"
        figures = f"{self.here} here, {self.committed} committed"
        if self.tolerance is None:
            rule = "must be equal" if self.kind == "data" else "no tolerance stated: equal only"
        elif self.kind == "perplexity":
            rule = f"tolerance {self.tolerance:.1%}"
        else:
            rule = f"tolerance {self.tolerance:g}"
        return f"{self.name}: {'reproduced' if self.reproduced else 'differs'}: {figures} ({rule})"


def committed_record(root: Path, record: Path) -> dict | None:
    """The record as git's HEAD has it (None: not committed there). `record` is named by its
    path within the checkout, not resolved: a results/<study> that is a link stays that study."""
    relative = Path(record).relative_to(root).as_posix()
    try:
        shown = subprocess.run(
            ["git", "show", f"HEAD:{relative}"], cwd=root, capture_output=True, text=True
        )
    except FileNotFoundError:
        raise InputError("--compare reads the committed results with git: install git") from None
    if shown.returncode != 0:
        if "not a git repository" in shown.stderr:
            raise InputError(
                f"{Path(root).resolve()} is not a git checkout: --compare compares with the "
                "results committed there (git's HEAD)"
            )
        return None
    try:
        return checked_record(json.loads(shown.stdout), f"git's HEAD:{relative}")
    except ValueError as err:
        raise InputError(f"git's HEAD:{relative} is not a JSON object ({err})") from None


def committed_studies(root: Path) -> list[str]:
    """The studies git's HEAD holds a run.json of (results/<study>), by name: read from git's
    listing, each record read once, where the study is compared."""
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "HEAD", paths.results_dir("")],
        cwd=root,
        capture_output=True,
        text=True,
    )
    records = set(listed.stdout.splitlines())
    names = {Path(line).parent.name for line in records}
    return sorted(name for name in names if paths.run_record(name) in records)


def checked_record(record, where: str) -> dict:
    """The record, once its figures' places have the shapes `figures` reads: `scores` and
    `experiments` objects of objects. What is not is named, with where it is."""
    if not isinstance(record, dict):
        raise InputError(f"{where} is not a JSON object but {type(record).__name__}")
    for field in ("scores", "experiments"):
        entries = record.get(field, {})
        if not isinstance(entries, dict):
            raise InputError(f"{where}: `{field}` is {type(entries).__name__}, not an object")
        for key, entry in entries.items():
            if not isinstance(entry, dict):
                raise InputError(
                    f"{where}: {field}[{key!r}] is {json.dumps(entry)[:60]}, not an object"
                )
    return record


def rerun_differences(here: dict, committed: dict) -> list[str]:
    """What makes `here` the record of another study than `committed`: its stages' code, its
    settings, the packages whose output moves numbers (aiayn.software.PACKAGES). None: a rerun
    of the same study, whose figures can be held to its tolerances."""
    from aiayn.software import PACKAGES

    ours, theirs = here.get("versions"), committed.get("versions")
    if not isinstance(ours, dict) or not isinstance(theirs, dict):
        side = "here" if not isinstance(ours, dict) else "committed"
        return [f"the record {side} has no versions (written before run.json recorded them)"]
    found = []
    code_ours, code_theirs = ours.get("code", {}), theirs.get("code", {})
    stages = [s for s in {**code_theirs, **code_ours} if code_ours.get(s) != code_theirs.get(s)]
    if stages:
        modules_ours, modules_theirs = ours.get("modules", {}), theirs.get("modules", {})
        moved = sorted(name for name in modules_ours.keys() | modules_theirs.keys()
                       if modules_ours.get(name) != modules_theirs.get(name))  # fmt: skip
        found.append(f"code of {', '.join(stages)}" + (f": {', '.join(moved)}" if moved else ""))
    for kind in ("datasets", "train", "evaluation"):
        a, b = ours.get(kind, {}), theirs.get(kind, {})
        for name in sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name)):
            found.append(f"{kind} settings of {name}")
    for kind in ("report", "complexity"):
        if ours.get(kind) != theirs.get(kind):
            found.append(f"{kind} settings")
    software_ours, software_theirs = here.get("software") or {}, committed.get("software") or {}
    for name in PACKAGES:
        a, b = software_ours.get(name), software_theirs.get(name)
        if a != b:
            found.append(f"{name} {a} here, {b} committed")
    return found


def figures(record: dict) -> dict[str, tuple[str, float | int]]:
    """Every figure compared: name -> (kind, value)."""
    found = {}
    for key, score in record.get("scores", {}).items():
        for field, kind in SCORE_FIGURES.items():
            if isinstance(score.get(field), int | float):
                found[f"{key} {field}"] = (kind, score[field])
        for field in SAME_DATA:
            if field in score:
                found[f"{key} {field}"] = ("data", score[field])
    for name, experiment in record.get("experiments", {}).items():
        if isinstance(experiment.get("dev_ppl"), int | float):
            found[f"{name} dev_ppl"] = ("perplexity", experiment["dev_ppl"])
    return found


def compare(here: dict, committed: dict, tolerances: dict) -> list[Verdict]:
    """Each figure of either record, with its verdict under `tolerances` (kind -> tolerance,
    None where the study states none)."""
    ours, theirs = figures(here), figures(committed)
    verdicts = []
    for name in sorted(ours.keys() | theirs.keys()):
        kind = (ours.get(name) or theirs[name])[0]
        tolerance = None if kind == "data" else tolerances.get(kind)
        value = ours.get(name, (kind, None))[1]
        verdicts.append(Verdict(name, value, theirs.get(name, (kind, None))[1], tolerance, kind))
    return verdicts


def largest_differences(verdicts: list[Verdict]) -> list[str]:
    """Per figure field (sacrebleu, tokenized_bleu, chrf, f1, dev_ppl), the verdict furthest
    from its committed value, as `field D of T (where)`: how close a rerun came, at a glance,
    beside the tolerance it was held to (perplexity's relative, as its tolerance is)."""
    furthest: dict[str, Verdict] = {}
    for verdict in verdicts:
        if verdict.kind == "data" or verdict.difference is None:
            continue
        field = verdict.name.rsplit(" ", 1)[1]
        if field not in furthest or verdict.difference > furthest[field].difference:
            furthest[field] = verdict
    lines = []
    for field in (name for name in (*SCORE_FIGURES, "dev_ppl") if name in furthest):
        verdict = furthest[field]
        difference, relative = verdict.difference, verdict.kind == "perplexity"
        text = f"{field} {difference:.1%}" if relative else f"{field} {difference:.2f}"
        if verdict.tolerance is not None:
            text += f" of {verdict.tolerance:.1%}" if relative else f" of {verdict.tolerance:g}"
        lines.append(f"{text} ({verdict.name.rsplit(' ', 1)[0]})")
    return lines


def environment_changes(here: dict, committed: dict) -> list[str]:
    """What the two records say differently of the machine and software, each difference once:
    `path: A here, B committed` for the study's own fields, and an experiments' field that
    differs alike in several experiments as one line naming them (or `all N experiments`)."""
    here, committed = with_unset_variables(here, committed)
    changes = []
    for key in ENVIRONMENT:
        for leaf, a, b in leaves(key, here.get(key), committed.get(key)):
            if a != b and a is not None and b is not None:
                changes.append(f"{leaf}: {a} here, {b} committed")
    names = sorted(here.get("experiments", {}).keys() & committed.get("experiments", {}))
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for name in names:
        ours, theirs = here["experiments"][name], committed["experiments"][name]
        for key in EXPERIMENT_ENVIRONMENT:
            for leaf, a, b in leaves(key, ours.get(key), theirs.get(key)):
                if a != b and a is not None and b is not None:
                    grouped.setdefault((leaf, str(a), str(b)), []).append(name)
    for (leaf, a, b), which in grouped.items():
        named = (
            f"all {len(names)} experiments" if len(which) == len(names) > 1 else ", ".join(which)
        )
        changes.append(f"experiments' {leaf}: {a} here, {b} committed ({named})")
    return changes


def with_unset_variables(here: dict, committed: dict) -> tuple[dict, dict]:
    """The records with each kernel variable (host.kernel_variables) that one sets and the other
    does not given as "unset" in the other: an unset variable is a setting, not a field that an
    older record lacks. Unchanged where either record predates the field."""
    ours, theirs = (record.get("host", {}).get("kernel_variables") for record in (here, committed))
    if ours is None or theirs is None:
        return here, committed
    names = sorted(ours.keys() | theirs.keys())

    def filled(record: dict, variables: dict) -> dict:
        given = {name: variables.get(name, "unset") for name in names}
        return {**record, "host": {**record["host"], "kernel_variables": given}}

    return filled(here, ours), filled(committed, theirs)


def leaves(path: str, ours, theirs):
    """(path, ours, theirs) for each leaf of two nested dicts."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(ours.keys() | theirs.keys()):
            yield from leaves(f"{path}.{key}", ours.get(key), theirs.get(key))
    else:
        yield path, ours, theirs


def tolerance_from_seeds(
    spreads: list[tuple[float, int]], comparisons: int, level: float = 0.05
) -> float:
    """The band a rerun's figure may differ from the committed one by: t * sqrt(2) * s, with s
    the sd over seeds pooled over experiments (each `(sd, seeds)`, weighted by its degrees of
    freedom) and t Student's two-sided quantile at `level` divided over the study's
    `comparisons` figures (Bonferroni), on the pooled degrees of freedom: the prediction band of
    a difference of two runs, which holds for the study as a whole."""
    from scipy.stats import t

    freedom = sum(seeds - 1 for _, seeds in spreads)
    if freedom < 1 or comparisons < 1:
        raise ValueError("a tolerance needs an experiment's sd over at least two seeds")
    pooled = math.sqrt(sum((seeds - 1) * sd * sd for sd, seeds in spreads) / freedom)
    return float(t.ppf(1 - level / (2 * comparisons), freedom)) * math.sqrt(2) * pooled


def experiment_of(run: str) -> str:
    """The experiment a training run belongs to: `tiny` for `tiny` and `tiny.seed3` (the names
    config.plan.runs.seed_runs gives), `tiny.seeds_ablation` for itself."""
    return re.sub(r"\.seed\d+$", "", run)


def seed_spreads(record: dict) -> dict[str, list[tuple[float, int]]]:
    """From a study trained with several seeds (its run.json): each experiment's sd over seeds
    and their number, of every BLEU figure, of every chrF figure, of every parser's F1, and of
    its dev perplexity relative to the mean."""
    bleu = [
        (entry["sacrebleu_sd"], entry["seeds"])
        for entry in record.get("seed_scores", {}).values()
        if entry.get("sacrebleu_sd") is not None
    ]
    grouped = seed_figures(record)

    def spreads(kind: str) -> list[tuple[float, int]]:
        relative = kind == "perplexity"  # as its tolerance: a fraction of the mean
        return [(statistics.stdev(v) / (statistics.fmean(v) if relative else 1), len(v))
                for found, v in grouped.values() if found == kind]  # fmt: skip

    return {"bleu": bleu, **{kind: spreads(kind) for kind in ("chrf", "f1", "perplexity")}}


def derived_tolerances(seeded: dict, compared: dict) -> dict[str, float]:
    """The tolerances of the study whose run.json is `compared`, from the seeds' spread that the
    seeded study's run.json `seeded` recorded: one family over the figures it compares (a
    score's sacreBLEU, paper BLEU and chrF count once: they measure the same translations)."""
    found = figures(compared)
    scored = {name.rsplit(" ", 1)[0] for name, (kind, _) in found.items() if kind in SCORED}
    perplexities = [name for name, (kind, _) in found.items() if kind == "perplexity"]
    comparisons = len(scored) + len(perplexities)
    return {
        kind: tolerance_from_seeds(spreads, comparisons)
        for kind, spreads in seed_spreads(seeded).items()
        if spreads
    }


def seed_figures(record: dict) -> dict[str, tuple[str, list[float]]]:
    """Each experiment's figures over its seeds, for the experiments of two or more: name
    (`<experiment>/<checkpoint>/<split> <field>`, `<experiment> dev_ppl`) -> (kind, the seeds'
    values in the record's order)."""
    found: dict[str, tuple[str, list[float]]] = {}
    for key, score in record.get("scores", {}).items():  # "<run>/<checkpoint>/<split>"
        run, _, figure = key.partition("/")
        for field, kind in SCORE_FIGURES.items():
            if isinstance(score.get(field), int | float):
                name = f"{experiment_of(run)}/{figure} {field}"
                found.setdefault(name, (kind, []))[1].append(float(score[field]))
    for run, experiment in record.get("experiments", {}).items():
        if isinstance(experiment.get("dev_ppl"), int | float):
            name = f"{experiment_of(run)} dev_ppl"
            found.setdefault(name, ("perplexity", []))[1].append(float(experiment["dev_ppl"]))
    return {name: value for name, value in found.items() if len(value[1]) > 1}


@dataclass(frozen=True)
class MeanVerdict:
    """An experiment's figure over its seeds, here and committed, and the band its mean may move
    by: the two-sample t-test of equal means at the study's level (Bonferroni over its
    comparisons), the sd pooled from both records' seeds. For perplexity, relative to the
    committed mean."""

    name: str
    kind: str
    here: tuple[float, ...]
    committed: tuple[float, ...]
    band: float

    @property
    def difference(self) -> float:
        here, committed = statistics.fmean(self.here), statistics.fmean(self.committed)
        difference = abs(here - committed)
        return difference / abs(committed) if self.kind == "perplexity" else difference

    @property
    def reproduced(self) -> bool:
        return self.difference <= self.band + 1e-9

    def line(self) -> str:
        here, committed = statistics.fmean(self.here), statistics.fmean(self.committed)
        band = f"{self.band:.1%}" if self.kind == "perplexity" else f"{self.band:.2f}"
        return (f"{self.name}, mean of {len(self.here)} and {len(self.committed)} seeds: "
                f"{'reproduced' if self.reproduced else 'differs'}: {here:.4g} here, "
                f"{committed:.4g} committed (band {band})")  # fmt: skip


def mean_band(here: list[float], committed: list[float], comparisons: int, level=0.05) -> float:
    """How far two means of seeds may differ when both come from one setting: Student's t at
    `level` over `comparisons` (two-sided, Bonferroni) on n1 + n2 - 2 degrees of freedom, times
    the pooled sd and sqrt(1/n1 + 1/n2)."""
    from scipy.stats import t

    freedom = len(here) + len(committed) - 2
    squares = sum((len(v) - 1) * statistics.variance(v) for v in (here, committed) if len(v) > 1)
    pooled = math.sqrt(squares / freedom)
    quantile = float(t.ppf(1 - level / (2 * comparisons), freedom))
    return quantile * pooled * math.sqrt(1 / len(here) + 1 / len(committed))


def compare_means(here: dict, committed: dict, level: float = 0.05) -> list[MeanVerdict]:
    """Each figure over seeds that both records hold, with its verdict: what a study trained with
    seeds claims is its seed means, so they decide whether it reproduced (a score's sacreBLEU,
    paper BLEU and chrF count once in the comparisons: they measure the same translations)."""
    ours, theirs = seed_figures(here), seed_figures(committed)
    shared = sorted(ours.keys() & theirs.keys())
    comparisons = len({name.rsplit(" ", 1)[0] for name in shared})
    verdicts = []
    for name in shared:
        kind, values = ours[name]
        committed_values = theirs[name][1]
        if kind == "perplexity":  # relative to the committed mean, as the figure's tolerance
            scale = statistics.fmean(committed_values)
            values = [v / scale for v in values]
            committed_values = [v / scale for v in committed_values]
        band = mean_band(values, committed_values, comparisons, level)
        verdicts.append(MeanVerdict(name, kind, tuple(ours[name][1]), tuple(theirs[name][1]), band))
    return verdicts


# The tables whose marks are a study's conclusions, and the figure each marks
MARKED_TABLES = {"table2": "sacreBLEU", "table3": "dev sacreBLEU"}


@dataclass(frozen=True)
class Conclusion:
    """One marked row of a table: the experiment is above or below its baseline, and the
    table's own test (Holm over the table) marks the difference."""

    table: str
    row: str
    baseline: str
    direction: str  # "above" or "below"

    def text(self) -> str:
        return f"{self.table}: {self.row} {self.direction} {self.baseline}, marked"


def conclusions(tables: dict[str, str]) -> dict[tuple[str, str], Conclusion]:
    """The study's conclusions from its tables' csv text (name -> text): each row marked `*`,
    keyed by (table, row), with its direction against its baseline."""
    import io

    import pandas as pd

    found = {}
    for table, text in tables.items():
        frame = pd.read_csv(io.StringIO(text))
        figure, label = MARKED_TABLES[table], "row" if table == "table3" else "model"
        if not {"mark", "vs. baseline", figure, label} <= set(frame.columns):
            continue
        ours = frame[frame["source"] == "ours"]
        for _, row in ours.iterrows():
            if not isinstance(row["mark"], str) or not row["mark"].startswith("*"):
                continue
            baselines = ours[(ours["vs. baseline"] == "(baseline)") & (ours["pair"] == row["pair"])]
            baseline = baselines.iloc[0]
            direction = "above" if row[figure] > baseline[figure] else "below"
            name = str(baseline[label]).split(" (vs. ")[0]
            found[(table, str(row[label]))] = Conclusion(table, str(row[label]), name, direction)
    return found


def conclusion_changes(
    here: dict[tuple[str, str], Conclusion], committed: dict[tuple[str, str], Conclusion]
) -> list[str]:
    """Each committed conclusion the rerun does not hold (lost or reversed) and each it adds."""
    changes = []
    for key, claim in committed.items():
        if key not in here:
            changes.append(f"{claim.text()}: not marked here")
        elif here[key].direction != claim.direction:
            changes.append(f"{claim.text()}: {here[key].direction} here")
    for key in here.keys() - committed.keys():
        changes.append(f"{here[key].text()} here: not marked in the committed study")
    return changes


def table_texts(root: Path, study: str, committed: bool) -> dict[str, str]:
    """The marked tables' csv text of a study: the working tree's, or git's HEAD's."""
    found = {}
    for table in MARKED_TABLES:
        relative = paths.table_file(table, "csv", study)
        if committed:
            shown = subprocess.run(["git", "show", f"HEAD:{relative}"], cwd=root,
                                   capture_output=True, text=True)  # fmt: skip
            if shown.returncode == 0:
                found[table] = shown.stdout
        elif (Path(root) / relative).is_file():
            found[table] = (Path(root) / relative).read_text(encoding="utf-8")
    return found
