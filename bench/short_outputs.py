"""Benchmark: why a trained model's translations are short, measured on its run folder.

On one split (the dev split by default) it decodes with each kept checkpoint and the averaged
model, and reports for each: sacreBLEU, brevity penalty and hypothesis/reference length (13a
tokens), under beam search with the experiment's settings and under greedy search. Then, for the
averaged model:
- both EOS rules (`decode.finalize` t2t and fairseq);
- search or model: for each beam output shorter than its reference, whether the model scores
  the reference higher (the search missed it) or lower (the model prefers the short output, a
  model error no search fixes), both scored as the search does, log P / lp(length);
- EOS on the reference path: teacher-forced, how likely EOS is inside references and at their end
  (a model that stops early on the reference path cuts sentences; one that does not, but still
  prefers short outputs, drops or rephrases content);
- a sweep of the length penalty alpha, and the alpha with the best BLEU on this split (the paper
  chose its alpha on the development set).
Prints one JSON record; with --save writes bench/results/short_outputs-cpu.json.

    python bench/short_outputs.py --workdir RUN --experiment multi30k_small \\
        --configfile configs/multi30k.yaml local.yaml --alpha 0.6 --save

RUN is the folder snakemake ran in; --configfile as given to snakemake there; --alpha replaces
the experiment's length penalty (here the paper's 0.6, to see what it does on this data).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import benchlib

ALPHAS = (0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 2.0)


def locate(workdir: Path, configfiles: list[Path], name: str, split: str | None) -> dict:
    """The run's weights, BPE model, binarized source and references, and decode settings."""
    from aiayn.config import paths
    from aiayn.config.experiments import resolve_evaluation
    from aiayn.config.load import load_config
    from aiayn.config.plan import Plan
    from aiayn.train.checkpoint import weights_files

    config = load_config(workdir, [workdir / path for path in configfiles])
    entry = Plan(config).runs.entry(name)
    evaluation = resolve_evaluation(entry, config["datasets"])
    dataset = config["datasets"][entry["dataset"]]
    split = split or entry["dev_split"]
    source, target = paths.split_sides("bin", entry["dataset"], split, dataset["langs"])
    _, reference = paths.split_sides("clean", entry["dataset"], split, dataset["langs"])
    return {
        "split": split,
        "settings": evaluation["decode"],
        "checkpoints": weights_files(workdir / paths.run_dir(name) / "weights"),
        "averaged": workdir / paths.averaged_model(name),
        "subword": workdir / paths.subword_file("model", entry["dataset"]),
        "source": workdir / source,
        "target": workdir / target,
        "reference": workdir / reference,
    }


def bleu_and_length(lines: list[str], references: list[str]) -> dict:
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(lines, [references])
    return {
        "bleu": round(bleu.score, 2),
        "brevity_penalty": round(bleu.bp, 3),
        "length_ratio": round(bleu.sys_len / bleu.ref_len, 3),
    }


