"""A/B of our decoder against the code of another revision, in the same run.

Ours is this checkout's src/ (`compare`) or a commit's (`compare_commit`: what that commit
bought over its parent). Both sides decode the same sentences with the same weights and
settings, each in a child process that imports `aiayn` from its own copy of src/ (`git archive`
of a revision, or this checkout's), in alternating order, `repeats` times each; each side keeps
its fastest run. What a change to the decoder buys is then measured on the same machine at the
same hour, and whether it kept the translations is checked sentence by sentence.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

import benchlib
import torch

PROJECT = benchlib.PROJECT

# Run by each side with its own src/ first on the path; it uses only what every revision since
# the decode settings moved to aiayn.decode.settings has: Transformer, TransformerConfig,
# DecodeSettings and translate().
CHILD = """
import json, sys
import numpy as np, torch
sys.path.insert(0, sys.argv[1])
from aiayn.decode.settings import DecodeSettings
from aiayn.model import Transformer
from aiayn.model_config import TransformerConfig
from aiayn.decode.translate import translate
job = json.loads(open(sys.argv[2]).read())
model = Transformer(TransformerConfig(**job["config"]))
model.load_state_dict(torch.load(job["weights"], weights_only=True))
model = model.to("cuda" if torch.cuda.is_available() else "cpu").eval()
sentences = [np.array(ids) for ids in job["sentences"]]
hypotheses, timing = translate(model, sentences, DecodeSettings(**job["settings"]), desc="ab")
result = {"seconds": timing["seconds"], "tokens": [h.tokens for h in hypotheses]}
open(sys.argv[3], "w").write(json.dumps(result))
"""


def revision_src(revision: str, folder: Path) -> Path:
    """The revision's src/ and schemas/ (its package reads its defaults from the schema), as
    git archive gives them, extracted under folder."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision, "src", "schemas"],
        cwd=PROJECT,
        capture_output=True,
    )
    if archive.returncode != 0:
        sys.exit(f"A/B against {revision}: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def short_commit(revision: str) -> str:
    return benchlib.git("rev-parse", "--short=7", revision).stdout.strip() or revision


def decode_once(src: Path, job: Path, out: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(job), str(out)], capture_output=True, text=True
    )
    if result.returncode != 0:
        sys.exit(f"A/B decoding with {src} failed:\n{result.stderr[-3000:]}")
    return json.loads(out.read_text())


def compare_commit(model, sentences, settings, commit: str, repeats: int) -> dict:
    """`commit`'s src/ against its parent's: what that one change bought, translations kept?"""
    subject = benchlib.git("log", "-1", "--format=%s", commit).stdout.strip()
    figures = compare(model, sentences, settings, f"{commit}~1", repeats, ours=commit)
    return {"commit": short_commit(commit), "change": subject[:200], **figures}


def compare(model, sentences, settings, revision: str, repeats: int, ours=None) -> dict:
    """Our src/ (or revision `ours`'s) against `revision`'s on the same model, sentences and
    settings."""
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        torch.save(model.state_dict(), scratch / "weights.pt")
        job = {
            "config": dataclasses.asdict(model.config),
            "weights": str(scratch / "weights.pt"),
            "sentences": [[int(i) for i in ids] for ids in sentences],
            "settings": dataclasses.asdict(settings),
        }
        (scratch / "job.json").write_text(json.dumps(job))
        sides = {
            "ours": revision_src(ours, scratch / "ours") if ours else PROJECT / "src",
            "baseline": revision_src(revision, scratch / "baseline"),
        }
        runs = {side: [] for side in sides}
        for side in benchlib.alternating(list(sides), repeats):
            out = scratch / f"{side}.json"
            runs[side].append(decode_once(sides[side], scratch / "job.json", out))
    ours, baseline = (min(runs[side], key=lambda r: r["seconds"]) for side in ("ours", "baseline"))
    same = sum(a == b for a, b in zip(ours["tokens"], baseline["tokens"], strict=True))
    return {
        "against": short_commit(revision),
        "repeats": repeats,
        "ours_seconds": ours["seconds"],
        "baseline_seconds": baseline["seconds"],
        "speedup": round(baseline["seconds"] / ours["seconds"], 2),
        "same_translations": round(same / len(sentences), 4),
    }
