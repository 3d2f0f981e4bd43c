"""Where a split's parallel text comes from: `toy`, `local`, `hf` or `sacrebleu`, one interface.

Every source is a function `fetch(spec, langs, outputs) -> provenance` that writes the source-side
and target-side lines of one split to `outputs` (atomically) and returns what it did, for the
split's JSON record. `spec` is the split's entry in the config (see schemas/config.schema.yaml).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import logging
import os
import shutil
import stat
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from aiayn.config.schema import source_defaults
from aiayn.data import toy
from aiayn.errors import InputError
from aiayn.logs import progress
from aiayn.textio import atomic_output

log = logging.getLogger(__name__)

Langs = tuple[str, str]
Outputs = tuple[str, str]


class SourceUnavailable(InputError):
    """A remote source (hub, sacrebleu server, URL) could not be reached or does not exist."""


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://", "ftp://"))


def resolve_location(location: str, root: str | None) -> str:
    """A path or URL from the config, joined to the dataset's `root` when it is relative."""
    if root is None or is_url(location) or os.path.isabs(location):
        return location
    return root.rstrip("/") + "/" + location if is_url(root) else os.path.join(root, location)


def local_files(spec: dict, langs: Langs, root: str | None) -> list[str]:
    """The resolved locations of a `local` split, source side first."""
    return [resolve_location(spec["paths"][lang], root) for lang in langs]


def _write_pairs(pairs: Iterable[tuple[str, str]], outputs: Outputs, desc: str) -> int:
    count = 0
    with atomic_output(outputs[0]) as src, atomic_output(outputs[1]) as tgt:
        for source_line, target_line in progress(pairs, desc=desc, unit=" lines"):
            for line, handle in ((source_line, src), (target_line, tgt)):
                if "\n" in line or "\r" in line:
                    line = line.replace("\r", " ").replace("\n", " ")
                handle.write(line)
                handle.write("\n")
            count += 1
    return count


def fetch_toy(
    spec: dict, langs: Langs, outputs: Outputs, split: str, root: str | None = None
) -> dict:
    if tuple(langs) != ("en", "de"):
        raise InputError(
            f"the toy source generates English -> German; set langs: [en, de], not {langs}"
        )
    partition = spec.get("partition") or split
    if partition not in toy.PARTITIONS:
        raise InputError(
            f"toy split {split!r} needs `partition: train|dev|test` in its config entry "
            "(the split name is not one of them)"
        )
    pairs = toy.generate(spec["size"], spec["seed"], partition)
    lines = _write_pairs(pairs, outputs, desc=f"toy {split}")
    return {"source": "toy", "partition": partition, "seed": spec["seed"], "lines": lines}


def not_a_file(path: str) -> str | None:
    """What a local source path is when it is not a regular file (a link is followed)."""
    mode = os.stat(path).st_mode
    kinds = {
        stat.S_ISDIR: "a folder",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISFIFO: "a pipe",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), None)


@contextlib.contextmanager
def _open_location(location: str):
    """A local file or URL as a binary stream, gunzipped when the name ends in .gz."""
    if is_url(location):
        try:
            opened = urllib.request.urlopen(location, timeout=60)  # noqa: S310 - user-configured URL
        except (urllib.error.URLError, OSError) as err:
            raise SourceUnavailable(
                f"cannot download {location}: {err}. Offline? Download the file elsewhere and set "
                "this split's `paths` (or the dataset's `root`) to the local copy."
            ) from None
    else:
        if not os.path.exists(location):
            raise InputError(
                f"{location}: no such file. Check the `paths` of this split (relative paths are "
                f"taken from the dataset's `root`, else from {os.getcwd()})."
            )
        if kind := not_a_file(location):
            raise InputError(
                f"{location} is {kind}, not a file: a local split's `paths` name files, which "
                "are hashed (a changed file reruns its stages) and then read. Point them at "
                "files (copy a stream or device to one first)"
            )
        opened = open(location, "rb")  # noqa: SIM115 - closed below
    with contextlib.ExitStack() as stack:
        stream = stack.enter_context(opened)
        if location.endswith(".gz"):
            stream = stack.enter_context(gzip.GzipFile(fileobj=stream))
        try:
            yield stream
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise InputError(
                f"{location}: the gzip file is truncated or corrupt ({type(err).__name__}: "
                f"{err or 'it ends early'}); nothing was written from it. Fetch it again "
                "(`gzip -t` checks a copy), or point this split's `paths` at a good one."
            ) from None


def _copy_stream(location: str, output: str) -> str:
    """Copy one local file or URL byte for byte (gunzipped if it ends in .gz); return its sha256."""
    digest = hashlib.sha256()
    with _open_location(location) as stream, atomic_output(output, "wb") as out:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def _detokenize_stream(location: str, output: str, lang: str) -> str:
    """Undo Moses tokenization line by line (spaces around punctuation, XML escapes such as
    &apos; and &quot;), so that BPE and BLEU see text as written; return the input's sha256."""
    from sacremoses import MosesDetokenizer

    detokenizer = MosesDetokenizer(lang=lang)
    digest = hashlib.sha256()
    with _open_location(location) as stream, atomic_output(output) as out:
        for number, raw in enumerate(progress(stream, desc=f"detokenize {lang}"), start=1):
            digest.update(raw)
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise InputError(
                    f"{location}, line {number}: not UTF-8 ({err.reason} at byte {err.start}); "
                    "re-encode the file as UTF-8."
                ) from None
            out.write(detokenizer.detokenize(line.split(), unescape=True))
            out.write("\n")
    return digest.hexdigest()


