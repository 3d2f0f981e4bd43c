"""Rule decode: translate one binarized split with beam search and write detokenized text."""

import logging

import torch

from aiayn.decode.settings import DecodeSettings
from aiayn.decode.translate import check_vocabulary, detokenized, load_model, pick_device, translate
from aiayn.logs import run_stage, save_record
from aiayn.parsing.constrained import search_constraint
from aiayn.precision import native_precision
from aiayn.prepare.binarize import IndexedDataset
from aiayn.prepare.pieces import load as load_subword
from aiayn.textio import read_lines, read_record, write_lines


def weights_path() -> str:
    """The averaged model, or the last checkpoint's weights that train.json names."""
    if snakemake.wildcards.checkpoint == "averaged":
        return snakemake.input.model
    return read_record(snakemake.input.model, "final_weights")["final_weights"]


def main():
    torch.set_num_threads(snakemake.threads)
    settings = DecodeSettings(**snakemake.params.settings)
    device = pick_device()
    path = weights_path()
    processor = load_subword(snakemake.input.subword)  # a damaged one named as such
    model, payload = load_model(
        path, device, snakemake.wildcards.experiment, snakemake.input.subword
    )
    source = IndexedDataset(snakemake.input.source[0].removesuffix(".bin"))
    check_vocabulary(processor, model, snakemake.input.subword, path)
    source.check_ids(model.config.vocab_size)
    sentences = list(source)
    wildcards = snakemake.wildcards
    desc = f"{wildcards.experiment}/{wildcards.checkpoint}/{wildcards.split}"
    lexicon = [list(read_lines(path)) for path in snakemake.input.lexicon] or None
    constraint = search_constraint(settings.constrain, processor, lexicon)  # parsing's
    hypotheses, timing = translate(model, sentences, settings, desc=desc, constraint=constraint)
    lines = detokenized(processor, hypotheses)
    write_lines(snakemake.output.hypotheses, lines)
    log = logging.getLogger("aiayn")
    log.info("%s: %d sentences", snakemake.output.hypotheses, len(lines))
    if timing["unfinished"]:
        log.warning(
            "%d of %d outputs reached the length limit (source + %d tokens) without EOS; each is "
            "its best unfinished hypothesis (decode.finalize %s)",
            timing["unfinished"],
            len(lines),
            settings.max_length_offset,
            settings.finalize,
        )
    save_record(
        snakemake.output.record,
        {
            "experiment": snakemake.wildcards.experiment,
            "checkpoint": snakemake.wildcards.checkpoint,
            "split": snakemake.wildcards.split,
            "weights": path,
            "step": payload.get("step"),
            "averaged_from": payload.get("averaged_from"),
            "settings": snakemake.params.settings,
            "device": str(device),
            "precision": native_precision(device)[1],  # what the matrix products ran in
            "mean_score": sum(h.score for h in hypotheses) / len(hypotheses),
            **timing,
        },
    )


run_stage(main, snakemake.log[0])
