"""The HTML report's front page (`snakemake --report`): which study, which command and commit
made it, and where its tables, figures and scores are, read from results/<study>/run.json."""

from __future__ import annotations

import json
from pathlib import Path

from aiayn.config import paths


def front_page(study: str, experiments: list[str], root: Path) -> str:
    """The page as reStructuredText (Snakemake renders it with Jinja first: no braces here)."""
    results = paths.results_dir(study)
    record_path = root / paths.run_record(study)
    title = f'Study "{study}": Attention Is All You Need, reproduced'
    lines = [title, "=" * len(title), ""]
    if record_path.is_file():
        record = json.loads(record_path.read_text(encoding="utf-8"))
        dirty = " (with uncommitted changes)" if record.get("uncommitted_changes") else ""
        lines += [
            f"Made by ``{record['command']}`` at commit ``{record.get('commit')}``{dirty}, "
            f"finished {record.get('finished')} after {record.get('invocation_seconds')} s; "
            f"config files: {', '.join(record.get('configfiles') or ['config.yaml'])}.",
            "",
        ]
    else:
        lines += [f"Not run yet: no ``{paths.run_record(study)}``.", ""]
    lines += [
        f"Experiments: {', '.join(f'``{name}``' for name in experiments)}.",
        "",
        f"Tables: ``{results}/tables/``, each in the paper's layout (``.md``, ``.tex``) and "
        "with every figure (``.csv``, ``_detail.md``). Figures: "
        f"``{results}/figures/``. Scores with their sacreBLEU signatures: "
        f"``{results}/scores/``. What made them: ``{paths.run_record(study)}``; whether the "
        "current code would rewrite them: ``aiayn results``.",
        "",
    ]
    return "\n".join(lines)
