"""The benchmarks' Hugging Face peer really is our model: same weights, same function."""

from __future__ import annotations

import copy
import functools
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


def lever_losses(tmp_path, config, lever=None, steps: int = 3) -> list[float]:
    """Our trainer's first steps' losses on a fixed corpus, its model changed by `lever` (one
    of aiayn.train.levers) before DeepSpeed wraps it."""
    import train_throughput

    from aiayn.train.engine import init_process
    from aiayn.train.settings import TrainSettings

    init_process()
    rng = np.random.default_rng(0)  # sentences of one length: one shape, compiled once
    corpus = [list(rng.integers(4, 500, (300, 9))) for _ in range(2)]
    settings = TrainSettings(tokens_per_step=1000, tokens_per_batch=1250,
                             checkpoint_every_minutes=None)  # fmt: skip
    folder = tmp_path / (lever.__name__ if lever else "eager")
    trainer = train_throughput.our_trainer(config, corpus, settings, folder, lever)
    return [trainer.train_step(save_requested=False, budget_spent=False)[0] for _ in range(steps)]


@pytest.mark.workflow  # real trainings in-process, compiling (about 60 s on 2 cores)
def test_compiled_levers_train_as_the_eager_model(tmp_path):
    """The suite's compiled_layers (#46: each layer through torch.compile) and fused_norm (#67:
    residual + dropout + LayerNorm as one compiled region) levers, applied inside our trainer,
    compute the eager steps' losses (without dropout, whose random numbers inductor draws
    differently); with dropout, the fused region still drops in training only."""
    from torch._dynamo.utils import counters

    from aiayn.train import levers

    config = build_config(500, "tiny", dropout=0.0)
    eager = lever_losses(tmp_path, config)
    assert len(set(eager)) == 3  # three steps on different batches
    for lever in (levers.compile_layers, levers.fuse_residual_norms):
        graphs = counters["stats"]["unique_graphs"]
        assert lever_losses(tmp_path, config, lever) == pytest.approx(eager, rel=1e-4), lever
        assert counters["stats"]["unique_graphs"] > graphs  # it did compile

    torch.manual_seed(0)
    model = Transformer(build_config(500, "tiny", dropout=0.3))
    fused = levers.fuse_residual_norms(copy.deepcopy(model))
    assert [n for n, _ in fused.named_parameters()] == [n for n, _ in model.named_parameters()]
    source, target = torch.randint(4, 500, (3, 7)), torch.randint(4, 500, (3, 5))
    torch.testing.assert_close(fused.eval()(source, target), model.eval()(source, target))
    assert not torch.allclose(fused.train()(source, target), model.eval()(source, target))


def test_fused_qkv_projections_compute_and_train_as_the_separate_ones(tmp_path):
    """The suite's fused_qkv lever (#46 item 2): each attention's Q/K/V projections as one
    stacked matrix computes the model's own function (logits to fp32 rounding, the same number
    of weights) and, inside our trainer's engine, its steps' losses."""
    from aiayn.train import levers

    config = build_config(500, "tiny", dropout=0.0)
    torch.manual_seed(0)
    separate = Transformer(config).eval()
    fused = levers.fuse_projections(copy.deepcopy(separate))
    source, target = torch.randint(4, 500, (3, 7)), torch.randint(4, 500, (3, 5))
    names = [name for name, _ in fused.named_parameters()]
    assert sum(".w_qkv." in name for name in names) == 2 * 3 * config.n_layers  # weight, bias
    assert not any(".w_k." in name for name in names)
    assert sum(p.numel() for p in fused.parameters()) == sum(
        p.numel() for p in separate.parameters()
    )
    torch.testing.assert_close(fused(source, target), separate(source, target))
    fused_losses = lever_losses(tmp_path, config, levers.fuse_projections)
    assert fused_losses == pytest.approx(lever_losses(tmp_path, config), rel=1e-5)


def test_an_attention_backend_pinned_by_width_computes_and_trains_as_the_model(tmp_path):
    """#67's attention lever: heads at most 64 wide through one SDPA backend. The math kernel
    gives the model's logits and training steps; the pin really decides (memory-efficient
    attention has no CPU kernel, so pinned here it fails), and only at the widths asked."""
    from aiayn.train import levers

    config = build_config(500, "tiny", dropout=0.0)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    source, target = torch.randint(4, 500, (3, 7)), torch.randint(4, 500, (3, 5))
    source[0, 4:] = 0  # a padded row: the encoder passes a mask
    math = levers.pin_attention_backend(copy.deepcopy(model), "math")
    torch.testing.assert_close(math(source, target), model(source, target))
    narrow = levers.pin_attention_backend(copy.deepcopy(model), "efficient", max_head_width=1)
    torch.testing.assert_close(narrow(source, target), model(source, target))  # none pinned
    with pytest.raises(RuntimeError, match="No viable backend"):
        levers.pin_attention_backend(copy.deepcopy(model), "efficient")(source, target)
    pinned = functools.partial(levers.pin_attention_backend, backend="math")
    pinned.__name__ = "math_attention"
    assert lever_losses(tmp_path, config, pinned) == pytest.approx(
        lever_losses(tmp_path, config), rel=1e-5
    )


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


