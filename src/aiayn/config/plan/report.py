"""What the report draws: which tables and figures a study has, what each is drawn from, what
the run record describes, and the study's GPU bill before any job runs."""

from __future__ import annotations

from aiayn.config import gpu_hours, paths
from aiayn.config.plan.data import DataPlan
from aiayn.config.plan.outputs import OutputPlan
from aiayn.config.plan.runs import RunPlan

TABLES = ("params", "table2", "table3", "table4")
FIGURES = ("learning_rate", "loss_curves", "averaging")
PARSING_FIGURES = ("parse_curves",)  # parsers that parse dev as they train


class ReportPlan:
    def __init__(self, config: dict, data: DataPlan, runs: RunPlan, outputs: OutputPlan):
        self.config, self.study = config, config["study"]
        self.data, self.runs, self.outputs = data, runs, outputs

    def files(self) -> list[str]:
        """Tables and figures of the trained runs: Tables 2 and 3 and the figures of those that
        translate, Table 4 of those that parse, and the parameter counts always."""
        files = [self.table_file("params")]
        if self.config.get("complexity", {}).get("enabled"):  # Table 1 measured (rule complexity)
            files += [self.table_file("table1"), paths.figure_file("complexity", study=self.study)]
        if self.runs.parsers():
            files.append(self.table_file("table4"))
        if self.shown("parse_curves"):
            files.append(paths.figure_file("parse_curves", study=self.study))
        names = self.runs.translators()
        if names:
            files += [self.table_file(table) for table in ("table2", "table3")]
            files += [paths.figure_file(figure, study=self.study) for figure in FIGURES]
            if self.config["report"]["attention_sentences"]:
                files += [  # one seed is enough to look at
                    paths.attention_figure("sentence1", experiment=name, study=self.study)
                    for name in names
                    if self.runs.seed_index(name) == 1
                ]
        return files

    def table_file(self, table: str, suffix: str = "md") -> str:
        return paths.table_file(table, suffix, self.study)

    def attention_figures(self) -> list[str]:
        """The attention maps' output patterns: each sentence's heads, and the chosen word's
        (none without sentences: the word is one of the first sentence's)."""
        count = len(self.config["report"]["attention_sentences"])
        views = [f"sentence{i + 1}" for i in range(count)] + ["word"] if count else []
        return [
            paths.attention_figure(view, suffix, study=self.study)
            for view in views
            for suffix in ("png", "pdf")
        ]

    def run_record_inputs(self) -> list[str]:
        """What the study's run record describes: every result file and training summary."""
        outputs = self.outputs
        return (
            outputs.train_summaries()
            + outputs.score_files()
            + outputs.seed_score_files()
            + self.files()
        )

    def described(self, names: list[str]) -> list[dict]:
        """What the tables and figures need to know of each run besides its files."""
        described = []
        for name in names:
            spec = self.runs.trainer_spec(name)
            described.append(
                {
                    "name": name,
                    "group": self.runs.group_of(name),
                    "pair": self.data.pair(self.runs.dataset(name)),
                    "dev_split": self.runs.dev_split(name),
                    "paper_row": self.runs.evaluation(name)["paper_row"],
                    "model": spec["model"],
                    "train": spec["train"],
                }
            )
        return described

    def shown(self, name: str) -> list[str]:
        """The runs a table or figure shows: Table 4 the parsers, the parameter table none (it
        counts the presets), the others the translators."""
        if name == "params":
            return []
        if name == "parse_curves":
            return [
                n for n in self.runs.parsers() if self.runs.entry(n)["train"]["dev_parse_sentences"]
            ]
        return self.runs.parsers() if name == "table4" else self.runs.translators()

    def inputs(self, name: str) -> dict[str, list[str]]:
        """What table or figure `name` is drawn from: training summaries, scores, training
        records."""
        names, outputs, runs = self.shown(name), self.outputs, self.runs
        inputs = {"summaries": outputs.train_summaries(names)}
        if name in ("table2", "table4"):
            inputs["scores"] = outputs.score_files("averaged", names)
        elif name == "table3":
            inputs["scores"] = outputs.score_files("last", names)
        if name in ("table2", "table3"):
            kind = "averaged" if name == "table2" else "last"
            inputs["seed_scores"] = outputs.seed_score_files(kind, names)
        elif name == "averaging":
            inputs["scores"] = [
                paths.score_file(n, kind, runs.dev_split(n), self.study)
                for n in names
                for kind in ("last", "averaged")
            ]
        if name == "parse_curves":  # the trivial trees on each parser's dev split
            inputs["baselines"] = list(
                dict.fromkeys(
                    paths.parse_baseline_file(runs.dataset(n), runs.dev_split(n), self.study)
                    for n in names
                )
            )
        if name == "table4":
            inputs["baselines"] = outputs.parse_baselines(names)
            inputs["train_records"] = [
                paths.split_record("clean", dataset, "train", self.data.pair(dataset))
                for dataset in map(runs.dataset, names)
            ]
        return inputs

    def vocabulary_sizes(self) -> dict[str, int]:
        """The BPE vocabulary size of each dataset a run translates, for the parameter counts
        beside the paper's (which are at the paper's vocabulary)."""
        used = dict.fromkeys(map(self.runs.dataset, self.runs.translators()))
        return {name: self.data.entry(name)["subword"]["vocab_size"] for name in used}

    def gpu_hours(self, code: str | None = None) -> str:
        """The expected GPU-hours of every training job of the study, and their total; `code`:
        the train stage's code version (a run trained by other code starts from step 0)."""
        costs = [
            gpu_hours.training_cost(
                name, self.runs.entry(name), self.runs.trainer_spec(name), code=code
            )
            for name in self.runs.names()
        ]
        return gpu_hours.report(costs)
