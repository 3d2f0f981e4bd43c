"""A table as a paper prints it, typeset as Markdown and as LaTeX that pastes into a paper.

The LaTeX needs only booktabs and fits the column it is \\input into: typeset at \\small, or
at \\footnotesize or \\scriptsize where that is wider than \\linewidth; where even that is
wider (a two-column venue's column), scaled to \\linewidth if graphicx is loaded, else \\tiny.
Its label is unique per study, the mark keeps its `*` in the footnotes, and every character
prints under the default font encoding.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

MARK = "*"


@dataclass
class Score:
    """A score cell: one value, or a mean with its sd over seeds, marked where it differs from
    the baseline's (aiayn.report.marks)."""

    value: float | None
    digits: int = 1
    sd: float | None = None
    seeds: int = 1
    marked: bool = False
    seeds_shown: bool = True  # `(n)` after the sd; not where every row has the same seeds

    def render(self, latex: bool) -> str:
        if self.value is None:
            return ""
        text = f"{self.value:.{self.digits}f}"
        if self.seeds > 1 and self.sd is not None:
            pm = r"$\pm$" if latex else "±"
            text += f" {pm} {self.sd:.{self.digits}f}"
            text += f" ({self.seeds})" if self.seeds_shown else ""
        if self.marked:
            text += f"$^{MARK}$" if latex else MARK
        return text


@dataclass
class Cost:
    """Training FLOPs as the paper prints them: 3.3 · 10^18; `span` columns where the paper
    prints one value across both language pairs."""

    flops: float | None
    span: int = 1

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
class Formula:
    """A cell that is mathematics: O(n^2 · d) as text, and its TeX for LaTeX (in math mode)."""

    text: str
    tex: str

    def render(self, latex: bool) -> str:
        return f"${self.tex}$" if latex else self.text


@dataclass
class Heading:
    """A row that names the rows under it (e.g. the test set of our rows), across the table."""

    text: str


@dataclass
class Layout:
    """A table as the paper lays it out: `groups` spans over the column heads (LaTeX
    \\multicolumn, Markdown folds them into the heads), `rule_before` a \\midrule before a row,
    `light_rule_before` a \\cmidrule."""

    name: str  # table2, ...: the file's name
    title: str  # "Table 2": what Markdown prints before the caption (LaTeX numbers its own)
    caption: str
    columns: list[str]
    rows: list[list | Heading] = field(default_factory=list)
    groups: list[tuple[str, int]] = field(default_factory=list)  # (text, columns spanned)
    rule_before: set[int] = field(default_factory=set)  # row indices
    light_rule_before: set[int] = field(default_factory=set)
    footnotes: list[str] = field(default_factory=list)
    latex_columns: list[str] | None = None  # the heads as LaTeX (math), where they differ
    study: str = ""  # the study whose table this is: its LaTeX label is tab:<study>-<name>

    @property
    def label(self) -> str:
        return f"tab:{self.study}-{self.name}" if self.study else f"tab:{self.name}"


def cell(value, latex: bool) -> str:
    if isinstance(value, Score | Cost | Formula):
        return value.render(latex)
    text = "" if value is None else str(value)
    return latex_escape(text) if latex else text.replace("|", "\\|")


LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
    "<": r"$<$",  # the default (OT1) encoding prints < as ¡
    ">": r"$>$",
    "|": r"$|$",
    "±": r"$\pm$",
    "·": r"$\cdot$",
    "ε": r"$\epsilon$",
    "×": r"$\times$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "−": r"$-$",
    "–": "--",
    "—": "---",
}
SPECIAL = re.compile("|".join(map(re.escape, LATEX_SPECIALS)))


def latex_escape(text: str) -> str:
    """Plain text as LaTeX that prints it (one pass: an escape is never escaped again)."""
    return SPECIAL.sub(lambda found: LATEX_SPECIALS[found.group()], text)


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


def table_rows(layout: Layout) -> list[list]:
    return [row for row in layout.rows if not isinstance(row, Heading)]


def alignments(layout: Layout) -> list[str]:
    """Markdown's alignment row: figures to the right, text (names, settings) to the left."""
    marks = []
    for index in range(len(layout.columns)):
        cells = [row[index] for row in table_rows(layout) if row[index] not in (None, "")]
        marks.append("---:" if cells and all(map(numeric, cells)) else ":---")
    return marks


def markdown_note(note: str) -> str:
    """A footnote line; a leading mark escaped, or Markdown makes the line a bullet."""
    return "\\" + note if note.startswith(MARK) else note


