"""Training: schedule, loss, batching, averaging, and real DeepSpeed runs (resume, copy task, 2 ranks)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from aiayn.config.schema import schema
from aiayn.errors import InputError
from aiayn.model import Transformer
from aiayn.model_config import TransformerConfig
from aiayn.prepare.binarize import IndexedDataset, write_indexed
from aiayn.train.batching import collate, shard, step_plan, token_batches
from aiayn.train.checkpoint import (
    average_weights,
    load_weights,
    prune,
    save_weights,
    tag_of,
    weights_file,
    weights_files,
)
from aiayn.train.loader import BatchStream
from aiayn.train.loss import label_smoothed_loss
from aiayn.train.memory import check_fits, parameter_count
from aiayn.train.schedule import inverse_sqrt_lr, lr_lambda
from tests.conftest import PROJECT, fault_point_env, wait_until_stopped, wandb_history


def test_base_schedule_peaks_at_step_4000():
    rates = [inverse_sqrt_lr(step, 512, 4000) for step in range(1, 20001)]
    assert int(np.argmax(rates)) + 1 == 4000
    assert inverse_sqrt_lr(4000, 512, 4000) == pytest.approx(6.988e-4, rel=1e-3)
    assert inverse_sqrt_lr(1, 512, 4000) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert inverse_sqrt_lr(16000, 512, 4000) == pytest.approx(512**-0.5 / 16000**0.5)
    assert lr_lambda(512, 4000)(3999) == inverse_sqrt_lr(4000, 512, 4000)  # LambdaLR counts from 0


def test_the_device_schedule_is_the_same_formula_and_never_reads_the_device():
    """train.sync_free's schedule computes section 5.3's rate with inverse_sqrt_lr itself, on
    device tensors: on the meta device, which holds no values, any read on the host (a Python
    min or max of tensors, an .item()) would raise."""
    from aiayn.train.sync_free import DeviceSchedule

    meta = torch.tensor(4000.0, dtype=torch.float64, device="meta")
    assert inverse_sqrt_lr(meta, 512, 4000, 2.0, torch.minimum).device.type == "meta"
    DeviceSchedule(512, 4000, 2.0, torch.device("meta")).advance(torch.zeros((), device="meta"))
    for step in (1, 3999, 4000, 4001, 100_000):
        on_device = inverse_sqrt_lr(torch.tensor(step, dtype=torch.float64), 512, 4000, 2.0,
                                    torch.minimum)  # fmt: skip
        assert on_device.item() == pytest.approx(inverse_sqrt_lr(step, 512, 4000, 2.0), rel=1e-15)


def test_label_smoothing_matches_a_hand_computation():
    logits = torch.tensor([[[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 0.3, 0.4]]])  # (B=1, T=2, V=4)
    target = torch.tensor([[2, 0]])  # second position is padding (pad id 0)
    loss, nll = label_smoothed_loss(logits, target, epsilon=0.1, pad_id=0)
    logp = [
        v - math.log(sum(math.exp(x) for x in logits[0, 0].tolist())) for v in logits[0, 0].tolist()
    ]
    expected_nll = -logp[2]
    expected = 0.9 * expected_nll + 0.1 * (-sum(logp) / 4)
    assert nll.item() == pytest.approx(expected_nll, rel=1e-6)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    reference = torch.nn.functional.cross_entropy(
        logits.view(-1, 4), target.view(-1), ignore_index=0, label_smoothing=0.1, reduction="sum"
    )
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)


def reference_smoothed_loss(logits, target, epsilon, pad_id=0):
    """The loss as one fp32 log-softmax over the whole batch (how it was computed before)."""
    lprobs = torch.nn.functional.log_softmax(logits.float(), dim=-1).view(-1, logits.size(-1))
    keep = target.reshape(-1) != pad_id
    nll = -lprobs.gather(1, target.reshape(-1, 1)).squeeze(1)[keep]
    uniform = -lprobs.mean(dim=-1)[keep]
    return ((1 - epsilon) * nll + epsilon * uniform).sum(), nll.sum()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "kernel, rows", [("sliced", 1), ("sliced", 7), ("sliced", 1000), ("compiled", 1000)]
)
def test_the_sliced_loss_has_the_whole_batch_loss_and_gradients(dtype, kernel, rows):
    """Slice by slice, or in torch.compile's fused kernels, forward and backward, the loss and
    the logits' gradient are those of one fp32 log-softmax over the whole batch (to fp32
    rounding), for both outputs' gradients, with padding, and in the logits' own dtype."""
    from aiayn.train.loss import SmoothedCrossEntropy

    generator = torch.Generator().manual_seed(3)
    logits = (torch.randn(3, 11, 53, generator=generator) * 4).to(dtype)
    target = torch.randint(1, 53, (3, 11), generator=generator)
    target[0, 7:] = 0
    target[2, 2:] = 0
    weights = torch.tensor(0.7), torch.tensor(-1.3)  # d(0.7 loss - 1.3 nll): both paths count
    ours = logits.clone().requires_grad_()
    loss, nll = SmoothedCrossEntropy.apply(ours.view(-1, 53), target.view(-1), 0.1, 0, rows, kernel)
    (weights[0] * loss + weights[1] * nll).backward()
    theirs = logits.clone().requires_grad_()
    expected_loss, expected_nll = reference_smoothed_loss(theirs, target, 0.1)
    (weights[0] * expected_loss + weights[1] * expected_nll).backward()
    assert loss.item() == pytest.approx(expected_loss.item(), rel=1e-6)
    assert nll.item() == pytest.approx(expected_nll.item(), rel=1e-6)
    assert ours.grad.dtype == dtype
    tolerance = 1e-6 if dtype == torch.float32 else 1e-2  # bf16: the gradient's own rounding
    torch.testing.assert_close(ours.grad.float(), theirs.grad.float(), atol=tolerance, rtol=0)
    assert torch.all(ours.grad[0, 7:] == 0) and torch.all(ours.grad[2, 2:] == 0)


def test_the_loss_is_sliced_to_a_bounded_fp32_size():
    """label_smoothed_loss takes the rows a slice at a time: a batch of many slices gives the
    loss and the gradient of a batch taken whole. A slice is 512 MiB of fp32 on a GPU, and on a
    CPU 1 MiB a thread, which a core's cache holds; always at least one row."""
    from aiayn.train.loss import slice_rows

    logits = torch.randn(4, 9, 40)
    target = torch.randint(1, 40, (4, 9))
    results = []
    for rows in (36, 5):  # whole, then 8 slices (the last of one row)
        taken = logits.clone().requires_grad_()
        loss, nll = label_smoothed_loss(taken, target, 0.1, pad_id=0, rows=rows)
        (loss + 2 * nll).backward()
        results.append(([loss.item(), nll.item()], taken.grad))
    (whole, whole_grad), (sliced, sliced_grad) = results
    assert sliced == pytest.approx(whole, rel=1e-6)
    torch.testing.assert_close(sliced_grad, whole_grad, rtol=0, atol=0)
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert slice_rows(8000, cpu, 1) == 32 and slice_rows(8000, cpu, 4) == 131
    assert slice_rows(8000, cuda, 1) == 16777 and slice_rows(37000, cuda, 1) == 3627
    assert slice_rows(1 << 20, cpu, 1) == 1


def test_the_loss_kernel_auto_compiles_on_cuda_where_compiling_works(caplog):
    """auto: torch.compile's fused kernels on CUDA (1.67x the base step on an H100), the eager
    slices on a CPU, where compiling needs a C++ toolchain and costs more than it saves; where
    the compiled loss cannot run, auto slices and says why."""
    from aiayn.train.loss import resolve_loss_kernel

    cpu = torch.device("cpu")
    assert resolve_loss_kernel("auto", cpu, torch.bfloat16) == "sliced"
    assert resolve_loss_kernel("compiled", cpu, torch.float32) == "compiled"  # it compiles here
    if not torch.cuda.is_available():  # a CUDA device this machine cannot use
        with caplog.at_level(logging.WARNING, logger="aiayn.train.loss"):
            assert resolve_loss_kernel("auto", torch.device("cuda"), torch.bfloat16) == "sliced"
        assert "train.loss_kernel auto: compiling the loss failed" in caplog.text
    with pytest.raises(InputError, match="train.loss_kernel 'fast' is not one of auto, sliced"):
        resolve_loss_kernel("fast", cpu, torch.float32)


