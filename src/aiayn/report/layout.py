"""Tables 2, 3 and 4 as the paper prints them, in Markdown and LaTeX, to paste into a paper.

The paper's columns and rounding (BLEU and F1 one decimal, perplexity two, cost as 3.3 · 10^18),
the paper's rows first and ours labelled; a mean over seeds is one cell, `mean ± sd (seeds)`, and
a significant difference from the baseline a mark with a one-line footnote. Every other figure
(intervals, p, chrF, counted FLOPs, devices, signatures) stays in the table's csv and
`*_detail.md` (aiayn.report.tables).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from aiayn.model import count_parameters
from aiayn.model_config import TransformerConfig
from aiayn.paper import TABLE2, TABLE2_PAIRS, TABLE2_ROW_OF, TABLE4
from aiayn.report import tables
from aiayn.report.parsing_table import BASELINE_NAMES, describe_split
from aiayn.report.tables import ExperimentResult

MARK = "*"
SEEDS_FOOTNOTE = "a ± s (n): mean and standard deviation over n training seeds."


@dataclass
class Score:
    """A score cell: one value, or a mean with its sd over seeds, marked where it differs
    significantly from the baseline's."""

    value: float | None
    digits: int = 1
    sd: float | None = None
    seeds: int = 1
    marked: bool = False

    def render(self, latex: bool) -> str:
        if self.value is None:
            return ""
        text = f"{self.value:.{self.digits}f}"
        if self.seeds > 1 and self.sd is not None:
            pm = r"$\pm$" if latex else "±"
            text += f" {pm} {self.sd:.{self.digits}f} ({self.seeds})"
        if self.marked:
            text += f"$^{MARK}$" if latex else MARK
        return text


def printed_digits(value: float | None) -> int:
    """The decimals the paper printed a figure of its own with (23.75, 24.6): kept as printed."""
    return 1 if value is None else max(1, len(repr(value).partition(".")[2]))


@dataclass
class Cost:
    """Training FLOPs as the paper prints them: 3.3 · 10^18."""

    flops: float | None

    def render(self, latex: bool) -> str:
        if self.flops is None:
            return ""
        exponent = math.floor(math.log10(self.flops))
        mantissa = round(self.flops / 10**exponent, 1)
        if mantissa >= 10:  # 9.96e18 rounds to 10.0: print 1.0 · 10^19
            mantissa, exponent = mantissa / 10, exponent + 1
        if latex:
            return rf"${mantissa:.1f} \cdot 10^{{{exponent}}}$"
        return f"{mantissa:.1f} · 10^{exponent}"


@dataclass
class Layout:
    """A table as the paper lays it out: `groups` spans over the column heads (LaTeX
    \\multicolumn, Markdown folds them into the heads), ours after a rule below the paper's."""

    name: str
    caption: str
    columns: list[str]
    rows: list[list] = field(default_factory=list)
    groups: list[tuple[str, int]] = field(default_factory=list)  # (text, columns spanned)
    rule_before: set[int] = field(default_factory=set)  # row indices
    footnotes: list[str] = field(default_factory=list)


def cell(value, latex: bool) -> str:
    if isinstance(value, Score | Cost):
        return value.render(latex)
    text = "" if value is None else str(value)
    return latex_escape(text) if latex else text.replace("|", "\\|")


def latex_escape(text: str) -> str:
    for plain, escaped in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("#", r"\#"),
        ("_", r"\_"),
        ("$", r"\$"),
        ("{", r"\{"),
        ("}", r"\}"),
        ("~", r"\textasciitilde{}"),
        ("^", r"\^{}"),
        ("±", r"$\pm$"),
        ("·", r"$\cdot$"),
        ("ε", r"$\epsilon$"),
        ("×", r"$\times$"),
    ):
        text = text.replace(plain, escaped)
    return text


def heads(layout: Layout) -> list[str]:
    """The column heads with their group's name folded in (Markdown has no spans)."""
    named, index = list(layout.columns), 0
    for text, span in layout.groups:
        for column in range(index, index + span):
            if text:
                named[column] = f"{text} {named[column]}"
        index += span
    return named


NUMBER = re.compile(r"[-+]?\d[\d.,]*(e[-+]?\d+)?K?")  # 0.1, 512, 1e-09, 100K


def numeric(value) -> bool:
    """Whether a cell holds a figure (a score, a cost, a number, a count such as 100K)."""
    if isinstance(value, Score | Cost | int | float):
        return True
    return isinstance(value, str) and NUMBER.fullmatch(value) is not None


def alignments(layout: Layout) -> list[str]:
    """Markdown's alignment row: figures to the right, text (names, settings) to the left."""
    marks = []
    for index in range(len(layout.columns)):
        cells = [row[index] for row in layout.rows if row[index] not in (None, "")]
        marks.append("---:" if cells and all(map(numeric, cells)) else ":---")
    return marks


def markdown(layout: Layout) -> str:
    lines = [layout.caption, "", "| " + " | ".join(heads(layout)) + " |"]
    lines.append("|" + "|".join(alignments(layout)) + "|")
    for row in layout.rows:
        lines.append("| " + " | ".join(cell(value, False) for value in row) + " |")
    return "\n".join([*lines, "", *layout.footnotes]).rstrip() + "\n"


