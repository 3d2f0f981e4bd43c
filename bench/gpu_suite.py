"""The GPU figures from one device call of about 5 minutes, with no manual step; CI runs it on CPU.

    python bench/gpu_suite.py pack                   # here: .device/, then the device command
    python bench/gpu_suite.py run --out $OUT         # there: install from .device/, the parts
    python bench/gpu_suite.py collect DIR            # here: DIR -> bench/results/, results/
    python bench/gpu_suite.py run --smoke --out DIR  # the same on CPU at tiny sizes (CI)

The parts run in PARTS order, what matters first, each under its cap (PART_CAPS_S; together they
fit the call's budget, so a call that started late still returns the headline figures): the
device's packages and matmul rates, base's training step, base's decoding of newstest2014
(a random model's outputs capped at source length, then a trained model's),
big's step, then the extras by name (EXTRAS) with what is left. A part that fails says so in
suite.json and the others still run. The run ends with the hours Table 2's training would take
on one such device. Each result is written under --out the moment it exists, so a call cut at
its limit returns what it took; a call returns at most 8 files.
`--parts multi30k` (a later lend, after `pack --multi30k`) runs configs/multi30k_gpu.yaml.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

import benchlib  # bench/, beside this script

PROJECT = benchlib.PROJECT
PACK = PROJECT / ".device"
SHARED_DATA = Path(os.environ.get("AIAYN_SHARED_DATA", PROJECT.parent / "shared" / "data"))
PARTS = ("device", "train_base", "decode_proxy", "decode_base", "train_big", "extras", "multi30k")
ONE_CALL = PARTS[:-1]  # the default; Multi30k on the GPU is a command for a later lend
# Seconds each may take at most; None: whatever the budget has left. The install and the capped
# parts of ONE_CALL fit CALL_BUDGET_S together (a test checks).
PART_CAPS_S = {"install": 40, "device": 10, "train_base": 55, "decode_proxy": 20,
               "decode_base": 120, "train_big": 55, "extras": None, "multi30k": None}  # fmt: skip
CALL_BUDGET_S = 300  # of the device's 15 minutes a session: room for an A/B call after it
CALL_TIMEOUT_S = CALL_BUDGET_S + 60  # the device call's timeout_s: the budget, then collecting
# On a CPU shared with other tests, from cold caches, caps and budget stretch by this much: a
# part killed while DeepSpeed builds its CPU op leaves a lock that stalls later starts.
SMOKE_SLACK = 5

# What the device needs beyond its image: these pins from pyproject.toml, and what they need.
# snakemake (and pulp, 16 MiB) would push a call's tree over its 64 MiB: Multi30k's pack only.
CALL_PACKAGES = ("deepspeed", "sacrebleu", "sacremoses", "sentencepiece", "transformers")
MULTI30K_PACKAGES = (*CALL_PACKAGES, "snakemake", "snakemake-executor-plugin-slurm")
# On the device's image already and too large to carry: never followed into.
LEFT_TO_THE_DEVICE = frozenset({"torch", "numpy", "pandas", "lxml", "pyarrow", "hf-xet"})
DEVICE_PYTHON = "3.12"  # the device image's python3
THIS_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
PACK_LIMIT_MIB, TRAVEL_LIMIT_MIB = 60, 64  # the pack; the call's tree with the pack
DATA_FILES = {  # .device/data/<name>: ../shared/data/<path>
    "newstest2014.en-de.en": "wmt14_newstest/full/newstest2014.en-de.en",
    "newstest2014.en-de.de": "wmt14_newstest/full/newstest2014.en-de.de",
    "newstest2014-filtered.tok.de": "wmt14_newstest/filtered/newstest2014-filtered.tok.de",
    # decode_base's training stops by its outputs' length on newstest2013 (the paper's dev set)
    "newstest2013.en": "wmt14_newstest/dev/newstest2013.en",
    "newstest2013.de": "wmt14_newstest/dev/newstest2013.de",
    # 10000 WMT pairs: decode_base trains base on them first, so that its model stops
    "wmt_sample/src-train.txt": "opennmt_toy_ende/src-train.txt",
    "wmt_sample/tgt-train.txt": "opennmt_toy_ende/tgt-train.txt",
    **{
        f"multi30k/{split}.{lang}.gz": f"multi30k/raw_gz/{split}.{lang}.gz"
        for split in ("train", "val", "test_2016_flickr")
        for lang in ("en", "de")
    },
}


def log(message: str, out: Path | None = None) -> None:
    line = f"[gpu_suite {time.strftime('%H:%M:%S')}] {message}"
    print(line, file=sys.stderr, flush=True)
    if out is not None:
        with open(out / "suite.log", "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


# ---------------------------------------------------------------------------------------- pack


def pinned_versions(names: tuple[str, ...] = CALL_PACKAGES) -> dict[str, str]:
    """name -> version of these packages as pyproject.toml pins them."""
    from packaging.requirements import Requirement

    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    requirements = map(Requirement, [*project["dependencies"],
                                     *project["optional-dependencies"]["dev"]])  # fmt: skip
    return {r.name: str(r.specifier).removeprefix("==") for r in requirements if r.name in names}


def closure(pins: dict[str, str], python: str = DEVICE_PYTHON, left: set | None = None):
    """Every package the pins need on that Python, at the versions installed here (the ones the
    tests ran with), from the installed metadata; none of LEFT_TO_THE_DEVICE (those reached are
    added to `left`)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    environment = {"python_version": python, "python_full_version": f"{python}.0", "extra": ""}
    found: dict[str, str] = {}
    pending = list(pins)
    while pending:
        name = canonicalize_name(pending.pop())
        if name in LEFT_TO_THE_DEVICE:
            (left if left is not None else set()).add(name)
            continue
        if name in found:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            sys.exit(f"pack: {name} is not installed here; first: pip install -e '.[dev]'")
        if name in pins and dist.version != pins[name]:
            sys.exit(f"pack: {name} {dist.version} is installed, pyproject pins {pins[name]}")
        found[name] = dist.version
        for requirement in map(Requirement, dist.requires or []):
            if requirement.marker is None or requirement.marker.evaluate(environment):
                pending.append(requirement.name)
    return found


