"""Tables 2, 3 and 4 as the paper prints them, to paste into a paper (aiayn.report.typeset
writes them as Markdown and LaTeX).

The paper's columns, groups and rounding (BLEU and F1 one decimal, perplexity two, cost as
3.3 · 10^18; the paper's own figures exactly as printed), the paper's rows first and ours below
a rule, named by the split they were scored on; a mean over seeds is one cell, `mean ± sd
(seeds)`, and a mark holds for the whole table (aiayn.report.marks), explained in a footnote.
Every other figure (intervals, raw and adjusted p, chrF, counted FLOPs, devices, signatures)
stays in the table's csv and `*_detail.md` (aiayn.report.tables).
"""

from __future__ import annotations

from aiayn.model import count_parameters
from aiayn.model_config import TransformerConfig
from aiayn.paper import TABLE2, TABLE2_PAIRS, TABLE2_ROW_OF, TABLE3, TABLE4
from aiayn.report import tables
from aiayn.report.marks import Family
from aiayn.report.parsing_table import BASELINE_NAMES, describe_split
from aiayn.report.tables import ExperimentResult
from aiayn.report.typeset import MARK, Cost, Heading, Layout, Score, stacked

SEEDS_FOOTNOTE = "a ± s (n): mean and sample standard deviation over n training seeds."
SAME_SEEDS_FOOTNOTE = "a ± s: mean and sample standard deviation over {n} training seeds."


def printed(text: str | None) -> Score:
    """A figure of the paper's as it printed it (26.30, 24.6)."""
    if text is None:
        return Score(None)
    return Score(float(text), max(1, len(text.partition(".")[2])))


def baseline_name(results: list[ExperimentResult]) -> str:
    return next(
        (r.group for r in results for key in r.scores if tables.test_of(r, key).get("is_baseline")),
        "the baseline",
    )


def seed_counts(results: list[ExperimentResult]) -> set[int]:
    """How many seeds each experiment of the table has, as a set."""
    return {len(runs) for runs in tables.by_experiment(results)}


def footnotes(results: list[ExperimentResult], comparisons: Family) -> list[str]:
    """What `±` and the mark mean, and why rows went unmarked; none where nothing needs it.
    Where every seeded experiment has the same seeds, their count is said once (and
    `show_seed_counts` leaves it out of the cells)."""
    counts, notes = seed_counts(results), []
    if counts - {1}:
        uniform = len(counts) == 1
        notes.append(SAME_SEEDS_FOOTNOTE.format(n=min(counts)) if uniform else SEEDS_FOOTNOTE)
    baseline = baseline_name(results)
    return notes + [note.format(mark=MARK, baseline=baseline) for note in comparisons.notes()]


def show_seed_counts(layout: Layout, results: list[ExperimentResult]) -> None:
    """Each score cell over seeds says its count, `(n)`, unless every seeded experiment has the
    same count, which the footnote then says once."""
    counts = seed_counts(results)
    if not counts - {1}:
        return
    for row in layout.rows:
        for value in row if isinstance(row, list) else ():
            if isinstance(value, Score):
                value.seeds_shown = len(counts) != 1


def bleu_score(result: ExperimentResult, key, runs: int, marked: set, metric: str) -> Score:
    """An experiment's BLEU on one split: its run's, or its mean and sd over seeds."""
    over_seeds = result.seed_scores.get(key)
    is_marked = (result.group, key) in marked
    if over_seeds is not None:
        figures = over_seeds[metric]
        return Score(figures["mean"], sd=figures["sd"], seeds=runs, marked=is_marked)
    return Score(result.scores[key][metric]["score"], marked=is_marked)