def latex(layout: Layout) -> str:
    """A booktabs table: \\caption, \\label{tab:<name>}, the footnotes under the rule."""
    width = len(layout.columns)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(layout.caption)}}}",
        rf"\label{{tab:{layout.name}}}",
        rf"\begin{{tabular}}{{l{'c' * (width - 1)}}}",
        r"\toprule",
    ]
    if layout.groups:
        spans, rules, start = [], [], 1
        for text, span in layout.groups:
            spans.append(
                rf"\multicolumn{{{span}}}{{c}}{{{latex_escape(text)}}}"
                if span > 1
                else latex_escape(text)
            )
            if text and span > 1:
                rules.append(rf"\cmidrule(lr){{{start}-{start + span - 1}}}")
            start += span
        lines += [" & ".join(spans) + r" \\", "".join(rules)]
    lines.append(" & ".join(latex_escape(column) for column in layout.columns) + r" \\")
    lines.append(r"\midrule")
    for index, row in enumerate(layout.rows):
        if index in layout.rule_before:
            lines.append(r"\midrule")
        lines.append(" & ".join(cell(value, True) for value in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if layout.footnotes:
        notes = r" \\ ".join(latex_escape(note) for note in layout.footnotes)
        lines += [r"\par\smallskip", rf"{{\footnotesize {notes}\par}}"]
    return "\n".join([*lines, r"\end{table}"]) + "\n"


def significance_note(results: list[ExperimentResult], significance: float) -> str:
    """The mark's footnote: which baseline, which test."""
    seeded = any(result.seed_scores for result in results)
    test = "Welch's t-test over seeds" if seeded else "sacreBLEU's paired bootstrap"
    baseline = next(
        (
            r.group
            for r in results
            for rec in r.scores.values()
            if (rec.get("paired_bootstrap") or {}).get("is_baseline")
        ),
        "the baseline",
    )
    return (
        f"{MARK} sacreBLEU differs from {baseline}'s at p < {significance:g} ({test}; "
        "p and intervals in the csv)."
    )


def seed_test_of(record: dict, over_seeds: dict | None) -> dict:
    return (over_seeds or {}).get("test") or record.get("paired_bootstrap") or {}


def bleu_score(record, over_seeds, runs: int, significance: float, metric: str) -> Score:
    test = seed_test_of(record, over_seeds)
    marked = not test.get("is_baseline") and (test.get("p_value") or 1.0) < significance
    if over_seeds is not None:
        figures = over_seeds[metric]
        return Score(figures["mean"], sd=figures["sd"], seeds=runs, marked=marked)
    return Score(record[metric]["score"], marked=marked)


def table2(results: list[ExperimentResult], significance: float = 0.05) -> Layout:
    """Model | BLEU EN-DE | EN-FR | Training cost EN-DE | EN-FR: the paper's rows, then ours
    (averaged models, the paper's tokenized BLEU on each test split); an experiment compared
    with the paper's base or big shares its row with the same experiment of the other pair."""
    layout = Layout(
        "table2",
        "Table 2, regenerated: BLEU on newstest2014 and training cost, the paper's rows "
        "(Vaswani et al. 2017) and ours (averaged models, tokenized BLEU with compounds split as "
        "the paper's, on the test split named; cost as the paper's: hours × devices × sustained "
        "fp32 TFLOPS).",
        ["Model", "EN-DE", "EN-FR", "EN-DE", "EN-FR"],
        groups=[("", 1), ("BLEU", 2), ("Training Cost (FLOPs)", 2)],
    )
    for model, *figures in TABLE2:
        bleu = [Score(value, printed_digits(value)) for value in figures[:2]]
        layout.rows.append([model, *bleu, Cost(figures[2]), Cost(figures[3])])
    layout.rule_before.add(len(layout.rows))
    ours: dict[tuple, list] = {}
    for runs in tables.by_experiment(results):
        first = runs[0]
        if first.pair not in TABLE2_PAIRS:
            continue
        bleu_column = 1 if first.pair == "en-de" else 2
        cost = Cost(tables.mean_of([tables.paper_way_cost(run.summary) for run in runs]))
        for (checkpoint, split), record in first.scores.items():
            if checkpoint != "averaged" or split == first.dev_split:
                continue
            key = (TABLE2_ROW_OF.get(first.paper_row or "") or first.group, split)
            if key in ours and ours[key][bleu_column].value is not None:
                key = (first.group, split)  # that pair's cell is taken: a row of its own
            row = ours.setdefault(key, ["", Score(None), Score(None), Cost(None), Cost(None)])
            over_seeds = first.seed_scores.get((checkpoint, split))
            row[bleu_column] = bleu_score(
                record, over_seeds, len(runs), significance, "tokenized_bleu"
            )
            row[bleu_column + 2] = cost
            row[0] = " / ".join(filter(None, [row[0], first.group]))
    for (_, split), row in ours.items():
        row[0] = f"{row[0]} (ours, {split})"
        layout.rows.append(row)
    layout.footnotes = footnotes(results, significance)
    return layout


def footnotes(results: list[ExperimentResult], significance: float) -> list[str]:
    notes = []
    if any(result.seed_scores for result in results):
        notes.append(SEEDS_FOOTNOTE)
    if any(
        seed_test_of(record, result.seed_scores.get(key)).get("p_value") is not None
        for result in results
        for key, record in result.scores.items()
    ):
        notes.append(significance_note(results, significance))
    return notes


TABLE3_COLUMNS = [
    "",
    "N",
    "d_model",
    "d_ff",
    "h",
    "d_k",
    "d_v",
    "P_drop",
    "ε_ls",
    "train steps",
    "PPL (dev)",
    "BLEU (dev)",
    "params ×10^6",
]


def table3(results: list[ExperimentResult], significance: float = 0.05) -> Layout:
    """The paper's columns; each of our experiments (its last checkpoint on its dev split,
    the paper's tokenized BLEU) under the paper's row it varies."""
    layout = Layout(
        "table3",
        "Table 3, regenerated: variations on the Transformer, the paper's rows (EN-DE "
        "newstest2013, base-size models, 37000-token vocabulary) each followed by ours (last "
        "checkpoint, no averaging, on the experiment's dev split; PPL per BPE token).",
        TABLE3_COLUMNS,
    )
    for runs in tables.by_experiment(results):
        first = runs[0]
        if first.paper_row:
            paper = tables.paper_table3_row(first.paper_row)
            layout.rows.append(
                [
                    first.paper_row,
                    *architecture_cells(paper),
                    steps(paper["train steps"]),
                    Score(paper["dev PPL"], 2),
                    Score(paper["dev BLEU (tok.)"]),
                    Score(paper["params (M)"], 0),
                ]
            )
        config = TransformerConfig(**first.model)
        key = ("last", first.dev_split)
        record, over_seeds = first.scores.get(key), first.seed_scores.get(key)
        perplexities = [run.summary["dev_ppl"] for run in runs]
        ppl = Score(tables.mean_of(perplexities), 2, tables.spread(perplexities), len(runs))
        bleu = (
            bleu_score(record, over_seeds, len(runs), significance, "tokenized_bleu")
            if record
            else Score(None)
        )
        millions = count_parameters(config) / 1e6
        ours = {**tables.architecture(config), "eps_ls": first.train["label_smoothing"]}
        layout.rows.append(
            [
                f"{first.group} (ours, {first.dev_split})",
                *architecture_cells(ours),
                steps(first.summary["steps"]),
                ppl,
                bleu,
                Score(millions, 0 if millions >= 10 else 1),
            ]
        )
    layout.footnotes = footnotes(results, significance)
    return layout


def architecture_cells(row: dict) -> list:
    return [
        row["N"],
        row["d_model"],
        row["d_ff"],
        row["h"],
        row["d_k"],
        row["d_v"],
        row["P_drop"],
        row["eps_ls"],
    ]


def steps(count: int) -> str:
    """100000 as the paper's 100K."""
    return f"{count // 1000}K" if count >= 1000 and count % 1000 == 0 else str(count)


def table4(results: list[ExperimentResult], training: dict[str, str], baselines=()) -> Layout:
    """Parser | Training | WSJ 23 F1: the paper's rows, the trivial baselines, then ours (the
    averaged model on each test split, named in the last column)."""
    layout = Layout(
        "table4",
        "Table 4, regenerated: English constituency parsing, the paper's rows (F1 on WSJ "
        "section 23) and ours with trivial baselines on the split named (EVALB's rules, "
        "COLLINS.prm); a treebank sample's figures are not comparable to WSJ 23.",
        ["Parser", "Training", "F1", "Test set"],
    )
    for parser, setting, f1 in TABLE4:
        layout.rows.append([parser, setting, Score(f1), "WSJ 23"])
    layout.rule_before.add(len(layout.rows))
    for record in baselines:
        for name, scores in record["baselines"].items():
            layout.rows.append(
                [
                    BASELINE_NAMES[name].format(**record["labels"]) + " (baseline)",
                    "none",
                    Score(scores["all"]["f1"]),
                    describe_split(record),
                ]
            )
    for result in results:
        for (checkpoint, split), record in result.scores.items():
            if checkpoint == "averaged" and split != result.dev_split:
                layout.rows.append(
                    [
                        f"{result.name} (ours)",
                        training[result.name],
                        Score(record["evalb"]["all"]["f1"]),
                        describe_split(record),
                    ]
                )
    return layout


def from_frame(name: str, frame, caption: str) -> Layout:
    """A table with no counterpart in the paper (the parameter counts) as it is, its numbers
    as short as they are exact (`g`)."""
    rows = [list(map(short, row)) for row in frame.astype(object).itertuples(index=False)]
    return Layout(name, caption, [str(column) for column in frame.columns], rows)


def short(value):
    """A frame's cell: empty for a missing one, a float as short as it is exact."""
    if value is None or value != value:  # None or NaN
        return ""
    return f"{value:g}" if isinstance(value, float) else value