def pip(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"]
    return subprocess.run(command, capture_output=True, text=True)


def fetch_wheels(packages: dict[str, str], folder: Path, python: str = DEVICE_PYTHON) -> list:
    """Binary wheels for that Python (x86-64 Linux) where PyPI has them; the rest (published as
    source only, deepspeed among them) built into wheels here. Returns the ones built."""
    folder.mkdir(parents=True, exist_ok=True)
    platforms = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
                 "manylinux1_x86_64", "any")  # fmt: skip
    tags = ["--python-version", python, "--implementation", "cp"]
    for abi in (f"cp{python.replace('.', '')}", "abi3", "none"):
        tags += ["--abi", abi]
    for platform in platforms:
        tags += ["--platform", platform]
    binary = [f"{name}=={version}" for name, version in sorted(packages.items())]
    built = []
    while binary:
        result = pip("download", "--no-deps", "--only-binary=:all:", *tags, "-d", str(folder),
                     *binary)  # fmt: skip
        if result.returncode == 0:
            break
        missing = next((pin for pin in binary if f"requirement {pin}" in result.stderr), None)
        if missing is None:
            sys.exit(f"pack: pip download failed:\n{result.stderr[-3000:]}")
        binary.remove(missing)
        built.append(missing)
    for pin in built:
        result = pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(folder), pin)
        if result.returncode != 0:
            sys.exit(f"pack: could not build a wheel of {pin}:\n{result.stderr[-3000:]}")
    here = "-cp" + THIS_PYTHON.replace(".", "") + "-"
    impure = [w.name for w in folder.glob("*.whl") if python != THIS_PYTHON and here in w.name]
    if impure:
        sys.exit(f"pack: built for this Python ({THIS_PYTHON}), not {python}: {impure}")
    return built


def mib(files) -> float:
    return sum(f.stat().st_size for f in files if f.is_file()) / 2**20


