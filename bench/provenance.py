"""What every benchmark record carries so a figure can be traced: the code's commit (with
`-dirty` when tracked code differs from it, so uncommitted code is never passed off as a
commit), the date, the command that made it, and where --save writes it."""

from __future__ import annotations

import datetime
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
RESULTS = PROJECT / "bench" / "results"


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=PROJECT, capture_output=True, text=True)


def command() -> str:
    """How this benchmark was run, from the project root."""
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(PROJECT):
        script = script.relative_to(PROJECT)
    return shlex.join(["python", str(script), *sys.argv[1:]])


def stamp() -> dict:
    today, how = datetime.date.today().isoformat(), command()
    copied = os.environ.get("AIAYN_COPIED_FROM_COMMIT")
    if copied:  # a copy of a clean checkout sent to another machine (a GPU): its sender names it
        return {"commit": f"{copied} (copied tree)", "date": today, "command": how}
    return {"commit": tree_commit(), "date": today, "command": how}


def tree_commit() -> str:
    """This checkout's short HEAD, with `-dirty` when tracked code differs from it."""
    head = git("rev-parse", "--short=7", "HEAD").stdout.strip() or "unknown (not a git checkout)"
    # Figures already written under results/ do not make the code dirty.
    figures = (":(exclude)bench/results", ":(exclude)results")
    changed = git("diff", "--quiet", "HEAD", "--", ".", *figures)
    return head + ("-dirty" if changed.returncode == 1 else "")


def save(record: dict, kind: str) -> Path:
    """Write `record` as bench/results/<bench>-<kind>.json (kind: cpu or gpu)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{record['bench']}-{kind}.json"
    out.write_text(json.dumps(record) + "\n")
    return out
