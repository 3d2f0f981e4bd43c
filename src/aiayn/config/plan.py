"""What a validated config asks the workflow for: its datasets, experiments and the files each
stage makes, read from the config in one place.

The Snakefile builds one `Plan` from its config; the rules and their input functions
(rules/common.smk) ask it for entries, names and file lists. Plain Python, so that every look-up
is unit-tested without Snakemake.
"""

from __future__ import annotations

from dataclasses import asdict

from aiayn.config import gpu_hours, paths
from aiayn.config.experiments import resolve, resolve_evaluation
from aiayn.errors import InputError

TABLES = ("params", "table2", "table3", "table4")
FIGURES = ("learning_rate", "loss_curves", "averaging")
PARSING_FIGURES = ("parse_curves",)  # parsers that parse dev as they train


class Plan:
    """Look-ups over one validated config (schema defaults filled in)."""

    def __init__(self, config: dict):
        self.config = config
        self.study = config["study"]
        self.runs = seed_runs(config["experiments"])  # run name -> (experiment, seed index)

    # ---- datasets ---------------------------------------------------------------------

    def dataset_entry(self, name: str) -> dict:
        try:
            return self.config["datasets"][name]
        except KeyError:
            raise ValueError(
                f"dataset {name!r} is not defined under `datasets` in the config "
                f"(defined: {sorted(self.config['datasets'])})"
            ) from None

    def dataset_pair(self, name: str) -> str:
        """The dataset's language pair as file names spell it: en-de."""
        return "-".join(self.dataset_entry(name)["langs"])

    def split_sides(self, stage: str, name: str, split: str, suffixes=("",)) -> list[str]:
        """The files of one split at one stage, source side then target, each with every suffix."""
        sides = paths.split_sides(stage, name, split, self.dataset_entry(name)["langs"])
        return [side + suffix for side in sides for suffix in suffixes]

    def split_source(self, name: str, split: str) -> dict:
        """Where a split comes from (its `splits` entry), also named in score files and tables."""
        splits = self.dataset_entry(name)["splits"]
        if split not in splits:
            raise ValueError(f"dataset {name!r} has no split {split!r} (splits: {sorted(splits)})")
        return splits[split]

    def treebank_datasets(self) -> list[str]:
        """Datasets whose splits are Penn Treebank files: parsed (Table 4), not translated."""
        names = []
        for name, spec in self.config["datasets"].items():
            sources = {split["source"] for split in spec["splits"].values()}
            if "ptb" in sources and sources != {"ptb"}:
                raise ValueError(
                    f"dataset {name!r} mixes `ptb` splits with {sorted(sources - {'ptb'})} ones: "
                    "every split of a parsing dataset must come from treebank files (its gold "
                    "trees are read from them); put the other splits in a dataset of their own"
                )
            if "ptb" in sources:
                names.append(name)
        return names

    def prepared_data_files(self) -> list[str]:
        """The BPE model and binarized splits of every dataset in `prepare` or that an
        experiment uses."""
        files = []
        used = [entry["dataset"] for entry in self.config["experiments"].values()]
        for name in dict.fromkeys(self.config["prepare"] + used):
            files.append(paths.subword_file("model", name))
            for split in self.dataset_entry(name)["splits"]:
                files += self.split_sides("bin", name, split, (".bin", ".idx"))
        return files

    # ---- experiments ------------------------------------------------------------------

    def experiment_names(self) -> list[str]:
        """Every training run: each experiment, then its other seeds (`<name>.seed<k>`). Each
        is trained, decoded and scored on its own; tables group them by experiment."""
        return list(self.runs)

    def groups(self) -> list[str]:
        """The experiments as the config names them, each one or more seeds."""
        return list(self.config["experiments"])

    def seeds_of(self, group: str) -> list[str]:
        """The runs of one experiment, first seed first."""
        return [run for run, (owner, _) in self.runs.items() if owner == group]

    def experiment_entry(self, name: str) -> dict:
        """A run's settings: its experiment's, with its name and its own `train.seed`."""
        if name not in self.runs:
            raise InputError(
                f"experiment {name!r} is not in the study's `experiments` (study "
                f"{self.study!r}: {self.experiment_names()}); a preset's experiments need its "
                "--configfile"
            )
        group, index = self.runs[name]
        entry = {"name": name, **self.config["experiments"][group], "group": group}
        if index > 1:
            entry["train"] = {**entry["train"], "seed": entry["train"]["seed"] + index - 1}
        return entry

    def experiment_dataset(self, name: str) -> str:
        """The name of the dataset an experiment trains and is scored on."""
        return self.experiment_entry(name)["dataset"]

    def trainer_spec(self, name: str) -> dict:
        """What the trainer reads (runs/{name}/experiment.json): model, training settings, data."""
        return resolve(self.experiment_entry(name), self.config["datasets"])

    def evaluation_settings(self, name: str) -> dict:
        """Decode settings, evaluation splits and paper row of an experiment."""
        return resolve_evaluation(self.experiment_entry(name), self.config["datasets"])

    def decode_settings(self, name: str) -> dict:
        return asdict(self.evaluation_settings(name)["decode"])

    def check_experiments(self) -> None:
        """Resolve every experiment once, so that a bad one is reported before any job runs."""
        for entry in map(self.experiment_entry, self.experiment_names()):
            resolve(entry, self.config["datasets"])
            resolve_evaluation(entry, self.config["datasets"])
        names = self.groups()
        baseline = self.config["report"]["baseline"]
        if baseline is not None and baseline not in names:
            raise InputError(
                f"report.baseline {baseline!r} is not an experiment of the config "
                f"(experiments: {names}); name one, or leave it out to test each "
                "experiment against the first of its dataset"
            )

    def parsing_experiments(self) -> list[str]:
        """Experiments that parse (Table 4): scored by EVALB, not BLEU."""
        treebanks = self.treebank_datasets()
        return [n for n in self.experiment_names() if self.experiment_dataset(n) in treebanks]

    def translation_experiments(self) -> list[str]:
        """Experiments that translate (Tables 2 and 3, the figures)."""
        parsing = self.parsing_experiments()
        return [name for name in self.experiment_names() if name not in parsing]

    def parse_baseline_files(self, names=None) -> list[str]:
        """Trivial parsers' scores on each split the parsers (or `names`) are tested on."""
        files = []
        for name in self.parsing_experiments() if names is None else names:
            dataset = self.experiment_dataset(name)
            dev = self.experiment_entry(name)["dev_split"]
            files += [
                paths.parse_baseline_file(dataset, split, self.study)
                for kind, split in self.scored_decodes(name)
                if kind == "averaged" and split != dev
            ]
        return list(dict.fromkeys(files))

    def averaged_models(self) -> list[str]:
        return [paths.averaged_model(name) for name in self.experiment_names()]

    def scored_decodes(self, name: str) -> list[tuple[str, str]]:
        """(checkpoint, split) pairs scored for an experiment: the averaged model on the dev split
        and every evaluation split (Table 2), the last checkpoint on the dev split (Table 3, as
        the paper: no averaging; beside the averaged one it makes the averaging figure)."""
        dev = self.experiment_entry(name)["dev_split"]
        splits = dict.fromkeys([dev, *self.evaluation_settings(name)["eval_splits"]])
        return [("averaged", split) for split in splits] + [("last", dev)]

    def baseline_group(self, name: str) -> str:
        """The experiment a run's scores are tested against: `report.baseline` where it
        translates the same dataset, else the dataset's first experiment."""
        dataset = self.experiment_dataset(name)
        translating = self.translation_experiments()
        same_data = [
            group
            for group in self.groups()
            if group in translating and self.experiment_dataset(group) == dataset
        ]
        chosen = self.config["report"]["baseline"]
        return chosen if chosen in same_data else same_data[0]

    def baseline_of(self, name: str) -> str:
        """The baseline's run a run is paired with: the one of the same seed, else its first."""
        group = self.baseline_group(name)
        runs = self.seeds_of(group)
        index = self.runs[name][1]
        return runs[index - 1] if index <= len(runs) else runs[0]

    def seeded_groups(self) -> list[str]:
        """Translation experiments summarised over seeds: those of more than one seed, and those
        tested against a baseline of more than one (the test counts the baseline's spread)."""
        translating = self.translation_experiments()

        def several_seeds(group: str) -> bool:
            return len(self.seeds_of(group)) > 1

        return [
            group
            for group in self.groups()
            if group in translating
            and (several_seeds(group) or several_seeds(self.baseline_group(group)))
        ]

    def seed_score_files(self, checkpoint: str | None = None, names=None) -> list[str]:
        """Each seeded experiment's summary over seeds, per scored decode."""
        return [
            paths.seed_score_file(group, kind, split, self.study)
            for group in self.seeded_groups()
            if names is None or group in names
            for kind, split in self.scored_decodes(group)
            if checkpoint in (None, kind)
        ]

    def score_files(self, checkpoint: str | None = None, names=None) -> list[str]:
        """Score files of every experiment (or of `names`), or of its averaged or last model."""
        return [
            paths.score_file(name, kind, split, self.study)
            for name in (self.experiment_names() if names is None else names)
            for kind, split in self.scored_decodes(name)
            if checkpoint in (None, kind)
        ]

    def translation_files(self) -> list[str]:
        """The translations (or linearized trees) behind every score file: a deliverable of their
        own, so that one deleted (a forced decode killed midway) is made again though its score
        file is still there."""
        return [
            paths.decode_output("hyp", name, kind, split)
            for name in self.experiment_names()
            for kind, split in self.scored_decodes(name)
        ]

    def gpu_hours_report(self) -> str:
        """The expected GPU-hours of every training job of the study, and their total."""
        costs = [
            gpu_hours.training_cost(name, self.experiment_entry(name), self.trainer_spec(name))
            for name in self.experiment_names()
        ]
        return gpu_hours.report(costs)

    # ---- report -----------------------------------------------------------------------

    def attention_figures(self) -> list[str]:
        """The attention maps' output patterns: each sentence's heads, and the chosen word's."""
        count = len(self.config["report"]["attention_sentences"])
        views = [f"sentence{i + 1}" for i in range(count)] + ["word"]
        return [
            paths.attention_figure(view, suffix, study=self.study)
            for view in views
            for suffix in ("png", "pdf")
        ]

    def report_files(self) -> list[str]:
        """Tables and figures of the trained experiments: Tables 2 and 3 and the figures of those
        that translate, Table 4 of those that parse, and the parameter counts always."""
        files = [self.table_file("params")]
        if self.parsing_experiments():
            files.append(self.table_file("table4"))
        if self.reported_experiments("parse_curves"):
            files.append(paths.figure_file("parse_curves", study=self.study))
        names = self.translation_experiments()
        if names:
            files += [self.table_file(table) for table in ("table2", "table3")]
            files += [paths.figure_file(figure, study=self.study) for figure in FIGURES]
            files += [  # one seed is enough to look at
                paths.attention_figure("sentence1", experiment=name, study=self.study)
                for name in names
                if self.runs[name][1] == 1
            ]
        return files

    def table_file(self, table: str, suffix: str = "md") -> str:
        return paths.table_file(table, suffix, self.study)

    def train_summaries(self) -> list[str]:
        return [paths.train_summary(name) for name in self.experiment_names()]

    def run_record_inputs(self) -> list[str]:
        """What the study's run record describes: every result file and training summary."""
        return (
            self.train_summaries()
            + self.score_files()
            + self.seed_score_files()
            + self.report_files()
        )

    def report_experiments(self, names: list[str]) -> list[dict]:
        """What the tables and figures need to know of each experiment besides its files."""
        described = []
        for name in names:
            spec = self.trainer_spec(name)
            described.append(
                {
                    "name": name,
                    "group": self.runs[name][0],
                    "pair": self.dataset_pair(self.experiment_dataset(name)),
                    "dev_split": self.experiment_entry(name)["dev_split"],
                    "paper_row": self.evaluation_settings(name)["paper_row"],
                    "model": spec["model"],
                    "train": spec["train"],
                }
            )
        return described

    def reported_experiments(self, name: str) -> list[str]:
        """The experiments a table or figure shows: Table 4 the parsers, the parameter table
        none (it counts the presets), the others the translators."""
        if name == "params":
            return []
        if name == "parse_curves":
            return [
                n
                for n in self.parsing_experiments()
                if self.experiment_entry(n)["train"]["dev_parse_sentences"]
            ]
        return self.parsing_experiments() if name == "table4" else self.translation_experiments()

    def report_inputs(self, name: str) -> dict[str, list[str]]:
        """What table or figure `name` is drawn from: training summaries, scores, training
        records."""
        names = self.reported_experiments(name)
        inputs = {"summaries": [paths.train_summary(n) for n in names]}
        if name in ("table2", "table4"):
            inputs["scores"] = self.score_files("averaged", names)
        elif name == "table3":
            inputs["scores"] = self.score_files("last", names)
        if name in ("table2", "table3"):
            kind = "averaged" if name == "table2" else "last"
            inputs["seed_scores"] = self.seed_score_files(kind, names)
        elif name == "averaging":
            inputs["scores"] = [
                paths.score_file(n, kind, self.experiment_entry(n)["dev_split"], self.study)
                for n in names
                for kind in ("last", "averaged")
            ]
        if name == "parse_curves":  # the trivial trees on each parser's dev split
            inputs["baselines"] = list(
                dict.fromkeys(
                    paths.parse_baseline_file(
                        self.experiment_dataset(n),
                        self.experiment_entry(n)["dev_split"],
                        self.study,
                    )
                    for n in names
                )
            )
        if name == "table4":
            inputs["baselines"] = self.parse_baseline_files(names)
            inputs["train_records"] = [
                paths.split_record("clean", dataset, "train", self.dataset_pair(dataset))
                for dataset in map(self.experiment_dataset, names)
            ]
        return inputs

    def vocabulary_sizes(self) -> dict[str, int]:
        """The BPE vocabulary size of each dataset an experiment translates, for the parameter
        counts beside the paper's (which are at the paper's vocabulary)."""
        used = dict.fromkeys(map(self.experiment_dataset, self.translation_experiments()))
        return {name: self.dataset_entry(name)["subword"]["vocab_size"] for name in used}


def seed_runs(experiments: dict) -> dict[str, tuple[str, int]]:
    """Run names of every experiment's seeds: the first keeps the experiment's name, so that a
    study asking for more seeds reuses the one-seed run; the k-th is `<name>.seed<k>`."""
    runs = {name: (name, 1) for name in experiments}
    for name, entry in experiments.items():
        for index in range(2, entry.get("seeds", 1) + 1):
            run = f"{name}.seed{index}"
            if run in runs:
                raise InputError(
                    f"experiment {name!r} asks for {entry['seeds']} seeds, and its seed {index} "
                    f"would be named {run!r}, which is already an experiment of the config: "
                    f"rename that experiment, or ask {name!r} for fewer seeds"
                )
            runs[run] = (name, index)
    return runs