def test_fairseq_export_gives_every_piece_its_own_id(tmp_path):
    """fairseq reads a dict.txt of whitespace-split tokens after its four specials: our pieces
    from id 4 on, each one token with no whitespace, so every id survives the trip as itself."""
    import fairseq_learning
    import sentencepiece as spm

    from aiayn.prepare.binarize import write_indexed

    rng = np.random.default_rng(0)
    words = ["Hund", "Katze", "läuft", "über", "die", "Straße", "ein", "Mann", "…", "née", "42"]
    lines = [" ".join(rng.choice(words, rng.integers(1, 12))) for _ in range(300)]
    (tmp_path / "text").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(tmp_path / "text"), model_prefix=str(tmp_path / "bpe"), vocab_size=320,
        model_type="bpe", byte_fallback=True, pad_id=0, unk_id=1, bos_id=2, eos_id=3,
    )  # fmt: skip
    processor = spm.SentencePieceProcessor(model_file=str(tmp_path / "bpe.model"))
    ids = [processor.encode(line) for line in lines]
    write_indexed(tmp_path / "train", ids, processor.get_piece_size())
    size = fairseq_learning.pieces_dictionary(tmp_path / "bpe.model", tmp_path / "dict.txt")
    fairseq_learning.export_split(tmp_path / "train", tmp_path / "bpe.model", tmp_path / "out")

    entries = [line.rsplit(" ", 1) for line in (tmp_path / "dict.txt").read_text().splitlines()]
    index = {token: 4 + i for i, (token, count) in enumerate(entries)}
    assert size == processor.get_piece_size() == 4 + len(index) == 4 + len(entries)
    read_back = [[index[token] for token in line.split()]
                 for line in (tmp_path / "out").read_text(encoding="utf-8").splitlines()]  # fmt: skip
    assert read_back == ids


FAIRSEQ_LOG = """\
2026-12-05 11:23:25 | INFO | fairseq_cli.train | begin dry-run validation on "valid" subset
2026-12-05 11:23:44 | INFO | train_inner | {"epoch": 1, "wps": "1508.3", "wpb": "2515.4"}
2026-12-05 11:24:00 | INFO | train_inner | {"epoch": 1, "wps": "1790.9", "wpb": "2792.8"}
2026-12-05 11:24:17 | INFO | train_inner | {"epoch": 1, "wps": "1810.8", "wpb": "3004.3"}
2026-12-05 11:26:15 | INFO | valid | {"epoch": 1, "valid_nll_loss": "7.998", "valid_ppl": "255.65", \
"valid_num_updates": "100"}
2026-12-05 11:28:57 | INFO | valid | {"epoch": 2, "valid_nll_loss": "6.539", "valid_ppl": "93", \
"valid_num_updates": "200"}
"""


def test_fairseq_log_is_read_in_nats(tmp_path):
    """fairseq logs its dev nll_loss in bits per token (its ppl is 2 ** nll_loss)."""
    import fairseq_learning

    (tmp_path / "fairseq.log").write_text(FAIRSEQ_LOG)
    curve = fairseq_learning.fairseq_curve(tmp_path / "fairseq.log")
    assert curve["dev_nll"] == pytest.approx({100: np.log(255.65), 200: np.log(93)}, abs=2e-3)
    assert curve["target_tokens_per_s"] == pytest.approx((1790.9 + 1810.8) / 2)  # after warm-up
    assert curve["target_tokens_per_step"] == pytest.approx(2770.8, abs=0.1)


@pytest.mark.parametrize("shift, most", [(0.0, 0.065), (0.3, 1.0)])
def test_fairseq_comparison_keeps_its_family_wise_level(shift, most):
    """Three seeds a side, eight dev steps, sd 0.05: with no difference, a curve is called
    different in at most 5% of draws (Holm over the steps); a 0.3-nat one is found in most."""
    import gc

    import fairseq_learning

    rng = np.random.default_rng(1)
    steps, draws, called = range(250, 2001, 250), 600, 0
    gc.freeze()  # statsmodels' Holm runs gc.collect() at every call: let it skip what is here
    for _ in range(draws):
        runs = {side: [{"dev_nll": {s: rng.normal(offset, 0.05) for s in steps}}
                       for _ in range(3)] for side, offset in (("ours", shift), ("fairseq", 0))}  # fmt: skip
        called += any(row["differs"] for row in fairseq_learning.compared(runs))
    gc.unfreeze()
    assert called / draws <= most
    if shift:
        assert called / draws >= 0.8