def pack(args) -> None:
    """.device/: the data, the wheels, the commit; then the device command(s) to run."""
    if args.folder.exists():
        shutil.rmtree(args.folder)
    for name, relative in DATA_FILES.items():
        if not (args.shared / relative).exists():
            sys.exit(f"pack: {args.shared / relative} is missing (or set AIAYN_SHARED_DATA)")
        (args.folder / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.shared / relative, args.folder / "data" / name)
    if not args.no_wheels:
        pins = pinned_versions(MULTI30K_PACKAGES if args.multi30k else CALL_PACKAGES)
        python, left = (THIS_PYTHON if args.this_python else DEVICE_PYTHON), set()
        built = fetch_wheels(closure(pins, python, left), args.folder / "wheels", python)
        log(f"pack: wheels for Python {python}; built here from source: {built or 'none'}")
        (args.folder / "requirements.txt").write_text("".join(f"{n}=={v}\n" for n, v in
                                                              sorted(pins.items())))  # fmt: skip
        (args.folder / "python").write_text(python + "\n")
        # what the pack counts on the machine's image to hold: a rehearsal installs these
        (args.folder / "left_to_the_machine.txt").write_text("".join(f"{n}\n" for n in
                                                                     sorted(left)))  # fmt: skip
    commit = benchlib.tree_commit()
    if commit.endswith("-dirty"):
        log("pack: the tree differs from its commit; commit first, or the figures say -dirty")
    (args.folder / "commit").write_text(commit + "\n")
    size = mib(args.folder.rglob("*"))
    listed = benchlib.git("ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout
    names = [name for name in listed.split("\0") if name]
    tree = mib(PROJECT / name for name in names)
    if size > PACK_LIMIT_MIB or size + tree > TRAVEL_LIMIT_MIB:
        limits = f"{PACK_LIMIT_MIB} MiB packed, {TRAVEL_LIMIT_MIB} in all"
        by_top: dict[str, list[Path]] = {}
        for name in names:
            by_top.setdefault(name.split("/")[0], []).append(PROJECT / name)
        largest = sorted(by_top, key=lambda top: -mib(by_top[top]))[:3]
        sys.exit(f"pack: {size:.1f} MiB packed + {tree:.1f} MiB of tree: over the call's {limits}"
                 f"; the call carries what git does not ignore, largest first: {largest}: "
                 "git-ignore what it need not carry (a virtual environment, data)")  # fmt: skip
    print(f"packed {args.folder}/: {size:.1f} MiB (+ {tree:.1f} MiB of tree)")
    print('carry: [".device"]')
    prefix = f"PYTHONUNBUFFERED=1 AIAYN_COPIED_FROM_COMMIT={commit} python3 bench/gpu_suite.py run"
    print(f"device command, the call (timeout_s {CALL_TIMEOUT_S}):\n"
          f"{prefix} --out $OUT --budget {CALL_BUDGET_S}")  # fmt: skip
    print("device command, a later lend, after `pack --multi30k` (timeout_s 600):\n"
          f"{prefix} --out $OUT --parts multi30k --budget 540")  # fmt: skip


# ----------------------------------------------------------------------------------------- run


def run_capped(command: list, deadline: float, out: Path, cwd: Path = PROJECT) -> str:
    """Run command with its output appended to suite.log; kill its whole process group at the
    deadline. Returns 'done', 'failed (exit N)' or 'cut at its time cap'."""
    command, remaining = [str(word) for word in command], deadline - time.monotonic()
    if remaining < 5:
        return "not started: no time left"
    log(f"$ {' '.join(command)}  (cap {remaining:.0f} s)", out)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        str(PROJECT / "src"), os.environ.get("PYTHONPATH")])))  # fmt: skip
    if "AIAYN_COPIED_FROM_COMMIT" not in env and (PACK / "commit").exists():
        env["AIAYN_COPIED_FROM_COMMIT"] = (PACK / "commit").read_text().strip()
    with open(out / "suite.log", "a", encoding="utf-8") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, cwd=cwd,
                                   env=env, start_new_session=True)  # fmt: skip
        try:
            code = process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return "cut at its time cap"
    return "done" if code == 0 else f"failed (exit {code})"


def install(pack: Path, out: Path, deadline: float, smoke: bool) -> str:
    """The pinned packages from .device/wheels, without network, over the device's image; one
    that will not install does not keep the others out."""
    if smoke:  # the wheels are the device's Python's; here the project's install serves
        return "skipped: --smoke (the packages here serve)"
    if not (pack / "wheels").is_dir():
        return "skipped: no .device/wheels (the packages here serve)"
    python = (pack / "python").read_text().strip() if (pack / "python").exists() else None
    if python is not None and python != THIS_PYTHON:
        return f"skipped: the wheels are for Python {python}, this is {THIS_PYTHON}"
    # --no-compile: Python compiles a module when it is first imported; pip would first compile
    # every file of every package, most never imported by the call
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
               pack / "wheels", "--disable-pip-version-check", "--no-compile"]  # fmt: skip
    status = run_capped([*command, "-r", pack / "requirements.txt"], deadline, out)
    if status == "done":
        return status
    pins = (pack / "requirements.txt").read_text().split()
    each = {pin: run_capped([*command, pin], deadline, out) for pin in pins}
    return f"{status} as a whole; one by one: " + ", ".join(f"{p} {s}" for p, s in each.items())