class Probe:
    """One model on one split: decodes it and scores given outputs as the search does."""

    def __init__(self, weights: Path, where: dict):
        import sentencepiece as spm
        import torch

        from aiayn.decode.translate import load_model
        from aiayn.prepare.binarize import IndexedDataset

        self.model, _ = load_model(weights, torch.device("cpu"))
        self.processor = spm.SentencePieceProcessor(model_file=str(where["subword"]))
        self.sources = list(IndexedDataset(str(where["source"]).removesuffix(".bin")))
        self.targets = list(IndexedDataset(str(where["target"]).removesuffix(".bin")))
        self.references = where["reference"].read_text(encoding="utf-8").splitlines()

    def decode(self, settings) -> tuple[list, dict]:
        from aiayn.decode.translate import detokenized, translate

        hypotheses, _ = translate(self.model, self.sources, settings, desc=settings.search)
        lines = detokenized(self.processor, hypotheses)
        return hypotheses, bleu_and_length(lines, self.references)

    def log_probs(self, source, target):
        """Teacher-forced log P of each token of target + EOS, and P(EOS) at each position."""
        import torch

        from aiayn.vocab import BOS_ID, EOS_ID

        source, target = source.tolist(), target.tolist()  # stored as uint16
        with torch.no_grad():
            source_in = torch.tensor([*source, EOS_ID])[None]  # (1, S)
            target_in = torch.tensor([BOS_ID, *target])[None]  # (1, T)
            log_probs = torch.log_softmax(self.model(source_in, target_in).float()[0], -1)
        target_out = torch.tensor([*target, EOS_ID])
        return log_probs.gather(1, target_out[:, None])[:, 0], log_probs[:, EOS_ID].exp()

    def search_or_model(self, hypotheses, alpha: float, finalize: str) -> dict:
        """Among outputs shorter than their reference: which does the model score higher?"""
        from aiayn.decode.search import length_penalty

        shorter = reference_higher = 0
        for source, target, hypothesis in zip(self.sources, self.targets, hypotheses, strict=True):
            if len(hypothesis.tokens) >= len(target):
                continue
            shorter += 1
            token_log_probs, _ = self.log_probs(source, target)
            score = float(token_log_probs.sum()) / length_penalty(len(target) + 1, alpha, finalize)
            reference_higher += score > hypothesis.score
        return {
            "outputs_shorter_than_reference": shorter,
            "reference_scores_higher": reference_higher,
            "output_scores_higher": shorter - reference_higher,
        }

    def eos_on_references(self) -> dict:
        import torch

        inside, at_end, stops_early = [], [], 0
        for source, target in zip(self.sources, self.targets, strict=True):
            _, eos = self.log_probs(source, target)
            inside.append(eos[:-1])
            at_end.append(float(eos[-1]))
            stops_early += bool((eos[:-1] > 0.5).any())
        inside = torch.cat(inside)
        return {
            "p_eos_at_end_mean": round(sum(at_end) / len(at_end), 3),
            "p_eos_inside_mean": round(float(inside.mean()), 4),
            "positions_inside_with_p_eos_over_half": round(float((inside > 0.5).float().mean()), 4),
            "references_with_an_early_likely_eos": stops_early,
            "references": len(self.targets),
        }


def measure(where: dict, alphas) -> dict:
    settings = where["settings"]
    greedy = replace(settings, search="greedy")
    rows = []
    for weights in [*where["checkpoints"], where["averaged"]]:
        probe = Probe(weights, where)
        hypotheses, beam = probe.decode(settings)
        rows.append({"weights": weights.stem, "beam": beam, "greedy": probe.decode(greedy)[1]})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    # The averaged model, decoded last: `probe` and `hypotheses` are its.
    other_rule = "fairseq" if settings.finalize == "t2t" else "t2t"
    sweep = [
        {"alpha": alpha, **probe.decode(replace(settings, alpha=alpha))[1]} for alpha in alphas
    ]
    return {
        "split": where["split"],
        "settings": asdict(settings),
        "checkpoints": rows,
        "averaged": {
            f"finalize_{other_rule}": probe.decode(replace(settings, finalize=other_rule))[1],
            "search_or_model": probe.search_or_model(hypotheses, settings.alpha, settings.finalize),
            "eos_on_references": probe.eos_on_references(),
            "alpha_sweep": sweep,
            "best_alpha": max(sweep, key=lambda row: row["bleu"])["alpha"],
        },
    }


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--workdir", type=Path, required=True, help="where snakemake ran")
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--configfile", type=Path, nargs="+", default=[])
    parser.add_argument("--split", help="default: the experiment's dev split")
    parser.add_argument(
        "--alpha", type=float, help="length penalty of the decodes (default: the experiment's)"
    )
    parser.add_argument("--alphas", type=float, nargs="+", default=ALPHAS, help="the sweep")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save", action="store_true", help="also write bench/results/")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    where = locate(args.workdir, args.configfile, args.experiment, args.split)
    if args.alpha is not None:
        where["settings"] = replace(where["settings"], alpha=args.alpha)
    record = {
        "bench": "short_outputs",
        "device": benchlib.device_name(),
        **benchlib.stamp(),
        "experiment": args.experiment,
        **measure(where, args.alphas),
    }
    benchlib.finish(record, "cpu", args.save)


if __name__ == "__main__":
    main()