def table2(
    results: list[ExperimentResult],
    significance: float = 0.05,
    study: str = "",
    comparisons: Family | None = None,
) -> Layout:
    """Model | BLEU EN-DE | EN-FR | Training cost EN-DE | EN-FR: the paper's rows, then ours
    (averaged models, the paper's tokenized BLEU) under a heading naming each test split; an
    experiment compared with the paper's base or big shares its row with the same experiment
    of the other pair."""
    layout = Layout(
        "table2",
        "Table 2",
        "BLEU and training cost: the paper's rows, on the English-to-German and "
        "English-to-French newstest2014 tests (Vaswani et al., 2017), and, below the rule, ours: "
        "averaged models on the test set each heading names, BLEU tokenized with compounds "
        "split as the paper's, cost as the paper's (hours × devices × sustained fp32 TFLOPS).",
        ["Model", "EN-DE", "EN-FR", "EN-DE", "EN-FR"],
        groups=[("", 1), ("BLEU", 2), ("Training Cost (FLOPs)", 2)],
        study=study,
    )
    for model, de, fr, de_cost, fr_cost in TABLE2:
        costs = (
            [Cost(de_cost, span=2), None] if de_cost == fr_cost else [Cost(de_cost), Cost(fr_cost)]
        )
        layout.rows.append([model, printed(de), printed(fr), *costs])
    if comparisons is None:  # the detail's family, where the caller built it
        comparisons = tables.family(results, tables.table2_keys, significance)
    marked = comparisons.marked()
    ours: dict[str, dict[str, list]] = {}  # test set -> row name -> row
    for runs in tables.by_experiment(results):
        first = runs[0]
        if first.pair not in TABLE2_PAIRS:
            continue
        bleu_column = 1 if first.pair == "en-de" else 2
        cost = Cost(tables.mean_of([tables.paper_way_cost(run.summary) for run in runs]))
        for key in tables.table2_keys(first):
            rows = ours.setdefault(tables.describe_test_set(first.scores[key]), {})
            name = TABLE2_ROW_OF.get(first.paper_row or "") or first.group
            if name in rows and rows[name][bleu_column].value is not None:
                name = first.group  # that pair's cell is taken: a row of its own
            row = rows.setdefault(name, ["", Score(None), Score(None), Cost(None), Cost(None)])
            row[bleu_column] = bleu_score(first, key, len(runs), marked, "tokenized_bleu")
            row[bleu_column + 2] = cost
            row[0] = " / ".join(filter(None, [row[0], first.group]))
    for test_set, rows in ours.items():
        layout.rule_before.add(len(layout.rows))
        layout.rows.append(Heading(f"Ours, on {test_set}"))
        layout.rows += rows.values()
    show_seed_counts(layout, results)
    layout.footnotes = footnotes(results, comparisons) + averaging_notes(results)
    return layout


def averaging_notes(results: list[ExperimentResult]) -> list[str]:
    """Which checkpoints each averaged model of ours averages (train.average_best_by): one
    line for all when they share the rule."""
    rules: dict[str, list[str]] = {}
    for result in results:
        rule = result.summary.get("average_rule")  # train.json; older summaries lack it
        if rule is None:
            continue
        count, averaged = rule["count"], rule.get("averaged", rule["count"])
        said = (f"the last {averaged} checkpoints" if rule["rule"] == "last"
                else f"the {averaged} checkpoints best on {METRIC_NAMES[rule['by']]}")  # fmt: skip
        if averaged < count:  # fewer to average than the rule asks: said, with why
            said += f", not the {count} asked ({rule.get('fewer', 'fewer were there')})"
        elif rule["rule"] == "last":
            said += " (the paper's rule)"
        rules.setdefault(said, []).append(result.group)
    if len(rules) <= 1:
        return [f"Averaged models: {said}." for said in rules]
    return [
        f"Averaged, {', '.join(dict.fromkeys(groups))}: {said}." for said, groups in rules.items()
    ]


