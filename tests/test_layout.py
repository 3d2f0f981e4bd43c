"""Tables 2, 3 and 4 in the paper's layout (aiayn.report.layout, typeset): the paper's columns and rounding,
ours labelled under the paper's rows, seeds and significance in one cell, and LaTeX that compiles."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.complexity.report import table1_layout
from aiayn.complexity.table1 import Grid, measure_table1
from aiayn.paper import TABLE2, TABLE3, TABLE4
from aiayn.report import layout, tables, typeset
from aiayn.report.params import params_table
from aiayn.report.typeset import MARK, Heading
from tests.conftest import PROJECT
from tests.test_seeds import result, seed_record


def seeded_results():
    """tiny (the baseline, three seeds) and tiny_one_layer (three seeds, p 0.01)."""
    runs = [
        result("tiny", "tiny", 80.04, seed_record(81.04, 2.0, None)),
        result("tiny.seed2", "tiny", 81.0),
        result("tiny.seed3", "tiny", 82.0),
        result("tiny_one_layer", "tiny_one_layer", 70.0, seed_record(72.35, 3.0, 0.01)),
        result("tiny_one_layer.seed2", "tiny_one_layer", 72.0),
        result("tiny_one_layer.seed3", "tiny_one_layer", 74.0),
    ]
    for run in runs:  # the same figures over seeds on the test split (Table 2)
        if run.seed_scores:
            run.seed_scores[("averaged", "test")] = run.seed_scores[("last", "dev")]
    return runs


def test_table2_has_the_papers_five_columns_its_rows_then_ours_under_their_test_set():
    table = layout.table2(seeded_results(), significance=0.05, study="toy_seeds")
    assert table.columns == ["Model", "EN-DE", "EN-FR", "EN-DE", "EN-FR"]
    assert table.groups == [("", 1), ("BLEU", 2), ("Training Cost (FLOPs)", 2)]
    text = typeset.markdown(table)
    assert text.startswith("**Table 2.** BLEU and training cost: the paper's rows")
    assert text.splitlines()[2] == (
        "| Model | BLEU EN-DE | BLEU EN-FR | Training Cost (FLOPs) EN-DE | "
        "Training Cost (FLOPs) EN-FR |"
    )
    assert [row[0] for row in table.rows[: len(TABLE2)]] == [entry[0] for entry in TABLE2]
    base = table.rows[[entry[0] for entry in TABLE2].index("Transformer (base model)")]
    assert base[3].span == 2 and base[4] is None  # one cost across both pairs, as printed
    assert "| Transformer (base model) | 27.3 | 38.1 | 3.3 · 10^18 | 3.3 · 10^18 |" in text
    assert table.rows[0][1].render(False) == "23.75"  # the paper's own figures as it printed them
    assert "| GNMT + RL Ensemble | 26.30 | 41.16 |" in text
    assert table.rule_before == {len(TABLE2)}
    heading, *ours = table.rows[len(TABLE2) :]
    assert heading == Heading("Ours, on test (300 lines)")
    assert [row[0] for row in ours] == ["tiny", "tiny_one_layer"]
    # one cell: mean ± sd (the seeds, the same for every row, in the footnote), the mark
    assert [cell.render(False) for cell in ours[0][1:3]] == ["81.0 ± 2.0", ""]
    assert ours[1][1].render(False) == "72.3 ± 3.0*"
    assert ours[1][1].render(True) == r"72.3 $\pm$ 3.0$^*$"
    assert table.footnotes == [
        "a ± s: mean and sample standard deviation over 3 training seeds.",
        "* sacreBLEU differs from tiny's over training seeds: Welch's t-test, p < 0.05 after "
        "Holm's adjustment over the table's 1 comparisons (p in the csv).",
    ]
    assert "\\* sacreBLEU differs" in text  # the legend keeps its mark in Markdown
    assert not re.search(r"\d\.\d{3}", text)  # no number with more than 2 decimals
    assert "Table 2" not in table.caption  # LaTeX numbers the table itself
    assert r"\label{tab:toy_seeds-table2}" in typeset.latex(table)


def test_table2_puts_the_same_models_en_de_and_en_fr_side_by_side():
    de = replace(result("base_en_de", "base_en_de", 25.0), paper_row="base")
    fr = replace(result("base_en_fr", "base_en_fr", 37.0), paper_row="base", pair="en-fr")
    other = replace(result("tiny", "tiny", 10.0), paper_row="base")  # base again in EN-DE
    for run in (de, fr, other):
        run.summary.update(seconds=3600.0, processes=8, device_tflops_fp32=9.5)
    rows = layout.table2([de, fr, other]).rows[len(TABLE2) + 1 :]
    assert [row[0] for row in rows] == ["base_en_de / base_en_fr", "tiny"]
    cells = [cell.render(False) for cell in rows[0][1:]]
    assert cells == ["25.0", "37.0", "2.7 · 10^17", "2.7 · 10^17"]  # 1 h x 8 x 9.5 TFLOPS
    assert rows[0][3].render(True) == r"$2.7 \cdot 10^{17}$"


def test_table2_groups_our_rows_by_the_test_set_they_were_scored_on():
    """Multi30k's score is not under the paper's newstest2014 without a word: a heading names
    each test set of our rows."""
    toy = result("tiny", "tiny", 90.0)
    other = result("multi", "multi", 35.0)
    test = other.scores[("averaged", "test")]
    other.scores = {("averaged", "test_2016_flickr"): {**test, "split": "test_2016_flickr"}}
    rows = layout.table2([toy, other]).rows[len(TABLE2) :]
    headings = [row.text for row in rows if isinstance(row, Heading)]
    assert headings == ["Ours, on test (300 lines)", "Ours, on test_2016_flickr (300 lines)"]


def test_costs_round_as_the_paper_prints_them():
    assert typeset.Cost(9.96e18).render(False) == "1.0 · 10^19"
    assert typeset.Cost(2.3e19).render(True) == r"$2.3 \cdot 10^{19}$"
    assert typeset.Cost(None).render(True) == ""


def test_table3_has_the_papers_groups_and_columns_and_ours_after_the_rows_they_vary():
    results = [replace(run, paper_row={"tiny": "base", "tiny_one_layer": "C_N2"}[run.group])
               for run in seeded_results()]  # fmt: skip
    table = layout.table3(results, significance=0.05)
    assert table.columns[1:] == ["N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "ε_ls",
                                 "train steps", "PPL (dev)", "BLEU (dev)", "params ×10^6"]  # fmt: skip
    assert r"$d_{\mathrm{model}}$" in typeset.latex(table)  # typeset heads
    labels = [row[0] for row in table.rows]
    assert labels == ["base", "tiny", "(C)", "tiny_one_layer"]  # the paper's groups
    assert table.rule_before == {2} and table.light_rule_before == {1, 3}
    paper = table.rows[2]
    bleu, ppl, params, steps = TABLE3["C_N2"]
    assert paper[1] == 2 and paper[9] == "100K" and paper[7].render(False) == "0.1"
    assert [cell.render(False) for cell in paper[10:]] == [f"{ppl:.2f}", f"{bleu:.1f}", "36"]
    ours = table.rows[3]
    assert ours[9] == "500" and ours[10].render(False) == "7.20 ± 0.20"
    assert ours[11].render(False) == "72.3 ± 3.0*" and ours[12].render(False) == "0.9"
    assert "on dev" in table.caption


def test_the_layout_and_the_detail_mark_by_the_one_family_they_are_handed():
    """The report script builds a table's family once and hands it to both: a family at a
    level that marks nothing leaves the mark out of the layout and the detail alike, whatever
    significance either would have used itself."""
    results = [replace(run, paper_row={"tiny": "base", "tiny_one_layer": "C_N2"}[run.group])
               for run in seeded_results()]  # fmt: skip
    strict = tables.family(results, tables.table3_keys, significance=1e-12)
    shown = layout.table3(results, significance=0.05, comparisons=strict)
    detail = tables.table3(results, significance=0.05, comparisons=strict)
    assert shown.rows[3][11].render(False) == "72.3 ± 3.0"  # marked at 0.05 (the test above)
    assert "*" not in set(detail["mark"].dropna())
    assert layout.table3(results, significance=0.05).rows[3][11].render(False).endswith("*")


def test_a_table_with_one_run_each_marks_nothing_and_says_why():
    results = [result("tiny", "tiny", 80.0), result("tiny_one_layer", "tiny_one_layer", 70.0)]
    results[1].scores[("last", "dev")]["paired_bootstrap"] = {"baseline": "tiny", "p_value": 0.001}
    table = layout.table3(results)
    assert not any(MARK in cell.render(False) for row in table.rows for cell in row
                   if isinstance(cell, typeset.Score))  # fmt: skip
    assert table.footnotes == [
        "One run per experiment: no row is marked; the csv's p (sacreBLEU's paired bootstrap) "
        "compares two trained models, not two settings."
    ]


def parser_result():
    run = result("parser", "parser", 0.0)
    record = {"split": "test", "sentences": 40, "test_set": {"documents": "0190-0199"},
              "evalb": {"all": {"f1": 71.234}}}  # fmt: skip
    return replace(run, dev_split="dev", scores={("averaged", "test"): record})


def test_table4_has_parser_training_f1_and_ours_under_the_split_named():
    baselines = [{"split": "test", "sentences": 40, "test_set": {"documents": "0190-0199"},
                  "labels": {"top": "S", "right_branching": "NP"},
                  "baselines": {"right-branching": {"all": {"f1": 20.04}}}}]  # fmt: skip
    table = layout.table4([parser_result()], {"parser": "documents 0001-0159"}, baselines)
    assert table.columns == ["Parser", "Training", "F1"]
    assert len(table.rows) == len(TABLE4) + 3
    heading, baseline, ours = table.rows[-3:]
    assert heading == Heading("On test (documents 0190-0199, 40 sentences)")
    assert baseline[0].endswith("(baseline)") and baseline[2].render(False) == "20.0"
    assert ours[0] == "parser (ours)" and ours[2].render(False) == "71.2"
    # in Markdown the figures align right, the text (training) left
    assert typeset.markdown(table).splitlines()[3] == "|:---|:---|---:|"


def test_markdown_aligns_a_column_right_only_where_every_cell_is_a_figure():
    table = typeset.Layout("t", "T", "A table.", ["name", "steps", "lr", "note", "empty"])
    table.rows = [
        ["a", "100K", 1e-09, "", None],
        ["b", "512", typeset.Score(0.5), "sinusoidal", ""],
    ]
    assert typeset.markdown(table).splitlines()[3] == "|:---|---:|---:|:---|:---|"


def test_latex_escapes_print_under_the_default_font_encoding():
    assert typeset.latex_escape("p < 0.05 & 5% a_b #") == r"p $<$ 0.05 \& 5\% a\_b \#"
    assert typeset.latex_escape("\\x{}") == r"\textbackslash{}x\{\}"  # escaped once
    assert typeset.stacked("params at toy's 800") == r"\shortstack{params at\\toy's 800}"


def test_the_params_table_prints_one_format_per_column():
    table = layout.params_layout(params_table({"toy": 800}), "Parameters.", "toy")
    column = table.columns.index("ours")
    figures = [row[column] for row in table.rows]
    assert all(re.fullmatch(r"\d+\.\d", figure) for figure in figures), figures
    assert table.groups[-1] == ("params (M)", 4)


needs_latex = pytest.mark.skipif(  # in CI (.ci/run installs them) a missing one fails the test
    not os.environ.get("CI")
    and (shutil.which("pdflatex") is None or shutil.which("pdftotext") is None),
    reason="no LaTeX engine (pdflatex) or pdftotext: apt-get install texlive-latex-base "
    "texlive-latex-recommended poppler-utils",
)


def compile_tables(paths, folder, options: str = "", preamble: str = "") -> str:
    """pdflatex on a plain article with booktabs that \\inputs each table file; the log and
    the PDF's text."""
    document = (
        f"\\documentclass[{options}]{{article}}\n\\usepackage{{booktabs}}\n{preamble}\n"
        "\\begin{document}\n"
        + "".join(f"\\input{{{path}}}\n" for path in paths)
        + "\\end{document}\n"
    )
    (folder / "tables.tex").write_text(document)
    compiled = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "tables.tex"],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert compiled.returncode == 0, compiled.stdout[-3000:]
    text = subprocess.run(["pdftotext", "tables.pdf", "-"], cwd=folder, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    return (folder / "tables.log").read_text(errors="replace"), text


def overfull(log: str) -> list[float]:
    """The overfull boxes LaTeX reported, in pt."""
    return [float(pt) for pt in re.findall(r"Overfull \\[hv]box \((\d+\.?\d*)pt too", log)]


def check_pasted(log: str, text: str) -> None:
    assert not [pt for pt in overfull(log) if pt > 1], re.findall(r"Overfull.*", log)
    assert "¡" not in text and "multiply defined" not in log
    assert not re.search(r"Table \d+: Table", text)
    # A legend keeps its mark (LaTeX's * prints as ∗). In two columns pdftotext may read the
    # mark as the end of the line beside it, a caption of the other column.
    lines = text.splitlines()
    for before, line in zip(["", *lines], lines, strict=False):
        if "differs from" in line and "over training seeds" in line:
            assert line.startswith(("∗", "*")) or before.rstrip().endswith(("∗", "*")), line


TINY_GRID = Grid(lengths=(8, 16, 32), widths=(16, 32, 64), d=16, n=16, r=4, heads=2,
                 path_lengths=(4, 8), repeats=1)  # fmt: skip


@needs_latex
def test_every_table_pastes_into_a_plain_article(tmp_path):
    tables = [
        layout.table2(seeded_results(), study="a"),
        layout.table3(seeded_results(), study="a"),
        layout.table4([parser_result()], {"parser": "documents 0001-0159"}, [], study="a"),
        layout.params_layout(params_table({"toy": 800}), "Parameters & counts_1 100% < 2.", "a"),
        table1_layout(measure_table1(TINY_GRID, kinds=("self_attention", "dilated")), "a"),
    ]
    paths = []
    for table in tables:
        paths.append(tmp_path / f"{table.name}.tex")
        paths[-1].write_text(typeset.latex(table))
    log, text = compile_tables(paths, tmp_path)
    check_pasted(log, text)
    words = " ".join(text.split())
    assert "100% < 2." in words and "72.3 ± 3.0∗" in words  # (OT1 draws _ as a rule)
    assert "O(n2 · d)" in words and "⌈logk n⌉" in words  # Table 1's formulas set as math


COMMITTED_TABLES = sorted((PROJECT / "results").glob("*/tables/*.tex"))


def test_the_committed_paper_tables_have_the_papers_shape():
    """Every committed study's Table 2 has at most 6 columns, and no table a paper would paste
    prints a number with more than 2 decimals."""
    table2 = [path for path in COMMITTED_TABLES if path.name == "table2.tex"]
    assert table2, "no committed results/*/tables/table2.tex"
    for path in table2:
        spec = re.search(r"\\begin\{tabular\}\{([lcr]+)\}", path.read_text()).group(1)
        assert len(spec) <= 6, path
    for path in COMMITTED_TABLES:
        if path.stem in ("table2", "table3", "table4"):
            assert not re.search(r"\d\.\d{3}", path.read_text()), path


@needs_latex
def test_every_committed_table_pastes_into_one_paper(tmp_path):
    """All studies' tables in one plain article (default encoding and text width): no overfull
    box, no ¡, legends with their mark, no label twice; and in a two-column article's column,
    where graphicx is loaded, the same."""
    log, text = compile_tables(COMMITTED_TABLES, tmp_path)
    check_pasted(log, text)
    labels = [
        re.search(r"\\label\{([^}]*)\}", path.read_text()).group(1) for path in COMMITTED_TABLES
    ]
    assert len(set(labels)) == len(labels)
    log, text = compile_tables(COMMITTED_TABLES, tmp_path, "twocolumn", "\\usepackage{graphicx}")
    check_pasted(log, text)


def test_the_report_front_page_names_the_study_its_command_commit_and_tables(tmp_path):
    from aiayn.report.front_page import front_page

    assert "Not run yet" in front_page("toy", ["tiny"], tmp_path)
    record = {"command": "snakemake --cores all", "commit": "abc1234", "finished": "2026-11-27",
              "invocation_seconds": 250.0, "configfiles": []}  # fmt: skip
    (tmp_path / "results" / "toy").mkdir(parents=True)
    (tmp_path / "results" / "toy" / "run.json").write_text(json.dumps(record))
    page = front_page("toy", ["tiny", "tiny_one_head"], tmp_path)
    assert page.startswith('Study "toy": Attention Is All You Need, reproduced\n=====')
    assert "Made by ``snakemake --cores all`` at commit ``abc1234``" in page
    assert "``results/toy/tables/``" in page and "``tiny_one_head``" in page
    assert "{" not in page  # Snakemake renders the page with Jinja first


FRONT_RECORD = json.dumps({"command": "snakemake --cores all", "commit": "abc1234"}).encode()


@settings(derandomize=True, deadline=None)  # the same examples in every run
@given(damaged=st.integers(0, len(FRONT_RECORD) - 1).map(lambda cut: FRONT_RECORD[:cut])
       | st.sampled_from([b"[1, 2]", b'{"commit": "abc1234"}', b"\xff\xfe", b"null"]))  # fmt: skip
def test_a_damaged_run_record_is_said_on_the_front_page_not_raised(tmp_path_factory, damaged):
    """The page is written as every snakemake starts (the Snakefile), before any job: a run
    record cut at any byte or of another shape is named on the page and warned of, with the
    ways out, and the start goes on (it was a traceback that stopped every snakemake command)."""
    from aiayn.report.front_page import front_page_file

    root = tmp_path_factory.mktemp("checkout")
    (root / "results" / "toy").mkdir(parents=True)
    (root / "results" / "toy" / "run.json").write_bytes(damaged)
    warnings = []
    page = Path(front_page_file("toy", ["tiny"], root, True, warnings.append)).read_text()
    assert "The run record cannot be read: " in page and "``results/toy/tables/``" in page
    [warning] = warnings
    assert "results/toy/run.json" in warning and "Restore it (`git checkout -- " in warning
    assert "or delete it: the workflow's last job (rule run_record) writes it again" in warning


def test_table2_says_which_checkpoints_each_averaged_model_averages():
    """train.json's average_rule (#65): one line when every experiment shares the rule, a line
    per rule otherwise; nothing for a train.json written before the rule was recorded."""
    runs = seeded_results()
    last = {"rule": "last", "count": 5}
    for run in runs:
        run.summary["average_rule"] = last
    assert layout.table2(runs).footnotes[-1] == (
        "Averaged models: the last 5 checkpoints (the paper's rule)."
    )
    for run in runs[3:]:
        run.summary["average_rule"] = {"rule": "best", "by": "dev_bleu", "count": 5}
    assert layout.table2(runs).footnotes[-2:] == [
        "Averaged, tiny: the last 5 checkpoints (the paper's rule).",
        "Averaged, tiny_one_layer: the 5 checkpoints best on dev BLEU.",
    ]
    for run in runs:  # fewer checkpoints than the rule asks: the footnote says how many, and why
        run.summary["average_rule"] = {"rule": "last", "count": 20, "averaged": 4,
                                       "fewer": "the run saved only 4 checkpoints"}  # fmt: skip
    assert layout.table2(runs).footnotes[-1] == (
        "Averaged models: the last 4 checkpoints, not the 20 asked (the run saved only 4 "
        "checkpoints)."
    )
    for run in runs:
        del run.summary["average_rule"]
    assert not any("Averaged" in note for note in layout.table2(runs).footnotes)
