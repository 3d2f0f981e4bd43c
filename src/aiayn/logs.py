"""Logging and progress bars that go to the rule's log file, as every rule has a `log:`."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys

from tqdm import tqdm

_progress_stream = sys.stderr


def setup_logging(logfile: str | None = None, level: int = logging.INFO) -> logging.Logger:
    """Send log records (and progress bars) to `logfile` and to stderr."""
    global _progress_stream
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if logfile:
        stream = open(logfile, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives with the process
        handlers.append(logging.StreamHandler(stream))
        _progress_stream = stream
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    return logging.getLogger("aiayn")


def progress(iterable=None, **kwargs):
    """A tqdm bar written to the log file (or stderr), updated at most every few seconds."""
    kwargs.setdefault("mininterval", 5.0)
    kwargs.setdefault("ascii", True)
    kwargs.setdefault("dynamic_ncols", False)
    return tqdm(iterable, file=_progress_stream, **kwargs)


def run_stage(main, logfile: str | None = None) -> None:
    """Run a stage's main(); bad input, the storage's refusal and memory that ran out are
    logged as one clear error and exit 1 (no traceback)."""
    from aiayn.errors import InputError, memory_refusal, out_of_memory, storage_refusal

    log = setup_logging(logfile)
    try:
        main()
    except InputError as err:
        log.error("%s", err)
        sys.exit(1)
    except (MemoryError, RuntimeError) as err:
        if not out_of_memory(err):
            raise
        log.error("%s", memory_refusal(err))
        sys.exit(1)
    except OSError as err:  # the storage's refusal (a full disk, another's folder), not a bug
        if (refusal := storage_refusal(err)) is None:
            raise
        log.error("%s", refusal)
        sys.exit(1)


def save_record(path: str, record: dict) -> None:
    """Write a stage's JSON record and log it, so the log says what the stage did."""
    from aiayn.textio import write_json

    write_json(path, record)
    logging.getLogger("aiayn").info("%s: %s", path, json.dumps(record, ensure_ascii=False))


@contextlib.contextmanager
def native_stderr_to(logfile: str | None):
    """Send what C/C++ libraries (sentencepiece) print on stderr to the log file, then restore."""
    if not logfile:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with open(logfile, "ab") as target:
        os.dup2(target.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
