"""The user's cache of what is costly to find and cannot change while its key holds: a device's
measured rate (aiayn.flops), a source file's version by meaning (aiayn.config.code_meaning).

It lives in $XDG_CACHE_HOME/aiayn (~/.cache/aiayn), one JSON file per kind, each written whole
under a temporary name. A file that is missing, damaged or cannot be written costs only the
work it saves: nothing read from it is trusted beyond its shape, and no run fails for it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from aiayn.textio import atomic_output


def cache_file(name: str) -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "aiayn" / name


def read_cache(path: Path) -> dict:
    """The file's mapping, or an empty one where it is missing or not a JSON object."""
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def write_cache(path: Path, kept: dict) -> OSError | None:
    """Write the mapping whole; the error where the folder cannot take it, for a warning."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path) as handle:
            json.dump(kept, handle, indent=1)
    except OSError as err:
        return err
    return None
