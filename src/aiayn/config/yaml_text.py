"""Reading a config file's YAML as a user means it.

PyYAML reads YAML 1.1, some of whose implicit types are not what they look like in a config: a
base-60 number (`12:30:00` is 45000), an octal with a leading zero (`010` is 8), a date. Here they
stay text, so the schema refuses them where a number is due, naming the key. A structure that
holds itself through an alias, or nests deeper than Python can follow, is refused by name, and
so is a number past what a float holds (`1.0e+400` would be infinity, `1.0e-400` zero).
"""

from __future__ import annotations

import math
import re

import yaml

from aiayn.errors import InputError

BEYOND_A_FLOAT = (
    "is beyond what a number holds here (the largest about 1.8e+308, the smallest above 0 "
    "about 4.9e-324)"
)


def past_a_float(text: str, value: float) -> bool:
    """Whether `value`, read from `text`, lost what the text says: infinity from digits that
    are not `inf`, or 0 from a number that is not zero."""
    mantissa = re.split("[eE]", text)[0]
    return (math.isinf(value) and "inf" not in text.lower()) or (
        value == 0 and re.search("[1-9]", mantissa) is not None
    )


# YAML 1.1's numbers less base 60 (`12:30:00`) and leading-zero octals (`010`)
STRICT_NUMBERS = {
    "tag:yaml.org,2002:int": r"[-+]?0b[0-1_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+",
    "tag:yaml.org,2002:float": r"[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?"
    r"|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
}


def strict_resolvers() -> dict:
    """SafeLoader's implicit types, with STRICT_NUMBERS' patterns and without dates."""
    found = {}
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items():
        kept = []
        for tag, pattern in resolvers:
            if tag in STRICT_NUMBERS:
                pattern = re.compile(f"^(?:{STRICT_NUMBERS[tag]})$")
            if tag != "tag:yaml.org,2002:timestamp":
                kept.append((tag, pattern))
        found[first] = kept
    return found


class ConfigLoader(yaml.SafeLoader):
    """YAML's safe loader without the YAML 1.1 types that are not what they look like: a
    base-60 number (`12:30:00` would be 45000), an octal with a leading zero (`010` would be 8)
    and a date stay text, which the schema then refuses where a number is due, naming the key.
    Hex (`0x10`), booleans (`yes`, `no`) and `.inf`/`.nan` keep their YAML meaning."""

    yaml_implicit_resolvers = strict_resolvers()

    def construct_yaml_float(self, node) -> float:
        """A float as written; refused where it is not: past what a float holds, PyYAML
        reads `1.0e+400` as infinity and `1.0e-400` as 0."""
        value = super().construct_yaml_float(node)
        if past_a_float(node.value, value):
            raise InputError(f"line {node.start_mark.line + 1}: {node.value} {BEYOND_A_FLOAT}")
        return value


ConfigLoader.add_constructor("tag:yaml.org,2002:float", ConfigLoader.construct_yaml_float)


def load_yaml(text: str, where: str):
    """`text` read with ConfigLoader; a structure that holds itself through an alias (`&a [*a]`)
    or nests deeper than Python can follow is refused, naming `where`."""
    try:
        data = yaml.load(text, Loader=ConfigLoader)  # noqa: S506 - a SafeLoader
    except RecursionError:
        raise InputError(f"{where} nests its settings too deeply to read: flatten it") from None
    except InputError as error:  # a number past a float's range, at its line
        raise InputError(f"{where}, {error}") from None
    check_no_loop(data, where)
    return data


def check_no_loop(value, where: str, path: tuple = (), holding=frozenset(), done=None) -> None:
    """Refuse a structure that holds itself. Each shared part (an alias used many times, as in
    a YAML bomb) is walked once: `done` holds the parts already found free of loops."""
    done = set() if done is None else done
    if not isinstance(value, dict | list) or id(value) in done:
        return
    if id(value) in holding:
        at = ".".join(map(str, path)) or "the top"
        raise InputError(
            f"{where}: the YAML alias at {at} refers to a structure that holds it (a loop): "
            "write the value out instead of the `*alias`"
        )
    holding = holding | {id(value)}
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        check_no_loop(item, where, (*path, key), holding, done)
    done.add(id(value))


def raw_study(text: str) -> str:
    """The text of a file's top-level `study:`, a number there, as written."""
    node = yaml.compose(text, Loader=ConfigLoader)
    return next(value.value for key, value in node.value if key.value == "study")
