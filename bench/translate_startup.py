"""Benchmark: one sentence through `aiayn translate`, the whole process (Python's start, the
imports, the config, loading the model, the search), beside the floor every such process pays
(Python starting and importing torch) and CTranslate2 translating the same sentence from the same
model exported by `aiayn export` (a process importing ctranslate2 and sentencepiece, not torch).
Each runs --repeats times in alternating order; the fastest counts. The model is a trained
experiment of a study run in --workdir (the quick start's `tiny` by default). Goal (#66): the
translate process within 2 s on the 2-core development machine. docs/benchmarks.md has the figures.

    snakemake --cores all && python bench/translate_startup.py --save
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib

SENTENCE = "The cat sat on the mat."
CT2_SCRIPT = """import json, sys, ctranslate2, sentencepiece
folder = sys.argv[1]
cut = sentencepiece.SentencePieceProcessor(model_file=folder + "/sentencepiece.model")
decode = json.load(open(folder + "/aiayn_export.json"))["decode"]
found = ctranslate2.Translator(folder, device="cpu").translate_batch(
    [cut.encode(sys.stdin.read().strip(), out_type=str)], beam_size=decode["beam"],
    length_penalty=decode["alpha"], suppress_sequences=[["<pad>"], ["<s>"]])
print(cut.decode(found[0].hypotheses[0]))"""


def timed(command: list[str], cwd: Path) -> tuple[float, str]:
    """Seconds the process took, start to exit, and what it printed."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, input=SENTENCE, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout.strip()


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--workdir", type=Path, default=Path("."), help="a study's run folder")
    parser.add_argument("--experiment", default="tiny")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    aiayn = [sys.executable, "-m", "aiayn.cli"]
    with tempfile.TemporaryDirectory() as scratch:
        exported = Path(scratch) / "ct2"
        export = [*aiayn, "export", "-e", args.experiment, "--format", "ct2", "-o", str(exported)]
        done = subprocess.run(export, cwd=workdir, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"`aiayn export` failed (train {args.experiment} first, e.g. `snakemake "
                     f"--cores all` in {workdir}):\n{done.stderr[-2000:]}")  # fmt: skip
        commands = {
            "python_and_torch": [sys.executable, "-c", "import torch"],
            "aiayn_translate": [*aiayn, "translate", "-e", args.experiment],
            "ctranslate2_script": [sys.executable, "-c", CT2_SCRIPT, str(exported)],
        }
        runs = {name: [] for name in commands}
        for name in benchlib.alternating(list(commands), args.repeats):
            runs[name].append(timed(commands[name], workdir))
    fastest = {name: min(seconds for seconds, _ in done) for name, done in runs.items()}
    ours = fastest["aiayn_translate"]
    record = {
        **benchlib.header("translate_startup"),
        "workdir": str(workdir),
        "experiment": args.experiment,
        "sentence": SENTENCE,
        "translations": {name: done[0][1] for name, done in runs.items() if done[0][1]},
        "repeats": args.repeats,
        "seconds": {name: round(seconds, 2) for name, seconds in fastest.items()},
        "beyond_torch_import_s": round(ours - fastest["python_and_torch"], 2),
        "ours_vs_ct2": round(fastest["ctranslate2_script"] / ours, 2),
        "goal_s": 2.0,
        "meets_goal": ours <= 2.0,
    }
    benchlib.finish(record, args)


if __name__ == "__main__":
    main()