def test_a_machine_that_cannot_compile_the_loss_is_told_before_the_first_step(tmp_path):
    """train.loss_kernel: compiled with no working C++ compiler (inductor's CPU backend, a fresh
    kernel cache): a clear error naming the setting and both ways out, before any training."""
    check = (
        "import torch\n"
        "from aiayn.train.loss import resolve_loss_kernel\n"
        "resolve_loss_kernel('compiled', torch.device('cpu'), torch.float32)\n"
    )
    env = {**os.environ, "CXX": "/nonexistent/g++", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode != 0
    assert (
        "InputError: train.loss_kernel compiled: torch.compile could not compile" in result.stderr
    )
    assert "/nonexistent/g++" in result.stderr and "train.loss_kernel: sliced" in result.stderr


def test_an_unknown_loss_kernel_is_refused_by_name():
    with pytest.raises(ValueError, match="'fused' is not one of sliced, compiled"):
        label_smoothed_loss(
            torch.zeros(2, 3, 5), torch.ones(2, 3, dtype=torch.long), 0.1, 0, "fused"
        )


@pytest.mark.parametrize("pad_to", [1, 8])
def test_batches_hold_at_most_the_real_token_budget_within_the_padded_limit(pad_to):
    rng = np.random.default_rng(3)
    source, target = rng.integers(1, 120, 3000), rng.integers(1, 120, 3000)
    source[5] = 1500  # longer than any batch may be
    batches, too_long = token_batches(
        source, target, max_tokens=1000, seed=1, epoch=0, pad_to=pad_to, max_padded=1300
    )
    assert too_long == 1
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == [i for i in range(3000) if i != 5]
    for batch in batches:
        for lengths in (source, target):
            assert lengths[batch].sum() <= 1000  # real tokens: the paper's budget
            padded = int(math.ceil(lengths[batch].max() / pad_to) * pad_to)
            assert len(batch) * padded <= 1300  # padded: the memory limit
    again, _ = token_batches(
        source, target, max_tokens=1000, seed=1, epoch=0, pad_to=pad_to, max_padded=1300
    )
    other_epoch, _ = token_batches(
        source, target, max_tokens=1000, seed=1, epoch=1, pad_to=pad_to, max_padded=1300
    )
    assert all(np.array_equal(a, b) for a, b in zip(batches, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(batches, other_epoch, strict=False))


def test_a_batch_is_filled_with_real_tokens_not_padding():
    """WMT-like lengths: the longer side's real tokens fill the budget to within a sentence,
    where a padded budget (the old rule, max_padded == max_tokens) leaves a fifth of it padding."""
    rng = np.random.default_rng(5)
    source = np.clip(rng.lognormal(3.2, 0.55, 20000), 2, 200).astype(int) + 1
    target = np.clip(source * rng.normal(1.05, 0.15, 20000), 2, 220).astype(int) + 2

    def fill(max_padded):
        batches, _ = token_batches(source, target, 3125, 1, 0, 8, max_padded=max_padded)
        full = batches[:-1] if len(batches) > 1 else batches
        longer = [max(source[b].sum(), target[b].sum()) for b in full]
        return np.mean(longer) / 3125

    assert fill(max_padded=4096) > 0.97
    assert fill(max_padded=3125) < 0.90


def test_pairs_longer_than_the_position_limit_are_skipped():
    source, target = np.array([5, 20, 8, 17]), np.array([6, 9, 16, 3])
    batches, too_long = token_batches(
        source, target, max_tokens=1000, seed=1, epoch=0, pad_to=8, position_limit=16
    )
    assert too_long == 2  # 20 and 17 pad to 24 positions; 16 fits exactly
    assert sorted(np.concatenate(batches).tolist()) == [0, 2]


def test_shards_are_disjoint_and_equal():
    batches = [np.array([i]) for i in range(11)]
    shards = [shard(batches, rank, 3) for rank in range(3)]
    assert [len(s) for s in shards] == [3, 3, 3]
    assert len({int(b[0]) for s in shards for b in s}) == 9


def test_collate_adds_eos_and_bos_and_pads():
    batch = collate([[5, 6], [7]], [[8], [9, 10, 11]], [0, 1], pad_to=4)
    assert batch.source.tolist() == [[5, 6, 3, 0], [7, 3, 0, 0]]
    assert batch.target_in.tolist() == [[2, 8, 0, 0], [2, 9, 10, 11]]
    assert batch.target_out.tolist() == [[8, 3, 0, 0], [9, 10, 11, 3]]
    assert batch.target_tokens == 6


def reference_rows(sentences, pad_to):
    """One row per sentence, written out the obvious way, padded to a multiple of pad_to."""
    width = -(-max(len(s) for s in sentences) // pad_to) * pad_to
    return [list(s) + [0] * (width - len(s)) for s in sentences]


def test_vectorised_collate_matches_sentence_by_sentence(tmp_path):
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 40, 300)  # empty sentences included
    source = [rng.integers(4, 60000, n).tolist() for n in lengths]
    target = [rng.integers(4, 60000, n).tolist() for n in rng.permutation(lengths)]
    write_indexed(tmp_path / "s", source, 60000)
    write_indexed(tmp_path / "t", target, 60000)
    indices = rng.choice(300, 64, replace=False)
    for data in (
        (IndexedDataset(tmp_path / "s"), IndexedDataset(tmp_path / "t")),
        (source, target),
    ):
        batch = collate(*data, indices, pad_to=8)
        picked_s, picked_t = [source[i] for i in indices], [target[i] for i in indices]
        assert batch.source.tolist() == reference_rows([s + [3] for s in picked_s], 8)
        assert batch.target_in.tolist() == reference_rows([[2] + t for t in picked_t], 8)
        assert batch.target_out.tolist() == reference_rows([t + [3] for t in picked_t], 8)
        assert batch.target_tokens == sum(len(t) + 1 for t in picked_t)
        assert batch.source.dtype == torch.long and batch.source.shape[1] % 8 == 0
    with pytest.raises(IndexError, match="out of range"):
        IndexedDataset(tmp_path / "s").gather([0, 300])


def test_batch_stream_counts_taken_batches_and_resumes_exactly():
    """Batches prepared ahead are not part of the checkpointed position: a stream restarted
    from any position gives the same batches as one that went on."""
    sentences = [[4 + i] * (1 + i % 5) for i in range(23)]

    def plan(epoch):
        return token_batches([len(s) + 1 for s in sentences], [2] * 23, 12, 7, epoch)[0]

    stream = BatchStream(sentences, sentences, plan, 1, torch.device("cpu"))
    per_epoch = len(plan(0))
    taken, positions = [], []
    for _ in range(2 * per_epoch + 3):  # across two epoch boundaries
        taken += stream.take(1)
        positions.append(stream.position)
        stream.prepare(2)  # what the trainer does while the device works
        assert len(stream.ready) == 2 and stream.ahead != stream.position
    assert positions[per_epoch - 1] == (0, per_epoch) and positions[per_epoch] == (1, 1)
    expected = [b for e in range(3) for b in plan(e)][: len(taken)]
    for batch, indices in zip(taken, expected, strict=True):
        assert torch.equal(batch.source, collate(sentences, sentences, indices).source)
    for cut in (0, per_epoch - 1, per_epoch + 2):
        stream.seek(positions[cut])
        again = stream.take(len(taken) - cut - 1)
        assert all(
            torch.equal(a.source, b.source) for a, b in zip(again, taken[cut + 1 :], strict=True)
        )


def weights_payload(state_dict: dict, step: int = 1) -> dict:
    return {"state_dict": state_dict, "model_config": {"vocab_size": 5}, "step": step,
            "experiment": "x"}  # fmt: skip


def test_averaging_known_tensors(tmp_path):
    for index, value in enumerate([1.0, 2.0, 6.0]):
        state = {"w": torch.full((2, 2), value), "b": torch.tensor([value])}
        save_weights(tmp_path / f"{index}.safetensors", weights_payload(state, step=index))
    averaged = average_weights([tmp_path / f"{i}.safetensors" for i in range(3)])
    assert torch.equal(averaged["state_dict"]["w"], torch.full((2, 2), 3.0))
    assert averaged["state_dict"]["b"].item() == 3.0 and len(averaged["averaged_from"]) == 3


def test_averaging_refuses_mismatched_checkpoints(tmp_path):
    for name, state in (("a", {"w": torch.zeros(2)}), ("b", {"w": torch.zeros(3)}),
                        ("c", {"v": torch.zeros(2)})):  # fmt: skip
        save_weights(tmp_path / f"{name}.safetensors", weights_payload(state))
    with pytest.raises(InputError, match=r"w has shape \(3,\)"):
        average_weights([tmp_path / "a.safetensors", tmp_path / "b.safetensors"])
    with pytest.raises(InputError, match="missing \\['w'\\], extra \\['v'\\]"):
        average_weights([tmp_path / "a.safetensors", tmp_path / "c.safetensors"])
    for broken in ("broken.safetensors", "broken.pt"):
        (tmp_path / broken).write_bytes(b"not a checkpoint")
        with pytest.raises(InputError, match="not a readable weights file"):
            load_weights(tmp_path / broken)


def test_weights_used_under_another_name_or_bpe_model_are_refused_naming_both(tmp_path):
    """A weights file copied from another run folder, or a BPE model rebuilt at the same size
    since training, would average or decode without a word (garbled output, the other
    experiment's scores): every consumer checks what the file says it was trained as."""
    from aiayn.decode.translate import load_model
    from aiayn.textio import file_sha256
    from aiayn.train.checkpoint import check_origin

    bpe, rebuilt = tmp_path / "bpe.model", tmp_path / "rebuilt.model"
    bpe.write_bytes(b"the pieces training cut its data with")
    rebuilt.write_bytes(b"the same size, other pieces")
    model = Transformer(
        TransformerConfig(vocab_size=20, n_layers=1, d_model=16, d_ff=32, n_heads=2, dropout=0.0)
    )
    for name, run, identity in (("a", "tiny", "1f"), ("b", "tiny", "1f"), ("c", "other", "2e")):
        payload = weights_payload(model.state_dict(), step=1) | {
            "model_config": vars(model.config), "experiment": run, "identity": identity,
            "subword_sha256": file_sha256(bpe),
        }  # fmt: skip
        save_weights(tmp_path / f"{name}.safetensors", payload)
    a, b, c = (tmp_path / f"{name}.safetensors" for name in "abc")
    assert average_weights([a, b], "tiny")["experiment"] == "tiny"
    with pytest.raises(InputError, match="holds the weights of experiment 'other', not 'tiny'"):
        average_weights([a, c], "tiny")
    with pytest.raises(InputError, match="was trained with other settings than"):
        average_weights([a, c])  # no name to check: one run's checkpoints all the same
    load_model(a, torch.device("cpu"), "tiny", bpe)
    with pytest.raises(InputError, match="holds the weights of experiment 'tiny', not 'other'"):
        load_model(a, torch.device("cpu"), "other", bpe)
    with pytest.raises(InputError, match="rebuilt.model is not the BPE model .*a.safetensors was"):
        load_model(a, torch.device("cpu"), "tiny", rebuilt)
    check_origin(
        {"experiment": None, "subword_sha256": None}, "old.pt", "tiny", rebuilt
    )  # says nothing


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_weights_holding_nan_or_inf_are_refused_where_they_are_read(tmp_path, bad):
    """One NaN in a weights file gave empty translations with exit 0, and averaging said it
    averaged the file: every reader now refuses it, naming the tensor and the way out."""
    from aiayn.decode.translate import load_model

    model = Transformer(
        TransformerConfig(vocab_size=20, n_layers=1, d_model=16, d_ff=32, n_heads=2, dropout=0.0)
    )
    good, broken = tmp_path / "good.safetensors", tmp_path / "averaged.safetensors"
    state = model.state_dict()
    save_weights(good, weights_payload(state) | {"model_config": vars(model.config)})
    state = {name: tensor.clone() for name, tensor in state.items()}
    state["encoder.0.feed_forward.w_1.bias"][3] = bad
    save_weights(broken, weights_payload(state) | {"model_config": vars(model.config)})
    message = r"encoder.0.feed_forward.w_1.bias holds 1 of 32 values that are NaN or infinite"
    for read in (
        lambda: load_weights(broken),
        lambda: average_weights([good, broken]),
        lambda: load_model(broken, torch.device("cpu")),
    ):
        with pytest.raises(InputError, match=message) as refused:
            read()
        assert f"delete it, then `snakemake --cores all --force {broken}`" in str(refused.value)
        assert "retrain with a lower `train.lr_scale`" in str(refused.value)
    assert average_weights([good, good])["averaged_from"] == [str(good), str(good)]


def test_an_unreadable_weights_file_is_told_how_it_comes_back(tmp_path):
    """The way out is a command (a plain rerun planned nothing, #77); the workflow test
    test_a_damaged_weights_file_comes_back_by_the_command_its_error_names follows it."""
    damaged = tmp_path / "runs/x/weights/step00000010.safetensors"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"\x00" * 64)
    with pytest.raises(InputError, match="not a readable weights file") as refused:
        load_weights(damaged)
    assert (
        f"Delete it, then `snakemake --cores all --force {tmp_path}/runs/x/train.json "
        f"{tmp_path}/runs/x/averaged.safetensors` writes it again from the newest checkpoint"
    ) in str(refused.value)
    averaged = tmp_path / "runs/x/averaged.safetensors"
    averaged.write_bytes(b"\x00" * 64)
    with pytest.raises(InputError, match=f"--force {averaged}` averages"):
        load_weights(averaged)


FOLDER_NAMES = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/`"),
    min_size=1,
    max_size=30,
)


def named_command(message: str) -> argparse.Namespace:
    """The first command in backticks of a message, as the shell splits it and Snakemake's own
    parser reads it."""
    import snakemake.cli

    command = re.search(r"`(snakemake [^`]*)`", message).group(1)
    return snakemake.cli.get_argument_parser().parse_args(shlex.split(command)[1:])


@examples(max_examples=40, deadline=None, derandomize=True)
@given(folder=FOLDER_NAMES)
def test_each_way_out_forces_the_one_file_it_names_in_any_folder(folder):
    """Each message's way out is one command a shell and Snakemake read as meant, in a folder of
    any name: the file it names is the one target, forced; `--forcerun <rule> <file>` made
    the file a second rule to force, and Snakemake ran the whole study."""
    from aiayn.prepare.pieces import load
    from aiayn.train.checkpoint import rewrite_advice

    run = Path("/nonexistent") / folder / "runs" / "x"
    with pytest.raises(InputError) as refused:
        load(run.parent.parent / "data/toy/spm/bpe.model")
    averaged = run / "averaged.safetensors"
    told = [
        ([averaged], rewrite_advice(averaged)),
        ([run / "train.json", averaged], rewrite_advice(run / "weights/step00000010.safetensors")),
        ([run.parent.parent / "data/toy/spm/bpe.model"], str(refused.value)),
    ]
    for targets, message in told:
        parsed = named_command(message)
        assert (parsed.targets, parsed.force, parsed.forcerun) == (
            [*map(str, targets)],
            True,
            set(),
        )


def test_a_signals_weights_are_never_averaged_and_go_once_a_scheduled_one_follows(tmp_path):
    """Pruning keeps the newest `average_last` weights written on schedule; a signal's (written
    at whatever step SLURM stopped the run) is kept only while it is the newest."""
    weights = tmp_path / "weights"
    weights.mkdir()
    for step, stopped in ((25, False), (34, True)):
        weights_file(weights, step, stopped).write_bytes(b"")
    prune(tmp_path / "checkpoints", weights, keep_states=1, keep_weights=2)
    assert [p.name for p in weights_files(weights)] == [
        "step00000025.safetensors",
        "step00000034.stopped.safetensors",  # the newest: kept, the run may stop here for good
    ]
    assert [p.name for p in weights_files(weights, scheduled_only=True)] == [
        "step00000025.safetensors"
    ]
    for step in (50, 75):
        weights_file(weights, step).write_bytes(b"")
        prune(tmp_path / "checkpoints", weights, keep_states=1, keep_weights=2)
    assert [p.name for p in weights_files(weights)] == [
        "step00000050.safetensors",
        "step00000075.safetensors",
    ]


def test_weights_files_load_without_running_code(tmp_path):
    """A shared weights file is safetensors with its config as JSON metadata; a .pt file of an
    earlier version loads too, but only as tensors and plain values: a pickle that would run
    code on load is refused."""
    state = {"w": torch.arange(4.0)}
    save_weights(tmp_path / "w.safetensors", weights_payload(state, step=7))
    loaded = load_weights(tmp_path / "w.safetensors")
    assert torch.equal(loaded["state_dict"]["w"], state["w"])
    assert (loaded["model_config"], loaded["step"], loaded["averaged_from"]) == (
        {"vocab_size": 5},
        7,
        None,
    )
    assert b"PK" not in (tmp_path / "w.safetensors").read_bytes()[:8]  # not a zip of pickles
    torch.save(weights_payload(state, step=3), tmp_path / "old.pt")  # an earlier version's file
    assert load_weights(tmp_path / "old.pt")["step"] == 3
    marker = tmp_path / "ran"
    torch.save({"state_dict": {}, "model_config": RunsCode(marker)}, tmp_path / "evil.pt")
    with pytest.raises(InputError, match="not a readable weights file"):
        load_weights(tmp_path / "evil.pt")
    assert not marker.exists()
    from safetensors.torch import save_file

    save_file(state, tmp_path / "other.safetensors")  # someone else's: no config to build from
    with pytest.raises(InputError, match="not one aiayn wrote"):
        load_weights(tmp_path / "other.safetensors")


class RunsCode:
    """Unpickling this object touches a file: what a malicious pickle could do instead."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


# Real training runs, each in its own process as the workflow runs them ---------------------------


def copy_task(root: Path, pairs: int, seed: int) -> tuple[str, str]:
    """Random sequences over ids 4..19 whose translation is themselves."""
    rng = np.random.default_rng(seed)
    sentences = [rng.integers(4, 20, rng.integers(3, 9)).tolist() for _ in range(pairs)]
    for side in ("src", "tgt"):
        write_indexed(root / side, sentences, vocab_size=20)
    return str(root / "src"), str(root / "tgt")


def copy_splits(root: Path, train_pairs: int, dev_pairs: int) -> tuple:
    """A copy task's train and dev splits under root/train and root/dev."""
    for split in ("train", "dev"):
        (root / split).mkdir()
    return copy_task(root / "train", train_pairs, seed=1), copy_task(
        root / "dev", dev_pairs, seed=2
    )


@pytest.fixture(scope="module")
def copy_data(tmp_path_factory):
    return copy_splits(tmp_path_factory.mktemp("copy"), 3000, 200)


def experiment(path: Path, data, **train) -> Path:
    spec = {
        "name": path.stem,
        "run_dir": str(path.parent / path.stem),
        "data": {"train": list(data[0]), "dev": list(data[1])},
        "model": {
            "vocab_size": 20,
            "n_layers": 2,
            "d_model": 64,
            "d_ff": 128,
            "n_heads": 4,
            "dropout": 0.1,
        },
        "train": {
            "max_steps": 12,
            "warmup_steps": 50,
            "tokens_per_step": 600,
            "tokens_per_batch": 600,
            "log_every_steps": 4,
            "dev_every_steps": 6,
            "checkpoint_every_minutes": None,
            **train,
        },
    }
    path.write_text(json.dumps(spec))
    return path


def train(spec: Path, processes: int = 1) -> dict:
    result = run_training(spec, processes)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads((spec.parent / spec.stem / "train.json").read_text())


def run_training(
    spec: Path, processes: int = 1, file_bytes: int | None = None
) -> subprocess.CompletedProcess:
    """Train in a subprocess, as the workflow does; `file_bytes` caps the size of any file it
    writes (RLIMIT_FSIZE: a write past it fails as on a full disk)."""
    if processes == 1:
        command = [sys.executable, "-m", "aiayn.train.trainer", str(spec)]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={processes}",
            "-m",
            "aiayn.train.trainer",
            str(spec),
        ]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")
    }

    def limit_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))

    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env=env,
        timeout=600,
        preexec_fn=limit_files if file_bytes else None,
    )


