"""A Python file's version by what its code does, not how it is written.

A stage reruns when its code changes (aiayn.config.versions). Hashing a file's bytes reran every
training of a study after a comment, a docstring or `ruff format`; this hashes the file's syntax
tree instead, written out so that what cannot change a number never reaches the version:
- comments, blank lines, line breaks, parentheses, quoting style, docstrings (and any other
  statement that is only a constant or `pass`);
- the order of a run of imports (kept where one name is bound twice: then the last one wins)
  and of a run of undecorated function definitions with distinct names;
- the text of messages: the literal parts of what is handed to `raise X(...)`, `assert`'s
  message, a logger's or `warnings.warn`'s call, `print(..., file=sys.stderr)`, a progress bar's
  `desc` and `unit` (the values formatted into them still count);
- type annotations of parameters, returns and local variables (a class's own annotated names,
  a dataclass's fields, still count);
- the names of a function's local variables (not its parameters), where the function has no
  class inside it and calls none of `locals`, `vars`, `eval` and `exec`.
Any changed statement, constant, default or signature still changes the version.

The tree is written out by hand rather than with `ast.dump`: fields that are empty or None are
left out, so that a newer Python adding an empty field to a node (3.12's `type_params`) gives the
same version for the same code.
"""

from __future__ import annotations

import ast
import atexit
import functools
import hashlib
import os
import sys
from pathlib import Path

from aiayn.textio import read_cache, user_cache, write_cache

# Fields that never change what the code does: a string's `u` prefix, `# type:` comments
IGNORED_FIELDS = {"kind", "type_comment", "type_ignores"}
IMPORTS = (ast.Import, ast.ImportFrom)


def meaning_version(source: str, filename: str = "<source>") -> str:
    """16 hex digits of the source's canonical syntax tree (see the module's docstring)."""
    return tree_version(ast.parse(source, filename=filename))


def tree_version(tree: ast.Module) -> str:
    return hashlib.sha256(canonical(tree).encode()).hexdigest()[:16]


def file_meaning_version(path: Path) -> str:
    """`meaning_version` of a file's text, found once per content (cached_facts): every rule
    and stage of a study versions the shared modules."""
    return file_facts(path)["meaning"]


def file_imports(path: Path) -> list[list]:
    """The file's import statements: ["import", names] for `import a.b`, and ["from", level,
    module or "", names] for `from ..a import b, c`; a module it launches by `-m` counts as
    `import` (import_statements)."""
    return file_facts(path)["imports"]


def file_facts(path: Path) -> dict:
    status = os.stat(path)
    return cached_facts(str(Path(path).resolve()), status.st_mtime_ns, status.st_size)


@functools.lru_cache(maxsize=4096)
def cached_facts(path: str, modified_ns: int, size: int) -> dict:
    """A file's version and imports, found once per content: a snakemake start versions about
    100 files, and parsing them took a second of every start (each cluster job's included)."""
    data = Path(path).read_bytes()
    content = hashlib.sha256(data).hexdigest()
    if (known := KEPT.get(content)) is not None:
        return known
    tree = ast.parse(data.decode("utf-8"), filename=path)
    facts = {
        "meaning": tree_version(tree),
        "imports": import_statements(tree),
    }
    KEPT.add(content, facts)
    return facts


def import_statements(tree: ast.Module) -> list[list]:
    """Also ["import", [module]] for each module the file starts as a program, `"-m", "a.b"` in
    a command's list: the train rule runs its trainer so, and the trainer's code is the rule's
    as much as an imported module's would be."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.append(["import", [alias.name for alias in node.names]])
        elif isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
            found.append(["from", node.level, node.module or "", names])
        elif isinstance(node, (ast.List, ast.Tuple)):
            found.extend(["import", [name]] for name in launched_modules(node.elts))
    return found


def launched_modules(elements: list[ast.expr]) -> list[str]:
    """The module named after each literal "-m" among a command's elements."""
    values = [node.value if isinstance(node, ast.Constant) else None for node in elements]
    return [
        name
        for flag, name in zip(values, values[1:], strict=False)
        if flag == "-m" and isinstance(name, str)
    ]