def data_file(name: str) -> Path:
    """A data file from .device/data, or from ../shared/data where it was not packed (here)."""
    packed = PACK / "data" / name
    return packed if packed.exists() else SHARED_DATA / DATA_FILES[name]


def python(script: str, *args) -> list:
    return [sys.executable, PROJECT / "bench" / script, *args]


TRAIN_SIZES = {  # train_throughput.py per preset: the paper's step, 25000 target tokens
    "base": ["--presets", "base", "--batch-tokens", 25000],
    "big": ["--presets", "big", "--batch-tokens", 12500, "--steps", 12],  # 2 micro-batches
}
# bf16 as on a GPU: the smoke takes DeepSpeed's bf16 optimizer and the step without waits
SMOKE_TRAIN = ["--presets", "tiny", "--tokens", 1000, "--vocab", 500, "--steps", 2, "--warmup", 1,
               "--pairs", 500, "--precision", "bf16"]  # fmt: skip
SMOKE_TRAIN_SIZES = {"base": [*SMOKE_TRAIN, "--batch-tokens", 1000],
                     "big": [*SMOKE_TRAIN, "--batch-tokens", 500]}  # fmt: skip
# ours (on CUDA, DeepSpeed's bf16 optimizer with ZeRO 1 and flat bf16 gradients, the loss through
# torch.compile) and its A/Bs: the step that never waits for the device, for base the fused
# Q/K/V projections and fp16 (dynamic loss scaling, what `auto` picks on a V100 or T4), for big
# one micro-batch of 25000 tokens. #67's other levers are the extra `levers`.
BASE_TRAINERS = "ours,ours_sync_free,ours_fused_qkv,ours_fp16"
BIG_TRAINERS = "ours,ours_sync_free,ours_one_micro_batch"
LEVER_TRAINERS = "ours_real_rows,ours_fused_norm,ours_math_attention,ours_efficient_attention"


def train_run(args, deadline, preset: str, trainers: str | None, profile=False) -> str:
    """One train_throughput.py run of some trainers on one preset, one round each (None: the
    profile only), merged into train_throughput.json by preset, also when its cap cut it."""
    device, record = args.out / "device.json", args.out / "train_throughput.run.json"
    peak = json.loads(device.read_text()).get("bf16_tflops") if device.exists() else None
    sizes = (SMOKE_TRAIN_SIZES if args.smoke else TRAIN_SIZES)[preset]
    command = python("train_throughput.py", *sizes, "--rounds", 1, "--out", record)
    command += ["--trainers", trainers] if trainers else ["--profile-only"]
    command += ["--measured-peak-tflops", peak] if peak else []
    command += ["--profile", args.out / "train.prof.run.txt"] if profile else []
    status = run_capped(command, deadline, args.out)
    if (args.out / "train.prof.run.txt").exists():  # train.prof.txt: the presets' tables so far
        with open(args.out / "train.prof.txt", "a", encoding="utf-8") as handle:
            handle.write((args.out / "train.prof.run.txt").read_text())
        (args.out / "train.prof.run.txt").unlink()
    if record.exists():
        merge_train_record(args.out / "train_throughput.json", json.loads(record.read_text()))
        record.unlink()
    return status


def merge_train_record(path: Path, new: dict) -> None:
    """Rows of the same preset merge trainer by trainer; their ratios are recomputed."""
    merged = json.loads(path.read_text()) if path.exists() else {**new, "results": []}
    rows = {row["preset"]: row for row in merged["results"]}
    for row in new["results"]:
        rows.setdefault(row["preset"], {}).update(row)
    merged["results"] = [benchlib.with_train_ratios(row) for row in rows.values()]
    benchlib.write_json(path, merged)


# decode_base's model: base trained on the WMT sample first, so that it emits EOS where a
# translation ends, as a random model does not: at most 2000 steps of 8000 target tokens or 45 s,
# stopping once its newstest2013 outputs are 0.8-1.25 times the references' length
DECODE_TRAINING = ["--train-steps", 2000, "--train-tokens", 8000, "--train-seconds", 45,
                   "--train-peak-lr", 1e-3, "--dev-every", 150, "--vocab", 8000]  # fmt: skip