METRIC_NAMES = {"dev_bleu": "dev BLEU", "dev_chrf": "dev chrF", "dev_loss": "dev loss"}


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
TABLE3_LATEX_COLUMNS = [
    "",
    "$N$",
    r"$d_{\mathrm{model}}$",
    r"$d_{\mathrm{ff}}$",
    "$h$",
    "$d_k$",
    "$d_v$",
    r"$P_{\mathrm{drop}}$",
    r"$\epsilon_{ls}$",
    r"\shortstack{train\\steps}",
    r"\shortstack{PPL\\(dev)}",
    r"\shortstack{BLEU\\(dev)}",
    r"\shortstack{params\\$\times 10^6$}",
]


def paper_group(row: str) -> str:
    """The paper's name for a row's group: base, (A) to (E), big."""
    return row if row in ("base", "big") else f"({row.partition('_')[0]})"


def table3(
    results: list[ExperimentResult],
    significance: float = 0.05,
    study: str = "",
    comparisons: Family | None = None,
) -> Layout:
    """The paper's columns in its groups (base, (A)-(E), big): in each group the paper's rows
    it varies, a rule, and our experiments that vary it (their last checkpoint on the dev
    split, the paper's tokenized BLEU); experiments with no row of the paper's come last."""
    splits = sorted({result.dev_split for result in results})
    layout = Layout(
        "table3",
        "Table 3",
        "Variations on the Transformer architecture: the paper's rows (English-to-German "
        "newstest2013, base-size models, a 37000-token vocabulary; Vaswani et al., 2017) and, "
        "after a rule in each group, our experiments (last checkpoint, no averaging, on "
        f"{', '.join(splits)}); perplexities per BPE token.",
        TABLE3_COLUMNS,
        latex_columns=TABLE3_LATEX_COLUMNS,
        study=study,
    )
    if comparisons is None:
        comparisons = tables.family(results, tables.table3_keys, significance)
    marked = comparisons.marked()
    groups: dict[str, tuple[list, list]] = {}  # group -> (paper's rows, ours)
    for runs in tables.by_experiment(results):
        first = runs[0]
        group = paper_group(first.paper_row) if first.paper_row else "other"
        paper, ours = groups.setdefault(group, ([], []))
        if first.paper_row and first.paper_row not in {row[0] for row in paper}:
            paper.append([first.paper_row, *paper_cells(first.paper_row)])
        ours.append([first.group, *our_cells(runs, marked)])
    for group, (paper, ours) in sorted(groups.items(), key=lambda item: group_order(item[0])):
        if layout.rows:
            layout.rule_before.add(len(layout.rows))
        for index, row in enumerate(sorted(paper, key=lambda row: list(TABLE3).index(row[0]))):
            layout.rows.append([group if index == 0 else "", *row[1:]])
        if paper:
            layout.light_rule_before.add(len(layout.rows))
        layout.rows += ours
    show_seed_counts(layout, results)
    layout.footnotes = footnotes(results, comparisons)
    return layout


GROUP_ORDER = ["base", "(A)", "(B)", "(C)", "(D)", "(E)", "big", "other"]


def group_order(group: str) -> int:
    return GROUP_ORDER.index(group)


def paper_cells(row: str) -> list:
    paper = tables.paper_table3_row(row)
    return [
        *architecture_cells(paper),
        steps(paper["train steps"]),
        Score(paper["dev PPL"], 2),
        Score(paper["dev BLEU (tok.)"]),
        Score(paper["params (M)"], 0),
    ]


def our_cells(runs: list[ExperimentResult], marked: set) -> list:
    """An experiment's cells of Table 3: its settings, steps, perplexity, BLEU, parameters."""
    first = runs[0]
    config = TransformerConfig(**first.model)
    key = ("last", first.dev_split)
    perplexities = [run.summary["dev_ppl"] for run in runs]
    ppl = Score(tables.mean_of(perplexities), 2, tables.spread(perplexities), len(runs))
    bleu = (
        bleu_score(first, key, len(runs), marked, "tokenized_bleu")
        if key in first.scores
        else Score(None)
    )
    ours = {**tables.architecture(config), "eps_ls": first.train["label_smoothing"]}
    return [
        *architecture_cells(ours),
        steps(first.summary["steps"]),
        ppl,
        bleu,
        Score(count_parameters(config) / 1e6, 1),
    ]


