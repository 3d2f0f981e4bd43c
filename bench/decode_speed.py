"""Benchmark: beam-search speed of our decoder beside a naive one and HF generate(), one run.

Ours (src/aiayn/decode/search.py: cached keys/values, finished sentences dropped, length-sorted
batches); naive: the same search recomputing the whole prefix at every step (must translate the
same); peer: HF MarianMTModel with the same weights (bench/marian.py), `generate(num_beams=4)` on
the same batches (its length penalty differs: the share that agree is reported); with --ct2,
CTranslate2 on the same model exported by `aiayn export` (aiayn.export.ct2), in float32 and int8,
its beam search with our alpha on the same sentences, as many threads as ours. newstest2014's
3003 English sentences, beam 4, alpha 0.6. Ours and generate() run --repeats times in alternating
order, each keeping its fastest; the naive decoder runs once. The model: --weights, or the preset
trained here on --train-source/--train-target until its dev outputs stop where translations end
(trained(), alpha then chosen on dev), or a random preset (outputs run to the maximum length: a
worst case; with --max-length-offset 0 each stops at its source's length, a speed proxy needing
no trained model). --reference adds the output/reference length (13a) and sacreBLEU. The record
is written to --out after training and after each timing, so a run cut short keeps what it
measured. docs/benchmarks.md has the figures.

    python bench/decode_speed.py --preset tiny --sentences 100     # CPU-sized
    python bench/decode_speed.py --profile decode.prof.txt         # and where the time goes
    python bench/decode_speed.py --cache-ab --max-length-offset 0  # the other layout; the proxy
    python bench/decode_speed.py --ab-commit C1 --ab-commit C2     # A/B: each commit vs its parent
    python bench/decode_speed.py --train-source src-train.txt --train-target tgt-train.txt \
        --train-steps 2000 --train-seconds 50 --dev-source newstest2013.en \
        --dev-reference newstest2013.de --reference newstest2014.en-de.de  # on a model that stops
"""

from __future__ import annotations

import functools
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import ab
import benchlib
import marian
import numpy as np
import sentencepiece as spm
import torch
import train_throughput
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from aiayn.decode.lengths import bleu_and_length
from aiayn.decode.search import default_drop_every
from aiayn.decode.settings import DecodeSettings
from aiayn.decode.translate import autocast, detokenized, load_model, pick_device, translate
from aiayn.model import Transformer
from aiayn.model_config import build_config
from aiayn.prepare.subword import SubwordSettings, train_bpe
from aiayn.train.settings import TrainSettings
from aiayn.train.trainer import leave

NEWSTEST2014 = benchlib.PROJECT.parent / "shared/data/wmt14_newstest/full/newstest2014.en-de.en"


def model_and_subword(args, device, workdir: Path):
    """The model to time, its subword model, and (when trained here) how its training went."""
    if args.weights:
        model, _ = load_model(args.weights, device)
        return model, spm.SentencePieceProcessor(model_file=args.subword), None
    corpus = [args.train_source, args.train_target] if args.train_steps else [args.source]
    train_bpe([str(path) for path in corpus], str(workdir / "bpe.model"),
              SubwordSettings(vocab_size=args.vocab))  # fmt: skip
    processor = spm.SentencePieceProcessor(model_file=str(workdir / "bpe.model"))
    torch.manual_seed(0)
    config = build_config(args.vocab, args.preset)
    if args.train_steps:
        model, training = trained(config, processor, args, workdir)
        return model.to(device).eval(), processor, training
    return Transformer(config).to(device).eval(), processor, None