def test_a_record_of_runs_started_at_their_own_threads_says_so_not_the_benchs_threads():
    """fairseq_learning and fairseq_memory start each run at THREADS_A_RUN threads while the
    benchmark's own process keeps torch's default: the record names the runs' count."""
    import benchlib
    import fairseq_learning

    torch_default = benchlib.header("x")["device"]
    assert torch_default.endswith(f", {torch.get_num_threads()} threads")
    device = benchlib.header("x", threads_a_run=fairseq_learning.THREADS_A_RUN)["device"]
    assert device == torch_default.rsplit(", ", 1)[0] + ", 1 thread a run"
    assert fairseq_learning.ONE_THREAD["OMP_NUM_THREADS"] == "1"
    assert benchlib.header("x", threads_a_run=4)["device"].endswith(", 4 threads a run")


def test_a_resumed_fairseq_record_compares_every_step_of_every_seed():
    """The kept seeds come back from the record's JSON with their steps as strings; the seed
    just measured has them as numbers: the comparison takes them as one step each."""
    import fairseq_learning

    kept = {"seed": 1, "dev_nll": {"250": 3.9, "500": 2.9}}
    new = {"seed": 2, "dev_nll": {250: 3.8, 500: 2.8}}
    runs = {"ours": [kept, new], "fairseq": [kept, {**new, "dev_nll": {250: 3.7, 500: 2.7}}]}
    rows = fairseq_learning.compared(runs)
    assert [row["step"] for row in rows] == [250, 500]
    assert [row["ours"] for row in rows] == [fairseq_learning.mean_sd([3.9, 3.8]),
                                              fairseq_learning.mean_sd([2.9, 2.8])]  # fmt: skip
    assert all("p" in row and "differs" in row for row in rows)


def test_fairseq_record_resumes_each_side_only_from_its_own_code_and_data(
    tmp_path, monkeypatch, capsys
):
    """--resume keeps a record's seeds of a side only where they were measured with these steps
    and that side's provenance of now (ours: the train stage's code, torch and the data;
    fairseq: its versions and the data), whether or not the folder they were trained in is still
    there; a seed measured otherwise is named and measured again, and an edit of ours keeps
    fairseq's seeds."""
    import argparse

    import fairseq_learning

    record = tmp_path / "fairseq_learning-cpu.json"
    monkeypatch.setattr(fairseq_learning, "RECORD", record)
    args = argparse.Namespace(resume=True, steps=2000, every=250, seeds=3, data_root=None)
    toolkit = {"fairseq": "0.12.3", "torch": "2.13.0"}

    def kept():  # as main calls it: with the provenance of now
        runs = fairseq_learning.kept_runs(fairseq_learning.provenance(tmp_path, toolkit), args)
        return {side: [run["seed"] for run in side_runs] for side, side_runs in runs.items()}

    assert kept() == {"ours": [], "fairseq": []}
    binarized = tmp_path / "data/multi30k/bin"
    binarized.mkdir(parents=True)
    (binarized / "train.en-de.en.bin").write_bytes(b"ids")
    now = fairseq_learning.provenance(tmp_path, toolkit)
    assert now["fairseq"] == toolkit | {"data": now["ours"]["data"]}

    def recorded(steps=2000, ours=None, fairseq=None):
        runs = {side: [{"seed": seed, "dev_nll": {"250": 5.0}, "target_tokens_per_s": 1.0,
                        "provenance": {**now[side], **(changed or {})}} for seed in (1, 2)]
                for side, changed in (("ours", ours), ("fairseq", fairseq))}  # fmt: skip
        record.write_text(json.dumps({"commit": "abc1234", "steps": steps, "every": 250,
                                      "runs": runs}))  # fmt: skip

    recorded()
    assert kept() == {"ours": [1, 2], "fairseq": [1, 2]}
    recorded(steps=1000)
    with pytest.raises(SystemExit, match="--steps 1000 --every 250"):
        kept()
    recorded(ours={"train_code": "0123456789abcdef"})
    assert kept() == {"ours": [], "fairseq": [1, 2]}
    assert "seed 2 of ours was measured with another train_code" in capsys.readouterr().out
    recorded(fairseq={"fairseq": "0.13.0"})
    assert kept() == {"ours": [1, 2], "fairseq": []}
    assert "seed 1 of fairseq was measured with another fairseq" in capsys.readouterr().out
    recorded()
    (binarized / "train.en-de.en.bin").write_bytes(b"other ids")
    assert kept() == {"ours": [], "fairseq": []}
    assert "another data" in capsys.readouterr().out
    recorded()
    record.write_text(record.read_text().replace('"provenance"', '"unrecorded"'))
    assert kept() == {"ours": [], "fairseq": []}
    assert "not recorded" in capsys.readouterr().out


