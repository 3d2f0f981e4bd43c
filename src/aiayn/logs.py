"""Logging and progress bars that go to the rule's log file, as every rule has a `log:`."""

from __future__ import annotations

import logging
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
    """Run a stage's main(); bad input is logged as one clear error and exits 1 (no traceback)."""
    from aiayn.errors import InputError

    log = setup_logging(logfile)
    try:
        main()
    except InputError as err:
        log.error("%s", err)
        sys.exit(1)
