"""bench/gpu_suite.py: what a session lent a GPU runs, kept working while none is lent.

The smoke run is the device sequence (install, device, decode, train, Multi30k through
snakemake) at CPU sizes, the call's parts in a bare virtual environment as on the device;
collect then files what it wrote as a device call's $OUT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from importlib.metadata import version

import pytest

from tests.conftest import PROJECT, SHARED_DATA, shared

sys.path.insert(0, str(PROJECT / "bench"))
import gpu_suite  # noqa: E402

# The device call brings back at most 8 files (the device tool's limit).
DEVICE_FILE_LIMIT = 8


def suite(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    command = [sys.executable, str(PROJECT / "bench" / "gpu_suite.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=PROJECT)


def test_one_call_takes_the_headline_figures_first_and_its_caps_fit_its_budget():
    """One device call of about 7 minutes must return training's MFU and the decode time even
    when it starts late: those parts come first, and every capped part fits the budget."""
    assert gpu_suite.ONE_CALL == (
        "device",
        "train_base",
        "decode_proxy",
        "decode_base",
        "train_big",
        "extras",
    )
    assert gpu_suite.PARTS == (*gpu_suite.ONE_CALL, "multi30k")
    capped = ["install", *gpu_suite.ONE_CALL]
    caps = [gpu_suite.PART_CAPS_S[part] for part in capped]
    assert caps[-1] is None  # the extras take what is left
    assert sum(caps[:-1]) <= gpu_suite.CALL_BUDGET_S <= 300  # room for an A/B call after it
    assert gpu_suite.PART_CAPS_S["device"] <= 25
    assert gpu_suite.CALL_BUDGET_S < gpu_suite.CALL_TIMEOUT_S <= 600  # the device's limit


def test_the_extras_are_picked_by_name():
    """The smoke run's extras and a call's --extras name them, so that a new extra moves no
    other; an unknown name is refused before anything runs."""
    assert set(gpu_suite.SMOKE_EXTRAS) <= set(gpu_suite.EXTRAS)
    assert gpu_suite.EXTRAS[:3] == ("sync_check", "levers", "attention")  # wanted first
    result = suite("run", "--out", "unused", "--extras", "levers,no_such_extra")
    assert result.returncode == 2 and "no_such_extra" in result.stderr
    assert "compiled_layers" in result.stderr  # the message lists the names there are


def test_every_trainer_a_part_names_is_a_trainer_of_train_throughput():
    """The headline's and the levers' trainers are train_throughput.py's names (its --trainers
    refuses others, which a call would learn only on the device)."""
    import train_throughput

    named = ",".join([gpu_suite.BASE_TRAINERS, gpu_suite.BIG_TRAINERS, gpu_suite.LEVER_TRAINERS])
    assert set(named.split(",")) <= set(train_throughput.TRAINERS)
    assert set(gpu_suite.LEVER_TRAINERS.split(",")) == {
        "ours_real_rows", "ours_fused_norm", "ours_math_attention", "ours_efficient_attention"
    }  # fmt: skip


def test_a_failed_install_is_logged_and_the_parts_run_on_what_is_there(tmp_path):
    """Install never blocks measuring: a pack whose wheels cannot be installed (here a pin
    with no wheel) leaves the parts to the machine's own packages."""
    pack, out = tmp_path / ".device", tmp_path / "out"
    (pack / "wheels").mkdir(parents=True)
    (pack / "requirements.txt").write_text("no-such-package-aiayn==1.0\n")
    result = suite(  # smoke: CPU-sized caps; --install: the pack is still installed
        "run",
        "--smoke",
        "--install",
        "--parts",
        "device",
        "--pack",
        str(pack),
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "suite.json").read_text())
    assert report["install"].startswith("failed (exit 1) as a whole; one by one:")
    assert "no-such-package-aiayn==1.0 failed" in report["install"]
    assert report["parts"]["device"]["status"] == "done"
    assert json.loads((out / "device.json").read_text())["bf16_tflops"] > 0
    assert "the parts run on the image's packages" in (out / "suite.log").read_text()


