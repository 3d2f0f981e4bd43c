"""The config schema, read by the settings dataclasses for their defaults.

Each default is written once, in the schema, where users read it and where `validate()` fills
it into the config; the dataclasses that carry the settings to the code take their field
defaults from there, so a script, a test or a benchmark that builds settings by hand gets the
workflow's defaults. The schema ships inside the package (`aiayn/config/config.schema.yaml`), so a
wheel or a non-editable `pip install .` carries it; the checkout's `schemas/config.schema.yaml`,
which the Snakefile validates against, is a link to the same file.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

SCHEMA = "schemas/config.schema.yaml"  # in a workflow checkout, as the Snakefile validates
SCHEMA_FILE = Path(__file__).resolve().with_name("config.schema.yaml")  # package data

# Where each settings object's properties are in the schema.
SECTIONS = {
    "train": ("experiment", "train"),
    "decode": ("experiment", "decode"),
    "clean": ("dataset", "clean"),
    "subword": ("dataset", "subword"),
    "linearization": ("dataset", "linearization"),
}


@cache
def schema() -> dict:
    if not SCHEMA_FILE.is_file():
        raise RuntimeError(
            f"{SCHEMA_FILE} is missing: the package was installed without its data; "
            "reinstall it (`pip install .` or `pip install -e .`)"
        )
    return yaml.safe_load(SCHEMA_FILE.read_text(encoding="utf-8"))


def section_properties(section: str) -> dict:
    """The schema's properties of one settings section (train, decode, clean, subword, ...)."""
    definition, key = SECTIONS[section]
    return schema()["$defs"][definition]["properties"][key]["properties"]


def defaults(section: str) -> dict:
    """The default of every property of a settings section."""
    return {name: spec["default"] for name, spec in section_properties(section).items()}


def source_defaults(source: str) -> dict:
    """The defaults of a split's keys for one kind of source (toy, local, hf, sacrebleu, ptb)."""
    for branch in schema()["$defs"]["split"]["allOf"]:
        if branch["if"]["properties"]["source"]["const"] == source:
            properties = branch["then"]["properties"]
            return {key: spec["default"] for key, spec in properties.items() if "default" in spec}
    raise KeyError(source)
