"""Tables 2, 3 and 4 in the paper's layout (aiayn.report.layout): the paper's columns and rounding,
ours labelled under the paper's rows, seeds and significance in one cell, and LaTeX that compiles."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace

import pytest

from aiayn.paper import TABLE2, TABLE3, TABLE4
from aiayn.report import layout
from aiayn.report.params import params_table
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


def test_table2_has_the_papers_five_columns_its_rows_then_ours_labelled():
    table = layout.table2(seeded_results(), significance=0.05)
    assert table.columns == ["Model", "EN-DE", "EN-FR", "EN-DE", "EN-FR"]
    assert table.groups == [("", 1), ("BLEU", 2), ("Training Cost (FLOPs)", 2)]
    text = layout.markdown(table)
    assert text.splitlines()[2] == (
        "| Model | BLEU EN-DE | BLEU EN-FR | Training Cost (FLOPs) EN-DE | "
        "Training Cost (FLOPs) EN-FR |"
    )
    assert [row[0] for row in table.rows[: len(TABLE2)]] == [entry[0] for entry in TABLE2]
    base = table.rows[[entry[0] for entry in TABLE2].index("Transformer (base model)")]
    assert [cell.render(False) for cell in base[1:]] == [
        "27.3", "38.1", "3.3 · 10^18", "3.3 · 10^18"
    ]  # fmt: skip
    assert table.rows[0][1].render(False) == "23.75"  # the paper's own figures as it printed them
    assert table.rule_before == {len(TABLE2)}
    ours = table.rows[len(TABLE2) :]
    assert [row[0] for row in ours] == ["tiny (ours, test)", "tiny_one_layer (ours, test)"]
    # one cell: mean ± sd (seeds), one decimal, the mark where p < 0.05; EN-FR empty
    assert [cell.render(False) for cell in ours[0][1:3]] == ["81.0 ± 2.0 (3)", ""]
    assert ours[1][1].render(False) == "72.3 ± 3.0 (3)*"
    assert ours[1][1].render(True) == r"72.3 $\pm$ 3.0 (3)$^*$"
    assert table.footnotes == [
        layout.SEEDS_FOOTNOTE,
        "* sacreBLEU differs from tiny's at p < 0.05 (Welch's t-test over seeds; p and "
        "intervals in the csv).",
    ]
    assert not re.search(r"\d\.\d{3}", text)  # no number with more than 2 decimals
    assert len(table.caption.split(". ")) <= 2  # a caption of one or two sentences


def test_table2_puts_the_same_models_en_de_and_en_fr_side_by_side():
    de = replace(result("base_en_de", "base_en_de", 25.0), paper_row="base")
    fr = replace(result("base_en_fr", "base_en_fr", 37.0), paper_row="base", pair="en-fr")
    other = replace(result("tiny", "tiny", 10.0), paper_row="base")  # base again in EN-DE
    for run in (de, fr, other):
        run.summary.update(seconds=3600.0, processes=8, device_tflops_fp32=9.5)
    rows = layout.table2([de, fr, other]).rows[len(TABLE2) :]
    assert [row[0] for row in rows] == ["base_en_de / base_en_fr (ours, test)", "tiny (ours, test)"]
    cells = [cell.render(False) for cell in rows[0][1:]]
    assert cells == ["25.0", "37.0", "2.7 · 10^17", "2.7 · 10^17"]  # 1 h x 8 x 9.5 TFLOPS
    assert rows[0][3].render(True) == r"$2.7 \cdot 10^{17}$"


def test_costs_round_as_the_paper_prints_them():
    assert layout.Cost(9.96e18).render(False) == "1.0 · 10^19"
    assert layout.Cost(2.3e19).render(True) == r"$2.3 \cdot 10^{19}$"
    assert layout.Cost(None).render(True) == ""


def test_table3_has_the_papers_columns_and_ours_under_the_row_it_varies():
    results = [replace(run, paper_row="C_N2" if run.group == "tiny_one_layer" else None)
               for run in seeded_results()]  # fmt: skip
    table = layout.table3(results, significance=0.05)
    assert table.columns[1:] == ["N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "ε_ls",
                                 "train steps", "PPL (dev)", "BLEU (dev)", "params ×10^6"]  # fmt: skip
    labels = [row[0] for row in table.rows]
    assert labels == ["tiny (ours, dev)", "C_N2", "tiny_one_layer (ours, dev)"]
    paper = table.rows[1]
    bleu, ppl, params, steps = TABLE3["C_N2"]
    assert paper[1] == 2 and paper[9] == "100K"
    assert [cell.render(False) for cell in paper[10:]] == [f"{ppl:.2f}", f"{bleu:.1f}", "36"]
    ours = table.rows[2]
    assert ours[9] == "500" and ours[10].render(False) == "7.20 ± 0.20 (3)"
    assert ours[11].render(False) == "72.3 ± 3.0 (3)*"


def parser_result():
    run = result("parser", "parser", 0.0)
    record = {"split": "test", "sentences": 40, "test_set": {"documents": "0190-0199"},
              "evalb": {"all": {"f1": 71.234}}}  # fmt: skip
    return replace(run, dev_split="dev", scores={("averaged", "test"): record})


def test_table4_has_parser_training_f1_and_the_split_named_for_ours():
    baselines = [{"split": "test", "sentences": 40, "test_set": {"documents": "0190-0199"},
                  "labels": {"top": "S", "right_branching": "NP"},
                  "baselines": {"right-branching": {"all": {"f1": 20.04}}}}]  # fmt: skip
    table = layout.table4([parser_result()], {"parser": "documents 0001-0159"}, baselines)
    assert table.columns == ["Parser", "Training", "F1", "Test set"]
    assert len(table.rows) == len(TABLE4) + 2 and table.rows[0][3] == "WSJ 23"
    baseline, ours = table.rows[-2:]
    assert baseline[0].endswith("(baseline)") and baseline[2].render(False) == "20.0"
    assert ours[0] == "parser (ours)" and ours[2].render(False) == "71.2"
    assert ours[3] == "test (documents 0190-0199, 40 sentences)"
    # in Markdown the figures align right, the text (training, test set) left
    assert layout.markdown(table).splitlines()[3] == "|:---|:---|---:|:---|"


def test_markdown_aligns_a_column_right_only_where_every_cell_is_a_figure():
    table = layout.Layout("t", "A table.", ["name", "steps", "lr", "note", "empty"])
    table.rows = [["a", "100K", 1e-09, "", None], ["b", "512", layout.Score(0.5), "sinusoidal", ""]]
    assert layout.markdown(table).splitlines()[3] == "|:---|---:|---:|:---|:---|"


needs_latex = pytest.mark.skipif(
    shutil.which("pdflatex") is None,
    reason="no LaTeX engine (pdflatex): apt-get install texlive-latex-base texlive-latex-recommended",
)


def compile_tables(body: str, folder) -> subprocess.CompletedProcess:
    """pdflatex on a minimal document (booktabs) holding `body`."""
    document = "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
    (folder / "tables.tex").write_text(document + body + "\\end{document}\n")
    return subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "tables.tex"],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@needs_latex
def test_every_table_compiles_with_booktabs(tmp_path):
    """A minimal document holding each table, through a real LaTeX engine."""
    baselines = []
    tables = [
        layout.table2(seeded_results()),
        layout.table3(seeded_results()),
        layout.table4([parser_result()], {"parser": "documents 0001-0159"}, baselines),
        layout.from_frame("params", params_table({"toy": 800}), "Parameters & counts_1 100%."),
    ]
    body = "\n".join(layout.latex(table) for table in tables)
    compiled = compile_tables(body, tmp_path)
    assert compiled.returncode == 0, compiled.stdout[-3000:]
    assert (tmp_path / "tables.pdf").stat().st_size > 0
    assert "tiny\\_one\\_layer" in body and "counts\\_1 100\\%" in body


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
def test_every_committed_table_compiles(tmp_path):
    compiled = compile_tables("\n".join(path.read_text() for path in COMMITTED_TABLES), tmp_path)
    assert compiled.returncode == 0, compiled.stdout[-3000:]