def check_the_call(out) -> tuple[dict, dict, dict]:
    """What the device call (every part of ONE_CALL, at smoke size) wrote to `out`: its report,
    and the proxy's and the headline's decode runs, which collect files."""
    report = json.loads((out / "suite.json").read_text())
    assert list(report["parts"]) == list(gpu_suite.ONE_CALL)
    assert all(part["status"] == "done" for part in report["parts"].values()), report
    returned = sorted(path.name for path in out.iterdir())
    assert len(returned) <= DEVICE_FILE_LIMIT and all(path.is_file() for path in out.iterdir())
    assert returned == [
        "decode.prof.txt",
        "decode_speed.json",
        "device.json",
        "suite.json",
        "suite.log",
        "train.prof.txt",
        "train_throughput.json",
    ]

    device = json.loads((out / "device.json").read_text())
    assert device["bf16_tflops"] > 0 and device["fp32_tflops"] > 0 and device["torch"]
    # decode_proxy (a random model, outputs capped at source length), decode_base (trained;
    # no generate() in the headline, no naive), then the extras' naive decoder
    decode = json.loads((out / "decode_speed.json").read_text())["runs"]
    assert [run["batch_tokens"] for run in decode] == [400, 400, 400]
    assert [run["repeats"] for run in decode] == [1, 1, 1]
    assert [run["max_length_offset"] for run in decode] == [0, 50, 50]
    proxy, trained = decode[0], decode[1]
    assert proxy["model"].startswith("tiny (random initialisation") and "cut" not in proxy
    assert trained["naive_recompute"] == "skipped: --no-naive"
    assert trained["hf_marian_generate"] == "skipped: --no-peer"
    assert trained["ancestry_same_translations"] == 1.0  # decode_base's cache A/B, in fp32
    # decode_base times a model our trainer trained first, and how long its outputs are
    assert trained["model"].startswith("tiny trained on src-train.txt, 1000 target tokens a step")
    assert trained["ours_cached"]["output_to_reference_length"] >= 0
    training = trained["training"]  # checked on newstest2013 at steps 2 and 3, or stopped at 2
    first, last = training["dev"][0], training["dev"][-1]
    assert first["step"] == 2 and first["length_ratio"] > 0 and 0 <= first["empty"] <= 1
    assert 0 <= first["at_length_limit"] <= 1 and first["median_sentence_ratio"] >= 0
    assert last["step"] == training["steps"] and training["first_loss"] > 0
    assert (training["stopped_by"] == "dev gates") == last["passed"]
    assert last["passed"] == (0.8 <= last["length_ratio"] <= 1.25 and last["empty"] <= 0.02
                              and 0.8 <= last["median_sentence_ratio"] <= 1.25
                              and last["at_length_limit"] <= 0.02)  # fmt: skip
    assert training["steps"] == 3 or training["stopped_by"] == "dev gates"
    by_alpha = training["dev_bleu_by_alpha"]  # alpha chosen on dev, then the test set timed
    assert len(by_alpha) == 3 and trained["alpha"] == training["alpha"]
    assert by_alpha[str(training["alpha"])] == max(by_alpha.values())
    assert decode[2]["model"].startswith("tiny (random initialisation")
    assert decode[2]["same_translations"] == 1.0 and decode[2]["speedup"] > 0
    assert "aten::" in (out / "decode.prof.txt").read_text()
    train = json.loads((out / "train_throughput.json").read_text())
    assert train["measured_peak_tflops"] == device["bf16_tflops"]
    # one row per preset, merged from the parts' runs: ours and its A/Bs; naive (an extra)
    (row,) = train["results"]
    ours = row["ours"]["target_tokens_per_s"]
    assert row["preset"] == "tiny" and ours > 0 and row["model_flops_per_target_token"] > 0
    assert "mfu_vs_measured_peak" in row["ours"]
    assert report["projected_hours_one_device"] == {}  # tiny is none of Table 2's models
    naive = row["naive_fp32_nn_transformer"]["target_tokens_per_s"]
    assert naive > 0 and row["speedup"] == pytest.approx(ours / naive, abs=0.01)
    without_waits = row["ours_sync_free"]  # bf16 as on a GPU: it ran (#46 item 1)
    assert without_waits["sync_free"] == "losses, skips and schedule"
    assert without_waits["skipped_steps"] == 0 and row["sync_free_speedup"] == pytest.approx(
        without_waits["target_tokens_per_s"] / ours, abs=0.01
    )
    assert row["ours"]["loss_kernel"] == "sliced" and row["ours"]["warmup_seconds"] > 0
    step = row["ours"]  # what the step held and took (#67): real tokens, not the budget
    assert (
        0 < step["real_target_tokens_per_step"] <= 1000
        and step["padded_per_real_target_token"] >= 1
    )
    assert 0 < step["host_step_ms"] <= step["step_ms"] and step["device_step_ms"] is None
    assert step["peak_memory_mib"] > 0 and step["peak_memory_of"] == "process RSS"
    assert row["fused_qkv_speedup"] > 0 and row["one_micro_batch_speedup"] > 0  # the A/Bs ran
    probe = row["ours_host_probe"]  # the same step at 512 tokens: what the host costs a step
    assert 0 < probe["real_target_tokens_per_step"] <= 512 and probe["step_ms"] > 0
    check = report["sync_check"]  # sync_free's step against DeepSpeed's, an overflow injected
    assert check["passed"] and check["skipped_steps"] == [1, 1] and check["same_weights"]
    assert check["no_sync_inside_step"] == "not checked: CUDA only"  # the sync mode is CUDA's
    table1 = report["complexity_gpu"]  # Table 1's figure on the device (#76), each layer type
    assert table1["grid"]["lengths"] == [8, 16] and len(table1["layers"]) == 6
    assert all(min(layer["seconds"]) > 0 for layer in table1["layers"].values())
    assert row["ours"]["precision"] == without_waits["precision"] == "bf16"
    # base also in fp16 (what a V100 gets), on a GPU only; every run of ours says its loss
    assert row["ours_fp16"] == "skipped: fp16 needs a CUDA GPU"
    assert row["ours"]["loss_per_token"] > 0 and without_waits["loss_per_token"] > 0
    profile = (out / "train.prof.txt").read_text()  # where our training step's time goes
    assert profile.startswith("2+2 layers, d_model 128: 2 steps of 1000 target tokens, sorted by")
    assert "aten::" in profile
    return report, proxy, trained


