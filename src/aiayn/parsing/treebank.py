"""The `ptb` data source: Penn Treebank .mrg files into parallel text (words -> linearized tree).

A split names its files by the treebank's own numbering, `wsj_SSDD.mrg` (section SS, document
SSDD): `sections: 02-21` for the standard training split (22 dev, 23 test) of the LDC release
(`treebank_3/parsed/mrg/wsj/`), or `documents: 0001-0159` for a slice of a sample such as NLTK's
(`nltk_data/corpora/treebank/combined/`). Every .mrg file under `path` is considered, in
subfolders too, in document order.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from aiayn.config.schema import source_defaults
from aiayn.errors import InputError
from aiayn.logs import progress
from aiayn.parsing.linearize import Linearization, linearize
from aiayn.parsing.trees import Tree, clean_tree, read_trees
from aiayn.textio import atomic_output

log = logging.getLogger(__name__)
_DOCUMENT = re.compile(r"wsj_(\d{4})\.mrg$")


def parse_range(value, digits: int, key: str) -> tuple[int, int]:
    """`"02-21"`, `"23"` or `23` -> (first, last), inclusive."""
    text = str(value).strip()
    match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", text)
    if not match:
        raise InputError(
            f"`{key}: {value}` is not a number or a range such as "
            f"{'02-21' if digits == 2 else '0001-0159'}"
        )
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else first
    if last < first:
        raise InputError(f"`{key}: {value}`: the range ends before it starts")
    return first, last


def treebank_folder(spec: dict, root: str | None) -> str:
    path = os.path.expanduser({**source_defaults("ptb"), **spec}["path"])
    if root is not None and not os.path.isabs(path):
        path = os.path.join(os.path.expanduser(root), path)
    return path


def select_files(spec: dict, root: str | None) -> list[str]:
    """The split's .mrg files in document order; an empty selection says what there is."""
    folder = treebank_folder(spec, root)
    if os.path.isfile(folder):
        return [folder]
    if not os.path.isdir(folder):
        raise InputError(
            f"treebank folder {folder} does not exist. Set the dataset's `root` (or the split's "
            "`path`) to the folder holding the wsj_*.mrg files, e.g. "
            "treebank_3/parsed/mrg/wsj of the LDC release or nltk_data/corpora/treebank/combined."
        )
    documents = {}
    for path in Path(folder).rglob("*.mrg"):
        match = _DOCUMENT.search(path.name)
        if match:
            documents[int(match.group(1))] = str(path)
    if not documents:
        raise InputError(f"{folder} holds no wsj_SSDD.mrg file (searched its subfolders too)")
    wanted = sorted(documents)
    if spec.get("sections") is not None:
        first, last = parse_range(spec["sections"], 2, "sections")
        wanted = [d for d in wanted if first <= d // 100 <= last]
    if spec.get("documents") is not None:
        first, last = parse_range(spec["documents"], 4, "documents")
        wanted = [d for d in wanted if first <= d <= last]
    if not wanted:
        have = sorted({d // 100 for d in documents})
        raise InputError(
            f"no file of {folder} is in sections {spec.get('sections', 'any')}, documents "
            f"{spec.get('documents', 'any')}: it holds sections "
            f"{', '.join(f'{s:02d}' for s in have)} (documents {min(documents):04d}-"
            f"{max(documents):04d}). Check this split's `sections` / `documents`."
        )
    return [documents[d] for d in wanted]


def split_trees(files: list[str]) -> Iterator[Tree]:
    """The cleaned trees of the files in order; trees of empty elements only are left out."""
    for path in progress(files, desc="treebank", unit=" files"):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for tree in read_trees(text, path):
            cleaned = clean_tree(tree)
            if cleaned is not None:
                yield cleaned


def _files_record(files: list[str]) -> dict:
    digest = hashlib.sha256()
    for path in files:
        digest.update(Path(path).read_bytes())
    return {"files": len(files), "first": files[0], "last": files[-1], "sha256": digest.hexdigest()}


def fetch_ptb(
    spec: dict,
    outputs: tuple[str, str, str],
    split: str,
    root: str | None = None,
    linearization: dict | None = None,
) -> dict:
    """One split as three line-aligned files: the words (the source side), the linearized trees
    (the target side) and the cleaned trees, TOP-rooted (the gold file EVALB reads)."""
    settings = Linearization(**(linearization or {}))
    files = select_files(spec, root)
    count = 0
    with (
        atomic_output(outputs[0]) as words,
        atomic_output(outputs[1]) as sequences,
        atomic_output(outputs[2]) as gold,
    ):
        for tree in split_trees(files):
            words.write(" ".join(tree.words()) + "\n")
            sequences.write(linearize(tree, settings) + "\n")
            gold.write(f"{tree}\n")
            count += 1
        if count == 0:
            raise InputError(f"split {split!r}: {files[0]} ... {files[-1]} hold no tree")
    log.info("split %s: %d trees from %d files", split, count, len(files))
    return {
        "source": "ptb",
        **{key: spec.get(key) for key in ("path", "sections", "documents")},
        **_files_record(files),
        "lines": count,
        "linearization": asdict(settings),
    }