def weights(summary: dict) -> dict:
    return load_weights(summary["final_weights"])["state_dict"]


@pytest.mark.workflow
def test_a_damaged_newest_checkpoint_is_set_aside_and_the_one_before_resumed(tmp_path, copy_data):
    straight = train(experiment(tmp_path / "straight.json", copy_data))
    spec = experiment(tmp_path / "run.json", copy_data, max_steps=8, checkpoint_every_steps=4,
                      keep_states=2)  # fmt: skip
    train(spec)
    newest = tmp_path / "run/checkpoints/step00000008"
    states = max(newest.glob("*.pt"), key=lambda path: path.stat().st_size)
    states.write_bytes(states.read_bytes()[: states.stat().st_size // 2])  # a truncated copy
    experiment(spec, copy_data, max_steps=12, checkpoint_every_steps=4, keep_states=2)
    result = run_training(spec)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"checkpoint {newest} is damaged ({states.name} is" in result.stderr
    assert "resumed from " + str(tmp_path / "run/checkpoints/step00000004") in result.stderr
    assert (newest.parent / "step00000008.damaged" / states.name).exists()  # kept, not deleted
    resumed = json.loads((tmp_path / "run/train.json").read_text())
    a, b = weights(straight), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.workflow
def test_a_lost_final_weights_file_is_written_again_from_its_checkpoint(tmp_path, copy_data):
    """Deleting an unreadable weights file and rerunning must not end with an older file as the
    final weights and fewer files to average than average_last."""
    spec = experiment(tmp_path / "run.json", copy_data, max_steps=12, checkpoint_every_steps=4,
                      average_last=3)  # fmt: skip
    first = train(spec)
    final = Path(first["final_weights"])
    kept = load_weights(final)["state_dict"]
    final.unlink()
    (tmp_path / "run" / "train.json").unlink()
    result = run_training(spec)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{final} was missing: written again from its checkpoint" in result.stderr
    again = json.loads((tmp_path / "run" / "train.json").read_text())
    assert again["steps"] == 12 and again["final_weights"] == str(final)
    assert [Path(p).name for p in again["average_weights"]] == [
        "step00000004.safetensors",
        "step00000008.safetensors",
        "step00000012.safetensors",
    ]
    restored = load_weights(final)["state_dict"]
    assert all(torch.equal(kept[k], restored[k]) for k in kept)


@pytest.mark.workflow
def test_a_full_disk_while_saving_keeps_the_checkpoint_before(tmp_path, copy_data):
    straight = train(experiment(tmp_path / "straight.json", copy_data))
    spec = experiment(tmp_path / "run.json", copy_data, max_steps=6)
    train(spec)
    saved = tmp_path / "run/checkpoints/step00000006"
    biggest = max(path.stat().st_size for path in saved.iterdir())
    experiment(spec, copy_data, max_steps=12)
    result = run_training(spec, file_bytes=biggest // 2)
    assert result.returncode == 1, result.stderr[-3000:]
    message = result.stderr.split("ERROR", 1)[-1]
    assert "step00000012 could not be written" in message, result.stderr[-3000:]
    assert f"the newest complete one, {saved}, is kept as it was" in message
    assert "Traceback" not in result.stderr
    assert not (saved.parent / "step00000012" / "COMPLETE").exists()
    resumed = train(spec)  # the disk has room again
    a, b = weights(straight), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.workflow
def test_resuming_gives_the_same_weights_as_never_stopping(tmp_path, copy_data):
    straight = train(experiment(tmp_path / "straight.json", copy_data, checkpoint_every_steps=6))
    halted = experiment(tmp_path / "halted.json", copy_data, max_steps=6)
    first = train(halted)
    assert first["steps"] == 6
    experiment(halted, copy_data, max_steps=12)  # a bigger budget is the same run, continued
    resumed = train(halted)
    assert resumed["steps"] == straight["steps"] == 12
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    saved = torch.load(
        tmp_path / "halted/checkpoints/step00000012/mp_rank_00_model_states.pt", weights_only=False
    )
    assert saved["train_state"]["step"] == 12
    spec = json.loads(halted.read_text())
    assert saved["experiment"]["model"].items() >= spec["model"].items()
    assert saved["experiment"]["train"]["max_steps"] == 12
    assert saved["experiment"]["data"] == spec["data"]
    log = [
        json.loads(line) for line in (tmp_path / "halted" / "train.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in log if "loss" in r] == [4, 6, 8, 12]


def train_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "train.jsonl").read_text().splitlines()]


def kill_at_step(spec: Path, run_dir: Path, step: int) -> int:
    """Train `spec` in a process that stops itself once `step` is logged (as its progress bar
    reaches step + 1, tests/fault_points) and is `kill -9`ed there; the last step logged."""
    marker = run_dir.parent / f"{run_dir.name}.stopped.json"
    env = fault_point_env(run_dir.parent, AIAYN_FAULT_PAUSE=f"progress:{step + 1}:{marker}")
    command = [sys.executable, "-m", "aiayn.train.trainer", str(spec)]
    process = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    try:
        wait_until_stopped(marker, process, f"training {spec.name}")
    finally:
        process.kill()
    assert process.wait() == -9
    return max(r["step"] for r in train_log(run_dir))


@pytest.mark.workflow
def test_a_run_killed_before_its_first_checkpoint_logs_each_step_once(tmp_path, copy_data):
    """The rerun starts from step 0 and drops what the killed attempt logged, in train.jsonl
    and TensorBoard alike (both held the first steps twice; #77); W&B's records, read in the
    order they were written, hold each step once too (the killed attempt's may be cut)."""
    settings = {"max_steps": 10, "log_every_steps": 1, "dev_every_steps": 5,
                "checkpoint_every_steps": 1000, "tokens_per_step": 2400,
                "tokens_per_batch": 2400, "wandb": "offline"}  # fmt: skip
    spec = experiment(tmp_path / "early.json", copy_data, **settings)
    assert 3 <= kill_at_step(spec, tmp_path / "early", 3) < 10
    assert not list((tmp_path / "early" / "checkpoints").glob("step*"))
    train(spec)
    logged = [r["step"] for r in train_log(tmp_path / "early") if "loss" in r]
    assert logged == list(range(1, 11))
    curves = curve_steps(tmp_path / "early")
    assert curves["train/loss"] == logged and curves["dev/loss"] == [5, 10]
    rows = wandb_history(tmp_path / "early")
    assert [row["_step"] for row in rows] == logged
    assert [row["_step"] for row in rows if "dev/loss" in row] == [5, 10]


def curve_steps(run_dir: Path) -> dict[str, list[int]]:
    """Each TensorBoard tag's steps, as tensorboard's own reader finds them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return {name: [e.step for e in events.Scalars(name)] for name in events.Tags()["scalars"]}


@pytest.mark.workflow
def test_early_stopping_killed_in_its_patience_resumes_and_stops_where_an_unbroken_run_stops(
    tmp_path, copy_data
):
    """dev_loss must improve by 10 nats (it never does after the first evaluation): an unbroken
    run stops at the 7th dev evaluation (step 14). Another is `kill -9`ed in the middle of its
    patience and rerun: it resumes the count from its checkpoint and stops at step 14 too, with
    the same weights; its curves hold every step once (the killed attempt's later steps hidden),
    the same steps as its train.jsonl, in TensorBoard and in W&B's records (what the killed
    attempt's writer had not written is logged by the rerun, up to its checkpoint)."""
    stopping = {"early_stopping_metric": "dev_loss", "early_stopping_patience": 6,
                "early_stopping_min_improvement": 10.0, "max_steps": 1000,
                "dev_every_steps": 2, "log_every_steps": 1, "checkpoint_every_steps": 2,
                "tokens_per_step": 2400, "tokens_per_batch": 2400}  # fmt: skip
    straight = train(experiment(tmp_path / "straight.json", copy_data, **stopping))
    assert straight["steps"] == 14
    assert straight["ended_by"].startswith(
        "early_stopping: dev_loss did not improve by 10.0 for 6 dev evaluations after its best"
    )
    spec = experiment(tmp_path / "killed.json", copy_data, **stopping, wandb="offline")
    log = tmp_path / "killed" / "train.jsonl"
    assert 7 <= kill_at_step(spec, log.parent, 7) < 14
    resumed = train(spec)
    assert (resumed["steps"], resumed["ended_by"]) == (straight["steps"], straight["ended_by"])
    a, b = weights(straight), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    lines = train_log(log.parent)
    logged = [r["step"] for r in lines if "loss" in r]
    assert logged == list(range(1, 15))  # the killed attempt's lines after its checkpoint: gone
    curves = curve_steps(log.parent)
    assert curves["train/loss"] == logged and curves["train/lr"] == logged
    assert (
        curves["dev/loss"] == [r["step"] for r in lines if "dev_loss" in r] == list(range(2, 15, 2))
    )
    rows = wandb_history(log.parent)
    assert [row["_step"] for row in rows] == logged
    assert [row["_step"] for row in rows if "dev/loss" in row] == list(range(2, 15, 2))
    assert train(spec)["steps"] == 14  # a stopped run stays stopped


@pytest.mark.workflow
def test_early_stopping_counts_evaluations_at_one_interval_whatever_the_averaging(
    tmp_path, copy_data
):
    """Best-N averaging scores every checkpoint (every 2 steps here) as it is saved; early
    stopping counts only the evaluations every dev_every_steps (4): with patience 1 and an
    improvement never reached it stops at the second of those, step 8 (it stopped at step 4,
    its patience spent by the averaging's extra evaluations; #77)."""
    settings = {"average_best_by": "dev_loss", "average_last": 2, "checkpoint_every_steps": 2,
                "dev_every_steps": 4, "max_steps": 40, "early_stopping_metric": "dev_loss",
                "early_stopping_patience": 1, "early_stopping_min_improvement": 10.0}  # fmt: skip
    summary = train(experiment(tmp_path / "stop.json", copy_data, **settings))
    assert summary["steps"] == 8 and summary["ended_by"].startswith("early_stopping")
    assert [r["step"] for r in train_log(tmp_path / "stop") if "dev_loss" in r] == [2, 4, 6, 8]


@pytest.mark.workflow
def test_the_best_checkpoints_by_a_dev_figure_are_kept_and_averaged(tmp_path, copy_data):
    """train.average_best_by: every scheduled checkpoint is scored as it is saved; the best
    `average_last` are kept beside the newest, train.json lists them and says the rule."""
    spec = experiment(tmp_path / "best.json", copy_data, average_best_by="dev_loss",
                      average_last=2, checkpoint_every_steps=2, max_steps=12)  # fmt: skip
    summary = train(spec)
    weights_dir = tmp_path / "best" / "weights"
    scores = json.loads((weights_dir / "scores.json").read_text())
    assert scores["metric"] == "dev_loss"
    dev = {r["step"]: r["dev_loss"] for r in train_log(tmp_path / "best") if "dev_loss" in r}
    assert sorted(dev) == [2, 4, 6, 8, 10, 12]  # each save scored, beside dev_every_steps
    best = sorted(dev, key=dev.get)[:2]
    assert summary["average_weights"] == [
        str(weights_file(weights_dir, step)) for step in sorted(best)
    ]
    assert summary["average_rule"] == {"rule": "best", "by": "dev_loss", "count": 2, "averaged": 2}
    assert summary["final_weights"] == str(weights_file(weights_dir, 12))
    kept = {path.name for path in weights_files(weights_dir)}
    assert kept == {weights_file(weights_dir, s).name for s in {*best, 10, 12}}
    assert set(scores["scores"]) == kept  # each kept file's score, no other


@pytest.mark.workflow
def test_half_written_checkpoints_are_ignored_and_changed_settings_start_afresh(
    tmp_path, copy_data
):
    spec = experiment(tmp_path / "run.json", copy_data, max_steps=6)
    train(spec)
    (tmp_path / "run" / "checkpoints" / "step00000099").mkdir()  # a save killed half-way
    experiment(spec, copy_data, max_steps=8)
    assert train(spec)["steps"] == 8
    assert not (tmp_path / "run" / "checkpoints" / "step00000099").exists()
    experiment(spec, copy_data, max_steps=8, label_smoothing=0.2)  # another model: not a resume
    summary = train(spec)
    assert summary["steps"] == 8 and len(list((tmp_path / "run" / "superseded").iterdir())) == 1


@pytest.mark.workflow
def test_a_time_budget_ends_training_with_a_checkpoint_and_a_rerun_adds_no_step(
    tmp_path, copy_data
):
    spec = experiment(tmp_path / "timed.json", copy_data, max_steps=100_000, max_minutes=0.002)
    first = train(spec)  # 0.12 s: a few steps on a CPU, far from max_steps, on any CPU
    assert first["ended_by"] == "max_minutes"
    assert 1 <= first["steps"] < 100_000 and first["seconds"] >= 0.12
    tags = sorted(p.name for p in (tmp_path / "timed" / "checkpoints").glob("step*"))
    assert tags[-1] == f"step{first['steps']:08d}"
    again = train(spec)  # the budget is spent: resume, evaluate, write the same summary
    assert (again["steps"], again["ended_by"]) == (first["steps"], "max_minutes")
    experiment(spec, copy_data, max_steps=first["steps"] + 3, max_minutes=None)
    assert train(spec)["steps"] == first["steps"] + 3  # a bigger budget continues the run


@pytest.mark.workflow
@pytest.mark.parametrize(("sync_free", "precision"), [(False, "fp32"), (True, "bf16")])
def test_a_diverging_run_stops_with_advice_and_keeps_its_last_good_checkpoint(
    tmp_path, copy_data, sync_free, precision
):
    """Checked at every step, or (train.sync_free, which steps bf16) when the losses are read
    back before each checkpoint: either way no checkpoint holds a step whose loss was not
    finite. fp32 is advised only to a run that is not fp32 already."""
    spec = experiment(tmp_path / "diverge.json", copy_data, lr_scale=1e30, precision=precision,
                      checkpoint_every_steps=1, sync_free=sync_free)  # fmt: skip
    result = run_training(spec)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "training diverged: the loss of step" in result.stderr
    assert "lower train.lr_scale" in result.stderr
    assert ("train.precision: fp32" in result.stderr) == (precision != "fp32")
    run_dir = tmp_path / "diverge"
    failed = int(result.stderr.split("the loss of step ")[1].split()[0])
    saved = sorted(p.name for p in (run_dir / "checkpoints").glob("step*"))
    assert saved and saved[-1] == tag_of(failed - 1)  # every step before was saved, not this one
    for weights in (run_dir / "weights").glob("step*.safetensors"):
        assert all(t.isfinite().all() for t in load_weights(weights)["state_dict"].values())
    assert not (run_dir / "train.json").exists()


VARIANTS = {  # a training's settings beside the eager one's: the same maths, other kernels
    "eager": {},
    "compiled_model": {"compile": True},
    "compiled_loss": {"loss_kernel": "compiled"},
    "real_rows": {"real_rows_only": True},  # the projection and loss skip padded positions
}


def test_a_compiled_model_or_loss_trains_like_the_eager_one(tmp_path, copy_data):
    """train.compile runs the model through torch.compile (inductor) inside DeepSpeed; train.
    loss_kernel: compiled, the loss; train.real_rows_only, the projection on real target rows
    only. Without dropout, whose random numbers inductor draws differently, each computes what
    eager does."""
    logs = {}
    for name, settings in VARIANTS.items():
        spec = experiment(tmp_path / f"{name}.json", copy_data, **settings)
        resolved = json.loads(spec.read_text())
        resolved["model"]["dropout"] = 0.0
        spec.write_text(json.dumps(resolved))
        summary = train(spec)
        jsonl = (spec.parent / spec.stem / "train.jsonl").read_text().splitlines()
        logs[name] = [json.loads(line) for line in jsonl]
        assert summary["steps"] == 12
        assert summary["loss_kernel"] == ("compiled" if name == "compiled_loss" else "sliced")
        compiled_model = settings.get("compile", False)
        assert (
            (summary["compiled_graphs"] or 0) > 0
            if compiled_model
            else summary["compiled_graphs"] is None
        )
    for name in ("compiled_model", "compiled_loss", "real_rows"):
        for eager, other in zip(logs["eager"], logs[name], strict=True):
            assert eager.keys() == other.keys() and eager["step"] == other["step"]
            for key in ("loss", "dev_loss"):
                if key in eager:
                    assert other[key] == pytest.approx(eager[key], rel=1e-4), (name, key)
        first, last = logs[name][0]["loss"], logs[name][-2]["loss"]
        assert last < first  # and it learns


# DeepSpeed's optimizer for bf16 weights with fp32 gradient sums, by ZeRO stage: parameter by
# parameter (ZeRO 1), or over flat buffers (ZeRO 2, #46 item 1's A/B)
BF16_OPTIMIZER_OF_ZERO_STAGE = {1: "BF16_Optimizer", 2: "DeepSpeedZeroOptimizer"}


def trainer_script(body: str) -> str:
    """A script that builds a Trainer, ending as the trainer's own __main__ does (its `leave`)."""
    return body + "\nfrom aiayn.train.trainer import leave\nleave(0)\n"


TINY_MODEL = dict(vocab_size=20, n_layers=2, d_model=64, d_ff=128, n_heads=4, dropout=0.1)
# One of each axis a model grows along, each far past any machine's memory.
TOO_LARGE = [{"d_model": 10**8}, {"d_ff": 10**12}, {"n_layers": 10**8}, {"vocab_size": 10**11},
             {"positions": "learned", "max_positions": 10**11},
             {"max_positions": 10**10}]  # the sinusoid table: no parameter, 128 GB at d_model 4  # fmt: skip


def sized(**size) -> types.SimpleNamespace:
    """What check_fits reads of an experiment: its name, model and ZeRO stage."""
    model = TransformerConfig(**{**TINY_MODEL, **size})
    return types.SimpleNamespace(name="huge", model=model, train=types.SimpleNamespace(zero_stage=1))  # fmt: skip


@pytest.mark.parametrize("size", TOO_LARGE, ids=lambda size: "-".join(map(str, size)))
def test_a_model_too_large_for_memory_is_refused_before_it_is_built(size):
    """Refused by the parameters counted on the meta device, before torch's allocator fails
    with a traceback or overcommit lets the OOM killer end the run without a word."""
    experiment = sized(**size)
    with pytest.raises(InputError) as refusal:
        check_fits(Transformer, experiment, "fp32", 1, torch.device("cpu"))
    message = str(refusal.value)
    assert message.startswith("experiment 'huge': training needs at least ")
    count = re.search(r"GiB a process for its ([\d,]+) parameters", message)[1]
    assert int(count.replace(",", "")) == meta_model_count(experiment.model)
    assert re.search(r"this process has [\d,.]+ GiB \(", message) and "d_model, d_ff" in message
    if experiment.model.positions == "sinusoidal":
        values = experiment.model.max_positions * experiment.model.d_model
        assert f"and its {values:,} fixed values (the sinusoid table)" in message
    check_fits(Transformer, sized(), "fp32", 1, torch.device("cpu"))  # the tiny model fits


def meta_model_count(config: TransformerConfig) -> int:
    """Every parameter's size, from the shapes of one layer of each kind (the model itself is
    too large to build even on the meta device for some of TOO_LARGE)."""
    with torch.device("meta"):
        one = Transformer(dataclasses.replace(config, n_layers=1))
    return sum(
        parameter.numel() * (config.n_layers if name.startswith(("encoder.", "decoder.")) else 1)
        for name, parameter in one.named_parameters()
    )


@given(
    layers=st.integers(1, 4), width=st.sampled_from([8, 16, 32]), heads=st.sampled_from([1, 2]),
    inner=st.integers(1, 40), learned=st.booleans(),
)  # fmt: skip
@examples(max_examples=25, deadline=None, derandomize=True)
def test_the_parameter_count_is_the_built_models(layers, width, heads, inner, learned):
    positions = "learned" if learned else "sinusoidal"
    config = sized(n_layers=layers, d_model=width, n_heads=heads, d_ff=inner, positions=positions).model  # fmt: skip
    count = sum(parameter.numel() for parameter in Transformer(config).parameters())
    assert parameter_count(Transformer, config) == count == meta_model_count(config)


TENSOR_BYTES_AFTER_A_STEP = trainer_script("""
import gc, json, sys, torch
from aiayn.train.memory import model_counts, state_bytes
from aiayn.train.trainer import Trainer
from aiayn.train.settings import Experiment

trainer = Trainer(Experiment.from_json(sys.argv[1]))
trainer.train_step(save_requested=False, budget_spent=False)
storages = {}
for thing in gc.get_objects():
    if isinstance(thing, torch.Tensor) and thing.device.type == "cpu":
        storage = thing.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
count, table = model_counts(trainer.build_model, trainer.exp.model)
bound = state_bytes(count, trainer.precision, trainer.settings.zero_stage, trainer.world) + 4 * table
print(json.dumps({"held": sum(storages.values()), "bound": bound, "count": count}))
""")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_memory_bound_is_at_most_what_a_real_step_holds(precision, tmp_path, copy_data):
    """A refusal is never wrong: after one real DeepSpeed step, the tensors the process holds
    (weights, gradients, Adam's moments, ZeRO's fp32 copy) are at least the bound."""
    spec = experiment(tmp_path / "run.json", copy_data, precision=precision, zero_stage=1)
    done = subprocess.run(
        [sys.executable, "-c", TENSOR_BYTES_AFTER_A_STEP, str(spec)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert 0 < figures["bound"] <= figures["held"], figures
    assert figures["bound"] >= (12 if precision == "bf16" else 16) * figures["count"]


def test_a_step_larger_than_the_training_split_is_refused_before_it_starts(tmp_path, copy_data):
    """An extra zero in tokens_per_step made one step read the corpus hundreds of times over:
    its first step ran for hours (a SIGTERM waiting for it to end). Refused at the first step,
    with the split's size, before any checkpoint."""
    spec = experiment(tmp_path / "run.json", copy_data, tokens_per_step=10**7)
    refused = run_training(spec)
    assert refused.returncode == 1, refused.stderr[-3000:]
    message = refused.stderr.split("ERROR", 1)[-1]
    assert "train.tokens_per_step 10,000,000 is more than the training split holds (" in message
    assert "Lower tokens_per_step" in message and "Traceback" not in refused.stderr
    assert not (tmp_path / "run/checkpoints").exists() or not any(
        (tmp_path / "run/checkpoints").glob("step*")
    )


OUT_OF_MEMORY_IN_STEP = """
import sys, torch
from aiayn.model import Transformer
from aiayn.train.trainer import leave, main

forwards = 0

def allocate_past_any_memory(module, inputs, output):
    global forwards
    if isinstance(module, Transformer):
        forwards += 1
        if forwards == int(sys.argv[2]):  # as a batch's activations too large for the machine
            torch.empty(2**60, dtype=torch.uint8)

torch.nn.modules.module.register_module_forward_hook(allocate_past_any_memory)
leave(main([sys.argv[1]]))
"""


def test_a_step_out_of_memory_is_told_and_keeps_the_checkpoints_before(tmp_path, copy_data):
    """The allocator's refusal inside a real step (a forward hook asks for 2^60 bytes, past any
    machine's address space, as a batch too large would): a message that names the step and the
    setting to lower, no traceback, no checkpoint of the failed step; a rerun resumes."""
    spec = experiment(tmp_path / "run.json", copy_data, checkpoint_every_steps=4)
    failed = subprocess.run(
        [sys.executable, "-c", OUT_OF_MEMORY_IN_STEP, str(spec), "6"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert failed.returncode == 1, failed.stderr[-3000:]
    message = failed.stderr.split("ERROR", 1)[-1]
    assert "experiment 'run' ran out of memory on the cpu in step 6" in message, message
    assert "lower train.tokens_per_batch" in message and "Traceback" not in failed.stderr
    checkpoints = tmp_path / "run/checkpoints"
    assert [path.name for path in checkpoints.glob("step*")] == ["step00000004"]
    assert "resumed from" in run_training(spec).stderr


NON_FINITE_STEP = trainer_script("""
import json, os, sys
import torch
from aiayn.train.trainer import Trainer
from aiayn.train.settings import Experiment

trainer = Trainer(Experiment.from_json(sys.argv[1]))
poisoned = {"now": False}
weight = next(trainer.engine.module.parameters())
weight.register_hook(lambda grad: grad * float("inf") if poisoned["now"] else grad)
rates, losses = [], []
for step in range(4):
    poisoned["now"] = step == 1  # the second step's gradients are not finite
    losses.append(trainer.train_step(save_requested=False, budget_spent=False)[0])
    rates.append(trainer.engine.lr_scheduler.get_last_lr()[0])
optimizer = type(trainer.engine.optimizer).__name__
print(json.dumps({"state": trainer.state, "rates": rates, "losses": losses, "optimizer": optimizer}))
""")


def test_a_step_with_non_finite_gradients_is_counted_and_the_schedule_waits(tmp_path, copy_data):
    """bf16 gradients can overflow: DeepSpeed then skips the optimizer step and does not advance
    the learning-rate schedule. The step is counted (train.json's skipped_steps) and logged,
    so the schedule's lag behind the step count is never silent. The fault is real: a gradient
    hook makes one step's gradients infinite inside the real engine. ZeRO 2's optimizer over
    flat buffers (#46 item 1's A/B) does the same, and its steps' losses are ZeRO 1's."""
    runs = {}
    for zero in (1, 2):
        spec = experiment(tmp_path / f"overflow{zero}.json", copy_data, precision="bf16",
                          warmup_steps=50, zero_stage=zero)  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", NON_FINITE_STEP, str(spec)],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        runs[zero] = result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["state"]["step"] == 4 and result["state"]["skipped_steps"] == 1
        first, skipped, third, fourth = result["rates"]
        assert skipped == first < third < fourth  # warm-up: the schedule stood still for one step
        assert "step 2: the gradients are not finite; the optimizer skipped the step" in done.stderr
        assert "schedule stays at step 1 (1 skipped so far)" in done.stderr
    assert {zero: run["optimizer"] for zero, run in runs.items()} == BF16_OPTIMIZER_OF_ZERO_STAGE
    assert runs[2]["losses"] == pytest.approx(runs[1]["losses"], rel=1e-3)
    assert runs[2]["rates"] == runs[1]["rates"]


def test_flat_bf16_gradients_step_exactly_as_deepspeeds_own(tmp_path, copy_data):
    """train.flat_gradients (#46 item 1): the bf16 gradients in one flat buffer, summed into
    fp32 by one add and normed once, give DeepSpeed's bf16 optimizer's own steps exactly (the
    same sums in the same order), over steps of two micro-batches. 2 processes: the bf16-sum
    test below."""
    from aiayn.train.engine import init_process
    from aiayn.train.settings import Experiment
    from aiayn.train.trainer import Trainer

    init_process()
    losses, weights = {}, {}
    for flat in (False, True):
        spec = experiment(tmp_path / f"flat{flat}.json", copy_data, precision="bf16",
                          tokens_per_batch=300, flat_gradients=flat)  # fmt: skip
        trainer = Trainer(Experiment.from_json(spec))
        optimizer = trainer.engine.optimizer
        assert (
            type(optimizer).__name__ == BF16_OPTIMIZER_OF_ZERO_STAGE[1]
            and trainer.accumulation == 2
        )
        steps = [trainer.train_step(save_requested=False, budget_spent=False) for _ in range(3)]
        losses[flat] = [loss for loss, *_ in steps]
        weights[flat] = optimizer.fp32_groups_flat_partition[0].detach().clone()
        in_one_buffer = all(p.grad is not None and p.grad._base is not None
                            for p in optimizer.bf16_groups[0])  # fmt: skip
        assert in_one_buffer == flat
    assert losses[True] == losses[False] and len(set(losses[False])) == 3
    assert torch.equal(weights[True], weights[False])


def test_the_sync_free_step_steps_and_skips_exactly_as_deepspeeds_own(tmp_path, copy_data, caplog):
    """train.sync_free (#46 item 1): the skip decided on the device (fused Adam's found_inf),
    the schedule and the counts kept there, the losses read back only by settle(). Over four
    steps of two micro-batches in bf16, the second's gradients infinite, it gives DeepSpeed's
    own steps with the same fused Adam exactly: the same fp32 master weights after every step
    and the same losses; the step is skipped, the schedule held at it, and the skip counted
    and logged once the trainer reads the device."""
    from aiayn.train.engine import init_process
    from aiayn.train.settings import Experiment
    from aiayn.train.trainer import Trainer

    init_process()
    runs, poisoned = {}, {"now": False}  # the hook makes step 2's gradients infinite
    for sync_free in (False, True):
        spec = experiment(tmp_path / f"sync_free{sync_free}.json", copy_data, precision="bf16",
                          tokens_per_batch=300, warmup_steps=2, sync_free=sync_free)  # fmt: skip
        trainer = Trainer(Experiment.from_json(spec))
        optimizer = trainer.engine.optimizer
        next(trainer.engine.module.parameters()).register_hook(
            lambda grad: grad * float("inf") if poisoned["now"] else grad
        )
        weights, losses, rates = [], [], []
        for step in range(1, 5):
            poisoned["now"] = step == 2
            loss, *_ = trainer.train_step(save_requested=False, budget_spent=False)
            losses.append(float(loss))
            rates.append(trainer.engine.lr_scheduler.get_last_lr()[0])
            weights.append(optimizer.fp32_groups_flat_partition[0].detach().clone())
        skipped_before_reading = trainer.state["skipped_steps"]
        trainer.steps.settle(trainer.state, trainer.folder.newest)
        runs[sync_free] = weights, losses, rates, skipped_before_reading, trainer.state
    shipped, shipped_losses, shipped_rates, _, state = runs[False]
    ours, losses, rates, unread, ours_state = runs[True]
    assert trainer.accumulation == 2
    assert type(trainer.engine.lr_scheduler).__name__ == "DeviceSchedule"
    assert state["skipped_steps"] == 1 and (unread, ours_state["skipped_steps"]) == (0, 1)
    assert all(torch.equal(a, b) for a, b in zip(shipped, ours, strict=True))
    assert torch.equal(shipped[0], shipped[1]) and not torch.equal(shipped[1], shipped[2])
    assert losses == shipped_losses and len(set(losses)) == 4
    assert rates == pytest.approx(shipped_rates, rel=1e-12) and rates[0] == rates[1]
    assert "1 of steps 1 to 4: the gradients are not finite" in caplog.text


def test_the_sync_free_step_follows_fp32_partitions_replaced_after_install(tmp_path, copy_data):
    """The step pairs DeepSpeed's fp32 partitions with their gradients at every step, not once
    at install: DeepSpeed 0.19.8 loads a checkpoint into them in place, but one that replaced
    them would otherwise leave Adam stepping tensors that are no longer the weights. Here the
    partition is replaced after install (in Adam's group too): the step updates the new one."""
    from aiayn.train.engine import init_process
    from aiayn.train.settings import Experiment
    from aiayn.train.trainer import Trainer

    init_process()
    spec = experiment(tmp_path / "replaced.json", copy_data, precision="bf16",
                      tokens_per_batch=300, sync_free=True)  # fmt: skip
    trainer = Trainer(Experiment.from_json(spec))
    optimizer = trainer.engine.optimizer
    installed = optimizer.fp32_groups_flat_partition[0]
    replaced = torch.nn.Parameter(installed.detach().clone())
    optimizer.fp32_groups_flat_partition[0] = replaced
    optimizer.optimizer.param_groups[0]["params"] = [replaced]
    before = replaced.detach().clone()
    trainer.train_step(save_requested=False, budget_spent=False)
    assert not torch.equal(replaced.detach(), before)  # stepped: it is the weights now
    assert torch.equal(installed.detach(), before)  # the tensor install saw: left alone
    model = next(trainer.engine.module.parameters())  # the bf16 weights follow the new one
    assert torch.equal(model.detach().flatten(), replaced.detach()[: model.numel()].bfloat16())


def schema_edge(section: str, key: str, highest: bool) -> float:
    """The lowest or the highest number the config's schema takes at an experiment's
    `section.key` (next to an exclusive bound); the highest seed is that of the last of the
    most `seeds` an experiment may have (seed + k - 1)."""
    experiment = schema()["$defs"]["experiment"]["properties"]
    bounds = experiment[section]["properties"][key]
    if highest:
        edge = bounds.get("maximum", bounds.get("exclusiveMaximum"))
        if "exclusiveMaximum" in bounds:
            edge = math.nextafter(edge, -math.inf)
        return edge + experiment["seeds"]["maximum"] - 1 if key == "seed" else edge
    edge = bounds.get("minimum", bounds.get("exclusiveMinimum"))
    return math.nextafter(edge, math.inf) if "exclusiveMinimum" in bounds else edge


@pytest.mark.parametrize("highest", [False, True], ids=["lowest", "highest"])
def test_every_number_the_schema_takes_builds_the_trainer_and_steps(tmp_path, copy_data, highest):
    """The schema's bounds are those of what reads the numbers: at the lowest and the highest
    value it takes, Adam's betas and epsilon, the seed (torch's and numpy's generators),
    label smoothing and both dropouts build a real trainer whose steps stay finite. Adam's
    betas at 1.5, a negative seed or one past 2^64 passed the schema and were tracebacks at
    the first step; an epsilon of 0 steps an unused piece's embedding by 0 / 0."""
    from aiayn.train.engine import init_process
    from aiayn.train.settings import Experiment
    from aiayn.train.trainer import Trainer

    init_process()
    train = ["adam_beta1", "adam_beta2", "label_smoothing", "seed"] + ["adam_eps"] * (not highest)
    edges = {key: schema_edge("train", key, highest) for key in train}
    spec = experiment(tmp_path / "edge.json", copy_data, **edges)
    written = json.loads(spec.read_text())
    for key in ("dropout", "attention_dropout"):
        written["model"][key] = schema_edge("overrides", key, highest)
    spec.write_text(json.dumps(written))
    trainer = Trainer(Experiment.from_json(spec))
    losses = [trainer.train_step(save_requested=False, budget_spent=False)[0] for _ in range(2)]
    assert all(math.isfinite(float(loss)) for loss in losses), (edges, losses)
    assert all(torch.isfinite(p).all() for p in trainer.engine.module.parameters()), edges


@pytest.mark.workflow
def test_sync_free_training_on_two_processes_resumes_and_follows_deepspeeds_step(
    tmp_path, copy_data
):
    """train.sync_free on 2 processes in bf16 (ZeRO 1), stopped after step 3 and resumed to 6,
    gives DeepSpeed's own step (with the same fused Adam) run straight through exactly: the
    same losses at each log line (summed over processes when read back), the same learning
    rate (the schedule comes back from the checkpoint) and the same final weights."""
    common = {"precision": "bf16", "warmup_steps": 4, "log_every_steps": 3, "max_steps": 6}
    shipped = experiment(tmp_path / "shipped.json", copy_data, **common)
    shipped = train(shipped, 2)
    spec = experiment(
        tmp_path / "sync.json", copy_data, sync_free=True, **common | {"max_steps": 3}
    )
    assert train(spec, 2)["steps"] == 3
    ours = train(experiment(spec, copy_data, sync_free=True, **common), 2)
    assert (ours["sync_free"], shipped["sync_free"]) == ("losses, skips and schedule", "off")
    assert ours["processes"] == 2 and ours["ranks_agree"] and ours["skipped_steps"] == 0
    logs = {}
    for name in ("shipped", "sync"):
        lines = (tmp_path / name / "train.jsonl").read_text().splitlines()
        logs[name] = [r for r in map(json.loads, lines) if "loss" in r]
    assert [r["step"] for r in logs["sync"]] == [r["step"] for r in logs["shipped"]] == [3, 6]
    for a, b in zip(logs["shipped"], logs["sync"], strict=True):
        assert (b["loss"], b["nll"]) == (a["loss"], a["nll"])
        assert b["lr"] == pytest.approx(a["lr"], rel=1e-12)
    a, b = weights(shipped), weights(ours)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.workflow
def test_a_run_resumes_with_sync_free_switched_on_and_off(tmp_path, copy_data):
    """train.sync_free is not part of a run's identity: its schedule is saved in LambdaLR's
    terms and the optimizer's groups as DeepSpeed's step leaves them, so a bf16 run stopped
    with it off resumes with it on, and back: the learning rate at each log line is that of a
    run never switched, and so are its losses, bit for bit."""
    common = {"precision": "bf16", "log_every_steps": 2, "max_steps": 6}
    runs = {"straight": [(6, False)], "switched": [(2, False), (4, True), (6, False)]}
    logs = {}
    for name, segments in runs.items():
        spec = tmp_path / f"{name}.json"
        for steps, sync_free in segments:
            experiment(spec, copy_data, sync_free=sync_free, **common | {"max_steps": steps})
            summary = train(spec)
            assert summary["steps"] == steps and summary["skipped_steps"] == 0
            assert summary["sync_free"] == ("losses, skips and schedule" if sync_free else "off")
            if sync_free:  # saved as DeepSpeed's own step leaves the groups: a float lr
                saved = tmp_path / name / "checkpoints" / tag_of(steps)
                optimizer = torch.load(next(saved.glob("*optim_states.pt")), weights_only=False)
                (group,) = optimizer["optimizer_state_dict"]["base_optimizer_state"]["param_groups"]
                assert isinstance(group["lr"], float) and group["fused"] is True
        lines = (tmp_path / name / "train.jsonl").read_text().splitlines()
        logs[name] = [r for r in map(json.loads, lines) if "loss" in r]
    assert [r["step"] for r in logs["switched"]] == [r["step"] for r in logs["straight"]]
    for a, b in zip(logs["straight"], logs["switched"], strict=True):
        assert b["lr"] == pytest.approx(a["lr"], rel=1e-12), b["step"]
        assert (b["loss"], b["nll"]) == (a["loss"], a["nll"]), b["step"]


def test_bf16_training_steps_through_deepspeed_and_saves_fp32_weights(tmp_path, copy_data):
    """The GPU default (bf16, ZeRO 1) on a CPU: DeepSpeed casts parameters, not buffers, which
    once crashed the first layer on every GPU. Gradients are summed in fp32, and the weights
    saved are the optimizer's fp32 master copy, not the bf16 ones widened."""
    summary = train(experiment(tmp_path / "bf16.json", copy_data, max_steps=4, precision="bf16"))
    assert summary["precision"] == "bf16" and summary["steps"] == 4
    assert summary["skipped_steps"] == 0
    assert summary["gradient_dtypes"] == {"accumulation": "float32", "communication": "float32"}
    assert math.isfinite(summary["dev_loss"])
    saved = weights(summary)
    assert all(tensor.dtype == torch.float32 for tensor in saved.values())
    assert any(not torch.equal(t, t.bfloat16().float()) for t in saved.values())


def test_bf16_autocast_trains_fp32_weights_with_bf16_products_through_deepspeed(
    tmp_path, copy_data
):
    """The A/B alternative to DeepSpeed's bf16 optimizer: fp32 weights and gradients, bf16
    matrix products under DeepSpeed's torch_autocast, torch's Adam over all parameters; its
    losses follow fp32 training's to bf16's rounding."""
    runs = {}
    for precision in ("bf16-autocast", "fp32"):
        spec = experiment(tmp_path / f"{precision}.json", copy_data, max_steps=4,
                          precision=precision, log_every_steps=1)  # fmt: skip
        runs[precision] = train(spec)
    summary = runs["bf16-autocast"]
    assert summary["precision"] == "bf16-autocast" and summary["steps"] == 4
    assert summary["gradient_dtypes"] == {"accumulation": "float32", "communication": "float32"}
    assert all(tensor.dtype == torch.float32 for tensor in weights(summary).values())
    losses = {}
    for precision in runs:
        lines = (tmp_path / precision / "train.jsonl").read_text().splitlines()
        losses[precision] = [r["loss"] for r in map(json.loads, lines) if "loss" in r]
    assert len(losses["fp32"]) == 4
    assert losses["bf16-autocast"] != losses["fp32"]  # the products did run in bf16
    assert losses["bf16-autocast"] == pytest.approx(losses["fp32"], rel=2e-2)


def one_step(root: Path, name: str, processes: int, tokens_per_batch: int, precision: str):
    """The loss and gradient norm of the first step over 8 pairs of 10 tokens (88 real tokens a
    side with EOS), taken as one batch, as two accumulated ones, or one on each of 2 processes."""
    rng = np.random.default_rng(4)
    sentences = [rng.integers(4, 20, 10).tolist() for _ in range(8)]
    data = root / "data"
    if not data.exists():
        data.mkdir()
        for side in ("src", "tgt"):
            write_indexed(data / side, sentences, vocab_size=20)
    pair = (str(data / "src"), str(data / "tgt"))
    spec = experiment(
        root / f"{name}.json",
        (pair, pair),
        max_steps=1,
        tokens_per_step=88,
        tokens_per_batch=tokens_per_batch,
        pad_to_multiple=1,
        log_every_steps=1,
        precision=precision,
    )
    described = json.loads(spec.read_text())
    described["model"]["dropout"] = 0.0  # the same forward pass however the pairs are split
    spec.write_text(json.dumps(described))
    summary = train(spec, processes)
    assert summary["real_tokens_per_step"] == {"source": 88.0, "target": 88.0}
    lines = (root / name / "train.jsonl").read_text().splitlines()
    (record,) = [r for r in map(json.loads, lines) if "loss" in r]
    return summary, record["loss"], record["grad_norm"]


@pytest.mark.workflow
@pytest.mark.parametrize(
    ("precision", "tolerance"), [("fp32", 1e-5), ("bf16", 2e-3), ("bf16-autocast", 2e-3)]
)
def test_one_process_two_processes_and_accumulation_give_the_same_gradient(
    tmp_path, precision, tolerance
):
    alone, loss, norm = one_step(tmp_path, "alone", 1, 88, precision)
    accumulated, loss_2, norm_2 = one_step(tmp_path, "accumulated", 1, 44, precision)
    split, loss_3, norm_3 = one_step(tmp_path, "split", 2, 88, precision)
    assert (alone["accumulation"], accumulated["accumulation"], split["accumulation"]) == (1, 2, 1)
    assert split["processes"] == 2
    assert loss_2 == pytest.approx(loss, rel=tolerance) and loss_3 == pytest.approx(
        loss, rel=tolerance
    )
    assert norm_2 == pytest.approx(norm, rel=tolerance) and norm_3 == pytest.approx(
        norm, rel=tolerance
    )


GRADIENT_OF_ONE_STEP = trainer_script("""
import os, sys, torch
import deepspeed
from deepspeed.utils import safe_get_full_grad
from aiayn.train.loss import label_smoothed_loss
from aiayn.train.memory import check_fits, parameter_count, state_bytes
from aiayn.train.trainer import Trainer
from aiayn.train.settings import Experiment

spec, summing, out = sys.argv[1:4]
if summing == "bf16":  # the control: DeepSpeed's own default, gradients summed in bf16
    initialize = deepspeed.initialize

    def bf16_sums(*args, **kwargs):
        kwargs["config"] = {**kwargs["config"], "data_types": {"grad_accum_dtype": "bf16"}}
        return initialize(*args, **kwargs)

    deepspeed.initialize = bf16_sums
trainer = Trainer(Experiment.from_json(spec))
engine, batches = trainer.engine, trainer.data.take(trainer.accumulation)
(tokens,) = trainer.all_reduce([sum(b.target_tokens for b in batches)])
for number, batch in enumerate(batches, start=1):  # as train_step.Steps.step does
    batch = batch.to(trainer.device)
    logits = engine(batch.source, batch.target_in)
    loss, _ = label_smoothed_loss(logits, batch.target_out, trainer.settings.label_smoothing)
    engine.backward(loss * (trainer.world / tokens), scale_wrt_gas=False)
    if number < len(batches):
        engine.step()  # not yet the boundary: the gradient is still being summed
grads = [safe_get_full_grad(p).float().flatten() for p in engine.module.parameters()]
if trainer.rank == 0:
    torch.save({"gradient": torch.cat(grads), "optimizer": type(engine.optimizer).__name__}, out)
""")


def gradient_of_one_step(
    root: Path, precision: str, summing: str, processes: int, zero=1, flat=True
):
    """The summed gradient, before the optimizer steps, of 512 micro-batches of one sentence on
    each process (the same sentence: each micro-batch's gradient is small beside the running
    sum); normalised by the step's tokens, so it is the same for any number of processes."""
    copies = 512 * processes
    data = root / f"one_sentence_{copies}"
    if not data.exists():
        data.mkdir()
        sentence = np.random.default_rng(4).integers(4, 20, 10).tolist()
        for side in ("src", "tgt"):
            write_indexed(data / side, [sentence] * copies, vocab_size=20)
    pair = (str(data / "src"), str(data / "tgt"))
    name = f"{precision}_{summing}_{processes}_zero{zero}_flat{flat}"
    spec = experiment(root / f"{name}.json", (pair, pair), tokens_per_step=copies * 11,
                      tokens_per_batch=11, pad_to_multiple=1, precision=precision,
                      zero_stage=zero, flat_gradients=flat)  # fmt: skip
    described = json.loads(spec.read_text())
    described["model"]["dropout"] = 0.0
    spec.write_text(json.dumps(described))
    command = ["-c", GRADIENT_OF_ONE_STEP] if processes == 1 else ["-m", "torch.distributed.run",
               "--standalone", f"--nproc_per_node={processes}", "--no-python", sys.executable,
               "-c", GRADIENT_OF_ONE_STEP]  # fmt: skip
    out = root / f"{name}.pt"
    done = subprocess.run(
        [sys.executable, *command, str(spec), summing, str(out)],
        capture_output=True, text=True, timeout=600, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out)  # the gradient and the name of DeepSpeed's optimizer that summed it


@pytest.fixture(scope="module")
def fp32_gradient_of_one_step(tmp_path_factory):
    return gradient_of_one_step(tmp_path_factory.mktemp("reference"), "fp32", "ours", 1)["gradient"]


@pytest.mark.workflow
@pytest.mark.parametrize(("processes", "zero"), [(2, 1), (2, 2)])  # micro-batches and processes
def test_bf16_gradients_are_summed_in_fp32_over_many_micro_batches_and_processes(
    tmp_path, processes, zero, fp32_gradient_of_one_step
):
    """512 small gradients summed in bf16 lose a quarter of the sum (an addend below half the
    running sum's last bit rounds away); summed in fp32, over the micro-batches and over the
    processes, they match the fp32 run to bf16's compute error. The control (DeepSpeed's bf16
    default) shows the test can fail. ZeRO 1 runs DeepSpeed's BF16_Optimizer; ZeRO 2 its
    ZeRO optimizer over flat buffers, the A/B of #46 item 1, which must sum in fp32 too."""
    reference = fp32_gradient_of_one_step

    def error(summed):
        gradient = summed["gradient"]
        return ((gradient - reference).norm() / reference.norm()).item()

    ours = gradient_of_one_step(tmp_path, "bf16", "ours", processes, zero)
    assert ours["optimizer"] == BF16_OPTIMIZER_OF_ZERO_STAGE[zero]
    if zero == 1:  # train.flat_gradients against the optimizer's own sums, bit for bit
        shipped = gradient_of_one_step(tmp_path, "bf16", "ours", processes, zero, flat=False)
        assert torch.equal(shipped["gradient"], ours["gradient"])
    ours = error(ours)
    bf16_sums = error(gradient_of_one_step(tmp_path, "bf16", "bf16", processes, zero))
    assert ours < 0.08 and bf16_sums > 0.2 and bf16_sums > 4 * ours, (ours, bf16_sums)


# Why the trainer skips a pair in the runs below: 600-token batches, learned positions of 8.
TOO_LONG = "longer than a batch (600 tokens per process) or the learned positions (max_positions 8)"


@pytest.mark.workflow
def test_learned_positions_skip_the_pairs_they_cannot_embed(tmp_path, copy_data):
    """Copy-task sentences have 3 to 8 tokens; with BOS or EOS, those of 8 need 9 positions
    (padded to 16), more than a table of 8 holds."""
    spec = experiment(tmp_path / "learned.json", copy_data, max_steps=3)
    described = json.loads(spec.read_text())
    described["model"].update(positions="learned", max_positions=8)
    spec.write_text(json.dumps(described))
    result = run_training(spec)
    assert result.returncode == 0, result.stderr[-3000:]
    longest = sum(len(s) == 8 for s in IndexedDataset(copy_data[0][0]))
    assert 0 < longest < 3000
    assert f"{longest} of 3000 training pairs are {TOO_LONG} and are skipped" in result.stderr
    dev_longest = sum(len(s) == 8 for s in IndexedDataset(copy_data[1][0]))
    assert 0 < dev_longest < 200
    left_out = f"{dev_longest} of 200 dev pairs are {TOO_LONG} and are left out of the dev loss"
    assert left_out in result.stderr
    # 600 padded tokens leave no room for padding above the 600 real ones: the batches close
    # on padding first, and the log says so with the fix
    assert "not train.tokens_per_step 600: the padded batches reach" in result.stderr
    assert "Raise tokens_per_batch (the memory limit)" in result.stderr
    summary = json.loads((tmp_path / "learned" / "train.json").read_text())
    assert summary["steps"] == 3 and math.isfinite(summary["dev_loss"])


DEV_TOO_LONG = (
    f"no dev pair can be scored: all 4 pairs of the dev split {{dev}} are {TOO_LONG}. Use a dev "
    "split with shorter sentences, or raise the experiment's train.tokens_per_batch or its "
    "max_positions (in `overrides`); either starts the run afresh."
)


@pytest.mark.workflow
@pytest.mark.parametrize(
    ("sentences", "message"),
    [
        ([[5, 6, 7, 8, 9, 10, 11, 12]] * 4, DEV_TOO_LONG),
        ([], "the dev split {dev} is empty: the dev loss needs sentence pairs"),
    ],
    ids=["too-long", "empty"],
)
def test_a_dev_split_with_no_pair_that_fits_stops_before_training(
    tmp_path, copy_data, sentences, message
):
    """Every dev pair is 9 tokens with EOS, more than learned positions of 8 hold, or there is
    none: the run used to train and then divide by zero dev tokens at its first evaluation."""
    (tmp_path / "dev").mkdir()
    for side in ("src", "tgt"):
        write_indexed(tmp_path / "dev" / side, sentences, vocab_size=20)
    dev = (str(tmp_path / "dev" / "src"), str(tmp_path / "dev" / "tgt"))
    spec = experiment(tmp_path / "nodev.json", (copy_data[0], dev), max_steps=3)
    described = json.loads(spec.read_text())
    described["model"].update(positions="learned", max_positions=8)
    spec.write_text(json.dumps(described))
    result = run_training(spec)
    assert result.returncode == 1, result.stderr[-3000:]
    assert message.format(dev=dev[0]) in result.stderr
    assert "ZeroDivisionError" not in result.stderr
    assert not (tmp_path / "nodev" / "train.json").exists()
    assert not list((tmp_path / "nodev").glob("**/step*"))


@pytest.mark.workflow
def test_a_tiny_model_learns_to_copy(tmp_path, copy_data):
    spec = experiment(
        tmp_path / "copy.json",
        copy_data,
        max_steps=900,
        warmup_steps=100,
        log_every_steps=100,
        dev_every_steps=150,
    )
    summary = train(spec)
    payload = load_weights(summary["final_weights"])
    model = Transformer(TransformerConfig(**payload["model_config"])).eval()
    model.load_state_dict(payload["state_dict"])
    source, target = (IndexedDataset(p) for p in copy_data[1])
    batch = collate(source, target, list(range(len(source))))
    predicted = model(batch.source, batch.target_in).argmax(-1)
    real = batch.target_out != 0
    accuracy = (predicted[real] == batch.target_out[real]).float().mean().item()
    assert accuracy > 0.98, accuracy
    log = [
        json.loads(line) for line in (tmp_path / "copy" / "train.jsonl").read_text().splitlines()
    ]
    nll = [r["nll"] for r in log if "nll" in r]
    assert nll[-1] < 0.2 * nll[0] and summary["dev_nll"] < 0.15


def saved_steps(run_dir: Path) -> list[int]:
    found = (run_dir / "weights").glob("step*.safetensors")
    return sorted(int(p.stem.removeprefix("step")) for p in found)


@pytest.mark.workflow
def test_two_processes_train_and_end_with_identical_weights(tmp_path, copy_data):
    # Rank 0's checkpoint clock runs out at every step (a microsecond); saving takes every rank,
    # so the step's vote must bring rank 1 along, or the run hangs.
    spec = experiment(
        tmp_path / "ddp.json",
        copy_data,
        max_steps=4,
        tokens_per_batch=300,
        checkpoint_every_minutes=1e-8,
    )
    summary = train(spec, processes=2)
    assert summary["processes"] == 2 and summary["accumulation"] == 1
    assert summary["ranks_agree"] is True and summary["steps"] == 4
    assert saved_steps(tmp_path / "ddp") == [1, 2, 3, 4]  # average_last 5 keeps them all
    full_states = [p.name for p in (tmp_path / "ddp" / "checkpoints").glob("step*")]
    assert full_states == ["step00000004"]  # keep_states 1: older Adam states are pruned
    shutil.rmtree(tmp_path / "ddp")
    # FLOPs are counted over both processes: per target token as many as one process doing it all.
    # An hour's checkpoint clock never runs out here: only the last step is saved.
    alone = train(
        experiment(
            tmp_path / "one.json",
            copy_data,
            max_steps=4,
            tokens_per_batch=600,
            checkpoint_every_minutes=60,
        )
    )
    assert saved_steps(tmp_path / "one") == [4]
    per_token = summary["train_flops"] / summary["target_tokens"]
    assert per_token == pytest.approx(alone["train_flops"] / alone["target_tokens"], rel=0.2)


@pytest.mark.parametrize(
    ("step", "limit", "world", "plan"),
    [
        (25000, 25000, 1, (1, 25000)),
        (25000, 25000, 8, (1, 3125)),  # the paper: 8 GPUs, ~3125 tokens each
        (25000, 4096, 1, (7, 3572)),
        (25000, 4096, 2, (4, 3125)),
        (2000, 2000, 2, (1, 1000)),
    ],
)
def test_a_step_holds_the_configured_tokens_on_any_number_of_processes(step, limit, world, plan):
    accumulation, batch = step_plan(step, limit, world)
    assert (accumulation, batch) == plan
    assert batch <= limit and step <= accumulation * batch * world < step + accumulation * world


@pytest.mark.workflow
def test_resuming_on_another_number_of_processes_stops_with_advice_and_keeps_the_checkpoint(
    tmp_path, copy_data
):
    spec = experiment(tmp_path / "zero.json", copy_data, max_steps=2)
    train(spec)
    run_dir = tmp_path / "zero"

    def saved_files():
        files = [*(run_dir / "checkpoints").rglob("*"), *(run_dir / "weights").rglob("*")]
        return {p: p.stat().st_mtime_ns for p in files if p.is_file()}

    before = saved_files()
    experiment(spec, copy_data, max_steps=4)
    result = run_training(spec, processes=2)
    assert result.returncode != 0
    assert "was written by 1 process" in result.stderr and "this run has 2" in result.stderr
    assert "processes" in result.stderr.split("this run has 2")[1]  # says what to set back
    assert saved_files() == before  # nothing written, moved or deleted
    assert saved_steps(run_dir) == [2]


@pytest.mark.workflow
def test_without_zero_the_saved_weights_are_those_zero_stage_1_trains(tmp_path, copy_data):
    """zero_stage 0 saves the module's own state dict instead of consolidating ZeRO's shards;
    on one process both run the same Adam on the same batches."""
    zero1 = train(experiment(tmp_path / "zero1.json", copy_data, max_steps=3))
    plain = train(experiment(tmp_path / "zero0.json", copy_data, max_steps=3, zero_stage=0))
    a, b = weights(zero1), weights(plain)
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], rtol=1e-5, atol=1e-6) for k in a)
    assert plain["dev_loss"] == pytest.approx(zero1["dev_loss"], rel=1e-5)


def test_a_build_lock_left_by_a_killed_start_is_removed(tmp_path, monkeypatch, caplog):
    """A start killed while torch compiled DeepSpeed's CPU op left its lock, on which every
    later start would wait forever (found by tests/test_faults.py); a lock still young may be a
    build in progress and is kept."""
    from aiayn.train.engine import STALE_BUILD_SECONDS, clear_stale_build_locks

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    stale, young = tmp_path / "deepspeed_shm_comm" / "lock", tmp_path / "deepspeed_x" / "lock"
    for lock in (stale, young):
        lock.parent.mkdir()
        lock.touch()
    killed_at = time.time() - STALE_BUILD_SECONDS - 60
    os.utime(stale, (killed_at, killed_at))
    with caplog.at_level(logging.WARNING):
        clear_stale_build_locks()
    assert not stale.exists() and young.exists()
    assert f"removed {stale}, left by a build killed" in caplog.text


def test_deepspeed_never_waits_for_the_device_to_time_a_step():
    """DeepSpeed's throughput timer synchronises the device at every forward and step by
    default, so the next batch could never be prepared while the GPU computes."""
    from aiayn.model_config import build_config
    from aiayn.train.engine import deepspeed_engine, init_process
    from aiayn.train.settings import TrainSettings

    _, _, device = init_process()
    model = Transformer(build_config(50, "tiny"))
    engine = deepspeed_engine(model, TrainSettings(), 1, False, device)
    assert not engine.tput_timer.config.enabled and not engine.tput_timer.config.synchronized
    assert not engine.wall_clock_breakdown()


def test_a_lone_process_handed_a_busy_port_picks_another():
    """Trainings started together can be handed the same free port; the one that finds it
    taken (EADDRINUSE) tries another instead of failing. A MASTER_PORT it inherited (here the
    busy one) is not a launcher's: it is not trusted either."""
    script = (
        "import os, socket\n"
        "import aiayn.train.engine as engine\n"
        "busy = socket.socket(); busy.bind(('127.0.0.1', 0)); busy.listen()\n"
        "taken = busy.getsockname()[1]\n"
        "os.environ['MASTER_PORT'] = str(taken)\n"
        "handed = iter([taken])\n"
        "free = engine.free_port\n"
        "engine.free_port = lambda: next(handed, None) or free()\n"
        "engine.init_process()\n"
        "print(os.environ['MASTER_PORT'] != str(taken))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK", "WORLD_SIZE")}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "True"


def test_a_dev_monitor_is_the_plug_in_its_spec_names():
    """The trainer loads a task's dev monitor by name (a parser's dev parses), so that training
    code imports no task and importing the trainer loads no parsing module."""
    from aiayn.parsing.dev_parse import DevParser
    from aiayn.train.trainer import plugin

    assert plugin("aiayn.parsing.dev_parse:DevParser") is DevParser
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, aiayn.train.trainer; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT / "src")},
    ).stdout
    assert "aiayn.train.trainer" in loaded and "aiayn.parsing" not in loaded