SMOKE_DECODE = ["--preset", "tiny", "--sentences", 12, "--vocab", 1000, "--batch-tokens", 400]
SMOKE_DECODE_TRAINING = ["--train-steps", 3, "--train-tokens", 1000, "--train-warmup", 1,
                         "--dev-every", 2, "--dev-sentences", 4]  # fmt: skip


def decode_run(args, deadline, preset: str, *options, trained: bool = False) -> str:
    """One decode_speed.py run on all of newstest2014 (12 sentences at smoke size), 16k source
    tokens a batch, once (`trained`: on base trained on the WMT sample first, alpha chosen on
    newstest2013); appended to decode_speed.json's runs, also what a run cut at its cap wrote."""
    record = args.out / "decode_speed.run.json"
    size = SMOKE_DECODE if args.smoke else ["--preset", preset, "--batch-tokens", 16000]
    command = python("decode_speed.py", "--source", data_file("newstest2014.en-de.en"), *size,
                     "--repeats", 1, "--out", record, *options)  # fmt: skip
    if trained:
        command += ["--train-source", data_file("wmt_sample/src-train.txt"), "--train-target",
                    data_file("wmt_sample/tgt-train.txt"), "--reference",
                    data_file("newstest2014.en-de.de"), "--dev-source",
                    data_file("newstest2013.en"), "--dev-reference", data_file("newstest2013.de"),
                    *(SMOKE_DECODE_TRAINING if args.smoke else DECODE_TRAINING)]  # fmt: skip
    if "--profile" not in options:
        command.append("--no-naive")
    status = run_capped(command, deadline, args.out)
    if record.exists():
        path = args.out / "decode_speed.json"
        runs = json.loads(path.read_text())["runs"] if path.exists() else []
        runs.append(json.loads(record.read_text()) | ({} if status == "done" else {"cut": status}))
        benchlib.write_json(path, {"bench": "decode_speed", "runs": runs})
        record.unlink()
    return status


def into_suite(args, deadline, script: str, size: list) -> str:
    """A standalone benchmark (sync_check.py: train.sync_free's step under CUDA's sync debug
    mode, an injected overflow; attention_speed.py: SDPA's backends at base's and big's widths)
    whose record goes into suite.json under its name: a call returns at most 8 files."""
    name = script.removesuffix(".py")
    record = args.out / f"{name}.run.json"
    status = run_capped(python(script, *size, "--out", record), deadline, args.out)
    if record.exists():
        args.report[name] = json.loads(record.read_text())
        record.unlink()
    return status


def part_runs(args) -> dict:
    """The parts and the extras by name, each a function of its deadline. The extras, most
    wanted first: the sync check of train.sync_free; base with #67's levers (real target rows
    only, residual + dropout + LayerNorm fused, attention through SDPA's math or memory-efficient
    kernels) and the attention microbenchmark that says which backend; Table 1's figure on the
    device (complexity_gpu.py, #76); base with each layer compiled on its own (#46's compile
    by region, its compile time in the warm-up's seconds);
    our step's profile; base's step at 512 tokens (what the host costs); the naive trainer; the
    naive decoder with the decoder's profile; big's naive trainer and profile. Retired, their
    figures in docs/benchmarks.md: ZeRO 2, bf16 autocast, the whole model and the decoder step
    compiled, the loss kernels' A/B, HF Marian's trainer."""
    sync_size = ["--preset", "tiny", "--tokens", 600, "--vocab", 500] if args.smoke else []
    smoke_attention = ["--tokens", 256, "--length", 16, "--steps", 1, "--repeats", 1]
    attention_size = smoke_attention if args.smoke else []
    complexity_size = ["--lengths", 8, 16, "--d", 16, "--repeats", 1] if args.smoke else []
    return {
        "device": lambda deadline: run_capped(python("gpu_suite.py", "measure-device", "--out",
            args.out / "device.json", *(["--smoke"] if args.smoke else [])), deadline, args.out),
        "train_base": lambda deadline: train_run(args, deadline, "base", BASE_TRAINERS),
        # a random base whose every output stops at its source's length: speed, no training
        "decode_proxy": lambda deadline: decode_run(args, deadline, "base", "--no-peer",
                                                    "--max-length-offset", 0),
        "decode_base": lambda deadline: decode_run(args, deadline, "base", "--cache-ab",
                                                   "--no-peer", trained=True),
        "train_big": lambda deadline: train_run(args, deadline, "big", BIG_TRAINERS),
        "multi30k": lambda deadline: multi30k_part(args, deadline),
        # the extras
        "sync_check": lambda deadline: into_suite(args, deadline, "sync_check.py", sync_size),
        "levers": lambda deadline: train_run(args, deadline, "base", LEVER_TRAINERS),
        "attention": lambda deadline: into_suite(args, deadline, "attention_speed.py",
                                                 attention_size),
        "complexity": lambda deadline: into_suite(args, deadline, "complexity_gpu.py",
                                                  complexity_size),
        "compiled_layers": lambda deadline: train_run(args, deadline, "base",
                                                      "ours_compiled_layers"),
        "train_profile": lambda deadline: train_run(args, deadline, "base", None, profile=True),
        "host_probe": lambda deadline: train_run(args, deadline, "base", "ours_host_probe"),
        "naive_trainer": lambda deadline: train_run(args, deadline, "base", "naive"),
        "decode_profile": lambda deadline: decode_run(args, deadline, "base", "--profile",
                                                      args.out / "decode.prof.txt"),
        "big_profile": lambda deadline: train_run(args, deadline, "big", "naive", profile=True),
    }  # fmt: skip


