"""Benchmark: training throughput of our trainer beside a naive baseline, in one run.

Ours: the workflow's Trainer.train_step (the DeepSpeed engine, length-bucketed batches padded to
8 and prepared while the device computes, bf16 where the device has it) on a synthetic corpus
with WMT-like lengths, binarized to a temporary folder. Naive: torch.nn.Transformer of the same
dimensions, fp32, fixed sentence counts in random order, plain Adam. Reported: real target
tokens per second and, on a GPU, model-FLOPs utilisation. Each trainer runs --rounds times (in
alternating order) and keeps its fastest; the record is rewritten to --out after each, so a run
cut at a time limit keeps what it measured. The A/B trainers (TRAINERS) each change one train
setting or apply one lever of aiayn.train.levers; docs/benchmarks.md. (HF Marian's trainer,
2.7-5.5x slower than ours in every GPU call, is retired: docs/benchmarks.md has its figures.)

    python bench/train_throughput.py                         # base and big at the paper's batch
    python bench/train_throughput.py --presets tiny --tokens 2000 --steps 3   # CPU-sized
    python bench/train_throughput.py --profile train.prof.txt   # and where our step's time goes
    python bench/train_throughput.py --trainers ours,ours_sync_free  # train.sync_free's A/B
"""

from __future__ import annotations

import functools
import math
import tempfile
from pathlib import Path

import benchlib
import numpy as np
import torch
import torch.nn.functional as F
from benchlib import measure

from aiayn.flops import training_flops
from aiayn.model import Transformer, sinusoidal_positions
from aiayn.model_config import build_config
from aiayn.prepare.binarize import write_indexed
from aiayn.train import levers
from aiayn.train.batching import collate, step_plan, token_batches
from aiayn.train.loader import BatchStream
from aiayn.train.record import sync_free_mode
from aiayn.train.settings import Experiment, TrainSettings
from aiayn.train.trainer import Trainer, leave
from aiayn.vocab import PAD_ID

PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}  # dense bf16


def synthetic_corpus(pairs: int, vocab: int, seed: int = 0):
    """Token ids with WMT-like lengths (median ~22 subwords, long tail), target ~1.1x source."""
    rng = np.random.default_rng(seed)
    source_lengths = np.clip(rng.lognormal(3.1, 0.55, pairs), 1, 200).astype(int)
    target_lengths = np.clip((source_lengths * rng.normal(1.1, 0.15, pairs)).astype(int), 1, 220)
    make = lambda lengths: [rng.integers(4, vocab, n) for n in lengths]  # noqa: E731
    return make(source_lengths), make(target_lengths)


def flops_per_step(config, batches) -> float:
    """Model FLOPs of the step's real tokens: aiayn.flops' count (the one training reports) for
    each sentence pair at its own length, so the padding the hardware also computes does not
    count as useful work."""
    total = 0.0
    for batch in batches:
        source_lengths = (batch.source != PAD_ID).sum(1).double()
        target_lengths = (batch.target_out != PAD_ID).sum(1).double()
        total += training_flops(config, 1, source_lengths, target_lengths).sum().item()
    return total


def bench_settings(args, **changes) -> TrainSettings:
    """The trainer's settings (seed, padding, ...) at the bench's batch size and --precision,
    with `changes` (an A/B's train settings, e.g. zero_stage=2)."""
    settings = {"tokens_per_step": args.tokens, "tokens_per_batch": args.batch_tokens,
                "checkpoint_every_minutes": None}  # fmt: skip
    settings |= {"precision": args.precision} if getattr(args, "precision", None) else {}
    return TrainSettings(**settings | changes)


def batch_plan(corpus, args):
    """Our length-bucketed batches by epoch, as the trainer plans them with bench_settings, and
    how many make one optimizer step."""
    settings = bench_settings(args)
    accumulation, batch_tokens = step_plan(settings.tokens_per_step, settings.tokens_per_batch, 1)
    sources, targets = corpus
    lengths = [len(s) + 1 for s in sources], [len(t) + 1 for t in targets]

    def plan(epoch):
        return token_batches(
            *lengths, batch_tokens, settings.seed, epoch, settings.pad_to_multiple
        )[0]

    return plan, accumulation


def real_flops_per_token(config, corpus, args) -> float:
    """Model FLOPs per real target token over exactly the batches the timed steps take."""
    plan, accumulation = batch_plan(corpus, args)
    stream = BatchStream(*corpus, plan, TrainSettings.pad_to_multiple, torch.device("cpu"))
    stream.take(args.warmup * accumulation)
    timed = stream.take(args.steps * accumulation)
    return flops_per_step(config, timed) / sum(b.target_tokens for b in timed)


