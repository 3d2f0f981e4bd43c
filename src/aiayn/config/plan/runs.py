"""The study's training runs: each experiment and its other seeds, what the trainer and the
decoder read for each, which runs parse or translate, and which run each is tested against."""

from __future__ import annotations

from dataclasses import asdict

from aiayn.config.experiments import resolve, resolve_evaluation
from aiayn.config.plan.data import DataPlan
from aiayn.errors import InputError


class RunPlan:
    def __init__(self, config: dict, data: DataPlan):
        self.config, self.data, self.study = config, data, config["study"]
        self.seeds = seed_runs(config["experiments"])  # run name -> (experiment, seed index)

    def names(self) -> list[str]:
        """Every training run: each experiment, then its other seeds (`<name>.seed<k>`). Each
        is trained, decoded and scored on its own; tables group them by experiment."""
        return list(self.seeds)

    def groups(self) -> list[str]:
        """The experiments as the config names them, each one or more seeds."""
        return list(self.config["experiments"])

    def group_of(self, name: str) -> str:
        return self.seeds[name][0]

    def seed_index(self, name: str) -> int:
        """1 for an experiment's first seed (the run named as the experiment), k for seed k."""
        return self.seeds[name][1]

    def seeds_of(self, group: str) -> list[str]:
        """The runs of one experiment, first seed first."""
        return [run for run, (owner, _) in self.seeds.items() if owner == group]

    def entry(self, name: str) -> dict:
        """A run's settings: its experiment's, with its name and its own `train.seed`."""
        if name not in self.seeds:
            raise InputError(
                f"experiment {name!r} is not in the study's `experiments` (study "
                f"{self.study!r}: {self.names()}); a preset's experiments need its "
                "--configfile"
            )
        group, index = self.seeds[name]
        entry = {"name": name, **self.config["experiments"][group], "group": group}
        if index > 1:
            entry["train"] = {**entry["train"], "seed": entry["train"]["seed"] + index - 1}
        return entry

    def sheet(self) -> dict[str, dict]:
        """One row per run, what the rules look up (`lookup(dpath="{experiment}/nodes",
        within=runs)`): the run's settings (`entry`), what it needs of its dataset, and for a
        translation its baseline and, for an experiment, its seeds' runs and `train_seeds`."""
        translating = self.translators()
        rows = {}
        for name in self.names():
            entry = self.entry(name)
            data = self.data.entry(entry["dataset"])
            row = {**entry, "splits": data["splits"], "target_lang": data["langs"][1]}
            row["linearization"] = data.get("linearization")
            if name in translating:
                row["baseline"] = self.baseline_of(name)
                row["baseline_group"] = self.baseline_group(name)
            row["seed_runs"] = self.seeds_of(name)
            row["train_seeds"] = [self.entry(run)["train"]["seed"] for run in row["seed_runs"]]
            rows[name] = row
        return rows

    def dataset(self, name: str) -> str:
        """The name of the dataset a run trains and is scored on."""
        return self.entry(name)["dataset"]

    def dev_split(self, name: str) -> str:
        return self.entry(name)["dev_split"]

    def trainer_spec(self, name: str) -> dict:
        """What the trainer reads (runs/{name}/experiment.json): model, training settings, data."""
        return resolve(self.entry(name), self.config["datasets"])

    def evaluation(self, name: str) -> dict:
        """Decode settings, evaluation splits and paper row of a run."""
        return resolve_evaluation(self.entry(name), self.config["datasets"])

    def decode_settings(self, name: str) -> dict:
        """The checked decode settings (aiayn.decode.settings.DecodeSettings) as a dict, every
        default filled in."""
        return asdict(self.evaluation(name)["decode"])

    def check(self) -> None:
        """Resolve every run once, so that a bad one is reported before any job runs."""
        for entry in map(self.entry, self.names()):
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

    def warnings(self) -> list[str]:
        """What the plan runs as written but likely not as meant: said before any job (a dry
        run and `aiayn config` too)."""
        return self.early_stopping_that_cannot_stop() + self.averaging_short_of_checkpoints()

    def averaging_short_of_checkpoints(self) -> list[str]:
        """A warning per experiment whose steps write fewer checkpoints than `average_last`:
        its final model averages only those (and the tables would call it the average of the
        last average_last). Said only where the count is known: no time-based checkpoints."""
        found = []
        for group in self.groups():
            train = self.trainer_spec(group)["train"]
            every, steps = train["checkpoint_every_steps"], train["max_steps"]
            if train["checkpoint_every_minutes"] is not None:
                continue
            written = -(-steps // every) if every else 1  # every `every` steps, and the last
            if train["average_last"] > written:
                how = f"every {every} steps" if every else "the last step only"
                more = ("train more steps (max_steps)" if every == 1
                        else "save more often (checkpoint_every_steps)")  # fmt: skip
                found.append(
                    f"experiment {group!r}: average_last {train['average_last']} but the run "
                    f"writes {written} checkpoint{'s' * (written > 1)} ({how}, to max_steps "
                    f"{steps}): its final model averages {written}. Lower average_last to at "
                    f"most {written}, or {more}"
                )
        return found

    def early_stopping_that_cannot_stop(self) -> list[str]:
        """A warning per experiment whose early stopping can never end it before `max_steps`:
        the first dev evaluation sets the best, so the earliest stop is `patience` evaluations
        after it. Not an error: a first stage that a later, larger `max_steps` continues is a
        plan (the checkpoint keeps the count), and this says so before any step is trained."""
        found = []
        for group in self.groups():
            train = self.trainer_spec(group)["train"]
            metric, patience = train["early_stopping_metric"], train["early_stopping_patience"]
            earliest = train["dev_every_steps"] * (patience + 1)
            if metric is not None and earliest >= train["max_steps"]:
                found.append(
                    f"experiment {group!r}: early stopping on {metric} cannot end it before "
                    f"max_steps {train['max_steps']}: dev is evaluated every "
                    f"{train['dev_every_steps']} steps (dev_every_steps) and the earliest stop "
                    f"is {patience} evaluations after the first (early_stopping_patience), at "
                    f"step {earliest}. Lower either to let it stop early, or keep them if a "
                    "larger max_steps will continue this run"
                )
        return found

    def parsers(self) -> list[str]:
        """Runs that parse (Table 4): scored by EVALB, not BLEU."""
        treebanks = self.data.treebanks()
        return [n for n in self.names() if self.dataset(n) in treebanks]

    def translators(self) -> list[str]:
        """Runs that translate (Tables 2 and 3, the figures)."""
        parsing = self.parsers()
        return [name for name in self.names() if name not in parsing]

    def scored_decodes(self, name: str) -> list[tuple[str, str]]:
        """(checkpoint, split) pairs scored for a run: the averaged model on the dev split and
        every evaluation split (Table 2), the last checkpoint on the dev split (Table 3, as the
        paper: no averaging; beside the averaged one it makes the averaging figure)."""
        dev = self.dev_split(name)
        splits = dict.fromkeys([dev, *self.evaluation(name)["eval_splits"]])
        return [("averaged", split) for split in splits] + [("last", dev)]

    def baseline_group(self, name: str) -> str:
        """The experiment a run's scores are tested against: `report.baseline` where it
        translates the same dataset, else the dataset's first experiment."""
        dataset = self.dataset(name)
        translating = self.translators()
        same_data = [
            group
            for group in self.groups()
            if group in translating and self.dataset(group) == dataset
        ]
        chosen = self.config["report"]["baseline"]
        return chosen if chosen in same_data else same_data[0]

    def baseline_of(self, name: str) -> str:
        """The baseline's run a run is paired with: the one of the same seed, else its first."""
        runs = self.seeds_of(self.baseline_group(name))
        index = self.seed_index(name)
        return runs[index - 1] if index <= len(runs) else runs[0]

    def seeded_groups(self) -> list[str]:
        """Translation experiments summarised over seeds: those of more than one seed, and those
        tested against a baseline of more than one (the test counts the baseline's spread)."""
        translating = self.translators()

        def several_seeds(group: str) -> bool:
            return len(self.seeds_of(group)) > 1

        return [
            group
            for group in self.groups()
            if group in translating
            and (several_seeds(group) or several_seeds(self.baseline_group(group)))
        ]


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