def fetch_local(
    spec: dict, langs: Langs, outputs: Outputs, split: str, root: str | None = None
) -> dict:
    """Byte copies, so that the clean stage reports bad bytes at their original line numbers;
    or, for Moses-tokenized files (`detokenize: moses`), detokenized copies, line for line."""
    locations = local_files(spec, langs, root)
    detokenize = spec.get("detokenize")
    if detokenize not in (None, "moses"):
        raise InputError(
            f"split {split!r}: detokenize must be `moses` or absent, not {detokenize!r}"
        )
    digests = [
        _detokenize_stream(location, output, lang) if detokenize else _copy_stream(location, output)
        for location, output, lang in zip(locations, outputs, langs, strict=True)
    ]
    record = {"source": "local", "files": locations, "sha256_uncompressed": digests}
    if detokenize:
        record["detokenized"] = "sacremoses MosesDetokenizer, XML escapes undone"
    return record


def _hf_hint(spec: dict, langs: Langs) -> str:
    return (
        f"Hugging Face dataset {spec['path']!r} (config {spec.get('name')!r}, "
        f"split {spec['split']!r}) could not be loaded. Offline or behind a firewall? "
        "Save the two sides as plain text "
        f"(one sentence per line, e.g. train.{langs[0]} and train.{langs[1]}) and use "
        f"`source: local` with `paths: {{{langs[0]}: ..., {langs[1]}: ...}}` for this split."
    )


def fetch_hf(
    spec: dict, langs: Langs, outputs: Outputs, split: str, root: str | None = None
) -> dict:
    import datasets  # heavy import: only when used

    kwargs = {k: spec[k] for k in ("name", "data_files", "revision") if spec.get(k) is not None}
    try:
        dataset = datasets.load_dataset(
            spec["path"], split=spec["split"], streaming=spec["streaming"], **kwargs
        )
    except Exception as err:  # the hub raises many types; all mean "not available here"
        raise SourceUnavailable(f"{_hf_hint(spec, langs)} ({type(err).__name__}: {err})") from None
    field = spec["field"]
    limit = spec.get("max_pairs")

    def pairs():
        for index, example in enumerate(dataset):
            if limit is not None and index >= limit:
                return
            try:
                record = example[field]
                yield record[langs[0]], record[langs[1]]
            except (KeyError, TypeError):
                raise InputError(
                    f"{spec['path']} row {index}: expected a field {field!r} holding "
                    f"{{{langs[0]!r}: ..., {langs[1]!r}: ...}}, got keys {sorted(example)}. "
                    "Set `field:` for this split, or check `langs` of the dataset."
                ) from None

    try:
        lines = _write_pairs(pairs(), outputs, desc=f"hf {spec['path']} {spec['split']}")
    except (ConnectionError, TimeoutError, OSError) as err:
        raise SourceUnavailable(f"{_hf_hint(spec, langs)} ({type(err).__name__}: {err})") from None
    return {
        "source": "hf",
        **{k: spec.get(k) for k in ("path", "name", "split", "revision")},
        "lines": lines,
    }


def fetch_sacrebleu(
    spec: dict, langs: Langs, outputs: Outputs, split: str, root: str | None = None
) -> dict:
    """A test set through sacrebleu's own download, cache ($SACREBLEU) and SGML extraction."""
    from sacrebleu.dataset import DATASETS

    test_set = spec["test_set"]
    langpair = spec.get("langpair") or f"{langs[0]}-{langs[1]}"
    if test_set not in DATASETS:
        raise InputError(f"sacrebleu has no test set {test_set!r} (see `sacrebleu --list`)")
    dataset = DATASETS[test_set]
    if langpair not in dataset.langpairs:
        raise InputError(f"sacrebleu test set {test_set!r} has no language pair {langpair!r}")
    try:
        source_file = dataset.get_source_file(langpair)
        reference_file = dataset.get_reference_files(langpair)[0]
    except (OSError, SystemExit, urllib.error.URLError) as err:
        raise SourceUnavailable(
            f"sacrebleu test set {test_set!r} ({langpair}) could not be downloaded ({err}). "
            f"Offline? Fetch it elsewhere with `sacrebleu -t {test_set} -l {langpair} --echo src` "
            f"(and `--echo ref`) into two files and use `source: local` with "
            f"`paths: {{{langs[0]}: ..., {langs[1]}: ...}}` for split {split!r}."
        ) from None
    for path, output in zip((source_file, reference_file), outputs, strict=True):
        with atomic_output(output, "wb") as out, open(path, "rb") as src:
            shutil.copyfileobj(src, out)
    return {
        "source": "sacrebleu",
        "test_set": test_set,
        "langpair": langpair,
        "files": [source_file, reference_file],
    }


SOURCES: dict[str, Callable[..., dict]] = {
    "toy": fetch_toy,
    "local": fetch_local,
    "hf": fetch_hf,
    "sacrebleu": fetch_sacrebleu,
}


def fetch(spec: dict, langs: Langs, outputs: Outputs, split: str, root: str | None = None) -> dict:
    """Write one split's two sides with the source its spec names; return its provenance."""
    name = spec.get("source")
    if name not in SOURCES:
        raise InputError(
            f"split {split!r}: unknown source {name!r}; choose one of {sorted(SOURCES)}"
        )
    spec = {**source_defaults(name), **spec}  # a spec the schema has not filled in, as in tests
    for output in outputs:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    log.info("fetching split %s from %s source", split, name)
    return SOURCES[name](spec, tuple(langs), tuple(outputs), split=split, root=root)