def binarized(corpus, vocab: int, folder: Path) -> tuple[str, str]:
    prefixes = str(folder / "train.src"), str(folder / "train.tgt")
    for prefix, sentences in zip(prefixes, corpus, strict=True):
        write_indexed(prefix, (s.tolist() for s in sentences), vocab)
    return prefixes


def our_trainer(config, corpus, settings: TrainSettings, folder: Path, edit=None) -> Trainer:
    """The workflow's Trainer (no checkpoints, no evaluation) on `corpus` (the source and
    target sentences as id arrays), binarized into `folder`; `edit` changes its model before
    DeepSpeed wraps it."""
    data = binarized(corpus, config.vocab_size, folder)
    experiment = Experiment("bench", folder / "run", data, data, config, settings)
    edited = edit or (lambda model: model)
    return Trainer(experiment, lambda model_config: edited(Transformer(model_config)))


def ours(config, corpus, args, device, edit=None, profile_to: Path | None = None, **changes):
    """The trainer's own step (no checkpoints, no evaluation) on the corpus, with the train
    settings `changes` (`tokens_per_batch=args.tokens`: one micro-batch a step), its model
    changed by `edit` (a lever of aiayn.train.levers) before DeepSpeed wraps it. The warm-up
    steps pay for any compiling: their seconds are recorded. Besides tokens per second, what
    the step held and took (step_figures). With `profile_to`, the timed steps run under
    torch.profiler instead, and its table is appended there."""
    with tempfile.TemporaryDirectory() as folder:
        settings = bench_settings(args, **changes)
        trainer = our_trainer(config, corpus, settings, Path(folder), edit)

        losses = []  # (loss sum, tokens) of each step, read after the timing

        def step():
            loss, _, tokens, _ = trainer.train_step(save_requested=False, budget_spent=False)
            losses.append((loss, tokens))
            return tokens

        if profile_to is not None:
            return append_profile(step, config, args, device, profile_to)
        warmup_seconds = benchlib.warm_up(step, args.warmup, device)
        labels = {"precision": trainer.precision, "loss_kernel": trainer.steps.loss_kernel,
                  "warmup_seconds": round(warmup_seconds, 1)}  # fmt: skip
        timed_from, before = len(losses), dict(trainer.state)
        tokens_per_s, timing = benchlib.timed_steps(step, args.steps, device)
        labels |= step_figures(before, trainer.state, args.steps) | timing
        # the same seed, data and steps in every trainer of ours: precisions compare by it
        timed = losses[timed_from:]
        labels["loss_per_token"] = round(sum(map(float, (loss for loss, _ in timed)))
                                         / sum(tokens for _, tokens in timed), 4)  # fmt: skip
        if settings.sync_free:  # read once, at the end
            trainer.steps.settle(trainer.state, lambda: None)
            labels["skipped_steps"] = trainer.state["skipped_steps"]
            labels["sync_free"] = sync_free_mode(settings, trainer.engine)
        return tokens_per_s, labels


def step_figures(before: dict, after: dict, steps: int) -> dict:
    """What the timed steps held, from the trainer's own counters: real target tokens a step
    (the "25000-token" step holds fewer: the padded limit closes batches early) and the padded
    target tokens the device computed per real one."""
    real = after["target_tokens"] - before["target_tokens"]
    padded = after["padded_target_tokens"] - before["padded_target_tokens"]
    return {"real_target_tokens_per_step": round(real / steps),
            "padded_per_real_target_token": round(padded / real, 3)}  # fmt: skip


def append_profile(step, config, args, device, path: Path) -> None:
    """Where our step's time goes: the operators of `args.steps` steps after the warm-up."""
    for _ in range(args.warmup):
        step()
    cuda = device.type == "cuda"
    table = benchlib.profiler_table(lambda: [step() for _ in range(args.steps)], cuda)
    heading = (
        f"{config.n_layers}+{config.n_layers} layers, d_model {config.d_model}: "
        f"{args.steps} steps of {args.tokens} target tokens, "
    )
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(heading + table)


