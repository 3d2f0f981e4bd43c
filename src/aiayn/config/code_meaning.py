"""A Python file's version by what its code does, not how it is written.

A stage reruns when its code changes (aiayn.config.versions). Hashing a file's bytes reran every
training of a study after a comment, a docstring or `ruff format`; this hashes the file's syntax
tree instead, so that comments, blank lines, line breaks, parentheses, quoting style, docstrings
(and any other statement that is only a constant or `pass`) and the order of a block of imports
never reach the version, while any changed statement, constant, default or signature does.

The tree is written out by hand rather than with `ast.dump`: fields that are empty or None are
left out, so that a newer Python adding an empty field to a node (3.12's `type_params`) gives the
same version for the same code.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
from pathlib import Path

# Fields that never change what the code does: a string's `u` prefix, `# type:` comments
IGNORED_FIELDS = {"kind", "type_comment", "type_ignores"}
IMPORTS = (ast.Import, ast.ImportFrom)


def meaning_version(source: str, filename: str = "<source>") -> str:
    """16 hex digits of the source's canonical syntax tree (see the module's docstring)."""
    tree = ast.parse(source, filename=filename)
    return hashlib.sha256(canonical(tree).encode()).hexdigest()[:16]


def file_meaning_version(path: Path) -> str:
    """`meaning_version` of a file's text; a file unchanged since (same modification time and
    size) is not hashed again: every rule and stage of a study versions the shared modules."""
    status = os.stat(path)
    return cached_version(str(Path(path).resolve()), status.st_mtime_ns, status.st_size)


@functools.lru_cache(maxsize=4096)
def cached_version(path: str, modified_ns: int, size: int) -> str:
    tree = parsed_file(path, modified_ns, size)
    return hashlib.sha256(canonical(tree).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=4096)
def parsed_file(path: str, modified_ns: int, size: int) -> ast.Module:
    """A file's syntax tree, parsed once for its version and its imports
    (aiayn.config.workflow.imported_names); never modified by either."""
    return ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)


def canonical(node) -> str:
    """The node as text: its type and non-empty fields, statements that do nothing left out."""
    if isinstance(node, ast.AST):
        fields = []
        for name in node._fields:
            value = getattr(node, name, None)
            if name in IGNORED_FIELDS or value is None or value == []:
                continue
            if isinstance(value, list) and all(isinstance(item, ast.stmt) for item in value):
                value = statements(value)
            elif isinstance(node, IMPORTS) and name == "names":
                value = sorted(value, key=lambda alias: (alias.name, alias.asname or ""))
            fields.append(f"{name}={canonical(value)}")
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return f"[{','.join(canonical(item) for item in node)}]"
    return f"{type(node).__name__}:{node!r}"


def statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """A block without its no-op statements, each run of consecutive imports in sorted order."""
    kept = [statement for statement in body if not is_no_op(statement)]
    ordered, run = [], []
    for statement in kept:
        if isinstance(statement, IMPORTS):
            run.append(statement)
            continue
        ordered.extend(sorted(run, key=canonical))
        run = []
        ordered.append(statement)
    return ordered + sorted(run, key=canonical)


def is_no_op(statement: ast.stmt) -> bool:
    """A docstring (or any bare constant, `...` included) or `pass`."""
    if isinstance(statement, ast.Pass):
        return True
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
