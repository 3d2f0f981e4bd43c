"""Each data source for real: toy, local (files and URLs), hf via datasets, sacrebleu via its cache."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.data.sources import SourceUnavailable, fetch, resolve_location
from aiayn.errors import InputError
from tests.conftest import PROJECT, edit_toy_data, shared, stage_sacrebleu_cache


def outputs(tmp_path, langs=("en", "de")):
    return tuple(str(tmp_path / f"out.{lang}") for lang in langs)


def read(path):
    return open(path, encoding="utf-8").read().splitlines()


def fetch_in_subprocess(spec, langs, outs, env, split="test"):
    """Run fetch() in a fresh interpreter, so that env vars read at import time take effect."""
    code = (
        "import json, sys; from aiayn.data.sources import fetch; from aiayn.errors import InputError\n"
        "spec, langs, outs, split = json.loads(sys.argv[1])\n"
        "try: print(json.dumps(fetch(spec, langs, outs, split=split)))\n"
        "except InputError as e: print(f'{type(e).__name__}: {e}', file=sys.stderr); sys.exit(3)\n"
    )
    args = json.dumps([spec, list(langs), list(outs), split])
    return subprocess.run(
        [sys.executable, "-c", code, args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=PROJECT,
        timeout=300,
    )


def test_toy_source_writes_the_generated_pairs(tmp_path):
    outs = outputs(tmp_path)
    record = fetch({"source": "toy", "size": 50, "seed": 3}, ("en", "de"), outs, split="dev")
    assert record["partition"] == "dev" and record["lines"] == 50
    assert len(read(outs[0])) == len(read(outs[1])) == 50


def test_toy_source_refuses_other_languages_and_unknown_partitions(tmp_path):
    with pytest.raises(InputError, match="English -> German"):
        fetch(
            {"source": "toy", "size": 5, "seed": 1}, ("en", "fr"), outputs(tmp_path), split="train"
        )
    with pytest.raises(InputError, match="partition"):
        fetch(
            {"source": "toy", "size": 5, "seed": 1}, ("en", "de"), outputs(tmp_path), split="valid"
        )


def test_local_gzip_files_are_copied_byte_for_byte(tmp_path):
    root = shared("multi30k")
    spec = {"source": "local", "paths": {"en": "val.en.gz", "de": "val.de.gz"}}
    outs = outputs(tmp_path)
    record = fetch(spec, ("en", "de"), outs, split="val", root=str(root / "raw_gz"))
    for lang, out in zip(("en", "de"), outs, strict=True):
        assert open(out, "rb").read() == (root / f"val.{lang}").read_bytes()
    assert (
        record["sha256_uncompressed"][0]
        == "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227"
    )


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_gzip_source_names_the_file_and_writes_nothing(tmp_path, damage):
    whole = gzip.compress("".join(f"line {i}\n" for i in range(20000)).encode())
    broken = whole[: len(whole) // 2] if damage == "truncated" else whole[:30] + b"x" * 200
    for lang in ("en", "de"):
        (tmp_path / f"train.{lang}.gz").write_bytes(broken)
    spec = {"source": "local", "paths": {"en": "train.en.gz", "de": "train.de.gz"}}
    (tmp_path / "out").mkdir()
    outs = outputs(tmp_path / "out")
    with pytest.raises(InputError) as error:
        fetch(spec, ("en", "de"), outs, split="train", root=str(tmp_path))
    message = str(error.value)
    assert f"{tmp_path}/train.en.gz: the gzip file is truncated or corrupt" in message
    assert "Fetch it again" in message
    assert not any((tmp_path / "out").iterdir())  # no half-written copy left behind


def test_local_missing_file_says_where_it_looked(tmp_path):
    spec = {"source": "local", "paths": {"en": "nope.en", "de": "nope.de"}}
    with pytest.raises(InputError, match=r"nope\.en: no such file.*root"):
        fetch(spec, ("en", "de"), outputs(tmp_path), split="train", root=str(tmp_path))


@pytest.mark.parametrize("kind", ["a character device", "a folder", "a pipe"])
def test_a_local_path_that_is_no_file_is_refused_and_never_read(project_copy, kind):
    """A split's `paths` naming /dev/zero hung the plan (its content was hashed for the rerun
    trigger, without end); a folder was an IsADirectoryError traceback. Both, and a named
    pipe, are refused by the download job naming what the path is, nothing written."""
    data = project_copy / "local"
    data.mkdir()
    (data / "t.de").write_text("ein Hund\n", encoding="utf-8")
    odd = {"a character device": "/dev/zero", "a folder": str(data), "a pipe": str(data / "p")}
    if kind == "a pipe":
        os.mkfifo(odd[kind])
    edit_toy_data(project_copy, lambda toy: toy["splits"].update(
        train={"source": "local", "paths": {"en": odd[kind], "de": str(data / "t.de")}}))  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "data/toy/raw/train.en-de.en"],
        cwd=project_copy, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    log = (project_copy / "logs/download/toy/train.en-de.log").read_text()
    assert result.returncode == 1 and "Traceback" not in result.stderr + log, result.stderr
    assert f"{odd[kind]} is {kind}, not a file: a local split's `paths` name files" in log
    assert not (project_copy / "data/toy/raw/train.en-de.en").exists()


def test_unreachable_url_names_the_local_alternative(tmp_path):
    spec = {"source": "local", "paths": {"en": "train.en.gz", "de": "train.de.gz"}}
    with pytest.raises(
        SourceUnavailable, match=r"cannot download http://127\.0\.0\.1:9/.*local copy"
    ):
        fetch(spec, ("en", "de"), outputs(tmp_path), split="train", root="http://127.0.0.1:9/data")
    assert not any(tmp_path.iterdir())


def test_relative_paths_join_the_root():
    assert resolve_location("a.gz", "https://host/x/") == "https://host/x/a.gz"
    assert resolve_location("a.gz", "/data") == "/data/a.gz"
    assert resolve_location("/abs/a.gz", "/data") == "/abs/a.gz"
    assert resolve_location("a.gz", None) == "a.gz"


def newstest2013_as_jsonl(tmp_path):
    newstest = shared("wmt14_newstest", "dev")
    english = read(newstest / "newstest2013.en")
    german = read(newstest / "newstest2013.de")
    path = tmp_path / "newstest2013.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for en, de in zip(english, german, strict=True):
            handle.write(
                json.dumps({"translation": {"de": de, "en": en}}, ensure_ascii=False) + "\n"
            )
    return path, english, german


@pytest.mark.parametrize("streaming", [True, False])
def test_hf_source_reads_translation_rows_through_datasets(tmp_path, streaming):
    path, english, german = newstest2013_as_jsonl(tmp_path)
    spec = {
        "source": "hf",
        "path": "json",
        "data_files": str(path),
        "split": "train",
        "streaming": streaming,
        "max_pairs": 2500,
    }
    outs = outputs(tmp_path)
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    result = fetch_in_subprocess(spec, ("en", "de"), outs, env)
    assert result.returncode == 0, result.stderr
    assert read(outs[0]) == english[:2500] and read(outs[1]) == german[:2500]
    assert json.loads(result.stdout)["lines"] == 2500


def test_hf_source_offline_names_the_dataset_and_the_local_alternative(tmp_path):
    spec = {"source": "hf", "path": "wmt/wmt14", "name": "de-en", "split": "train"}
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    result = fetch_in_subprocess(spec, ("en", "de"), outputs(tmp_path), env, split="train")
    assert result.returncode == 3, result.stderr
    assert "SourceUnavailable: Hugging Face dataset 'wmt/wmt14'" in result.stderr
    assert "source: local" in result.stderr and "paths: {en: ..., de: ...}" in result.stderr


def test_hf_source_rows_without_the_language_are_an_error(tmp_path):
    path, _, _ = newstest2013_as_jsonl(tmp_path)
    spec = {"source": "hf", "path": "json", "data_files": str(path), "split": "train"}
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    result = fetch_in_subprocess(spec, ("en", "fr"), outputs(tmp_path, ("en", "fr")), env)
    assert result.returncode == 3 and "row 0: expected a field 'translation'" in result.stderr


def test_sacrebleu_wmt14_full_matches_the_reference_release(tmp_path):
    cache = stage_sacrebleu_cache(tmp_path / "sacrebleu")
    outs = outputs(tmp_path)
    spec = {"source": "sacrebleu", "test_set": "wmt14/full"}
    result = fetch_in_subprocess(spec, ("en", "de"), outs, {"SACREBLEU": str(cache)})
    assert result.returncode == 0, result.stderr
    full = shared("wmt14_newstest", "full")
    assert open(outs[0], "rb").read() == (full / "newstest2014.en-de.en").read_bytes()
    assert open(outs[1], "rb").read() == (full / "newstest2014.en-de.de").read_bytes()


@pytest.mark.parametrize(
    ("test_set", "folder", "stem", "count"),
    [
        ("wmt14", "filtered/derived", "newstest2014-filtered", 2737),
        ("wmt13", "dev", "newstest2013", 3000),
    ],
)
def test_sacrebleu_filtered_and_dev_sets(tmp_path, test_set, folder, stem, count):
    cache = stage_sacrebleu_cache(tmp_path / "sacrebleu")
    outs = outputs(tmp_path)
    result = fetch_in_subprocess(
        {"source": "sacrebleu", "test_set": test_set}, ("en", "de"), outs, {"SACREBLEU": str(cache)}
    )
    assert result.returncode == 0, result.stderr
    for lang, out in zip(("en", "de"), outs, strict=True):
        expected = read(shared("wmt14_newstest", folder, f"{stem}.{lang}"))
        # sacrebleu's extraction turns every whitespace run (U+00A0 included) into one space
        assert read(out) == [re.sub(r"\s+", " ", line.strip()) for line in expected]
        assert len(expected) == count


def test_sacrebleu_offline_names_the_test_set_and_the_local_alternative(tmp_path):
    spec = {"source": "sacrebleu", "test_set": "wmt14/full"}
    result = fetch_in_subprocess(
        spec, ("en", "de"), outputs(tmp_path), {"SACREBLEU": str(tmp_path / "empty")}
    )
    assert result.returncode == 3, result.stderr
    assert "sacrebleu test set 'wmt14/full' (en-de) could not be downloaded" in result.stderr
    assert "source: local" in result.stderr


def test_sacrebleu_unknown_names_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no test set 'wmt99'"):
        fetch(
            {"source": "sacrebleu", "test_set": "wmt99"}, ("en", "de"), outputs(tmp_path), split="t"
        )
    with pytest.raises(InputError, match="no language pair 'en-xx'"):
        fetch(
            {"source": "sacrebleu", "test_set": "wmt14"}, ("en", "xx"), outputs(tmp_path), split="t"
        )


def test_local_absolute_paths_plain_and_gzip_mixed(tmp_path):
    source = tmp_path / "a.en.gz"
    with gzip.open(source, "wb") as handle:
        handle.write(b"one\ntwo\n")
    (tmp_path / "a.de").write_bytes(b"eins\nzwei\n")
    spec = {"source": "local", "paths": {"en": str(source), "de": str(tmp_path / "a.de")}}
    outs = outputs(tmp_path / "out")
    fetch(spec, ("en", "de"), outs, split="train")
    assert read(outs[0]) == ["one", "two"] and read(outs[1]) == ["eins", "zwei"]


def test_local_moses_tokenized_files_are_detokenized_line_for_line(tmp_path):
    """OpenNMT's newstest2012 sample is Moses-tokenized with XML escapes; undone, it is the
    original text on nearly every line (the rest differ in tokenizer-lossy spots like `1: 0`)."""
    root = shared("opennmt_toy_ende")
    original = shared("wmt14_newstest", "extra", "newstest2012.en").read_text().splitlines()
    spec = {
        "source": "local",
        "paths": {"en": "src-val.txt", "de": "tgt-val.txt"},
        "detokenize": "moses",
    }
    outs = outputs(tmp_path)
    record = fetch(spec, ("en", "de"), outs, split="val", root=str(root))
    english = Path(outs[0]).read_text().splitlines()
    german = Path(outs[1]).read_text().splitlines()
    assert len(english) == len(german) == 3000
    assert not any("&apos;" in line or "&quot;" in line for line in english + german)
    same = sum(a == b for a, b in zip(english, original, strict=False))
    assert same / len(english) > 0.94
    assert english[0] == original[0]
    assert record["detokenized"].startswith("sacremoses")
    assert record["sha256_uncompressed"][0] == (
        "a32a3554fb6c1073b7ed8e0e43828e88ff35d2292e13b42503b479f43c69c782"
    )


def test_detokenizing_a_non_utf8_file_names_the_line(tmp_path):
    (tmp_path / "x.en").write_bytes(b"fine .\nbad \xff byte\n")
    (tmp_path / "x.de").write_bytes(b"gut .\nauch\n")
    spec = {"source": "local", "paths": {"en": "x.en", "de": "x.de"}, "detokenize": "moses"}
    outs = outputs(tmp_path / "out")
    with pytest.raises(InputError, match=r"x\.en, line 2: not UTF-8"):
        fetch(spec, ("en", "de"), outs, split="train", root=str(tmp_path))
    assert not any(Path(out).exists() for out in outs)


def test_unknown_detokenizer_is_an_input_error(tmp_path):
    spec = {"source": "local", "paths": {"en": "x.en", "de": "x.de"}, "detokenize": "spacy"}
    with pytest.raises(InputError, match="detokenize must be `moses`"):
        fetch(spec, ("en", "de"), outputs(tmp_path), split="train", root=str(tmp_path))
