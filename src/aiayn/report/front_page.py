"""The HTML report's front page (`snakemake --report`): which study, which command and commit
made it, and where its tables, figures and scores are, read from results/<study>/run.json."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from aiayn.config import paths
from aiayn.errors import InputError
from aiayn.textio import read_record


def front_page(study: str, experiments: list[str], root: Path, warn=None) -> str:
    """The page as reStructuredText (Snakemake renders it with Jinja first: no braces here).
    A damaged run record is said on the page and `warn`ed of: it must not stop every
    snakemake start, which writes this page before any job."""
    results = paths.results_dir(study)
    record_path = root / paths.run_record(study)
    title = f'Study "{study}": Attention Is All You Need, reproduced'
    lines = [title, "=" * len(title), ""]
    if record_path.is_file():
        lines += [made_by(record_path, warn), ""]
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


# A study's run record damaged: the committed one comes back from git, any other is written
# again by the workflow's last job.
RESTORE = (
    "Restore it (`git checkout -- <file>` where it is committed), or delete it: the workflow's "
    "last job (rule run_record) writes it again"
)


def made_by(record_path: Path, warn=None) -> str:
    """Which command and commit made the study, or that its record cannot be read."""
    try:
        record = read_record(
            record_path, "command", remedy=RESTORE.replace("<file>", str(record_path))
        )
    except InputError as err:
        if warn is not None:
            warn(f"{err} (the report's front page says so meanwhile)")
        return f"The run record cannot be read: {err}"
    dirty = " (with uncommitted changes)" if record.get("uncommitted_changes") else ""
    configfiles = record.get("configfiles")
    if not isinstance(configfiles, list) or not configfiles:
        configfiles = ["config.yaml"]
    return (
        f"Made by ``{record['command']}`` at commit ``{record.get('commit')}``{dirty}, "
        f"finished {record.get('finished')} after {record.get('invocation_seconds')} s; "
        f"config files: {', '.join(map(str, configfiles))}."
    )


def front_page_file(study: str, experiments: list[str], root: Path, write: bool, warn) -> str:
    """The page's path. It is kept where Snakemake keeps its own state,
    written (only when it changed) when `write` (the main process; its jobs only name it).
    Where that folder is a colleague's that this user cannot write (umask 077 on a shared
    folder), the page goes to this user's temporary folder instead, with a `warn`ing: a dry
    run or a run must not die of the report's front page."""
    page = Path(root) / ".snakemake" / "aiayn" / f"report_{study}.rst"
    if not write:
        return str(page)
    text = front_page(study, experiments, Path(root), warn)
    try:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(text, encoding="utf-8")
    except OSError as err:
        fallback = Path(tempfile.gettempdir()) / f"aiayn-{os.getuid()}-report_{study}.rst"
        fallback.write_text(text, encoding="utf-8")
        warn(
            f"the report's front page cannot be written to {page} ({err.strerror}); it is "
            f"{fallback} instead (make {page.parent} writable for you to keep it there)"
        )
        return str(fallback)
    return str(page)