def architecture_cells(row: dict) -> list:
    return [
        row["N"],
        row["d_model"],
        row["d_ff"],
        row["h"],
        row["d_k"],
        row["d_v"],
        Score(row["P_drop"]),
        Score(row["eps_ls"]),
    ]


def steps(count: int) -> str:
    """100000 as the paper's 100K."""
    return f"{count // 1000}K" if count >= 1000 and count % 1000 == 0 else str(count)


def table4(
    results: list[ExperimentResult], training: dict[str, str], baselines=(), study: str = ""
) -> Layout:
    """Parser | Training | F1: the paper's rows, then, under a heading naming each test split,
    the trivial baselines and ours (the averaged model)."""
    layout = Layout(
        "table4",
        "Table 4",
        "English constituency parsing: the paper's rows (F1 on Section 23 of WSJ; Vaswani et "
        "al., 2017) and, below the rule, trivial baselines and ours on the split each heading "
        "names (EVALB's rules, COLLINS.prm); a treebank sample's figures are not comparable to "
        "WSJ 23.",
        ["Parser", "Training", "F1"],
        study=study,
    )
    for parser, setting, f1 in TABLE4:
        layout.rows.append([parser, setting, Score(f1)])
    ours: dict[str, list] = {}  # test split -> rows
    for record in baselines:
        for name, scores in record["baselines"].items():
            label = BASELINE_NAMES[name].format(**record["labels"]) + " (baseline)"
            row = [label, "none", Score(scores["all"]["f1"])]
            ours.setdefault(describe_split(record), []).append(row)
    for result in results:
        for (checkpoint, split), record in result.scores.items():
            if checkpoint == "averaged" and split != result.dev_split:
                row = [
                    f"{result.name} (ours)",
                    training[result.name],
                    Score(record["evalb"]["all"]["f1"]),
                ]
                ours.setdefault(describe_split(record), []).append(row)
    for split, rows in ours.items():
        layout.rule_before.add(len(layout.rows))
        layout.rows += [Heading(f"On {split}"), *rows]
    return layout


PARAMS_LATEX_COLUMNS = dict(zip(TABLE3_COLUMNS[1:8], TABLE3_LATEX_COLUMNS[1:8], strict=True))


def params_layout(frame, caption: str, study: str = "") -> Layout:
    """The parameter counts of every preset (aiayn.report.params): the architecture, then the
    counts in millions under one group head, each column's numbers in one format."""
    counts = [column for column in frame.columns if str(column).startswith(("params", "ours"))]
    settings = [column for column in frame.columns if column not in counts]
    shows = [column_format(frame[column]) for column in frame.columns]
    rows = [
        [show(value) for show, value in zip(shows, row, strict=True)]
        for row in frame.astype(object).itertuples(index=False)
    ]
    heads = [*settings, *(count_head(column) for column in counts)]
    return Layout(
        "params",
        "Parameters",
        caption,
        heads,
        rows,
        groups=[("", len(settings)), ("params (M)", len(counts))],
        latex_columns=[
            PARAMS_LATEX_COLUMNS.get(head, stacked(head))
            if index < len(settings)
            else stacked(head)
            for index, head in enumerate(heads)
        ],
        study=study,
    )


def count_head(column: str) -> str:
    """`params, ours (M)` -> `ours`, `params at toy's 800 (M)` -> `at toy's 800`: the group
    head says params (M)."""
    return column.removeprefix("params").removesuffix("(M)").strip(" ,")


def column_format(column):
    """How a column's cells print: its floats with the fewest decimals that show every one of
    them, the rest as they are."""
    floats = [value for value in column if isinstance(value, float) and value == value]
    digits = min(
        (d for d in range(4) if all(round(value, d) == value for value in floats)), default=3
    )

    def show(value):
        if value is None or value != value:  # None or NaN
            return ""
        return f"{value:.{digits}f}" if isinstance(value, float) else value

    return show
