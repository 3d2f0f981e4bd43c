"""The one exception type for bad user input, so entry scripts can print it without a traceback."""

from __future__ import annotations

import errno
import os

FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # a full disk or quota, a file size limit
DENIED = {errno.EROFS, errno.EACCES, errno.EPERM}  # a read-only file system, another's folder


class InputError(ValueError):
    """Input (a file, a config value) is wrong: the message says what, where, and how to fix it."""


class StorageError(InputError):
    """An output could not be written (a full disk, a size limit): the message says what was
    kept and how to go on. Reported like bad input: one clear message, no traceback."""


def storage_advice(err: OSError, folder) -> str | None:
    """What a user does about an error of the storage under `folder`; None for any other error
    (a bug's OSError keeps its traceback)."""
    if err.errno in FULL:
        return (f"The disk, your quota or the file size limit (`ulimit -f`) is reached there: "
                f"free space (`df -h {folder}`) or work on a bigger disk, then run the same "
                "command again")  # fmt: skip
    if err.errno in DENIED:
        return (f"You may not write or read there: make it and {folder} writable for you "
                f"(`ls -ld {folder}` shows its owner and mode), or work in a folder you own, "
                "then run the same command again")  # fmt: skip
    return None


def storage_refusal(err: OSError) -> str | None:
    """The one-line refusal for an error of the storage, naming the file; None for others."""
    folder = os.path.dirname(os.path.abspath(err.filename)) if err.filename else "."
    advice = storage_advice(err, folder)
    return advice and f"{err.filename or 'a file'}: {err.strerror}. {advice}."