def trained(config, processor, args, workdir: Path) -> tuple[Transformer, dict]:
    """The preset trained by our trainer on the parallel corpus, as fp32 weights, and how its
    training went. The paper's schedule, scaled to peak at --train-peak-lr after
    --train-warmup steps. It stops after --train-steps or --train-seconds, or once the model
    stops where a translation ends: every --dev-every steps the first --dev-sentences of
    --dev-source are translated, and it stops when their length is 0.8-1.25 times the
    reference's and each sentence passes dev_gates (chosen on dev; the timed test set is never
    looked at). Fixed recipes left the outputs empty or 4x too long (the fifth lend)."""
    corpus = [[np.array(processor.encode(line)) for line in path.read_text("utf-8").splitlines()]
              for path in (args.train_source, args.train_target)]  # fmt: skip
    warmup = min(args.train_warmup, args.train_steps)
    settings = TrainSettings(max_steps=args.train_steps, warmup_steps=warmup,
                             lr_scale=args.train_peak_lr * (config.d_model * warmup) ** 0.5,
                             tokens_per_step=args.train_tokens,
                             tokens_per_batch=args.train_tokens * 5 // 4,  # room for padding
                             checkpoint_every_minutes=None)  # fmt: skip
    trainer = train_throughput.our_trainer(config, corpus, settings, workdir)
    began, losses, dev, stopped_by = time.perf_counter(), [], [], "steps"
    if args.dev_source:  # read and encoded once, translated at every check
        lines = args.dev_source.read_text(encoding="utf-8").splitlines()[: args.dev_sentences]
        dev_sentences = [np.array(processor.encode(line)) for line in lines]
        dev_references = args.dev_reference.read_text(encoding="utf-8").splitlines()
    for step in range(1, args.train_steps + 1):
        loss, _, tokens, _ = trainer.train_step(save_requested=False, budget_spent=False)
        losses.append(loss / tokens)  # label-smoothed, per target token
        if args.dev_source and (step % args.dev_every == 0 or step == args.train_steps):
            model = fp32_copy(trainer, config)
            gates = dev_gates(model, dev_sentences, dev_references, processor, args)
            dev.append({"step": step, "loss": round(losses[-1], 3), **gates})
            if gates["passed"]:
                stopped_by = "dev gates"
                break
        if args.train_seconds and time.perf_counter() - began > args.train_seconds:
            stopped_by = "seconds"
            break
    training = {"steps": len(losses), "stopped_by": stopped_by, "warmup_steps": warmup,
                "peak_lr": args.train_peak_lr, "first_loss": round(losses[0], 3),
                "last_loss": round(losses[-1], 3), "dev": dev,
                "seconds": round(time.perf_counter() - began, 1)}  # fmt: skip
    model = fp32_copy(trainer, config)
    if args.dev_source:  # the length penalty, on the dev sentences the checks translated
        training |= chosen_alpha(model, dev_sentences, dev_references, processor, args)
    return model, training


def fp32_copy(trainer, config) -> Transformer:
    """The trainer's model (bf16 on a GPU) as an fp32 Transformer on the same device."""
    weights = trainer.engine.module.state_dict()
    model = Transformer(config).to(next(iter(weights.values())).device)
    model.load_state_dict({name: value.float() for name, value in weights.items()})
    return model.eval()


def search_settings(args) -> DecodeSettings:
    """The beam search timed, and the one the dev checks use."""
    return DecodeSettings(beam=args.beam, alpha=args.alpha, batch_tokens=args.batch_tokens,
                          max_length_offset=args.max_length_offset)  # fmt: skip


def dev_gates(model, sentences, references, processor, args) -> dict:
    """Whether the model stops where translations end, on the first --dev-sentences of the dev
    set: output over reference length (13a tokens) for the whole and the median sentence in
    0.8-1.25, at most 2% of outputs at the length limit, at most 2% empty."""
    hypotheses, _ = translate(model, sentences, search_settings(args), desc="dev")
    words = Tokenizer13a()
    lines = detokenized(processor, hypotheses)
    pairs = zip(lines, references[: len(lines)], strict=True)
    ratios = [len(words(line).split()) / max(1, len(words(ref).split())) for line, ref in pairs]
    ends = zip(hypotheses, sentences, strict=True)
    at_limit = [len(h.tokens) >= len(source) + args.max_length_offset for h, source in ends]
    whole = length_figures(hypotheses, processor, references)["output_to_reference_length"]
    figures = {"length_ratio": whole, "median_sentence_ratio": round(float(np.median(ratios)), 3),
               "at_length_limit": round(float(np.mean(at_limit)), 4),
               "empty": round(float(np.mean([not h.tokens for h in hypotheses])), 4)}  # fmt: skip
    lengths_fit = all(0.8 <= figures[k] <= 1.25 for k in ("length_ratio", "median_sentence_ratio"))
    ends_fit = figures["at_length_limit"] <= 0.02 and figures["empty"] <= 0.02
    return figures | {"passed": lengths_fit and ends_fit}


def chosen_alpha(model, sentences, references, processor, args) -> dict:
    """The length penalty's alpha with the best sacreBLEU on the dev sentences (--alphas; the
    paper chose its alpha on dev too); args.alpha becomes it."""
    bleu = {}
    for alpha in args.alphas:
        found, _ = translate(
            model, sentences, replace(search_settings(args), alpha=alpha), desc="alpha"
        )
        bleu[alpha] = length_figures(found, processor, references)["sacrebleu"]
    args.alpha = max(bleu, key=bleu.get)
    return {"dev_bleu_by_alpha": bleu, "alpha": args.alpha}


