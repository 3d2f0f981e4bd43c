"""The content of a local source file, as a param of its download job: Snakemake's mtime trigger
misses a file replaced by another with the old mtime (`cp -p`, `rsync -a`, `tar x`), its params
trigger does not.

Hashing a corpus at every start would cost seconds per GB, so each digest is kept in a cache
beside Snakemake's records (CACHE), keyed by what no copy can keep: the file's inode and change
time (ctime, which no user can set), with its size and mtime. A file whose keys are unchanged is
not read.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

from aiayn.textio import atomic_output, file_sha256

# In the workflow's folder, beside Snakemake's own records (its params trigger reads them)
CACHE = ".snakemake/aiayn/source_sha256.json"


def stamp(info: os.stat_result) -> list[int]:
    return [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def source_digests(files: list[str], cache_path: str | os.PathLike = CACHE) -> list[str | None]:
    """The sha256 of each file (None for one that is not there, or is no regular file: a
    device such as /dev/zero never ends; the job then says so)."""
    cache_path = Path(cache_path)
    cache = {}
    with contextlib.suppress(OSError, ValueError):
        cache = json.loads(cache_path.read_text(encoding="utf-8"))
    digests, changed = [], False
    for name in files:
        try:
            info = os.stat(name)
        except OSError:
            info = None
        if info is None or not stat.S_ISREG(info.st_mode):
            digests.append(None)
            continue
        key = os.path.realpath(name)
        entry = cache.get(key)
        if not isinstance(entry, dict) or entry.get("stamp") != stamp(info):
            entry, changed = {"stamp": stamp(info), "sha256": file_sha256(name)}, True
            cache[key] = entry
        digests.append(entry["sha256"])
    if changed:
        with contextlib.suppress(OSError):  # a read-only folder: the digests still count
            with atomic_output(cache_path) as handle:
                json.dump(cache, handle, indent=1)
    return digests
