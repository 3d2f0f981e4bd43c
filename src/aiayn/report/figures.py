"""The figures: learning-rate schedules, loss curves, BLEU before and after averaging, and
encoder self-attention maps in the style of the paper's Figures 3-5."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from aiayn.train.curves import read_lines  # noqa: E402
from aiayn.train.schedule import inverse_sqrt_lr  # noqa: E402


def learning_rate(schedules: dict[str, dict]):
    """Left: the paper's base and big schedules over 100k steps; right: each experiment's.

    schedules: name -> {"d_model", "warmup_steps", "lr_scale", "max_steps"}.
    """
    figure, (paper, ours) = plt.subplots(1, 2, figsize=(11, 4))
    steps = np.arange(1, 100_001, 50)
    for label, d_model in (("base (d_model 512)", 512), ("big (d_model 1024)", 1024)):
        paper.plot(steps, [inverse_sqrt_lr(s, d_model, 4000) for s in steps], label=label)
    paper.set(title="paper: warm-up 4000 steps", xlabel="step", ylabel="learning rate")
    paper.legend()
    for name, spec in schedules.items():
        steps = np.arange(1, spec["max_steps"] + 1)
        rates = [
            inverse_sqrt_lr(s, spec["d_model"], spec["warmup_steps"], spec["lr_scale"])
            for s in steps
        ]
        ours.plot(steps, rates, label=name)
    ours.set(title="ours", xlabel="step", ylabel="learning rate")
    ours.legend(fontsize="small")
    figure.tight_layout()
    return figure


def read_log(path: str | Path) -> tuple[list[dict], list[dict]]:
    """Training records and dev records of a train.jsonl."""
    records = read_lines(Path(path))
    return [r for r in records if "loss" in r], [r for r in records if "dev_loss" in r]


def loss_curves(logs: dict[str, str]):
    """Training loss (label-smoothed, per target token) and dev loss, per experiment, and
    beside them dev BLEU where training scored it (train.dev_bleu_sentences)."""
    runs = {name: read_log(path) for name, path in logs.items()}
    with_bleu = any("dev_bleu" in r for _, dev in runs.values() for r in dev)
    figure, axes = plt.subplots(1, 3 if with_bleu else 2, figsize=(16 if with_bleu else 11, 4))
    train_axes, dev_axes = axes[0], axes[1]
    dev_axes.sharey(train_axes)
    counts = set()
    for name, (train, dev) in runs.items():
        train_axes.plot([r["step"] for r in train], [r["loss"] for r in train], label=name)
        dev_axes.plot([r["step"] for r in dev], [r["dev_loss"] for r in dev], "o-", label=name)
        scored = [r for r in dev if "dev_bleu" in r]
        counts |= {r["dev_bleu_sentences"] for r in scored}
        if with_bleu:
            axes[2].plot([r["step"] for r in scored], [r["dev_bleu"] for r in scored], "o-")
    train_axes.set(title="training loss", xlabel="step", ylabel="loss per target token")
    dev_axes.set(title="dev loss", xlabel="step")
    dev_axes.legend(fontsize="small")
    if with_bleu:
        sentences = "/".join(map(str, sorted(counts)))
        axes[2].set(title=f"dev BLEU (sacreBLEU), first {sentences} sentences", xlabel="step",
                    ylabel="BLEU")  # fmt: skip
    figure.tight_layout()
    return figure


def parse_curves(logs: dict[str, str], baselines: dict[str, dict[str, float]]):
    """Dev F1, tagging accuracy and output length over reference length of each parser's dev
    parses (train.dev_parse_sentences) against training steps, with the trivial trees' dev F1:
    a parser that stops reading its input falls to them."""
    figure, (f1_axes, tag_axes, length_axes) = plt.subplots(1, 3, figsize=(14, 4))
    counts = set()
    for name, path in logs.items():
        parsed = [r for r in read_log(path)[1] if "dev_f1" in r]
        counts |= {r["dev_parse_sentences"] for r in parsed}
        steps = [r["step"] for r in parsed]
        f1_axes.plot(steps, [r["dev_f1"] for r in parsed], "o-", label=name)
        tag_axes.plot(steps, [r["dev_tagging_accuracy"] for r in parsed], "o-", label=name)
        length_axes.plot(steps, [r["dev_length_ratio"] for r in parsed], "o-", label=name)
    styles = iter(["--", ":", "-."] * len(baselines))
    for label, scores in baselines.items():
        for baseline, f1 in scores.items():
            label_ = f"{baseline}, all of {label}"
            f1_axes.axhline(f1, color="grey", linestyle=next(styles), label=label_)
    length_axes.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
    sentences = "/".join(map(str, sorted(counts)))
    f1_axes.set(title=f"dev F1 (EVALB rules), {sentences} sentences", xlabel="step", ylabel="F1")
    tag_axes.set(title="dev tagging accuracy", xlabel="step", ylabel="% of words")
    length_axes.set(title="output length / reference length", xlabel="step", ylabel="ratio")
    f1_axes.legend(fontsize="small")
    figure.tight_layout()
    return figure


def averaging(bleu: dict[str, tuple[float, float]], split_label: str):
    """Dev BLEU of the last checkpoint and of the averaged model, per experiment."""
    names = list(bleu)
    x = np.arange(len(names))
    figure, axes = plt.subplots(figsize=(max(5, 1.6 * len(names)), 4))
    last = axes.bar(x - 0.2, [bleu[n][0] for n in names], 0.4, label="last checkpoint")
    averaged = axes.bar(x + 0.2, [bleu[n][1] for n in names], 0.4, label="averaged")
    axes.bar_label(last, fmt="%.1f", fontsize="small")
    axes.bar_label(averaged, fmt="%.1f", fontsize="small")
    axes.set_xticks(x, names, rotation=20, ha="right")
    axes.set(ylabel=f"BLEU on {split_label} (tok., compound split)")
    axes.set_title("checkpoint averaging")
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncols=2)
    figure.tight_layout()
    return figure


def attention_heads(weights: np.ndarray, pieces: list[str], title: str):
    """Every head of one layer as a heatmap (query rows, key columns): Figures 4-5 style."""
    heads = weights.shape[0]
    columns = min(heads, 4)
    rows = -(-heads // columns)
    size = max(4.0, 0.12 * len(pieces))
    figure, axes = plt.subplots(rows, columns, figsize=(size * columns, size * rows), squeeze=False)
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.axis("off")
            continue
        ax.imshow(weights[head], cmap="Blues", vmin=0.0, vmax=1.0)
        ax.set_title(f"head {head + 1}")
        ax.set_xticks(range(len(pieces)), pieces, rotation=90, fontsize=6)
        ax.set_yticks(range(len(pieces)), pieces, fontsize=6)
    figure.suptitle(title)
    figure.tight_layout(rect=(0, 0, 1, 0.96))
    return figure


def attention_from_token(weights: np.ndarray, pieces: list[str], query: int, title: str):
    """Where one token attends, head by head: Figure 3 style (rows: heads)."""
    heads = weights.shape[0]
    figure, axes = plt.subplots(figsize=(max(6.0, 0.2 * len(pieces)), 1 + 0.35 * heads))
    axes.imshow(weights[:, query, :], cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    axes.set_xticks(range(len(pieces)), pieces, rotation=90, fontsize=7)
    axes.set_yticks(range(heads), [f"head {h + 1}" for h in range(heads)], fontsize=7)
    axes.set_title(title)
    figure.tight_layout()
    return figure


def word_start(pieces: list[str], sentence: str, word: str) -> int | None:
    """Index of the first subword piece of `word` in the sentence, or None when absent."""
    words = sentence.split()
    if word not in words:
        return None
    target, count = words.index(word), -1
    for index, piece in enumerate(pieces):
        if piece.startswith("\u2581"):
            count += 1
            if count == target:
                return index + 1 if piece == "\u2581" else index  # a lone word boundary
    return None