def length_figures(hypotheses, processor, references: list[str] | None) -> dict:
    """Our output's length over the references' (13a tokens, as sacreBLEU counts) and its
    sacreBLEU: how close to a real translation's length the timed outputs are."""
    if references is None:
        return {}
    lines = detokenized(processor, hypotheses)
    figures = bleu_and_length(lines, references[: len(hypotheses)])  # aiayn lengths' figures
    return {"output_to_reference_length": figures["length_ratio"], "sacrebleu": figures["bleu"]}


def run(model, sentences, settings, incremental: bool, drop_every=None) -> tuple[list, dict]:
    hypotheses, timing = translate(
        model, sentences, settings, incremental=incremental, drop_every=drop_every
    )
    figures = {
        k: round(timing[k], 2) for k in ("seconds", "sentences_per_s", "target_tokens_per_s")
    }
    return hypotheses, figures


def write_profile(model, sentences, settings, path: Path) -> None:
    """Where our decoder's time goes: torch.profiler over the longest sentences (the first
    batches), the operators ranked by their own time on the device (CPU time on a CPU)."""
    cuda = next(model.parameters()).is_cuda
    longest = sorted(sentences, key=len, reverse=True)[: max(1, len(sentences) // 10)]
    table = benchlib.profiler_table(
        lambda: translate(model, longest, settings, incremental=True, desc="profile"), cuda
    )
    path.write_text(f"{len(longest)} longest sentences, {table}")


def run_peer(peer_model, sentences, args) -> tuple[list, dict]:
    """Marian's generate() on the same weights and batches."""
    with autocast(peer_model.device):
        return marian.marian_generate(peer_model, sentences, args.beam, args.batch_tokens)


def ct2_translators(model, processor, workdir: Path, device) -> dict:
    """CTranslate2 translators of `model` as `aiayn export --format ct2` writes it, in float32
    and int8, on our device, each with as many threads as torch uses."""
    import ctranslate2

    from aiayn.export import ct2
    from aiayn.export.bundle import vocabulary_pieces

    pieces = vocabulary_pieces(processor)
    translators = {}
    for quantization in ("float32", "int8"):
        folder = workdir / f"ct2_{quantization}"
        ct2.write(model.cpu(), pieces, folder, None if quantization == "float32" else quantization)
        translators[quantization] = ctranslate2.Translator(
            str(folder), device=device.type, intra_threads=torch.get_num_threads()
        )
    return translators


def run_ct2(translator, sentences, processor, args) -> tuple[list, dict]:
    """CTranslate2's beam search over the same sentences (batches of --batch-tokens source
    tokens), with our --beam and --alpha: its token ids and figures. Its length limit is one per
    call, so it stops at the longest source + --max-length-offset (ours at each sentence's own;
    CTranslate2's default, 256, is longer than either)."""
    pieces = [[processor.id_to_piece(int(i)) for i in s] for s in sentences]
    longest = max(len(s) for s in sentences) + args.max_length_offset
    start = time.perf_counter()
    found = translator.translate_batch(
        pieces, beam_size=args.beam, length_penalty=args.alpha, max_batch_size=args.batch_tokens,
        batch_type="tokens", suppress_sequences=[["<pad>"], ["<s>"]], max_decoding_length=longest,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    tokens = [[processor.piece_to_id(p) for p in result.hypotheses[0]] for result in found]
    produced = sum(len(t) + 1 for t in tokens)  # with EOS, as ours counts
    return tokens, {"seconds": round(seconds, 2),
                    "sentences_per_s": round(len(tokens) / seconds, 2),
                    "target_tokens_per_s": round(produced / seconds, 2)}  # fmt: skip


def fastest_runs(model, peers: dict, sentences, settings, args) -> tuple[tuple, dict]:
    """Ours and each peer (a name -> a function running it) `--repeats` times each, in
    alternating order so that all meet the same noise of a shared machine, keeping each one's
    fastest run."""
    runs = {"ours": [], **{name: [] for name in peers}}
    for who in benchlib.alternating(list(runs), args.repeats):
        if who == "ours":
            runs[who].append(run(model, sentences, settings, True, args.drop_every))
        else:
            runs[who].append(peers[who]())
    fastest = {who: min(done, key=lambda r: r[1]["seconds"]) for who, done in runs.items()}
    return fastest.pop("ours"), fastest


def ct2_figures(ours, ours_figures, peers: dict) -> dict:
    """CTranslate2's figures per weight type, our speed relative to it (seconds of theirs over
    ours: 0.8 means ours takes 1.25x as long), and how often it translated as ours."""
    record = {}
    for quantization in ("float32", "int8"):
        if f"ct2_{quantization}" not in peers:
            continue
        tokens, figures = peers[f"ct2_{quantization}"]
        record[f"ctranslate2_{quantization}"] = figures
        record[f"ours_vs_ct2_{quantization}"] = round(
            figures["seconds"] / ours_figures["seconds"], 2
        )
        record[f"same_translations_as_ct2_{quantization}"] = agreement(ours, tokens)
    return record


def agreement(ours, tokens) -> float:
    """The share of sentences another decoder translated token for token as ours."""
    return round(sum(a.tokens == b for a, b in zip(ours, tokens, strict=True)) / len(ours), 4)


def naive_figures(model, sentences, settings, ours, ours_figures, skip: bool) -> dict:
    """The naive decoder's figures, its speed relative to ours, and whether it agrees."""
    if skip:
        return {"naive_recompute": "skipped: --no-naive"}
    naive, figures = run(model, sentences, settings, incremental=False)
    return {"naive_recompute": figures,
            "speedup": round(figures["seconds"] / ours_figures["seconds"], 2),
            "same_translations": agreement(ours, [h.tokens for h in naive])}  # fmt: skip


def variant_figures(model, sentences, settings, ours, ours_figures, args) -> dict:
    """Ours again with --cache-ab's ancestry cache, `--repeats` times: its fastest figures, its
    speed relative to ours, and whether it translates the same. (The compiled step's A/B is
    retired: docs/benchmarks.md.)"""
    variants = {"ancestry": {"cache": "ancestry"}} if args.cache_ab else {}
    record = {}
    for name, change in variants.items():
        variant = replace(settings, **change)
        runs = [run(model, sentences, variant, True, args.drop_every) for _ in range(args.repeats)]
        hypotheses, figures = min(runs, key=lambda r: r[1]["seconds"])
        record[f"ours_{name}"] = figures
        record[f"{name}_speedup"] = round(ours_figures["seconds"] / figures["seconds"], 2)
        record[f"{name}_same_translations"] = agreement(ours, [h.tokens for h in hypotheses])
    return record


def peer_figures(ours, ours_figures, peer, skipped: bool = False) -> dict:
    """The peer's figures, its speed relative to ours, and how often it translated as ours."""
    if peer is None:
        why = "--no-peer" if skipped else "transformers is not installed"
        return {"hf_marian_generate": f"skipped: {why}"}
    tokens, figures = peer
    return {"hf_marian_generate": figures,
            "speedup_vs_hf": round(figures["seconds"] / ours_figures["seconds"], 2),
            "same_translations_as_hf": agreement(ours, tokens)}  # fmt: skip


def model_name(args) -> str:
    if args.train_steps:
        return (f"{args.preset} trained on {args.train_source.name}, {args.train_tokens} target "
                f"tokens a step (vocabulary {args.vocab}; its steps under training)")  # fmt: skip
    return f"{args.preset} (random initialisation, vocabulary {args.vocab})"


def main() -> None:
    parser = benchlib.parser(__doc__, out=True)
    add = parser.add_argument
    add("--source", type=Path, default=NEWSTEST2014)
    add("--sentences", type=int, default=None, help="first N (default: all)")
    add("--preset", default="base")
    add("--vocab", type=int, default=8000, help="BPE size for a random model")
    add("--weights", help="a trained weights file (runs/EXP/averaged.safetensors)")
    add("--subword", help="its sentencepiece model (data/DATASET/spm/bpe.model)")
    add("--train-source", type=Path, help="parallel text to train the preset on")
    add("--train-target", type=Path, help="its other side, line by line")
    add("--train-steps", type=int, default=0, help="our trainer's steps on it")
    add("--train-tokens", type=int, default=25000, help="target tokens a step")
    add("--train-seconds", type=float, help="or stop training after this long")
    add("--train-warmup", type=int, default=200, help="warm-up steps")
    add("--train-peak-lr", type=float, default=7e-4, help="at the warm-up's end (paper: 7e-4)")
    add("--dev-source", type=Path, help="stop training once its outputs stop")
    add("--dev-reference", type=Path, help="--dev-source's references")
    add("--dev-sentences", type=int, default=300, help="the first N of it")
    add("--dev-every", type=int, default=100, help="steps between dev checks")
    add("--reference", type=Path, help="the source's reference translations")
    add("--beam", type=int, default=4)
    add("--alpha", type=float, default=0.6, help="the length penalty (trained: chosen on dev)")
    add("--alphas", type=float, nargs="+", default=[0.6, 1.0, 1.4], help="tried on dev")
    add("--max-length-offset", type=int, default=50, help="outputs stop at source length + N")
    add("--batch-tokens", type=int, default=4000)
    add("--repeats", type=int, default=2, help="runs of ours and HF each; the fastest counts")
    add("--no-naive", action="store_true", help="skip the naive decoder (many times slower)")
    add("--drop-every", type=int, help="finished sentences leave the batch every N steps")
    add("--no-peer", action="store_true", help="skip HF generate()")
    add("--ct2", action="store_true", help="also CTranslate2, float32 and int8 (the export extra)")
    add("--cache-ab", action="store_true", help="also decode with decode.cache ancestry")
    add("--ab-against", metavar="REVISION", help="also decode with that revision's src/ (ab.py)")
    add("--ab-commit", metavar="COMMIT", action="append", default=[],
        help="also decode with that commit's src/ and its parent's (repeatable)")  # fmt: skip
    add("--profile", type=Path, help="also write a torch.profiler table of our decoder here")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.weights and not args.subword:
        parser.error("--weights needs --subword")
    if args.train_steps and not (args.train_source and args.train_target):
        parser.error("--train-steps needs --train-source and --train-target")
    if bool(args.dev_source) != bool(args.dev_reference):
        parser.error("--dev-source and --dev-reference go together")
    if not args.source.exists():
        sys.exit(f"{args.source} is missing: pass --source (newstest2014 source, one per line)")

    device = pick_device()
    lines = args.source.read_text(encoding="utf-8").splitlines()[: args.sentences]
    references = args.reference.read_text(encoding="utf-8").splitlines() if args.reference else None
    if args.train_steps:
        from aiayn.train.engine import init_process

        init_process()  # the trainer's one-process group
    record = {**benchlib.header("decode_speed", device), "model": args.weights or model_name(args)}
    with tempfile.TemporaryDirectory() as workdir:
        model, processor, training = model_and_subword(args, device, Path(workdir))
        if training:  # kept even if the timing below is cut short
            record["training"] = training
            written(record, args)
        translators = ct2_translators(model, processor, Path(workdir), device) if args.ct2 else {}
        model.to(device)
    sentences = [np.array(processor.encode(line)) for line in lines]
    settings = search_settings(args)
    record |= {"source": f"{args.source.name}, {len(sentences)} sentences", "beam": args.beam,
               "alpha": args.alpha, "max_length_offset": args.max_length_offset,
               "batch_tokens": args.batch_tokens, "repeats": args.repeats,
               "drop_every": args.drop_every or default_drop_every(device)}  # fmt: skip
    peers = {f"ct2_{kind}": functools.partial(run_ct2, translator, sentences, processor, args)
             for kind, translator in translators.items()}  # fmt: skip
    if marian.available() and not args.no_peer:
        peer_model = marian.marian_from_ours(model).eval()
        peers["hf"] = functools.partial(run_peer, peer_model, sentences, args)
    (ours, ours_figures), fastest = fastest_runs(model, peers, sentences, settings, args)
    record["ours_cached"] = ours_figures | length_figures(ours, processor, references)
    written(record, args)
    record |= naive_figures(model, sentences, settings, ours, ours_figures, args.no_naive)
    record |= variant_figures(model, sentences, settings, ours, ours_figures, args)
    record |= peer_figures(ours, ours_figures, fastest.get("hf"), args.no_peer)
    record |= ct2_figures(ours, ours_figures, fastest)
    written(record, args)
    if args.ab_against:
        record["ab"] = ab.compare(model, sentences, settings, args.ab_against, args.repeats)
    if args.ab_commit:
        record["ab_commits"] = [ab.compare_commit(model, sentences, settings, commit, args.repeats)
                                for commit in args.ab_commit]  # fmt: skip
    if args.profile:
        write_profile(model, sentences, settings, args.profile)
    benchlib.finish(record, args, device)


def written(record: dict, args) -> None:
    """The record so far to --out: a run cut at its cap keeps what it measured."""
    if args.out is not None:
        benchlib.write_json(args.out, record)


if __name__ == "__main__":
    main()
    leave(0)  # as the trainer ends: no C++ static destructors after DeepSpeed ran