def test_fairseq_speed_ratio_is_over_the_seeds_run_side_by_side():
    """A seed measured alone (its other side kept from before) ran on a machine shared
    differently: its speed is a figure of its own, not part of the ratio."""
    import fairseq_learning

    def run(seed, speed, beside):
        return {"seed": seed, "target_tokens_per_s": speed, "beside": beside}

    runs = {"ours": [run(1, 1500, "fairseq"), run(2, 3000, None)],
            "fairseq": [run(1, 1000, "ours"), run(2, 1000, None)]}  # fmt: skip
    assert fairseq_learning.speed_ratio(runs) == 1.5
    runs["ours"][0]["beside"] = None
    assert fairseq_learning.speed_ratio(runs) is None


def test_fairseq_runs_are_planned_two_at_a_time_a_seeds_pair_together():
    """Where both toolkits miss a seed, its two runs share the machine (their speeds compare);
    where one side is complete, the other's missing seeds run two at a time."""
    import fairseq_learning as fl

    def kept(*seeds):
        return [{"seed": seed} for seed in seeds]

    both = fl.planned({"ours": kept(), "fairseq": kept()}, 2, ["ours", "fairseq"])
    assert both == [[(1, "ours"), (1, "fairseq")], [(2, "ours"), (2, "fairseq")]]
    assert [fl.beside(job, both[0]) for job in both[0]] == ["fairseq", "ours"]
    theirs = fl.planned({"ours": kept(1), "fairseq": kept(1, 2)}, 5, ["fairseq", "ours"])
    assert theirs == [[(3, "ours"), (3, "fairseq")], [(4, "ours"), (4, "fairseq")],
                      [(5, "ours"), (5, "fairseq")], [(2, "ours")]]  # fmt: skip
    assert fl.beside((2, "ours"), theirs[3]) is None
    ours = fl.planned({"ours": kept(), "fairseq": kept(1, 2, 3)}, 3, ["ours", "fairseq"])
    assert ours == [[(1, "ours"), (2, "ours")], [(3, "ours")]]
    assert fl.beside((2, "ours"), ours[0]) == "ours seed 1"
    only = fl.planned({"ours": kept(), "fairseq": kept(1)}, 3, ["fairseq"])
    assert only == [[(2, "fairseq"), (3, "fairseq")]]
    assert fl.planned({"ours": kept(1), "fairseq": kept(1)}, 1, ["ours", "fairseq"]) == []


def test_a_toy_candidate_is_a_study_the_workflow_takes_without_a_test_split(tmp_path):
    """bench/toy_candidates.py hands the workflow the candidate as a local dataset with the
    default toy's sizes, seeds and BPE, and config.yaml's experiments decoding dev only: the
    config loads as the Snakefile loads it, and no test split exists to look at."""
    import toy_candidates

    from aiayn.config.load import load_config

    toy = toy_candidates.default_toy() | {"splits": {"train": {"size": 300, "seed": 1},
                                                    "dev": {"size": 20, "seed": 2}}}  # fmt: skip
    toy_candidates.write_corpus(tmp_path / "corpus", 1.0, toy)
    assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == [
        "dev.de", "dev.en", "train.de", "train.en"]  # fmt: skip
    assert len((tmp_path / "corpus/dev.en").read_text().splitlines()) == 20
    written = (tmp_path / "corpus/train.de").stat().st_mtime_ns
    toy_candidates.write_corpus(tmp_path / "corpus", 1.0, toy)  # again: nothing to rewrite
    assert (tmp_path / "corpus/train.de").stat().st_mtime_ns == written
    path = toy_candidates.candidate_config(tmp_path, tmp_path / "corpus", ["tiny"], seeds=2)
    config = load_config(PROJECT, [path])
    assert sorted(config["datasets"]["toy_candidate"]["splits"]) == ["dev", "train"]
    assert config["experiments"]["tiny"]["eval_splits"] == ["dev"]
    assert toy_candidates.run_names(["tiny"], 2) == ["tiny", "tiny.seed2"]