@pytest.mark.workflow
@pytest.mark.timeout(1800)  # install, the call and Multi30k: about 8 minutes on 2 cores
def test_the_device_call_rehearsed_in_a_bare_environment_then_multi30k_and_collect(tmp_path):
    """The GPU machine's way, rehearsed at smoke size: a fresh virtual environment holding only
    torch (and the few packages the pack counts on the image for) installs everything else
    from the pack's wheels with no index, then takes every part of the one call in order;
    Multi30k (a later lend's command, which needs the workflow engine) runs here; collect
    files both as a device call's $OUT."""
    shared("wmt14_newstest", "full", "newstest2014.en-de.en")
    shared("multi30k", "raw_gz", "train.en.gz")
    shared("opennmt_toy_ende", "src-train.txt")
    pack = tmp_path / ".device"
    out, later, work, checkout = (tmp_path / name for name in ("out", "later", "work", "checkout"))
    result = suite("pack", "--this-python", "--folder", str(pack), "--shared", str(SHARED_DATA))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (pack / "python").read_text().strip() == gpu_suite.THIS_PYTHON
    left = (pack / "left_to_the_machine.txt").read_text().split()
    assert "torch" in left and set(left) <= gpu_suite.LEFT_TO_THE_DEVICE
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    image = [f"{name}=={version(name)}" for name in left]  # torch, numpy, ...
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-compile", *image],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    bare = subprocess.run([python, "-c", "import deepspeed"], capture_output=True, timeout=60)
    assert bare.returncode != 0  # nothing but the image's share yet

    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH",)}
    # its own build of DeepSpeed's CPU op: never a lock in the cache the other tests share
    env["TORCH_EXTENSIONS_DIR"] = str(tmp_path / "torch_extensions")
    command = [python, str(PROJECT / "bench" / "gpu_suite.py"), "run", "--smoke", "--install",
               "--pack", str(pack), "--out", str(out), "--work", str(work)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report, proxy, trained = check_the_call(out)
    assert report["install"] == "done", (out / "suite.log").read_text()[-3000:]
    packages = json.loads((out / "device.json").read_text())["packages"]
    pins = gpu_suite.pinned_versions()  # what the call ran on: the pack's, not the machine's
    assert {name: packages[name] for name in pins} == pins and set(pins) == set(
        gpu_suite.CALL_PACKAGES
    )

    # Multi30k on the GPU: a command of its own, for a later lend
    result = suite(
        "run", "--smoke", "--parts", "multi30k", "--out", str(later), "--work", str(work)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    later_report = json.loads((later / "suite.json").read_text())
    assert later_report["parts"]["multi30k"]["status"] == "done"
    assert later_report["install"] == "skipped: --smoke (the packages here serve)"
    with tarfile.open(later / "multi30k_gpu.tar.gz") as archive:
        names = set(archive.getnames())
        score = json.load(archive.extractfile("scores/multi30k_gpu_small/averaged/val.json"))
    assert {"tables/table2.md", "run.json"} <= names  # the study's results
    for name in ("multi30k_gpu_small", "multi30k_gpu_base"):  # both trained, both scored
        assert f"runs/{name}/train.json" in names
        assert f"scores/{name}/averaged/test_2016_flickr.json" in names
    assert score["sacrebleu"]["score"] >= 0

    for returned in (out, later):
        result = suite("collect", str(returned), "--into", str(checkout))
        assert result.returncode == 0, result.stderr[-3000:]
    results = checkout / "bench" / "results"
    assert sorted(path.name for path in results.iterdir()) == [
        "complexity-gpu.png",
        "decode_profile-gpu.txt",
        "decode_proxy-gpu.json",
        "decode_speed-gpu.json",
        "decode_speed_sweep-gpu.json",
        "device-gpu.json",
        "suite-gpu.json",
        "train_profile-gpu.txt",
        "train_throughput-gpu.json",
    ]
    quoted = json.loads((results / "decode_speed-gpu.json").read_text())
    assert quoted == trained  # the headline run, base at 16k tokens, in bench's own format
    assert json.loads((results / "decode_proxy-gpu.json").read_text()) == proxy
    assert json.loads((results / "suite-gpu.json").read_text())["parts"] == report["parts"]
    assert (checkout / "results" / "multi30k_gpu" / "run.json").exists()
    assert (checkout / "results" / "multi30k_gpu" / "tables" / "table2.md").exists()
    assert sorted(p.name for p in (checkout / "results").iterdir()) == ["multi30k_gpu"]


def test_a_part_over_its_cap_is_cut_and_the_others_still_run(tmp_path):
    """The device call has a hard limit: a part that overruns is stopped at its own cap, what
    was finished stays, and the run says which part did not finish."""
    out = tmp_path / "out"
    out.mkdir()
    import time

    started = time.monotonic()
    status = gpu_suite.run_capped(
        [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(600)"],
        time.monotonic() + 6,
        out,
    )
    # far below the part's 600 s on any machine: the cap, not the part, ended it
    assert status == "cut at its time cap" and time.monotonic() - started < 120
    assert "started" in (out / "suite.log").read_text()
    assert gpu_suite.run_capped(["true"], time.monotonic() + 1, out).startswith("not started")
    assert gpu_suite.run_capped(["false"], time.monotonic() + 30, out) == "failed (exit 1)"


def test_pack_copies_the_data_and_prints_commands_a_device_call_accepts(tmp_path):
    shared("multi30k", "raw_gz", "train.en.gz")
    folder = tmp_path / ".device"
    result = suite("pack", "--no-wheels", "--folder", str(folder), "--shared", str(SHARED_DATA))
    assert result.returncode == 0, result.stderr[-3000:]
    for name, relative in gpu_suite.DATA_FILES.items():
        assert (folder / "data" / name).read_bytes() == (SHARED_DATA / relative).read_bytes()
    commit = (folder / "commit").read_text().strip()
    lines = result.stdout.splitlines()
    assert 'carry: [".device"]' in lines
    commands = [line for line in lines if line.startswith("PYTHONUNBUFFERED=1")]
    assert len(commands) == 2 and all(len(command) < 2000 for command in commands)
    assert all(f"AIAYN_COPIED_FROM_COMMIT={commit} " in command for command in commands)
    assert "--parts" not in commands[0] and f"--budget {gpu_suite.CALL_BUDGET_S}" in commands[0]
    assert "--parts multi30k" in commands[1]  # for a later lend
    assert f"device command, the call (timeout_s {gpu_suite.CALL_TIMEOUT_S}):" in lines


def test_the_device_wheels_are_the_pinned_packages_and_what_they_need_but_torch():
    pins = gpu_suite.pinned_versions(gpu_suite.MULTI30K_PACKAGES)
    assert set(pins) == set(gpu_suite.MULTI30K_PACKAGES)
    packages = gpu_suite.closure(pins)
    assert {name: packages[name] for name in pins} == pins
    assert not set(packages) & gpu_suite.LEFT_TO_THE_DEVICE  # torch is the device's own
    assert "pydantic" in packages and "pulp" in packages  # deepspeed's and snakemake's needs
    assert all(version(name) == found for name, found in packages.items())
    # the one call's pack leaves the workflow engine out (pulp alone is 16 MiB)
    call = gpu_suite.closure(gpu_suite.pinned_versions())
    assert "deepspeed" in call and "transformers" in call and "pulp" not in call


def test_fetch_wheels_downloads_binaries_and_builds_source_only_packages(tmp_path):
    """connection-pool (a snakemake need) is published as source only: pack builds it here."""
    built = gpu_suite.fetch_wheels(
        {"connection-pool": version("connection-pool"), "pyyaml": version("pyyaml")}, tmp_path
    )
    assert built == [f"connection-pool=={version('connection-pool')}"]
    wheels = sorted(path.name for path in tmp_path.iterdir())
    assert wheels[0].startswith("connection_pool-") and wheels[0].endswith("-py3-none-any.whl")
    assert wheels[1].startswith("pyyaml-") and "cp312" in wheels[1]


def test_table2_hours_are_projected_from_our_measured_rate():
    """The paper's steps (base 100k, big 300k) of 25000 target tokens at our tokens per second;
    EN-DE and EN-FR train the same two models for the same steps."""
    rows = [
        {"preset": "base", "ours": {"target_tokens_per_s": 250_000}},
        {"preset": "big", "ours": {"target_tokens_per_s": 125_000}},
        {"preset": "tiny", "ours": {"target_tokens_per_s": 9}},
    ]
    hours = gpu_suite.projected_hours(rows)
    base, big = 100_000 * 25000 / 250_000 / 3600, 300_000 * 25000 / 125_000 / 3600
    assert hours == {
        "base": round(base, 1),
        "big": round(big, 1),
        "table2_en_de": round(round(base, 1) + round(big, 1), 1),
        "table2_en_fr": round(round(base, 1) + round(big, 1), 1),
    }
    assert gpu_suite.projected_hours(rows[:1]) == {"base": round(base, 1)}  # big not measured
