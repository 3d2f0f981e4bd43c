"""Rule attention_maps: encoder self-attention of the last-but-one layer on chosen sentences."""

import numpy as np

from aiayn.decode.translate import load_model, pick_device
from aiayn.logs import run_stage
from aiayn.prepare.pieces import load as load_subword
from aiayn.report import figures
from aiayn.report.attention import encoder_attention, figure_layer
from aiayn.report.output import save_figure
from aiayn.textio import atomic_output


def main():
    processor = load_subword(snakemake.input.subword)
    model, _ = load_model(
        snakemake.input.model,
        pick_device(),
        snakemake.wildcards.experiment,
        snakemake.input.subword,
    )
    layer = figure_layer(model.config.n_layers)
    name = snakemake.wildcards.experiment
    paths = iter(snakemake.output.figures)
    first, dump = None, {}
    for number, sentence in enumerate(snakemake.params.sentences, start=1):
        ids = processor.encode(sentence)
        desc = f"report.attention_sentences[{number - 1}] ({name}'s attention maps)"
        every_layer = encoder_attention(model, ids, desc)  # (layers, h, S + 1, S + 1), EOS last
        weights = every_layer[layer]
        pieces = [*(processor.id_to_piece(i) for i in ids), "</s>"]
        dump[f"sentence{number}_weights"] = every_layer
        dump[f"sentence{number}_pieces"] = np.array(pieces)
        first = first or (sentence, pieces, weights)
        title = f"{name}: encoder self-attention, layer {layer + 1} of {model.config.n_layers}"
        save_figure(figures.attention_heads(weights, pieces, title), next(paths), next(paths))
    sentence, pieces, weights = first
    word = snakemake.params.word
    query = figures.word_start(pieces, sentence, word)
    title = f"{name}: where '{word}' attends, layer {layer + 1}, every head"
    if query is None:
        query, title = 0, f"{name}: '{word}' is not in sentence 1; first token shown"
    figure = figures.attention_from_token(weights, pieces, query, title)
    save_figure(figure, next(paths), next(paths))
    with atomic_output(snakemake.output.weights, "wb") as handle:
        np.savez_compressed(handle, **dump)


run_stage(main, snakemake.log[0])
