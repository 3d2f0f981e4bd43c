"""What the runs make: averaged models, translations, scores and the trivial parsers' scores,
as the lists of files that targets ask for."""

from __future__ import annotations

from aiayn.config import paths
from aiayn.config.plan.runs import RunPlan


class OutputPlan:
    def __init__(self, study: str, runs: RunPlan):
        self.study, self.runs = study, runs

    def averaged_models(self) -> list[str]:
        return [paths.averaged_model(name) for name in self.runs.names()]

    def train_summaries(self, names=None) -> list[str]:
        return [paths.train_summary(n) for n in (self.runs.names() if names is None else names)]

    def score_files(self, checkpoint: str | None = None, names=None) -> list[str]:
        """Score files of every run (or of `names`), or of its averaged or last model."""
        return [
            paths.score_file(name, kind, split, self.study)
            for name in (self.runs.names() if names is None else names)
            for kind, split in self.runs.scored_decodes(name)
            if checkpoint in (None, kind)
        ]

    def seed_score_files(self, checkpoint: str | None = None, names=None) -> list[str]:
        """Each seeded experiment's summary over seeds, per scored decode."""
        return [
            paths.seed_score_file(group, kind, split, self.study)
            for group in self.runs.seeded_groups()
            if names is None or group in names
            for kind, split in self.runs.scored_decodes(group)
            if checkpoint in (None, kind)
        ]

    def translation_files(self) -> list[str]:
        """The translations (or linearized trees) behind every score file: a deliverable of their
        own, so that one deleted (a forced decode killed midway) is made again though its score
        file is still there."""
        return [
            paths.decode_output("hyp", name, kind, split)
            for name in self.runs.names()
            for kind, split in self.runs.scored_decodes(name)
        ]

    def parse_baselines(self, names=None) -> list[str]:
        """Trivial parsers' scores on each split the parsers (or `names`) are tested on."""
        files = []
        for name in self.runs.parsers() if names is None else names:
            dataset, dev = self.runs.dataset(name), self.runs.dev_split(name)
            files += [
                paths.parse_baseline_file(dataset, split, self.study)
                for kind, split in self.runs.scored_decodes(name)
                if kind == "averaged" and split != dev
            ]
        return list(dict.fromkeys(files))