EXTRAS = tuple(n for n in part_runs(argparse.Namespace(smoke=0, out=Path())) if n not in PARTS)
# At smoke size (CI), the extras whose code paths no other part takes.
SMOKE_EXTRAS = ("sync_check", "complexity", "train_profile", "host_probe", "naive_trainer",
                "decode_profile")  # fmt: skip


def projected_hours(rows: list[dict]) -> dict:
    """Hours of Table 2's training (the paper's steps of 25000 target tokens) on one such device
    at our measured rate, per model and per language pair (EN-DE: base + big; EN-FR trains the
    same models for the same steps, at a 32000- rather than 37000-piece vocabulary)."""
    from aiayn.paper import PAPER_TRAINING

    hours = {}
    for row in rows:
        if row["preset"] in PAPER_TRAINING and isinstance(row.get("ours"), dict):
            steps = PAPER_TRAINING[row["preset"]][3]
            rate = row["ours"]["target_tokens_per_s"]
            hours[row["preset"]] = round(steps * 25000 / rate / 3600, 1)
    if set(hours) == {"base", "big"}:
        hours["table2_en_de"] = hours["table2_en_fr"] = round(hours["base"] + hours["big"], 1)
    return hours


def run(args) -> None:
    """Install (what fails there is logged, and the parts run on the image's packages), then
    the parts in PARTS order, each under its cap; suite.json is rewritten after each."""
    args.out.mkdir(parents=True, exist_ok=True)
    start, slack = time.monotonic(), SMOKE_SLACK if args.smoke else 1
    end = start + args.budget * slack
    args.report = report = {"smoke": args.smoke, "budget_s": args.budget, "parts": {}}
    log(f"run: parts {args.parts}, budget {args.budget} s", args.out)
    install_deadline = min(end, start + PART_CAPS_S["install"] * slack)
    report["install"] = install(args.pack, args.out, install_deadline, args.smoke and not
                                args.install)  # fmt: skip
    if report["install"] != "done" and not report["install"].startswith("skipped"):
        log(f"run: the install from .device/wheels {report['install']}; the parts run on the "
            "image's packages (suite.log has pip's message)", args.out)  # fmt: skip
    runs = part_runs(args)
    extras = args.extras or (SMOKE_EXTRAS if args.smoke else EXTRAS)
    runs["extras"] = lambda deadline: summary([runs[name](deadline) for name in extras])
    for part in [part for part in PARTS if part in args.parts]:
        cap = PART_CAPS_S[part]
        deadline = end if cap is None else min(end, time.monotonic() + cap * slack)
        began = time.monotonic()
        status = runs[part](deadline)
        report["parts"][part] = {"status": status, "seconds": round(time.monotonic() - began, 1)}
        log(f"run: {part}: {status}", args.out)
        for partial in args.out.glob("*.partial"):  # a write cut off at the cap
            partial.unlink()
        benchlib.write_json(args.out / "suite.json", report)
    if (args.out / "train_throughput.json").exists():
        rows = json.loads((args.out / "train_throughput.json").read_text())["results"]
        report["projected_hours_one_device"] = projected_hours(rows)
        log(f"run: Table 2's training on one such device: {projected_hours(rows)}", args.out)
    report["seconds"] = round(time.monotonic() - start, 1)
    benchlib.write_json(args.out / "suite.json", report)
    failed = [part for part, result in report["parts"].items() if result["status"] != "done"]
    if failed:
        sys.exit(f"run: not all done: {failed} (suite.json, suite.log)")