class NaiveTransformer(torch.nn.Module):
    """The same dimensions from torch.nn.Transformer, as a first attempt would write it."""

    def __init__(self, config):
        super().__init__()
        self.embed = torch.nn.Embedding(config.vocab_size, config.d_model, padding_idx=0)
        self.core = torch.nn.Transformer(config.d_model, config.n_heads, config.n_layers,
                                         config.n_layers, config.d_ff, config.dropout,
                                         batch_first=True)  # fmt: skip
        self.register_buffer("positions", sinusoidal_positions(1024, config.d_model))

    def embed_with_positions(self, ids):
        return self.embed(ids) * math.sqrt(self.embed.embedding_dim) + self.positions[: ids.size(1)]

    def forward(self, source, target_in):
        embed, length = self.embed_with_positions, target_in.size(1)
        hidden = torch.ones(length, length, dtype=torch.bool, device=target_in.device).triu(1)
        out = self.core(embed(source), embed(target_in), tgt_mask=hidden,
                        src_key_padding_mask=source == 0, tgt_key_padding_mask=target_in == 0,
                        memory_key_padding_mask=source == 0)  # fmt: skip
        return out @ self.embed.weight.T


NAIVE_BATCH_TOKENS = 6250  # its fp32 batch of 25000 tokens ran out of 140 GB on an H200


