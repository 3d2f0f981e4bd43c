"""`aiayn export`: a trained model as a folder another toolkit loads, written whole or not at all.

The folder holds the converted model (ct2.py, hf.py), the sentencepiece model that cuts its
input, and aiayn_export.json: where it came from and how to decode as the workflow did (beam,
alpha, the length limit, the tokens never emitted) and what the other engines do differently
(their beam search ends a hypothesis at its EOS as fairseq's rule does; the paper's, t2t, is
ours only).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from aiayn.errors import InputError
from aiayn.textio import atomic_folder
from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID

FORMATS = ("ct2", "hf")
RECORD = "aiayn_export.json"
SUBWORD = "sentencepiece.model"
ENGINE_RULE = (
    "CTranslate2 and transformers end a beam hypothesis at its EOS and divide its score by "
    "length ** alpha (CTranslate2's length_penalty, transformers' length_penalty), as "
    "decode.finalize: fairseq does; the paper's rule (t2t: ((5 + length) / 6) ** alpha, "
    "which the workflow may have scored with) is ours only"
)


def vocabulary_pieces(processor) -> list[str]:
    """The sentencepiece model's pieces in id order: the vocabulary both toolkits are given."""
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def export(
    weights: Path,
    subword: Path,
    settings,
    output: Path,
    fmt: str,
    quantization: str | None = None,
    experiment: str | None = None,
) -> dict:
    """Write the model of `weights` (with its BPE model `subword`) into `output` as `fmt`."""
    from aiayn.decode.translate import check_vocabulary, load_model
    from aiayn.export import ct2, hf
    from aiayn.prepare.pieces import load as load_subword

    if settings.constrain != "none":
        raise InputError(
            f"experiment {experiment!r} parses (decode.constrain: {settings.constrain}): "
            "CTranslate2 and transformers decode without the tree constraint a parser needs, so "
            "it is not exported; its trees come from the workflow (decode/.../*.trees)"
        )
    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if quantization is not None and fmt != "ct2":
        raise InputError("--quantization is CTranslate2's (--format ct2)")
    if quantization is not None:  # "" too: CTranslate2's traceback, after the load
        check_quantization(quantization)
    check_destination(output)
    processor = load_subword(subword)
    model, payload = load_model(weights, torch_cpu(), experiment, subword)
    check_vocabulary(processor, model, subword, weights)
    pieces = vocabulary_pieces(processor)
    record = {
        "format": fmt,
        "experiment": experiment,
        "weights": str(weights),
        "step": payload.get("step"),
        "averaged_from": payload.get("averaged_from"),
        "quantization": quantization,
        "subword": SUBWORD,
        "decode": {
            **asdict(settings),
            "source_ends_with": pieces[EOS_ID],
            "start": pieces[BOS_ID],
            "never_emitted": [pieces[PAD_ID], pieces[BOS_ID]],
            "max_length": f"source length + {settings.max_length_offset}",
        },  # fmt: skip
        "engine_rule": ENGINE_RULE,
    }
    try:
        with one_export_at_a_time(output):
            check_destination(output)  # again: another export may have finished meanwhile
            with atomic_folder(output) as folder:
                if fmt == "ct2":
                    ct2.write(model, pieces, folder, quantization)
                else:
                    hf.write(model, pieces, subword, folder, settings)
                shutil.copyfile(subword, folder / SUBWORD)
                record["files"] = sorted([*(path.name for path in folder.iterdir()), RECORD])
                (folder / RECORD).write_text(json.dumps(record, indent=2) + "\n", "utf-8")
    except OSError as err:  # a read-only folder or file system, a full disk: nothing is left
        raise InputError(
            f"--output {output} cannot be written ({err.strerror}: {err.filename}): give a "
            "folder on a file system you can write to, with room for the model"
        ) from None
    return record


@contextlib.contextmanager
def one_export_at_a_time(output: Path):
    """Two exports into one new folder would both find it absent and race on the final rename
    (`Directory not empty`); an exclusive lock on the folder that holds it makes the second wait
    and then replace the first's export, as a later run does. It is held on the parent folder
    itself, so nothing is left behind; where its file system has no locks, nothing is held."""
    output.parent.mkdir(parents=True, exist_ok=True)
    parent = os.open(output.parent, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(parent, fcntl.LOCK_EX)
        yield
    finally:
        os.close(parent)  # closing it releases the lock


def torch_cpu():
    import torch

    return torch.device("cpu")


def check_quantization(quantization: str) -> None:
    """Before the model loads: a weight type CTranslate2 has (its own list)."""
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

    if quantization not in ACCEPTED_MODEL_TYPES:
        raise InputError(
            f"{quantization!r} is not a CTranslate2 weight type: use one of "
            f"{', '.join(ACCEPTED_MODEL_TYPES)} (`aiayn export --quantization <type>`, or the "
            "target runs/<experiment>/export/ct2-<type>)"
        )


def check_destination(output: Path) -> None:
    """An export replaces an earlier export only: never a file, nor a folder of other things,
    nor files someone put beside an earlier export's. It may delete only what the earlier
    export's record lists as written; a record that lists nothing readable protects the folder."""
    if output.is_file() or (output.exists() and not output.is_dir()):
        raise InputError(f"--output {output} is a file: give a folder to write the model into")
    try:
        present = sorted(path.name for path in output.iterdir()) if output.is_dir() else []
    except OSError as err:
        raise InputError(f"--output {output} cannot be read ({err.strerror})") from None
    if not present:
        return
    written = earlier_export_files(output)
    others = [name for name in present if name not in written]
    if others:
        raise InputError(
            f"--output {output} is an earlier export with other files beside it "
            f"({', '.join(others)}), which replacing it would delete: move them out, or "
            "give another folder"
        )


def earlier_export_files(output: Path) -> set[str]:
    """The files the export in `output` says it wrote: its record's `files`."""
    record = output / RECORD
    if not record.is_file():
        raise InputError(
            f"--output {output} holds files that are not an earlier export (no {RECORD}): "
            "give a new or empty folder"
        )
    try:
        files = json.loads(record.read_text(encoding="utf-8"))["files"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        files = None
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        raise InputError(
            f"--output {output}: its {RECORD} does not list the files an export wrote "
            "(damaged, or written by an older aiayn), so replacing the folder could delete "
            "files of yours: move the folder away, or give another"
        )
    return set(files)
