"""Glue that the Snakefile needs before it can import anything else from the package."""

from __future__ import annotations

import os
from pathlib import Path


def use_this_checkout(src_dir: str | os.PathLike) -> None:
    """Make jobs import `aiayn` from this checkout's src/, whatever else is installed.

    Then the code that runs is the code whose hash drives the rerun triggers, also inside conda
    environments and cluster jobs.
    """
    src_dir = str(Path(src_dir).resolve())
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != src_dir]
    os.environ["PYTHONPATH"] = os.pathsep.join([src_dir, *paths])
