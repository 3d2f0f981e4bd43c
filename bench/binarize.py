"""Benchmark: binarization throughput and peak memory as the corpus grows.

Binarizes generated toy lines (100k and 1M by default) with our streaming writer, and, in the
same run, with a naive baseline that encodes everything into memory and saves one array. Each
measurement runs in a fresh child process, so its peak RSS is its own. Prints one JSON line;
with --save, also writes it under bench/results/.

    python bench/binarize.py                   # 100k and 1M lines
    python bench/binarize.py --sizes 2000 --save
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT / "src"))

from aiayn.binarize import binarize_file, encode_lines  # noqa: E402
from aiayn.data.toy import ToyGrammar  # noqa: E402
from aiayn.subword import SubwordSettings, load, train_bpe  # noqa: E402
from aiayn.textio import read_lines  # noqa: E402


def write_corpus(path: Path, lines: int, seed: int = 1) -> None:
    grammar = ToyGrammar(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(lines):
            handle.write(grammar.pair()[1] + "\n")


def measure(method: str, model: str, text: str, prefix: str, threads: int) -> dict:
    """Runs in the child: one binarization, timed, with this process's peak RSS."""
    import numpy as np

    processor = load(model)
    start = time.perf_counter()
    if method == "streaming":
        binarize_file(processor, text, prefix, threads=threads)
    else:  # naive: every sentence in memory, then one concatenation
        sentences = [
            np.asarray(ids, np.uint16)
            for ids in encode_lines(processor, read_lines(text), threads=threads)
        ]
        np.save(prefix + ".npy", np.concatenate(sentences))
        np.save(prefix + ".lengths.npy", np.array([len(s) for s in sentences]))
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"seconds": round(seconds, 3), "peak_rss_mib": round(peak_kib / 1024, 1)}


def in_child(method: str, model: Path, text: Path, prefix: Path, threads: int) -> dict:
    args = [
        sys.executable,
        __file__,
        "--child",
        method,
        str(model),
        str(text),
        str(prefix),
        str(threads),
    ]
    result = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def device() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo")
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return f"CPU: {model}, {os.cpu_count()} cores"


def commit() -> str:
    result = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT, capture_output=True, text=True
    )
    return result.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument(
        "--save", action="store_true", help="also write the JSON under bench/results/"
    )
    args = parser.parse_args()

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "bpe.model"
        for size in args.sizes:
            text = tmp / f"corpus{size}.de"
            write_corpus(text, size)
            if not model.exists():
                train_bpe(
                    [str(text)],
                    str(model),
                    SubwordSettings(vocab_size=args.vocab_size, input_sentence_size=100_000),
                )
            row = {"lines": size}
            for method in ("streaming", "naive"):
                figures = in_child(method, model, text, tmp / f"{method}{size}", args.threads)
                row[method] = {**figures, "lines_per_s": round(size / figures["seconds"])}
            results.append(row)
    smallest, largest = results[0], results[-1]
    record = {
        "bench": "binarize",
        "device": device(),
        "commit": commit(),
        "date": datetime.date.today().isoformat(),
        "threads": args.threads,
        "results": results,
        # How peak memory grows from the smallest to the largest corpus (1.0 = flat).
        "rss_growth": {
            method: round(largest[method]["peak_rss_mib"] / smallest[method]["peak_rss_mib"], 2)
            for method in ("streaming", "naive")
        },
    }
    line = json.dumps(record)
    print(line)
    if args.save:
        out = PROJECT / "bench" / "results" / "binarize-cpu.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(line + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(
            json.dumps(
                measure(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
            )
        )
    else:
        main()
