"""Benchmark: the CPU data stages' throughput and peak memory as the corpus grows.

On generated toy lines (100k and 1M by default): sentencepiece BPE training as the subword stage
runs it (a shuffled sample of `input_sentence_size` lines, here --bpe-sample) beside training on
every line; then binarization with our streaming writer beside a naive baseline that encodes
everything into memory and saves one array. Each measurement runs in a fresh child process, so
its peak RSS is its own. Prints one JSON line; with --save, also writes it under bench/results/.

    python bench/data_stages.py                   # 100k and 1M lines
    python bench/data_stages.py --sizes 2000 --save
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import benchlib

from aiayn.data.toy import ToyGrammar  # noqa: E402
from aiayn.prepare.binarize import binarize_file, encode_lines  # noqa: E402
from aiayn.prepare.subword import SubwordSettings, load, train_bpe  # noqa: E402
from aiayn.textio import read_lines  # noqa: E402


def write_corpus(path: Path, lines: int, seed: int = 1) -> None:
    grammar = ToyGrammar(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(lines):
            handle.write(grammar.pair()[1] + "\n")


BPE_METHODS = {"bpe_sampled": None, "bpe_all_lines": 0}  # 0: sentencepiece reads every line
BINARIZE_METHODS = ("streaming", "naive")


def measure(
    method: str, model: str, text: str, prefix: str, threads: str, vocab_size: str, sample: str
) -> dict:
    """Runs in the child: one BPE training or binarization, timed (benchlib adds the peak RSS)."""
    import numpy as np

    threads, vocab_size, sample = int(threads), int(vocab_size), int(sample)

    start = time.perf_counter()
    if method in BPE_METHODS:
        size = sample if BPE_METHODS[method] is None else BPE_METHODS[method]
        settings = SubwordSettings(vocab_size=vocab_size, input_sentence_size=size)
        train_bpe([text], model, settings, threads=threads)
    elif method == "streaming":
        processor = load(model)
        binarize_file(processor, text, prefix, threads=threads)
    else:  # naive: every sentence in memory, then one concatenation
        processor = load(model)
        sentences = [
            np.asarray(ids, np.uint16)
            for ids in encode_lines(processor, read_lines(text), threads=threads)
        ]
        np.save(prefix + ".npy", np.concatenate(sentences))
        np.save(prefix + ".lengths.npy", np.array([len(s) for s in sentences]))
    return {"seconds": round(time.perf_counter() - start, 3)}  # without starting the process


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument(
        "--bpe-sample", type=int, default=100_000, help="input_sentence_size of the subword stage"
    )
    args = parser.parse_args()

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for size in args.sizes:
            text = tmp / f"corpus{size}.de"
            write_corpus(text, size)
            row = {"lines": size}
            for method in (*BPE_METHODS, *BINARIZE_METHODS):
                model = tmp / f"bpe{size}.model"  # written by bpe_sampled, read by binarizing
                if method == "bpe_all_lines":
                    model = tmp / f"bpe_all{size}.model"
                prefix, sizes = tmp / f"{method}{size}", (args.vocab_size, args.bpe_sample)
                figures = benchlib.in_child(
                    __file__, method, model, text, prefix, args.threads, *sizes
                )
                row[method] = {**figures, "lines_per_s": round(size / figures["seconds"])}
            results.append(row)
    record = {
        **benchlib.header("data_stages"),
        "threads": args.threads,
        "results": results,
        "rss_growth": benchlib.rss_growth(results, (*BPE_METHODS, *BINARIZE_METHODS)),
    }
    benchlib.finish(record, args)


if __name__ == "__main__":
    benchlib.child_main(measure, main)
