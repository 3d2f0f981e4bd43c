"""The one exception type for bad user input, so entry scripts can print it without a traceback."""


class InputError(ValueError):
    """Input (a file, a config value) is wrong: the message says what, where, and how to fix it."""


class StorageError(InputError):
    """An output could not be written (a full disk, a size limit): the message says what was
    kept and how to go on. Reported like bad input: one clear message, no traceback."""
