"""Glue for the Snakefile: which checkout jobs import, and which of its files each rule runs."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from aiayn.config.code_meaning import file_imports

CHECKOUT_VARIABLE = "AIAYN_CHECKOUT"


def use_this_checkout(src_dir: str | os.PathLike) -> None:
    """Make jobs import `aiayn` from this checkout's src/, whatever else is installed.

    Then the code that runs is the code whose hash drives the rerun triggers, also in cluster
    jobs. Snakemake clears PYTHONPATH in conda jobs (`--sdm conda`): there the environment has
    the checkout installed in editable mode, from $AIAYN_CHECKOUT (rules/envs/aiayn.yaml).
    """
    src_dir = str(Path(src_dir).resolve())
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != src_dir]
    os.environ["PYTHONPATH"] = os.pathsep.join([src_dir, *paths])
    os.environ[CHECKOUT_VARIABLE] = str(Path(src_dir).parent)


def package_modules(entry: str | os.PathLike, src_dir: str | os.PathLike) -> list[Path]:
    """The package's source files that `entry` (a workflow script or a module) runs: every
    `aiayn` module it imports or starts by `-m`, directly or through each other, imports inside
    functions included, with the `__init__.py` of each package on the way.

    A rule hashes these for its rerun trigger, so no list of modules can go stale.
    """
    src_dir = Path(src_dir).resolve()
    found: set[Path] = set()
    pending = [Path(entry).resolve()]
    while pending:
        path = pending.pop()
        for name in imported_names(path, src_dir):
            for file in files_of(name, src_dir):
                if file not in found:
                    found.add(file)
                    pending.append(file)
    return sorted(found)


def imported_names(path: Path, src_dir: Path) -> frozenset[str]:
    """Dotted names that the file's import statements may load: `from a.b import c` gives
    a.b and a.b.c (c may be a module), relative imports resolved against the file's package.
    A file is parsed once per content (aiayn.config.code_meaning.file_imports)."""
    status = os.stat(path)
    return cached_imported_names(Path(path), Path(src_dir), status.st_mtime_ns, status.st_size)


@functools.lru_cache(maxsize=4096)
def cached_imported_names(path: Path, src_dir: Path, modified_ns: int, size: int) -> frozenset[str]:
    package = path.parent.relative_to(src_dir).parts if path.is_relative_to(src_dir) else ()
    names = set()
    for statement in file_imports(path):
        if statement[0] == "import":
            names.update(statement[1])
            continue
        _, level, module, imported = statement
        base = module.split(".") if module else []
        if level:
            base = [*package[: len(package) - level + 1], *base]
        names.add(".".join(base))
        names.update(".".join([*base, name]) for name in imported)
    return frozenset(names)


def files_of(name: str, src_dir: Path) -> list[Path]:
    """The source files that importing `name` executes within src_dir (none outside it)."""
    parts, files = name.split("."), []
    for depth in range(1, len(parts) + 1):
        stem = src_dir.joinpath(*parts[:depth])
        if (stem / "__init__.py").is_file():
            files.append(stem / "__init__.py")
        elif stem.with_suffix(".py").is_file():
            files.append(stem.with_suffix(".py"))
            break
        else:
            break
    return files


def module_version(module: str) -> str:
    """What a module loaded by name does (`aiayn.decode.dev_translation`), with every `aiayn`
    module it runs, by meaning (aiayn.config.code_meaning): 16 hex digits."""
    import hashlib
    import importlib.util
    import json

    from aiayn.config.code_meaning import file_meaning_version

    entry = Path(importlib.util.find_spec(module).origin).resolve()
    src_dir = entry.parents[len(module.split(".")) - 1]
    files = [entry, *package_modules(entry, src_dir)]
    versions = sorted((path.relative_to(src_dir).as_posix(), file_meaning_version(path))
                      for path in files)  # fmt: skip
    return hashlib.sha256(json.dumps(versions).encode()).hexdigest()[:16]
