"""Config files composed into one study: which files count, how they add up, what it is called.

Without `--configfile`, the study is config.yaml (the toy study). With config files, config.yaml
is left out entirely, so its toy experiments never leak into a preset's run, and the files add up:

- `experiments` and `datasets` are keyed by name. Files given side by side (on the command line,
  or in one `include:` list) add their entries; a name they both define must have the same
  settings, else it is an error naming both files.
- A file's `include:` list (paths relative to that file) is read first; the file's own entries
  then refine what it included, key by key (so paper.yaml can mark the WSJ as optional).
- `prepare` lists are joined; other settings: the later file wins.
- The study is named by each command-line file's `study:` (or its file name), joined by `+`
  when several differ; `--config study=NAME` names it outright (refused where snakemake
  reads NAME as a number that reads back otherwise: `1e5` would be 100000.0). Its results go
  to results/<study>/.

`--config` overrides go on last, merged key by key as Snakemake merges them.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from aiayn.config.check import EXPONENT, check_size
from aiayn.config.yaml_text import (
    BEYOND_A_FLOAT,
    ConfigLoader,
    load_yaml,
    past_a_float,
    raw_study,
)
from aiayn.errors import InputError
from aiayn.textio import reencoding

NAMED_SECTIONS = ("experiments", "datasets")


@dataclass
class Layer:
    """The settings one file (with its includes) contributes, and which file defined each
    experiment and dataset."""

    config: dict = field(default_factory=dict)
    origins: dict = field(default_factory=dict)  # (section, name) -> the defining file
    study: str | None = None


@dataclass(frozen=True)
class Passed:
    """The config a deploying workflow passes to this one as a Snakemake module (`module aiayn:
    config: config`): its settings and the file they were read from (its `include:` paths are
    relative to it, its stem names a study without `study:`)."""

    settings: Mapping
    origin: Path


def compose_config(
    default: Path,
    configfiles: Sequence[Path] = (),
    overrides: Mapping | None = None,
    passed: Passed | None = None,
    workflow_dir: Path | None = None,
) -> dict:
    """The study's config (not yet validated): the config a deploying workflow passed, or else
    `default` alone or the config files added up; then `overrides` (Snakemake's --config) on
    top. An include not found beside the file naming it is looked for in `workflow_dir` (the
    workflow's checkout, whose presets a deployment's config names)."""
    if passed is not None:
        where = f"the config passed to the module (read from {passed.origin})"
        settings = checked_settings(copy.deepcopy(dict(passed.settings)), where)
        files = [passed.origin]
        layers = [layer_of(settings, passed.origin, (), workflow_dir)]
    else:
        files = [Path(f) for f in configfiles] or [Path(default)]
        layers = [read_layer(path, (), workflow_dir) for path in files]
    config = side_by_side(layers).config
    studies = [
        study_name(layer.study, path) or path.stem
        for layer, path in zip(layers, files, strict=True)
    ]
    config["study"] = "+".join(dict.fromkeys(studies))
    merge(config, typed_overrides(overrides or {}))
    if isinstance(config["study"], int | float) and not isinstance(config["study"], bool):
        config["study"] = command_line_study(config["study"], sys.argv)
    return config


def command_line_study(value: float, argv: Sequence[str]) -> str:
    """The name `--config study=...` gives. Snakemake has read it already, as a number where it
    could (`1e5` as 100000.0, `02024` as 2024, quoted or not); the command line still holds what
    was typed, and a number that reads back otherwise would name another folder: refused."""
    typed = [found.group(1) for argument in argv
             if (found := re.fullmatch(r"(?:--config=)?study=(.*)", argument, re.S))]  # fmt: skip
    name = str(value)
    if typed and typed[-1].strip("'\"") != name:
        raise InputError(
            f"--config study={typed[-1]}: snakemake reads it as the number {value!r}, which "
            f"would name the study {name!r}: name it in a config file instead (`study: "
            f"{typed[-1]}` there keeps it as written), or give a name that is not a number"
        )
    return name


def study_name(value, path: Path) -> str | None:
    """A file's `study:`; a number (`study: 2024`, which YAML reads as one) is its name."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise InputError(f"{path}: `study: {value!r}` is not a name: write the study's name")


def typed_overrides(overrides: Mapping) -> dict:
    """Snakemake's `--config KEY=VALUE` reads a nested VALUE (`{tiny: {train: {max_steps:
    100}}}`) with YAML's BaseLoader, which leaves every scalar inside it a string ('100',
    'true'); read them as the same text in a config file would be (100, True), so that nested
    numbers and booleans can be set from the command line."""
    return {
        key: typed_scalars(value, key) if isinstance(value, dict | list) else copy.deepcopy(value)
        for key, value in overrides.items()
    }


def typed_scalars(value, where: str):
    """`value` with each string read as a config file reads it (`010` stays text, as there),
    but for a number with an exponent and no point (`1e-3`), a number here; one past what a
    float holds is refused naming `where`, its key under --config."""
    if isinstance(value, dict):
        return {key: typed_scalars(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [typed_scalars(item, f"{where}.{index}") for index, item in enumerate(value)]
    if not isinstance(value, str):
        return value
    try:
        typed = yaml.load(value, Loader=ConfigLoader) if value.strip() else None  # noqa: S506
        if EXPONENT.fullmatch(value):  # `1e-3`, which YAML 1.1 reads as text
            typed = float(value)
            if past_a_float(value, typed):
                raise InputError(value)
    except yaml.YAMLError:
        return value
    except InputError:
        raise InputError(f"--config {where}: {value} {BEYOND_A_FLOAT}") from None
    return typed if typed is None or isinstance(typed, bool | int | float) else value


def read_layer(path: Path, including: tuple[Path, ...], workflow_dir: Path | None = None) -> Layer:
    """One file with everything it includes, its own entries refining the included ones."""
    resolved = path.resolve()
    if resolved in including:
        chain = " -> ".join(str(p) for p in (*including, resolved))
        raise InputError(f"config files include each other in a circle: {chain}")
    return layer_of(load_file(path), path, including, workflow_dir)


def layer_of(
    own: dict, path: Path, including: tuple[Path, ...], workflow_dir: Path | None
) -> Layer:
    """The settings `own` read from `path`, on top of what they include."""
    includes = own.pop("include", [])
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise InputError(f"{path}: `include` must be a list of config file paths")
    chain = (*including, path.resolve())
    included = side_by_side(
        [
            read_layer(include_path(path, name, workflow_dir), chain, workflow_dir)
            for name in includes
        ]
    )
    layer = Layer(included.config, dict(included.origins), own.pop("study", None))
    for section in NAMED_SECTIONS:
        entries = layer.config.setdefault(section, {})
        for name, settings in (own.pop(section, None) or {}).items():
            if name in entries and isinstance(settings, dict):
                merge(entries[name], settings)
            else:
                entries[name] = settings
            layer.origins[(section, name)] = path
    layer.config["prepare"] = joined(layer.config.get("prepare"), own.pop("prepare", None))
    merge(layer.config, own)
    return layer


def side_by_side(layers: list[Layer]) -> Layer:
    """Layers that add up: named entries joined (a name twice must agree), `prepare` joined,
    other settings the later layer's."""
    total = Layer({section: {} for section in NAMED_SECTIONS})
    for layer in layers:
        for section in NAMED_SECTIONS:
            entries = total.config[section]
            for name, settings in layer.config.get(section, {}).items():
                key = (section, name)
                if name in entries and entries[name] != settings:
                    raise InputError(
                        f"{section[:-1]} {name!r} is defined twice with different settings: in "
                        f"{total.origins[key]} and in {layer.origins[key]}. Give one of them "
                        "another name, or define it in one file that both include"
                    )
                if name not in entries:
                    entries[name] = copy.deepcopy(settings)
                    total.origins[key] = layer.origins[key]
        total.config["prepare"] = joined(total.config.get("prepare"), layer.config.get("prepare"))
        rest = {k: v for k, v in layer.config.items() if k not in (*NAMED_SECTIONS, "prepare")}
        merge(total.config, copy.deepcopy(rest))
    return total


def include_path(including_file: Path, name: str, workflow_dir: Path | None) -> Path:
    """An include's path, relative to the file that names it; a config outside the checkout may
    also name this workflow's presets, as the checkout's root or its configs/ folder sees them
    (`configs/wmt14_en_de.yaml`, or a copied preset's own `data/multi30k.yaml`)."""
    places = [including_file.parent / name]
    if workflow_dir is not None:
        places += [workflow_dir / name, workflow_dir / "configs" / name]
    found = next((place for place in places if place.is_file()), None)
    if found is not None:
        return found
    tried = ", ".join(shown(str(place)) for place in dict.fromkeys(places))
    raise InputError(
        f"{including_file}: the include {shown(name)} is not a file at {tried}; correct the "
        "path (relative to the including file) or remove it from `include:`"
    )


def shown(text: str) -> str:
    """Text as it reads on one line: quoted with escapes where it holds a newline or another
    character that does not print."""
    return text if text.isprintable() else repr(text)


def load_file(path: Path) -> dict:
    if not path.is_file():
        missing = "is not a file" if path.exists() else "does not exist"
        raise InputError(f"config file {shown(str(path))} {missing}")
    try:
        text = path.read_text(encoding="utf-8")
        data = load_yaml(text, f"config file {path}") or {}
    except yaml.YAMLError as err:
        raise InputError(f"config file {path} is not valid YAML: {err}") from None
    except UnicodeDecodeError as err:
        raise InputError(
            f"config file {path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at "
            f"offset {err.start}): re-encode it: {reencoding(err.object[:4], path)}"
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"config file {path} must hold a mapping of settings")
    if isinstance(data.get("study"), int | float) and not isinstance(data["study"], bool):
        data["study"] = raw_study(text)  # a name, as written (`0x10`, not 16)
    return checked_settings(data, str(path))


def checked_settings(data: dict, path: str) -> dict:
    """What must hold of one file's settings before files are added up."""
    check_size(data, path)
    prepare = data.get("prepare")
    if prepare is not None and not (
        isinstance(prepare, list) and all(isinstance(name, str) for name in prepare)
    ):
        raise InputError(f"{path}: `prepare` must be a list of dataset names")
    for section in NAMED_SECTIONS:
        if isinstance(data.get(section), list):
            raise InputError(
                f"{path}: `{section}` is a list; it is keyed by name, so that config files add "
                f"to each other: write `{section}: {{NAME: {{...}}}}` with each entry's name as "
                "its key (and no `name:` inside)"
            )
        if data.get(section) is not None and not isinstance(data[section], dict):
            raise InputError(f"{path}: `{section}` must map names to settings")
    return data


def joined(first, second) -> list:
    """Two `prepare` lists as one, in order, each name once."""
    return list(dict.fromkeys([*(first or []), *(second or [])]))


def merge(config: dict, update: Mapping) -> None:
    """Snakemake's key-by-key merge (nested mappings merged, everything else replaced), of a
    copy, so that the merged config shares nothing with the file it came from."""
    from snakemake.utils import update_config

    update_config(config, copy.deepcopy(dict(update)))


def absent_optional_datasets(config: dict) -> dict[str, str]:
    """Datasets marked `optional` whose local root folder does not exist (data the user must
    supply, like the LDC's WSJ), each with the one line that says how to add it."""
    absent = {}
    for name, dataset in config["datasets"].items():
        root = dataset.get("root")
        if not dataset.get("optional") or root is None or "://" in root:
            continue
        if not Path(root).expanduser().exists():
            users = [n for n, e in config["experiments"].items() if e["dataset"] == name]
            absent[name] = (
                f"left out {', '.join(users) or 'nothing'}: dataset {name!r} has no data at "
                f"{root}; to add it: --config 'datasets={{{name}: {{root: /path/to/it}}}}'"
            )
    return absent


def check_not_emptied(config: dict, absent: dict[str, str]) -> None:
    """A study whose every experiment needs an optional dataset that is absent (a mistyped
    root, say) would end empty with exit 0; that is an error, with each dataset's line."""
    if not absent:
        return
    kept = without_datasets(config, absent)
    if (config["experiments"] or config["prepare"]) and not (
        kept["experiments"] or kept["prepare"]
    ):
        raise InputError(
            "nothing is left of the study: every experiment needs an optional dataset whose "
            "data is absent. " + " ".join(absent.values())
        )


def without_datasets(config: dict, names) -> dict:
    """The config without these datasets, their experiments, or their `prepare` entries."""
    names = set(names)
    kept = copy.deepcopy(config)
    kept["datasets"] = {n: d for n, d in kept["datasets"].items() if n not in names}
    kept["experiments"] = {
        n: e for n, e in kept["experiments"].items() if e["dataset"] not in names
    }
    kept["prepare"] = [n for n in kept["prepare"] if n not in names]
    return kept