def summary(statuses: list[str]) -> str:
    done = statuses.count("done")
    return "done" if done == len(statuses) else f"{done} of {len(statuses)} done: {statuses}"


# ------------------------------------------------------------------------- the parts in-process


def measure_device(args) -> None:
    """What the figures were taken on (the device, the packages the call runs on), and the
    rates MFU can be measured against."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    size = 512 if args.smoke else 8192

    def tflops(dtype, tf32: bool = False, repeats: int = 10) -> float:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
        rate = benchlib.measure(lambda: (a @ b, 2 * size**3)[1], repeats, 3, device)
        return round(rate / 1e12, 2)

    cuda = device.type == "cuda"
    record = {
        **benchlib.header("device", device),
        "packages": {name: installed(name) for name in ("torch", *CALL_PACKAGES, "numpy")},
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "memory_gib": round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
        if cuda
        else None,
        "matmul_size": size,
        "bf16_tflops": tflops(torch.bfloat16),
        "tf32_tflops": tflops(torch.float32, tf32=True),
        "fp32_tflops": tflops(torch.float32),
    }
    torch.backends.cuda.matmul.allow_tf32 = False
    benchlib.write_json(args.out, record)
    print(json.dumps(record))


# ------------------------------------------------------------------------------------ Multi30k

SMOKE_TRAINING = dict(max_steps=3, max_minutes=None, warmup_steps=2, tokens_per_step=500,
                      tokens_per_batch=500, checkpoint_every_minutes=None,
                      checkpoint_every_steps=1, average_last=2, log_every_steps=1,
                      dev_every_steps=3)  # fmt: skip
ARCHIVED = (".json", ".md", ".csv", ".tex", ".png", ".hyp")


def multi30k_part(args, deadline: float) -> str:
    """configs/multi30k_gpu.yaml from scratch in a work folder (at smoke size: 300 lines of
    each file, a one-layer model for 3 steps); its results/ (run.json, scores, tables) and the
    training summaries go into multi30k_gpu.tar.gz, also when the cap cut it."""
    import yaml

    work = args.work / "multi30k_gpu"
    shutil.rmtree(work, ignore_errors=True)
    (work / "data").mkdir(parents=True)
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            with gzip.open(data_file(f"multi30k/{split}.{lang}.gz"), "rt") as handle:
                lines = handle.readlines()[: 300 if args.smoke else None]
            with gzip.open(work / "data" / f"{split}.{lang}.gz", "wt") as handle:
                handle.writelines(lines)
    preset = PROJECT / "configs" / "multi30k_gpu.yaml"
    overlay: dict = {"study": "multi30k_gpu", "include": [str(preset)],
                     "datasets": {"multi30k": {"root": str(work / "data")}}}  # fmt: skip
    if args.smoke:
        overlay["datasets"]["multi30k"]["subword"] = {"vocab_size": 500}  # 322 characters
        small = {"model": "tiny", "train": SMOKE_TRAINING,
                 "overrides": {"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 2},
                 "decode": {"search": "greedy", "max_length_offset": 5}}  # fmt: skip
        names = yaml.safe_load(preset.read_text())["experiments"]
        overlay["experiments"] = {name: small for name in names}
    (work / "suite.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    shutil.copyfile(PROJECT / "config.yaml", work / "config.yaml")
    command = [sys.executable, "-m", "snakemake", "--snakefile", PROJECT / "Snakefile", "--cores",
               "all", "--directory", work, "--configfile", work / "suite.yaml"]  # fmt: skip
    status = run_capped(command, deadline, args.out, cwd=work)
    study = work / "results" / "multi30k_gpu"
    with tarfile.open(args.out / "multi30k_gpu.tar.gz", "w:gz") as archive:
        for folder, base in ((study, study), (work / "runs", work)):
            for path in sorted(folder.rglob("*")):
                if path.is_file() and path.suffix in ARCHIVED:
                    archive.add(path, str(path.relative_to(base)))
    return status


# ------------------------------------------------------------------------------------- collect


def collect(args) -> None:
    """What a device call returned -> bench/results/*-gpu.json and results/multi30k_gpu/ of the
    checkout (or of --into); nothing else is touched."""
    source, written, results = args.folder, [], args.into / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)

    def save(record: dict, name: str | None = None) -> None:
        written.append(benchlib.save(record, "gpu", results, name))

    for name in ("device", "train_throughput"):
        if (source / f"{name}.json").exists():
            save(json.loads((source / f"{name}.json").read_text()), name)
    if (source / "decode_speed.json").exists():
        runs = json.loads((source / "decode_speed.json").read_text())["runs"]
        save({"bench": "decode_speed_sweep", "runs": runs})
        proxy = [run_ for run_ in runs if run_.get("max_length_offset") == 0]
        trained = [run_ for run_ in runs if "training" in run_]
        if proxy:  # decode_proxy's run: a random base, outputs capped at source length
            save(proxy[0], "decode_proxy")
        if trained:  # decode_base's run, on a model trained to stop: quoted in docs
            save(trained[0])
    found = source / "suite.json"
    suite = json.loads(found.read_text()) if found.exists() else {}
    if set(suite.get("parts", {})) - {"multi30k"}:  # what ran, how long each part took
        save({"bench": "gpu_suite", **suite}, "suite")
    if "complexity_gpu" in suite:  # Table 1's figure on the device, drawn as the workflow's
        from aiayn.complexity.report import cost_figure

        cost_figure(suite["complexity_gpu"]).savefig(results / "complexity-gpu.png", dpi=150)
        written.append(results / "complexity-gpu.png")
    for name, target in (("decode", "decode_profile"), ("train", "train_profile")):
        if (source / f"{name}.prof.txt").exists() and (source / f"{name}.prof.txt").stat().st_size:
            shutil.copyfile(source / f"{name}.prof.txt", results / f"{target}-gpu.txt")
            written.append(results / f"{target}-gpu.txt")
    if (source / "multi30k_gpu.tar.gz").exists():
        target = args.into / "results" / "multi30k_gpu"
        shutil.rmtree(target, ignore_errors=True)
        with tarfile.open(source / "multi30k_gpu.tar.gz") as archive:
            archive.extractall(target, filter="data")
        written.append(target)
    if not written:
        sys.exit(f"collect: nothing to collect in {source}")
    for path in written:
        print(f"wrote {path}")


def main() -> None:
    parser = benchlib.parser(__doc__, saves=False)
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="wheels and data into .device/, then the commands")
    packing.add_argument("--folder", type=Path, default=PACK)
    packing.add_argument("--shared", type=Path, default=SHARED_DATA, help="../shared/data")
    packing.add_argument("--no-wheels", action="store_true", help="the data only")
    packing.add_argument("--multi30k", action="store_true", help="for the Multi30k command")
    packing.add_argument("--this-python", action="store_true", help="(CI's rehearsal)")
    running = commands.add_parser("run", help="on the device: install, then the parts")
    running.add_argument("--out", type=Path, required=True, help="$OUT on the device")
    running.add_argument("--parts", type=benchlib.comma_list(PARTS, "parts"),
                         default=list(ONE_CALL), help=f"some of {','.join(PARTS)}")  # fmt: skip
    running.add_argument("--extras", type=benchlib.comma_list(EXTRAS, "extras"),
                         help=f"some of {','.join(EXTRAS)} (default: all)")  # fmt: skip
    running.add_argument("--budget", type=float, default=CALL_BUDGET_S, help="seconds in all")
    running.add_argument("--smoke", action="store_true", help="tiny sizes on CPU (CI)")
    running.add_argument("--work", type=Path, default=Path("/tmp/aiayn_gpu_suite"))
    running.add_argument("--pack", type=Path, default=PACK, help="(tests) another pack folder")
    running.add_argument("--install", action="store_true", help="also with --smoke (CI)")
    collecting = commands.add_parser("collect", help="a device call's files into the project")
    collecting.add_argument("folder", type=Path)
    collecting.add_argument("--into", type=Path, default=PROJECT, help="(tests) another checkout")
    measuring = commands.add_parser("measure-device", help="(run's device part, in a process)")
    measuring.add_argument("--out", type=Path, required=True)
    measuring.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    commands = {"pack": pack, "run": run, "collect": collect, "measure-device": measure_device}
    commands[args.command](args)


if __name__ == "__main__":
    main()