class KeptFacts:
    """Facts by content digest, kept in the user's cache (aiayn.textio) for the next process.
    They hold for this module's text and this Python (whose syntax trees they read): a cache
    written under another is not read, and is replaced. New facts are written once, as the
    process ends."""

    LIMIT = 4096  # files; the oldest go first

    def __init__(self) -> None:
        self.path = user_cache("code_meaning.json")
        self.tool = hashlib.sha256(Path(__file__).read_bytes() + sys.version.encode()).hexdigest()
        self.files: dict[str, dict] | None = None
        self.new: dict[str, dict] = {}

    def read(self) -> dict[str, dict]:
        kept = read_cache(self.path)
        files = kept.get("files") if kept.get("tool") == self.tool else None
        return {k: v for k, v in files.items() if is_facts(v)} if isinstance(files, dict) else {}

    def get(self, content: str) -> dict | None:
        if self.files is None:
            self.files = self.read()
        return self.files.get(content)

    def add(self, content: str, facts: dict) -> None:
        if not self.new:
            atexit.register(self.save)
        self.new[content] = facts

    def save(self) -> None:
        """Add the new facts to what the file holds now (another process may have written)."""
        files = {k: v for k, v in self.read().items() if k not in self.new}
        files.update(self.new)
        recent = dict(list(files.items())[-self.LIMIT :])
        write_cache(self.path, {"tool": self.tool, "files": recent})


def is_facts(facts) -> bool:
    """A kept entry of the shape cached_facts gives, or not to be trusted."""
    if not isinstance(facts, dict) or not isinstance(facts.get("meaning"), str):
        return False
    statements = facts.get("imports")
    return isinstance(statements, list) and all(map(is_import, statements))


def is_import(statement) -> bool:
    match statement:
        case ["import", [*names]]:
            return all(isinstance(name, str) for name in names)
        case ["from", int(), str(), [*names]]:
            return all(isinstance(name, str) for name in names)
    return False


KEPT = KeptFacts()


LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical"}
PROGRESS_CALLS = {"progress", "tqdm", "trange"}
PROGRESS_TEXT = {"desc", "unit"}
SCOPE_INSPECTION = {"locals", "vars", "eval", "exec"}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
MESSAGE = "Message"


def canonical(node, names: dict[str, str] | None = None) -> str:
    """The node as text: its type and non-empty fields, statements that do nothing left out,
    messages' text and annotations left out, local names replaced (`names`: a function's,
    name -> placeholder; None outside functions)."""
    if isinstance(node, list):
        return f"[{','.join(canonical(item, names) for item in node)}]"
    if not isinstance(node, ast.AST):
        return f"{type(node).__name__}:{node!r}"
    if isinstance(node, ast.Name) and names and node.id in names:
        return f"Name(id={names[node.id]})"
    if isinstance(node, FUNCTIONS) and names is None:  # nested functions share the outer map
        names = local_names(node)
    if isinstance(node, ast.ClassDef):  # its body's names are attributes, never renamed
        names = None
    if isinstance(node, ast.AnnAssign) and names is not None:  # in a function: an assignment
        if node.value is None:
            return "Pass()"
        return canonical(ast.Assign(targets=[node.target], value=node.value), names)
    if isinstance(node, ast.Call):
        return call(node, names)
    fields = []
    for name in node._fields:
        value = getattr(node, name, None)
        if name in IGNORED_FIELDS or value is None or value == []:
            continue
        if name in ("annotation", "returns") and not isinstance(node, ast.AnnAssign):
            continue
        if isinstance(value, list) and all(isinstance(item, ast.stmt) for item in value):
            text = canonical(statements(value), names)
        elif isinstance(node, IMPORTS) and name == "names":
            text = canonical(sorted(value, key=lambda alias: (alias.name, alias.asname or "")))
        elif (isinstance(node, ast.Assert) and name == "msg") or (
            isinstance(node, ast.Raise) and name == "exc" and isinstance(value, ast.Call)
        ):
            text = call(value, names, message_args=True) if name == "exc" else message(value, names)
        else:
            text = canonical(value, names)
        fields.append(f"{name}={text}")
    return f"{type(node).__name__}({','.join(fields)})"