def markdown_cells(row: list | Heading, width: int) -> list[str]:
    """A row's cells; a heading in the first, a value spanning columns in each it spans."""
    if isinstance(row, Heading):
        return [f"*{row.text}*", *[""] * (width - 1)]
    cells = [cell(value, False) for value in row]
    for index, value in enumerate(row):
        if isinstance(value, Cost) and value.span > 1:
            cells[index + 1 : index + value.span] = [cells[index]] * (value.span - 1)
    return cells


def markdown(layout: Layout) -> str:
    lines = [f"**{layout.title}.** {layout.caption}", ""]
    lines += ["| " + " | ".join(heads(layout)) + " |", "|" + "|".join(alignments(layout)) + "|"]
    for row in layout.rows:
        lines.append("| " + " | ".join(markdown_cells(row, len(layout.columns))) + " |")
    notes = [markdown_note(note) + "  " for note in layout.footnotes]  # a line break after each
    return "\n".join([*lines, "", *notes]).rstrip() + "\n"


def latex_row(row: list | Heading, width: int) -> str:
    if isinstance(row, Heading):
        return rf"\multicolumn{{{width}}}{{l}}{{\textit{{{latex_escape(row.text)}}}}} \\"
    cells, skip = [], 0
    for value in row:
        if skip:  # covered by the span before it
            skip -= 1
            continue
        text = cell(value, True)
        if isinstance(value, Cost) and value.span > 1:
            text, skip = rf"\multicolumn{{{value.span}}}{{c}}{{{text}}}", value.span - 1
        cells.append(text)
    return " & ".join(cells) + r" \\"


def head_lines(layout: Layout) -> list[str]:
    lines = []
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
    columns = layout.latex_columns or [stacked(column) for column in layout.columns]
    return [*lines, " & ".join(columns) + r" \\"]


def stacked(head: str) -> str:
    """A long head on two lines (\\shortstack), split at the space nearest its middle, as the
    paper sets `train steps` and `params ×10^6`: the column is then as wide as its figures."""
    spaces = [index for index, char in enumerate(head) if char == " "]
    if len(head) < 8 or not spaces:
        return latex_escape(head)
    middle = min(spaces, key=lambda index: abs(index - len(head) / 2))
    lines = (latex_escape(head[:middle]), latex_escape(head[middle + 1 :]))
    return rf"\shortstack{{{lines[0]}\\{lines[1]}}}"


FIT = [
    r"% \small, or \footnotesize, \scriptsize where that is wider than the column; then scaled to",
    r"% the column where graphicx is loaded (\resizebox), else \tiny.",
    r"\setbox0=\hbox{\small\tabcolsep=.4em\aiaynTabular}%",
    r"\ifdim\wd0>\linewidth \setbox0=\hbox{\footnotesize\tabcolsep=.4em\aiaynTabular}\fi",
    r"\ifdim\wd0>\linewidth \setbox0=\hbox{\scriptsize\tabcolsep=.4em\aiaynTabular}\fi",
    r"\ifdim\wd0>\linewidth \ifdefined\resizebox",
    r"  \setbox0=\hbox{\resizebox{\linewidth}{!}{\box0}}%",
    r"  \else \setbox0=\hbox{\tiny\tabcolsep=.4em\aiaynTabular}\fi\fi",
    r"\leavevmode\box0\par",
]


def latex(layout: Layout) -> str:
    """A booktabs table that fits the column it is \\input into (see the module's docstring):
    \\caption, \\label{tab:<study>-<name>}, the footnotes under it, one per line."""
    width = len(layout.columns)
    body = [rf"\begin{{tabular}}{{l{'c' * (width - 1)}}}", r"\toprule", *head_lines(layout)]
    body.append(r"\midrule")
    for index, row in enumerate(layout.rows):
        if index in layout.rule_before:
            body.append(r"\midrule")
        elif index in layout.light_rule_before:
            body.append(rf"\cmidrule(lr){{1-{width}}}")
        body.append(latex_row(row, width))
    body += [r"\bottomrule", r"\end{tabular}"]
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(layout.caption)}}}",
        rf"\label{{{layout.label}}}",
        r"\def\aiaynTabular{%",
        *body,
        "}%",
        *FIT,
    ]
    if layout.footnotes:
        notes = " \\par ".join(latex_note(note) for note in layout.footnotes)
        lines += [r"\smallskip", rf"{{\footnotesize {notes}\par}}"]
    return "\n".join([*lines, r"\end{table}"]) + "\n"


def latex_note(note: str) -> str:
    """A footnote; its leading mark as the cells print it (a `*` after `\\\\` would be read
    as `\\\\*`)."""
    if note.startswith(MARK):
        return f"$^{MARK}$" + latex_escape(note[len(MARK) :])
    return latex_escape(note)
