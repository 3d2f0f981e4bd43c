"""The one exception type for bad user input, so entry scripts can print it without a traceback."""


class InputError(ValueError):
    """Input (a file, a config value) is wrong: the message says what, where, and how to fix it."""
