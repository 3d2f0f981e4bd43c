"""FLOP counting: a multiply-add per weight per position, plus the attention products."""

import json
import logging

import pytest
import torch

import aiayn.flops
from aiayn.flops import forward_flops, known_tflops, rate_cache, sustained_tflops, training_flops
from aiayn.model import Transformer
from aiayn.model_config import build_config
from aiayn.paper import TABLE2, paper_cost, paper_training_cost
from aiayn.report.tables import paper_way_cost


@pytest.mark.parametrize("preset", ["tiny", "base", "A_h1", "B_dk16", "big"])
def test_one_position_costs_two_flops_per_weight_plus_attention(preset):
    config = build_config(1000, preset)
    with torch.device("meta"):
        model = Transformer(config)
    weights = sum(
        p.numel() for n, p in model.named_parameters() if p.dim() > 1 and "embeddings" not in n
    )
    weights += config.d_model * config.vocab_size  # the shared matrix as output projection
    d_k, d_v = config.head_dims
    scores = 3 * config.n_layers * 2 * config.n_heads * (d_k + d_v)  # 3 attentions per layer pair
    assert forward_flops(config, 1, 1, 1) == 2 * weights + scores


def test_flops_grow_with_batch_and_quadratically_in_attention():
    config = build_config(1000, "tiny")
    assert forward_flops(config, 4, 10, 12) == 4 * forward_flops(config, 1, 10, 12)
    assert training_flops(config, 2, 10, 12) == 3 * forward_flops(config, 2, 10, 12)
    linear = forward_flops(config, 1, 20, 20) - 2 * forward_flops(config, 1, 10, 10)
    assert linear > 0  # the attention products grow with length squared


def test_sustained_tflops_is_measured():
    assert sustained_tflops(torch.device("cpu"), torch.float32, seconds=0.05, repeats=3) > 0


@pytest.fixture
def measured(monkeypatch, tmp_path):
    """A cache folder of the test's own, and the (device, dtype) pairs actually measured."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = []

    def measure(device, dtype):
        calls.append((device.type, dtype))
        return sustained_tflops(device, dtype, seconds=0.02, repeats=1)

    monkeypatch.setattr(aiayn.flops, "sustained_tflops", measure)
    return calls


def test_a_rate_is_measured_once_per_device_and_dtype_then_read(measured):
    cpu = torch.device("cpu")
    fp32 = known_tflops(cpu, torch.float32)
    assert known_tflops(cpu, torch.float32) == fp32 > 0
    known_tflops(cpu, torch.bfloat16)
    assert measured == [("cpu", torch.float32), ("cpu", torch.bfloat16)]
    (kept,) = [v for k, v in json.loads(rate_cache().read_text()).items() if "float32" in k]
    assert kept["tflops"] == fp32 and kept["measured"]
    torch.set_num_threads(torch.get_num_threads() + 1)  # another CPU setting: its own rate
    try:
        known_tflops(cpu, torch.float32)
    finally:
        torch.set_num_threads(torch.get_num_threads() - 1)
    assert len(measured) == 3


@pytest.mark.parametrize(
    "damaged",
    [
        "{",
        "[]",
        '{"K": 3}',
        '{"K": {"tflops": "fast"}}',
        '{"K": {"tflops": -1.0}}',
        '{"K": {"tflops": NaN}}',
        '{"K": {}}',
    ],  # fmt: skip
)
def test_a_damaged_cache_is_measured_again_and_mended(measured, damaged):
    cpu = torch.device("cpu")
    known_tflops(cpu, torch.float32)
    key = next(iter(json.loads(rate_cache().read_text())))
    rate_cache().write_text(damaged.replace('"K"', json.dumps(key)))
    assert known_tflops(cpu, torch.float32) > 0
    assert known_tflops(cpu, torch.float32) > 0
    assert len(measured) == 2  # measured again once, then read
    assert json.loads(rate_cache().read_text())[key]["tflops"] > 0


def test_a_cache_that_cannot_be_written_costs_a_measurement_not_the_run(
    measured, monkeypatch, read_only_folder, caplog
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(read_only_folder))
    with caplog.at_level(logging.WARNING, logger="aiayn.flops"):
        assert known_tflops(torch.device("cpu"), torch.float32) > 0
        assert known_tflops(torch.device("cpu"), torch.float32) > 0
    assert len(measured) == 2
    assert "the device's rate was not kept (Read-only file system)" in caplog.text


def test_the_papers_table2_costs_come_from_its_formula_and_hardware():
    """Footnote 5: hours x GPUs x sustained single-precision TFLOPS; 8 P100 (9.5 TFLOPS), base
    12 hours, big 3.5 days, as Table 2 prints them to two figures."""
    assert f"{paper_training_cost('base'):.1e}" == "3.3e+18"
    assert f"{paper_training_cost('big'):.1e}" == "2.3e+19"
    printed = {row[0]: row[3] for row in TABLE2}
    assert paper_training_cost("base") == pytest.approx(
        printed["Transformer (base model)"], rel=0.01
    )
    assert paper_training_cost("big") == pytest.approx(printed["Transformer (big)"], rel=0.01)
    assert paper_cost(1.0, 2, 2.8) == 2 * 3600 * 2.8e12  # two K80s for an hour


def test_our_paper_way_cost_uses_the_fp32_rate_and_shows_bf16_apart():
    summary = {
        "seconds": 7200.0,
        "processes": 8,
        "precision": "bf16",
        "device_tflops_fp32": 50.0,
        "device_tflops_bf16": 600.0,
    }
    assert paper_way_cost(summary) == 2 * 3600 * 8 * 50e12
    assert paper_way_cost(summary, "bf16") == 2 * 3600 * 8 * 600e12
    older = {"seconds": 3600.0, "processes": 1, "precision": "bf16", "device_tflops": 600.0}
    assert paper_way_cost(older) is None  # its one rate was bf16's: not the paper's way
    assert paper_way_cost({**older, "precision": "fp32"}) == 3600 * 600e12
