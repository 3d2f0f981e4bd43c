"""What a validated config asks the workflow for, read from the config in one place.

The Snakefile builds one `Plan` from its config; the rules, their input functions
(rules/common.smk) and their look-ups (`lookup(within=runs)`: `RunPlan.sheet`) ask its four
parts, one per concern:
- `plan.data`: datasets, their splits and the prepared (BPE, binarized) files;
- `plan.runs`: the training runs (experiments and their seeds), their settings and baselines;
- `plan.outputs`: the files the runs make: models, translations, scores;
- `plan.report`: tables, figures, the run record and the study's GPU bill.
Plain Python, so that every look-up is unit-tested without Snakemake.
"""

from __future__ import annotations

from aiayn.config.plan.data import DataPlan
from aiayn.config.plan.outputs import OutputPlan
from aiayn.config.plan.report import FIGURES, PARSING_FIGURES, TABLES, ReportPlan
from aiayn.config.plan.runs import RunPlan

__all__ = ["FIGURES", "PARSING_FIGURES", "TABLES", "Plan"]


class Plan:
    """Look-ups over one validated config (schema defaults filled in)."""

    def __init__(self, config: dict):
        self.config = config
        self.study = config["study"]
        self.data = DataPlan(config)
        self.runs = RunPlan(config, self.data)
        self.outputs = OutputPlan(self.study, self.runs)
        self.report = ReportPlan(config, self.data, self.runs, self.outputs)