def naive(config, corpus, args, device):
    """A fixed number of sentences a batch, sized as a first attempt would size it to fit: a
    quarter of the paper's step, accumulated to the step's tokens."""
    model = NaiveTransformer(config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    sources, targets = corpus
    mean = float(np.mean([max(len(s), len(t)) + 1 for s, t in zip(sources, targets, strict=True)]))
    batch_tokens = min(args.batch_tokens, NAIVE_BATCH_TOKENS)
    per_batch = max(1, int(batch_tokens / mean))
    rng = np.random.default_rng(2)

    def step():
        count = per_batch * max(1, round(args.tokens / batch_tokens))
        indices, total = rng.choice(len(sources), count, replace=False), 0
        optimizer.zero_grad(set_to_none=True)
        for chunk in np.array_split(indices, max(1, len(indices) // per_batch)):
            batch = collate(sources, targets, chunk).to(device)
            logits = model(batch.source, batch.target_in)
            F.cross_entropy(logits.flatten(0, 1), batch.target_out.flatten(), ignore_index=0,
                            label_smoothing=0.1).backward()  # fmt: skip
            total += batch.target_tokens
        optimizer.step()
        return total

    return measure(step, args.steps, args.warmup, device)


HOST_PROBE_TOKENS = 512


def cuda_only(trainer, why: str):
    """The trainer on a CUDA device; elsewhere, why it did not run."""
    return lambda *run: trainer(*run) if run[3].type == "cuda" else f"skipped: {why}"


TRAINERS = {  # name on the command line (and its key in a result row): how it runs
    "ours": ours,
    "naive": naive,  # its row key: NAIVE_KEY
    # fp16 with dynamic loss scaling, what `auto` picks on a V100 or T4 (7.x), against bf16
    "ours_fp16": cuda_only(functools.partial(ours, precision="fp16"), "fp16 needs a CUDA GPU"),
    # the step that never waits for the device (#46 item 1's host syncs): train.sync_free
    "ours_sync_free": functools.partial(ours, sync_free=True),
    # big's step as one micro-batch of 25000 tokens rather than two (memory permitting)
    "ours_one_micro_batch": lambda *run: ours(*run, tokens_per_batch=run[2].tokens),
    # the host's cost of a step: the same step at a batch of 512 tokens, whose device work is
    # near nothing, so its step_ms is what the host spends (launches, Python, DeepSpeed)
    "ours_host_probe": lambda *run: ours(*run, tokens_per_step=HOST_PROBE_TOKENS,
                                         tokens_per_batch=HOST_PROBE_TOKENS),  # fmt: skip
    # the pre-softmax projection and the loss on real target rows only (#67 item 4)
    "ours_real_rows": functools.partial(ours, real_rows_only=True),
    # the levers (aiayn.train.levers): Q/K/V as one product (#46 item 2), each layer compiled
    # on its own (#46), residual + dropout + LayerNorm fused (#67), attention at widths <= 64
    # through SDPA's math or memory-efficient kernels (#67, bench/attention_speed.py)
    "ours_fused_qkv": functools.partial(ours, edit=levers.fuse_projections),
    "ours_compiled_layers": functools.partial(ours, edit=levers.compile_layers),
    "ours_fused_norm": functools.partial(ours, edit=levers.fuse_residual_norms),
    "ours_math_attention": functools.partial(ours, edit=functools.partial(
        levers.pin_attention_backend, backend="math")),
    "ours_efficient_attention": cuda_only(functools.partial(ours, edit=functools.partial(
        levers.pin_attention_backend, backend="efficient")), "its kernel needs a CUDA GPU"),
}  # fmt: skip
NAIVE_KEY = "naive_fp32_nn_transformer"


def utilisation(flops_per_s: float, datasheet_tflops, measured_tflops) -> dict:
    """Model-FLOPs utilisation against the data sheet's dense bf16 peak (None where the device
    is not in PEAK_TFLOPS) and, when given, against the rate measured on this device."""
    datasheet = round(flops_per_s / (datasheet_tflops * 1e12), 4) if datasheet_tflops else None
    figures = {"mfu": datasheet}
    if measured_tflops:
        figures["mfu_vs_measured_peak"] = round(flops_per_s / (measured_tflops * 1e12), 4)
    return figures


def measure_preset(preset: str, corpus, args, device, peak, write) -> dict:
    """One preset's row, filled trainer by trainer; `write()` runs after each, so a run cut
    off at a time limit keeps every figure already taken."""
    config = build_config(args.vocab, preset)
    flops_per_token = real_flops_per_token(config, corpus, args)
    row = {
        "preset": preset,
        "tokens_per_step": args.tokens,
        "model_flops_per_target_token": round(flops_per_token),
    }
    args.rows.append(row)
    best: dict[str, float] = {}
    for name in benchlib.alternating([] if args.profile_only else args.trainers, args.rounds):
        key, trainer = (NAIVE_KEY if name == "naive" else name), TRAINERS[name]
        torch.manual_seed(0)
        result = trainer(config, corpus, args, device)
        if isinstance(result, str):  # why it did not run
            row[key] = result
            continue
        tokens_per_s, labels = result if isinstance(result, tuple) else (result, {})
        if tokens_per_s > best.get(key, 0.0):
            best[key] = tokens_per_s
            flops_per_s = tokens_per_s * flops_per_token
            row[key] = {
                "target_tokens_per_s": round(tokens_per_s),
                **labels,
                **utilisation(flops_per_s, peak, args.measured_peak_tflops),
            }
        benchlib.with_train_ratios(row)
        write()
    if args.profile:
        torch.manual_seed(0)
        ours(config, corpus, args, device, profile_to=args.profile)
    return row


def main() -> None:
    parser = benchlib.parser(__doc__, out=True)
    add = parser.add_argument
    add("--presets", nargs="+", default=["base", "big"])
    add("--tokens", type=int, default=25000, help="target tokens per optimizer step")
    add("--batch-tokens", type=int, default=25000, help="tokens per forward pass")
    add("--vocab", type=int, default=37000)
    add("--steps", type=int, default=20)
    add("--warmup", type=int, default=3)
    add("--pairs", type=int, default=20000)
    add(
        "--precision",
        choices=["bf16", "fp16", "fp32"],
        help="train.precision (default: the trainer's)",
    )
    add("--trainers", type=benchlib.comma_list(TRAINERS, "trainers"),
        default=["ours", "naive"], help=f"some of {', '.join(TRAINERS)}")  # fmt: skip
    add("--rounds", type=int, default=2, help="runs of each trainer; its fastest counts")
    add("--measured-peak-tflops", type=float,
        help="the measured bf16 matmul rate (gpu_suite.py): MFU also against it")  # fmt: skip
    add("--profile", type=Path, help="also write a torch.profiler table of our step per preset")
    add("--profile-only", action="store_true", help="with --profile: no trainer is timed")
    args = parser.parse_args()
    if args.profile_only and not args.profile:
        parser.error("--profile-only needs --profile FILE")
    if args.profile:
        args.profile.write_text("")

    from aiayn.train.engine import init_process

    _, _, device = init_process()
    record = benchlib.header("train_throughput", device)
    peak = next((value for key, value in PEAK_TFLOPS.items() if key in record["device"]), None)
    corpus = synthetic_corpus(args.pairs, args.vocab)
    args.rows = []
    record |= {
        "peak_tflops": peak,
        "measured_peak_tflops": args.measured_peak_tflops,
        "steps": args.steps,
        "results": args.rows,
    }

    def write() -> None:
        if args.out is not None:
            benchlib.write_json(args.out, record)

    for preset in args.presets:
        measure_preset(preset, corpus, args, device, peak, write)
    benchlib.finish(record, args, device)


if __name__ == "__main__":
    main()
    leave(0)  # as the trainer ends: no C++ static destructors after DeepSpeed ran