def call(node: ast.Call, names: dict[str, str] | None, message_args: bool = False) -> str:
    """A call; its arguments are a message's parts where they are text for a person: a raised
    exception's (message_args), a log call's, a stderr print's, a progress bar's label."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    stderr = called == "print" and any(
        keyword.arg == "file" and isinstance(keyword.value, ast.Attribute)
        and keyword.value.attr == "stderr" for keyword in node.keywords
    )  # fmt: skip
    text_args = (
        message_args or stderr or (isinstance(func, ast.Attribute) and called in LOG_METHODS)
    )
    args = [message(arg, names) if text_args else canonical(arg, names) for arg in node.args]
    keywords = []
    for keyword in node.keywords:
        label = message_args or (called in PROGRESS_CALLS and keyword.arg in PROGRESS_TEXT)
        value = message(keyword.value, names) if label else canonical(keyword.value, names)
        keywords.append(f"keyword({keyword.arg!r},{value})")
    return (f"Call(func={canonical(func, names)},args=[{','.join(args)}],"
            f"keywords=[{','.join(keywords)}])")  # fmt: skip


def message(value, names: dict[str, str] | None) -> str:
    """A message's parts: its literal text as one placeholder, what is formatted into it as
    code."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return MESSAGE
    if isinstance(value, ast.JoinedStr):
        return f"JoinedStr({','.join(message(part, names) for part in value.values)})"
    if isinstance(value, ast.FormattedValue):
        return f"FormattedValue({canonical(value.value, names)},{value.conversion})"
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mod)):
        return (f"BinOp({message(value.left, names)},{type(value.op).__name__},"
                f"{message(value.right, names)})")  # fmt: skip
    return canonical(value, names)


def local_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """The function's local variables (assigned, not parameters, not declared global or
    nonlocal), each mapped to a placeholder by order of first appearance; none where renaming
    could change what runs (a class inside, or a call that reads names at run time)."""
    inside = list(ast.walk(function))[1:]
    if any(isinstance(node, ast.ClassDef) for node in inside) or any(
        isinstance(node, ast.Name) and node.id in SCOPE_INSPECTION for node in inside
    ):
        return {}
    arguments = function.args
    parameters = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                  arguments.vararg, arguments.kwarg] if a}  # fmt: skip
    declared = {name for node in inside if isinstance(node, (ast.Global, ast.Nonlocal))
                for name in node.names}  # fmt: skip
    found: dict[str, str] = {}
    for node in inside:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            if node.id not in parameters | declared and node.id not in found:
                found[node.id] = f"local{len(found)}"
    return found


def statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """A block without its no-op statements, each run of consecutive imports, and each run of
    consecutive undecorated function definitions, in sorted order where no name in the run is
    bound twice (then the order decides which one holds)."""
    kept = [statement for statement in body if not is_no_op(statement)]
    ordered, run = [], []
    for statement in kept:
        if run and kind_of(statement) != kind_of(run[0]):
            ordered.extend(sorted_run(run))
            run = []
        if kind_of(statement) is None:
            ordered.append(statement)
        else:
            run.append(statement)
    return ordered + sorted_run(run)


def kind_of(statement: ast.stmt) -> str | None:
    """What kind of run the statement can be sorted within, if any."""
    if isinstance(statement, IMPORTS):
        return "import"
    if isinstance(statement, FUNCTIONS) and not statement.decorator_list:
        return "function"
    return None


def sorted_run(run: list[ast.stmt]) -> list[ast.stmt]:
    bound = [name for statement in run for name in bound_names(statement)]
    if len(bound) != len(set(bound)):
        return run
    return sorted(run, key=canonical)


def bound_names(statement: ast.stmt) -> list[str]:
    """The names an import or a function definition binds (`import a.b` binds `a`)."""
    if isinstance(statement, FUNCTIONS):
        return [statement.name]
    return [alias.asname or alias.name.split(".")[0] for alias in statement.names]


def is_no_op(statement: ast.stmt) -> bool:
    """A docstring (or any bare constant, `...` included) or `pass`."""
    if isinstance(statement, ast.Pass):
        return True
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
