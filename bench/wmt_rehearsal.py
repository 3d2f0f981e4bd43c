"""Benchmark: the data stages rehearsed at WMT14 EN-DE's size (4.5M pairs) on a CPU.

The toy source generates the pairs (WMT itself cannot be downloaded here); each stage then runs
with the paper preset's settings (configs/wmt14_en_de.yaml): clean with Moses' ratio 9, BPE on a
sample of `input_sentence_size` lines (4M), binarize both sides; last, one epoch's batches are
planned over every pair with the base model's step (25000 real tokens, 32000 padded, lengths
padded to 8), as each training process does at every epoch start. Each stage runs in a fresh
child process, so its wall time and peak RSS are its own. Prints one JSON line; with --save, also
writes it to bench/results/wmt_rehearsal-cpu.json.

    python bench/wmt_rehearsal.py --pairs 450000 4500000 --save
    python bench/wmt_rehearsal.py --pairs 2000 20000            # a quick look

What differs from WMT: the toy grammar has about 700 word types, so BPE is trained to
--vocab-size pieces (default 1000), not the preset's 37000, which needs real text; its sentences
are shorter (about 12 tokens a side, WMT's about 27). The download stage keeps every sentence it
wrote in a set, to write distinct ones: its memory grows with the corpus (the toy source's cost;
the hf source streams).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import benchlib

PROJECT = benchlib.PROJECT

STAGES = ("download", "clean", "subword", "binarize", "plan_epoch")
PRESET = PROJECT / "configs" / "wmt14_en_de.yaml"


def preset_settings() -> dict:
    """The data and step settings of the paper preset, as the workflow would resolve them."""
    from aiayn.config.study import compose_config
    from aiayn.data.clean import CleanSettings
    from aiayn.prepare.subword import SubwordSettings

    preset = compose_config(PROJECT / "config.yaml", [PRESET])
    dataset = preset["datasets"]["wmt14_en_de"]
    base = preset["experiments"]["base_en_de"]
    return {
        "clean": CleanSettings(**dataset["clean"]),
        "subword": SubwordSettings(**dataset["subword"]),
        "tokens_per_step": base["train"]["tokens_per_step"],
        "tokens_per_batch": base["train"]["tokens_per_batch"],
        "pad_to_multiple": base["train"].get("pad_to_multiple", 8),
    }


def run_stage(stage: str, folder: Path, pairs: int, threads: int, vocab_size: int) -> dict:
    """In the child: one stage on the files the stages before it wrote."""
    raw, clean, bpe, binary = (folder / name for name in ("raw", "clean", "bpe.model", "bin"))
    sides = ("en", "de")
    settings = preset_settings()
    if stage == "download":
        from aiayn.data.sources import fetch

        spec = {"source": "toy", "size": pairs, "seed": 1}
        fetch(spec, sides, [f"{raw}.{s}" for s in sides], split="train")
    elif stage == "clean":
        from aiayn.data.clean import clean_split

        paths = ([f"{raw}.{s}" for s in sides], [f"{clean}.{s}" for s in sides])
        record = clean_split(*paths, train=True, settings=settings["clean"])
        return {"kept_pairs": record["kept_pairs"]}
    elif stage == "subword":
        from dataclasses import replace

        from aiayn.prepare.subword import train_bpe

        subword = replace(settings["subword"], vocab_size=vocab_size)
        train_bpe([f"{clean}.{s}" for s in sides], str(bpe), subword)
        return {"input_sentence_size": subword.input_sentence_size, "vocab_size": vocab_size}
    elif stage == "binarize":
        from aiayn.prepare.binarize import binarize_file
        from aiayn.prepare.pieces import load

        processor = load(bpe)
        for side in sides:
            binarize_file(processor, f"{clean}.{side}", f"{binary}.{side}", threads=threads)
    else:
        return plan_epoch(binary, settings)
    return {}


def plan_epoch(binary: Path, settings: dict) -> dict:
    """One epoch's batches over every pair, as Trainer.batches_of_epoch plans them."""
    from aiayn.prepare.binarize import IndexedDataset
    from aiayn.train.batching import real_tokens_per_step, step_plan, token_batches

    source, target = (IndexedDataset(f"{binary}.{side}") for side in ("en", "de"))
    lengths = (source.lengths + 1, target.lengths + 1)
    accumulation, share = step_plan(settings["tokens_per_step"], settings["tokens_per_batch"], 1)
    start = time.perf_counter()
    batches, too_long = token_batches(
        *lengths, share, 1, 0, settings["pad_to_multiple"], max_padded=settings["tokens_per_batch"]
    )
    planning = time.perf_counter() - start
    _, target = real_tokens_per_step(batches, lengths, accumulation, 1)
    return {
        "planning_seconds": round(planning, 2),  # the stage's seconds include importing torch
        "batches": len(batches),
        "too_long": too_long,
        "real_target_tokens_per_step": round(target, 1),
    }


def child(stage: str, folder: str, pairs: str, threads: str, vocab_size: str) -> dict:
    return run_stage(stage, Path(folder), int(pairs), int(threads), int(vocab_size))


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--pairs", type=int, nargs="+", default=[450_000, 4_500_000])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=1000)
    args = parser.parse_args()
    results = []
    for pairs in args.pairs:
        with tempfile.TemporaryDirectory() as folder:
            row = {"pairs": pairs}
            for stage in STAGES:
                sizes = (pairs, args.threads, args.vocab_size)
                row[stage] = benchlib.in_child(__file__, stage, folder, *sizes)
                print(f"{pairs} pairs: {stage} {row[stage]}", file=sys.stderr, flush=True)
            results.append(row)
    record = {
        **benchlib.header("wmt_rehearsal"),
        "threads": args.threads,
        "preset": str(PRESET.relative_to(PROJECT)),
        "results": results,
        "rss_growth": benchlib.rss_growth(results, STAGES),
    }
    benchlib.finish(record, args)


if __name__ == "__main__":
    benchlib.child_main(child, main)
