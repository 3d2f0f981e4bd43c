"""The composed config checked before anything reads it, with a message of one short paragraph.

jsonschema's own error prints the whole instance it failed on: for a misspelt top-level key that
is the whole config (thousands of lines, the key on line 3), and for a YAML alias bomb (aliases
nested ten deep) printing never ends. So the config's expanded size is bounded first, then each
error names its key path, what was wrong and, for an unknown key, the nearest valid name.
Whole-number floats (`2.0`) pass the schema's `integer` in jsonschema; here they are refused,
naming the key, before they fail a run hours later; so are NaN and infinity. Every name that
becomes a path (study, dataset, split, experiment) is held to the schema's `$defs` patterns,
which admit no `.` or `..` and no path separator, so no file of a study can leave its folder.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable

import yaml

from aiayn.config.yaml_text import BEYOND_A_FLOAT, ConfigLoader, past_a_float
from aiayn.errors import InputError

# Values in the config with every YAML alias expanded: the paper's whole study has about 2,000.
MAX_VALUES = 100_000


def check_config(config: dict, schema: dict) -> None:
    """Raise InputError with a short message if the config is too large or breaks the schema."""
    check_size(config, "the config")
    check_keys(config)
    check_finite(config)
    errors = list(strict_validator(schema).iter_errors(config))
    if errors:
        raise InputError(describe(first(errors)))
    check_names_as_wildcards(config)


def check_names_as_wildcards(config: dict) -> None:
    """Names are wildcard values of the rules' file patterns, and Snakemake refuses a value
    ending in a part repeated 20 times or more (`aaaaaaaaaaaaaaaaaaaa`), taking it for an endless
    recursion (its PeriodicWildcardError, when it builds the plan): asked here of its own
    detector, so that the refusal names the key."""
    from snakemake.io import PeriodicityDetector

    detector = PeriodicityDetector()
    for where, name in config_names(config):
        if (part := detector.is_periodic(name)) is not None:
            times = next(n for n in range(len(name), 0, -1) if name.endswith(part * n))
            raise InputError(
                f"config key {where}: {short(name)} ends in {part!r} {times} times over, "
                "which Snakemake refuses in a file name "
                "pattern (it takes the repetition for an endless recursion): shorten the "
                "repeated part"
            )


def config_names(config: dict):
    """Every name that becomes a file name, with its key path."""
    yield "study", config["study"]
    for dataset, settings in config.get("datasets", {}).items():
        yield "datasets", dataset
        for split in settings.get("splits", {}):
            yield f"datasets.{dataset}.splits", split
    for experiment in config.get("experiments", {}):
        yield "experiments", experiment


def check_size(config, what: str) -> None:
    """Refuse a config (or a config file) whose values, aliases expanded, are too many."""
    size = expanded_size(config)
    if size > MAX_VALUES:
        raise InputError(
            f"{what} expands to {size:,} values, over {MAX_VALUES:,}: are YAML aliases "
            "(`*name`) nested in it? Write the repeated settings out, or use a preset's "
            "`include:`"
        )


def check_keys(value, where: tuple = ()) -> None:
    """Every key is text: YAML reads `2024:` as a number and `on:` as true, which no name
    check expects (they ended in a TypeError)."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_keys(item, (*where, index))
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        if isinstance(key, bool):  # YAML 1.1: on/off/yes/no
            raise InputError(
                f"config key {key_path(where)}: a key YAML reads as {str(key).lower()} (on, "
                'off, yes, no, true or false): write the name in quotes, e.g. "on"'
            )
        if not isinstance(key, str):
            raise InputError(
                f"config key {key_path(where)}: the key {key!r} is not text (YAML reads it as "
                f'{type(key).__name__}): write it in quotes, "{key}"'
            )
        check_keys(item, (*where, key))


