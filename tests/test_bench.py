"""The benchmarks' Hugging Face peer really is our model: same weights, same function."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from aiayn.decode.settings import DecodeSettings
from aiayn.decode.translate import translate
from aiayn.model import Transformer
from aiayn.model_config import build_config
from tests.conftest import PROJECT

pytest.importorskip("transformers", reason="the Marian baseline needs transformers ([dev])")
sys.path.insert(0, str(PROJECT / "bench"))
import marian  # noqa: E402


def random_batch(vocab: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    source = torch.randint(4, vocab, (3, 11), generator=generator)
    source[0, 7:], source[0, 6] = 0, 3  # a padded row, EOS before the padding
    source[1:, -1] = 3
    target = torch.randint(4, vocab, (3, 9), generator=generator)
    target[:, 0] = 2  # BOS
    target[2, 6:] = 0
    return source, target


@pytest.mark.parametrize("overrides", [{}, {"n_layers": 1, "n_heads": 2}])
def test_marian_with_our_weights_computes_our_logits(overrides):
    torch.manual_seed(0)
    ours = Transformer(build_config(300, "tiny", **overrides)).eval()
    peer = marian.marian_from_ours(ours).eval()
    source, target = random_batch(300, seed=1)
    with torch.no_grad():
        expected, got = ours(source, target), marian.marian_logits(peer, source, target)
    real = target != 0
    assert torch.allclose(got[real], expected[real], atol=1e-5)
    with torch.no_grad():  # a model that differs in one weight does not agree
        peer.model.decoder.layers[0].fc2.bias[0] += (
            1.0  # (a uniform shift would vanish in LayerNorm)
        )
        changed = marian.marian_logits(peer, source, target)
    assert not torch.allclose(changed[real], expected[real], atol=1e-3)


def test_marian_generate_returns_one_translation_per_sentence_in_input_order():
    torch.manual_seed(0)
    ours = Transformer(build_config(200, "tiny", n_layers=1)).eval()
    peer = marian.marian_from_ours(ours).eval()
    rng = np.random.default_rng(0)
    sentences = [rng.integers(4, 200, size=n) for n in (5, 12, 3, 8)]
    tokens, figures = marian.marian_generate(peer, sentences, beam=4, batch_tokens=20)
    longest = max(len(s) for s in sentences)
    assert len(tokens) == 4
    assert all(0 not in t and 3 not in t and len(t) <= longest + 51 for t in tokens)
    assert figures["sentences_per_s"] > 0
    # Greedy search is the same algorithm in both, so identical weights give identical tokens;
    # only the length limit differs (ours per sentence, generate()'s per batch).
    hypotheses, _ = translate(ours, sentences, DecodeSettings(search="greedy"))
    greedy, _ = marian.marian_generate(peer, sentences, beam=1, batch_tokens=20, alpha=1.0)
    for hypothesis, tokens in zip(hypotheses, greedy, strict=True):
        assert (
            len(hypothesis.tokens) >= 50 and tokens[: len(hypothesis.tokens)] == hypothesis.tokens
        )


def test_train_throughput_counts_the_flops_of_real_tokens_only():
    """MFU divides useful work: the bench counts each pair at its own length with aiayn.flops'
    formula (the one train.json reports), so padding a batch further adds nothing."""
    import train_throughput

    from aiayn.flops import training_flops
    from aiayn.train.batching import collate

    config = build_config(100, "tiny")
    sources = [np.array([5, 6, 7]), np.array([8] * 9)]
    targets = [np.array([9, 10]), np.array([11] * 6)]
    expected = sum(
        training_flops(config, 1, len(s) + 1, len(t) + 1)  # + EOS
        for s, t in zip(sources, targets, strict=True)
    )
    for pad_to in (1, 8, 64):
        batch = collate(sources, targets, [0, 1], pad_to=pad_to)
        assert train_throughput.flops_per_step(config, [batch]) == expected


@pytest.mark.workflow  # a real training in-process, compiling (about 40 s on 2 cores)
def test_layers_compiled_one_by_one_train_as_the_eager_model(tmp_path):
    """The suite's compiled_layers A/B (#46: compile by region): each encoder and decoder layer
    through torch.compile, in place inside our trainer's engine, computes the eager steps'
    losses (without dropout, whose random numbers inductor draws differently)."""
    import train_throughput
    from torch._dynamo.utils import counters

    from aiayn.train.engine import init_process
    from aiayn.train.settings import TrainSettings

    init_process()
    config = build_config(500, "tiny", dropout=0.0)
    rng = np.random.default_rng(0)  # sentences of one length: one shape, compiled once
    corpus = [list(rng.integers(4, 500, (300, 9))) for _ in range(2)]
    settings = TrainSettings(tokens_per_step=1000, tokens_per_batch=1250,
                             checkpoint_every_minutes=None)  # fmt: skip
    losses, graphs = {}, counters["stats"]["unique_graphs"]
    for by_layer in (False, True):
        (tmp_path / str(by_layer)).mkdir()
        trainer = train_throughput.our_trainer(config, corpus, settings, tmp_path / str(by_layer))
        if by_layer:
            train_throughput.compile_layers(trainer.engine.module)
        steps = [trainer.train_step(save_requested=False, budget_spent=False) for _ in range(3)]
        losses[by_layer] = [loss for loss, *_ in steps]
    assert counters["stats"]["unique_graphs"] > graphs  # the layers did compile
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)
    assert len(set(losses[False])) == 3  # three steps on different batches


def test_fused_qkv_projections_compute_and_train_as_the_separate_ones(tmp_path):
    """The suite's fused_qkv A/B (#46 item 2): each attention's Q/K/V projections as one stacked
    matrix computes the model's own function (logits to fp32 rounding, the same number of
    weights) and, inside our trainer's engine, its steps' losses."""
    import train_throughput

    from aiayn.train.engine import init_process
    from aiayn.train.settings import TrainSettings

    config = build_config(500, "tiny", dropout=0.0)
    torch.manual_seed(0)
    separate = Transformer(config).eval()
    fused = train_throughput.fuse_projections(copy.deepcopy(separate))
    source, target = torch.randint(4, 500, (3, 7)), torch.randint(4, 500, (3, 5))
    names = [name for name, _ in fused.named_parameters()]
    assert sum(".w_qkv." in name for name in names) == 2 * 3 * config.n_layers  # weight, bias
    assert not any(".w_k." in name for name in names)
    assert sum(p.numel() for p in fused.parameters()) == sum(
        p.numel() for p in separate.parameters()
    )
    torch.testing.assert_close(fused(source, target), separate(source, target))

    init_process()
    rng = np.random.default_rng(0)
    corpus = [list(rng.integers(4, 500, (300, 9))) for _ in range(2)]
    settings = TrainSettings(tokens_per_step=1000, tokens_per_batch=1250,
                             checkpoint_every_minutes=None)  # fmt: skip
    losses = {}
    for fuse in (False, True):
        edit = train_throughput.fuse_projections if fuse else None
        trainer = train_throughput.our_trainer(config, corpus, settings, tmp_path / str(fuse), edit)
        assert any("w_qkv" in name for name, _ in trainer.engine.module.named_parameters()) == fuse
        steps = [trainer.train_step(save_requested=False, budget_spent=False) for _ in range(3)]
        losses[fuse] = [loss for loss, *_ in steps]
    assert losses[True] == pytest.approx(losses[False], rel=1e-5) and len(set(losses[True])) == 3


def test_attention_benchmark_times_each_backend_or_says_why_it_cannot(tmp_path):
    """#67's attention microbenchmark at CPU size: every backend timed (forward and backward)
    or skipped with the reason, base's and big's widths, encoder and causal."""
    command = [sys.executable, str(PROJECT / "bench/attention_speed.py"), "--tokens", "256",
               "--length", "16", "--steps", "1", "--repeats", "1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert [(r["preset"], r["causal"]) for r in record["rows"]] == [
        ("base", False),
        ("base", True),
        ("big", False),
        ("big", True),
    ]
    for row in record["rows"]:
        times = row["forward_backward_ms"]
        assert set(times) == {"flash", "efficient", "math", "compiled_math"}
        assert times["math"] > 0 and times["compiled_math"] > 0  # every device has these
        assert all(isinstance(t, float) or t.startswith("skipped: ") for t in times.values())
