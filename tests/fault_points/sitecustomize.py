"""Fault points for tests/test_faults.py, in every Python process a test starts with this folder
on PYTHONPATH (Python imports `sitecustomize` as it starts).

A job reaches events of its own progress, whatever the CPU's speed:
- `progress`: a progress bar (tqdm) reached position n (an item begun, or an update made);
- `staged`: a temporary file or folder begun inside the project (where outputs are staged);
- `before_publish`, `after_publish`: just before and just after a rename inside the project
  (an output published, a run folder moved aside).

AIAYN_FAULT_COUNT=<folder>: each process writes as it exits (os._exit too) how far it got in each kind
(`<pid>.json`). AIAYN_FAULT_PAUSE=<kind>:<n>:<marker>: the first process to reach the n-th event
of that kind (for `progress`, position n) writes <marker> and stops itself (SIGSTOP), so that the
test's `kill -9` lands exactly there. Snakemake's own process is never counted or stopped, and
only paths under AIAYN_FAULT_ROOT count (not caches such as torch's extensions, nor
snakemake's records in .snakemake/). Without these variables nothing is changed.
"""

import os

ROOT = os.environ.get("AIAYN_FAULT_ROOT")
if ROOT and (os.environ.get("AIAYN_FAULT_COUNT") or os.environ.get("AIAYN_FAULT_PAUSE")):
    import atexit
    import json
    import signal
    import sys
    import tempfile

    COUNT_DIR = os.environ.get("AIAYN_FAULT_COUNT")
    PAUSE = os.environ.get("AIAYN_FAULT_PAUSE", "")
    PAUSE_KIND, PAUSE_AT, MARKER = PAUSE.split(":", 2) if PAUSE else ("", "0", "")
    PAUSE_AT = int(PAUSE_AT)
    reached = {"progress": 0, "staged": 0, "before_publish": 0, "after_publish": 0}
    original = {"replace": os.replace, "rename": os.rename}
    original_mkstemp, original_mkdtemp = tempfile.mkstemp, tempfile.mkdtemp

    def is_job() -> bool:
        """Not snakemake itself (`python -m snakemake` or its console script)."""
        first = sys.argv[0] if sys.argv else ""
        return not first.endswith(("snakemake/__main__.py", "bin/snakemake"))

    def in_project(path) -> bool:
        full = os.path.abspath(os.fspath(path))
        return full.startswith(ROOT + os.sep) and f"{os.sep}.snakemake{os.sep}" not in full

    def pause(kind: str, event: int) -> None:
        tmp = f"{MARKER}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"pid": os.getpid(), "kind": kind, "event": event, "argv": sys.argv}, handle)
        original["replace"](tmp, MARKER)
        os.kill(os.getpid(), signal.SIGSTOP)  # every thread at once, until the kill

    def reach(kind: str, event: int | None = None) -> None:
        """Count one event of `kind` (progress: the bar's position `event`), pausing on the
        one asked for."""
        if not is_job():
            return
        if event is None:
            reached[kind] += 1
            event = reached[kind]
        else:
            reached[kind] = max(reached[kind], event)
        if kind == PAUSE_KIND and event == PAUSE_AT:
            pause(kind, event)

    def counted_rename(name: str):
        def rename(src, dst, *args, **kwargs):
            counted = in_project(src)
            if counted:
                reach("before_publish")
            result = original[name](src, dst, *args, **kwargs)
            if counted:
                reach("after_publish")
            return result

        return rename

    os.replace, os.rename = counted_rename("replace"), counted_rename("rename")

    def mkstemp(*args, **kwargs):
        made = original_mkstemp(*args, **kwargs)
        if in_project(made[1]):
            reach("staged")
        return made

    def mkdtemp(*args, **kwargs):
        made = original_mkdtemp(*args, **kwargs)
        if in_project(made):
            reach("staged")
        return made

    tempfile.mkstemp, tempfile.mkdtemp = mkstemp, mkdtemp

    from tqdm import std

    original_iter, original_update = std.tqdm.__iter__, std.tqdm.update

    def iterate(self):
        position = getattr(self, "initial", 0) or 0
        for item in original_iter(self):
            position += 1
            if not self.disable:
                reach("progress", position)
            yield item

    def update(self, n=1):
        before = getattr(self, "n", 0)
        result = original_update(self, n)
        if not self.disable:
            for position in range(int(before) + 1, int(self.n) + 1):
                reach("progress", position)
        return result

    std.tqdm.__iter__, std.tqdm.update = iterate, update

    def write_counts() -> None:
        if COUNT_DIR and is_job() and any(reached.values()):
            path = os.path.join(COUNT_DIR, f"{os.getpid()}.json")
            with open(path, "w", encoding="utf-8") as handle:
                json.dump({"argv": sys.argv, "reached": reached}, handle)

    atexit.register(write_counts)
    original_exit = os._exit

    def leave(status):
        """os._exit skips atexit (the trainer leaves that way): count first."""
        write_counts()
        original_exit(status)

    os._exit = leave