def check_finite(value, where: tuple = ()) -> None:
    """No setting is NaN or infinite: YAML reads `.nan` and `.inf` as numbers, which pass every
    bound of the schema (NaN compares false with all of them) and then stop a run late or,
    worse, quietly (a NaN minimum improvement made early stopping end a run still improving)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(
            f"config key {key_path(where)}: {value} is not a finite number (YAML reads .nan "
            "and .inf as numbers, and one past about 1.8e+308 as .inf): give a finite value, "
            "or leave the key out for its default"
        )
    if isinstance(value, dict | list):
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            check_finite(item, (*where, key))


def expanded_size(value, sizes: dict | None = None) -> int:
    """How many values `value` holds with aliases expanded, counted without expanding them
    (a shared node's size is computed once)."""
    sizes = {} if sizes is None else sizes
    if not isinstance(value, dict | list):
        return 1
    if id(value) not in sizes:
        sizes[id(value)] = 0  # a node that contains itself counts once
        children = value.values() if isinstance(value, dict) else value
        sizes[id(value)] = 1 + sum(expanded_size(child, sizes) for child in children)
    return sizes[id(value)]


def strict_validator(schema: dict):
    """The schema's validator, with `integer` meaning an int (jsonschema also takes 2.0)."""
    from jsonschema import Draft202012Validator, validators

    def is_integer(checker, instance) -> bool:
        return isinstance(instance, int) and not isinstance(instance, bool)

    checker = Draft202012Validator.TYPE_CHECKER.redefine("integer", is_integer)
    return validators.extend(Draft202012Validator, type_checker=checker)(schema)


def first(errors: list):
    """The error to report: the deepest of the most relevant (jsonschema's best_match)."""
    from jsonschema.exceptions import best_match

    return best_match(errors)


NAME_RULE = (
    "use letters, digits and `_` (names become folders and file names: `.`, `..` and `/` "
    "would lead out of them)"
)
# The schema's name patterns: a name with its suffixes (`<name>.seed100.log`), or two names in
# one file name (`<split>.<src>-<tgt>.<lang>.bin`), stays within a file name's 255 bytes.
NAME_LIMIT = 100


def name_refusal(name) -> str:
    if isinstance(name, str) and len(name) > NAME_LIMIT:
        return (
            f"{short(name)} has {len(name)} characters, over {NAME_LIMIT}: shorten it (names "
            "become folders and file names, with suffixes such as `.seed2.log`, and a file "
            "name holds at most 255 bytes)"
        )
    return f"{short(name)} is not allowed: {NAME_RULE}"


def describe(error) -> str:
    """One paragraph: where, what, and how to fix it; never the whole instance."""
    where = key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        return unknown_key(error, where)
    if error.validator == "pattern":
        if "A-Za-z0-9_" in error.validator_value:  # a name that becomes a path
            return f"config key {where}: {name_refusal(error.instance)}"
        rule = f"it must match {error.validator_value}"
        return f"config key {where}: {short(error.instance)} is not allowed: {rule}"
    if error.validator == "type" and error.validator_value in ("integer", "number"):
        return f"config key {where}: {not_a_number(error.instance, error.validator_value)}"
    if error.validator == "enum" and isinstance(error.instance, bool):
        return f"config key {where}: {yes_no_for_a_word(error.instance, error.validator_value)}"
    message = error.message if len(error.message) <= 300 else error.message[:297] + "..."
    return f"config key {where}: {message}"


def not_a_number(value, kind: str) -> str:
    """What is wrong with a value where a number belongs, said by what it is."""
    wanted = "a whole number" if kind == "integer" else "a number"
    if isinstance(value, bool):
        return f"{str(value).lower()} is a yes/no value, not {wanted}: write {wanted}"
    if value is None:
        return (
            f"the value is empty (null), not {wanted}: write {wanted}, or leave the key out "
            "for its default"
        )
    if isinstance(value, str):
        return f"{short(value)} is text, not {wanted}: {how_to_write_a_number(value, wanted)}"
    if isinstance(value, float) and kind == "integer":
        return f"{short(value)} is not a whole number: write it without a decimal point"
    return f"{short(value)} is not {wanted}"


# what YAML 1.1 reads as a yes/no value, by the value it reads
YES_NO_WORDS = {False: ("off", "no", "false", "n"), True: ("on", "yes", "true", "y")}


def yes_no_for_a_word(value: bool, choices: list) -> str:
    """A yes/no value where one of some words belongs (`wandb: off` is read as false): the
    word meant, to write in quotes, where one of the choices is such a word."""
    words = [choice for choice in choices if isinstance(choice, str)]
    meant = [word for word in words if word.lower() in YES_NO_WORDS[value]]
    read_as = f"YAML reads {', '.join(YES_NO_WORDS[value][:3])} as {str(value).lower()}"
    listed = ", ".join(repr(word) for word in words)
    if meant:
        return f"a yes/no value ({read_as}): write '{meant[0]}' in quotes, or one of {listed}"
    return f"a yes/no value ({read_as}), not one of {listed}: write one of them in quotes"


# an exponent YAML 1.1 leaves as text: it needs a decimal point and a sign (1.0e+5)
EXPONENT = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+")


def yaml_number(number: float) -> str:
    """The number as YAML 1.1 reads it back exactly: digits for a whole number, else Python's
    shortest exact form with a decimal point in the mantissa and a sign on the exponent."""
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    mantissa, _, exponent = repr(number).partition("e")
    if not exponent:
        return mantissa
    mantissa += "" if "." in mantissa else ".0"
    return f"{mantissa}e{exponent if exponent[0] in '+-' else '+' + exponent}"


def how_to_write_a_number(text: str, wanted: str) -> str:
    """The way out for a number read as text: the quotes, where the text unquoted is a number;
    else what YAML made of what was written (a leading zero, a time, a date, `1e5`)."""
    try:
        unquoted = yaml.load(text, Loader=ConfigLoader)  # noqa: S506 - a SafeLoader
    except (yaml.YAMLError, InputError):  # not YAML, or a number past a float's range
        unquoted = None
    if isinstance(unquoted, int | float) and not isinstance(unquoted, bool):
        return 'write it without quotes (in YAML, `key: 100`, not `key: "100"`)'
    if EXPONENT.fullmatch(text.strip()):
        number = float(text)
        if past_a_float(text, number):
            return f"{text.strip()} {BEYOND_A_FLOAT}"
        return ("YAML reads an exponent without a decimal point and a sign as text: write "
                f"{yaml_number(number)}")  # fmt: skip
    example = "100" if wanted == "a whole number" else "0.5"
    return (f"YAML reads `{text[:40]}` as text (a leading zero, a time and a date stay text "
            f"here): write {wanted} in plain digits, like {example}")  # fmt: skip


def unknown_key(error, where: str) -> str:
    """A misspelt key, named first, with the nearest valid name."""
    allowed = list(error.schema.get("properties", {}))
    patterns = list(error.schema.get("patternProperties", {}))
    unknown = [
        name
        for name in error.instance
        if name not in allowed and not any(re.search(p, name) for p in patterns)
    ]
    if not unknown:  # not a key of its own: jsonschema's words, shortened
        return f"config key {where}: {error.message[:300]}"
    name = unknown[0]
    if patterns and not allowed:  # a named entry (a dataset, a split) with a bad name
        return f"config key {where}: {name_refusal(name)}"
    near = difflib.get_close_matches(name, allowed, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    inside = f"under {where}" if where != "(top level)" else "at the top level"
    return f"config: unknown key {name!r} {inside}: {hint}valid keys: {', '.join(allowed)}"


def key_path(parts: Iterable) -> str:
    path = ".".join(str(part) for part in parts)
    return path or "(top level)"


def short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
