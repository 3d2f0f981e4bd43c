"""The GPU figures from one device call of about 7 minutes, with no manual step; CI runs it on CPU.

A GPU is lent to some sessions only, for 15 minutes of device time in all (start-up included).
`pack` prepares everything here, `run` takes the figures there, `collect` files what came back:

    python bench/gpu_suite.py pack                   # here: .device/, then the device command
    python bench/gpu_suite.py run --out $OUT         # there: install from .device/, the parts
    python bench/gpu_suite.py collect DIR            # here: DIR -> bench/results/, results/
    python bench/gpu_suite.py run --smoke --out DIR  # the same on CPU at tiny sizes (CI)

The parts, in the order of what matters (PARTS), each under its own cap (PART_CAPS_S), the caps
of one call fitting its budget (--budget, 420 s) so that a call that started late still returns
the headline figures:
- preflight: the packages, one bf16 step of our trainer, one batch of our beam search and of
  generate(); what fails is recorded and the parts still run;
- device: name, memory, torch/CUDA versions, measured bf16, TF32 and fp32 matmul rates;
- train_base: bench/train_throughput.py, base at the paper's step (25000 target tokens), ours
  (the loss compiled), ours with the eager sliced loss (the A/B), then HF Marian, eager, MFU
  against the data sheet's and the measured peak;
- decode_base: bench/decode_speed.py, base, all of newstest2014, beam 4, 16k source tokens a
  batch, ours, ours with the ancestry cache, then generate();
- train_big: the same as train_base for big (two micro-batches of 12500 tokens);
- compile: base with train.compile (torch.compile);
- extras (EXTRAS, by name; --extras picks some), with whatever time is left: our step's
  profile, the loss kernels, the naive trainer, the naive decoder and the decoder's profile, the
  compiled decoder step, big's naive trainer, big compiled, the optimizer path's A/B (bf16
  autocast), the decode sweep (finished sentences dropped at every step, big, 4k and 32k tokens);
- multi30k (not in the default call; for a later lend): configs/multi30k_gpu.yaml from scratch.
If the install from .device/wheels fails, suite.log says so and the parts run on the machine's
own packages. Each result is written under --out the moment it exists (train_throughput.py
rewrites its record after every trainer), so a call cut off at its limit still returns what it
took. A device call returns at most 8 files: hence one log and one file per kind of result.
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
# In the order they run: what matters most first, since a call may end before the last.
PARTS = ("preflight", "device", "train_base", "decode_base", "train_big", "compile", "extras",
         "multi30k")  # fmt: skip
ONE_CALL = PARTS[:-1]  # the default; Multi30k on the GPU is a command for a later lend

# What the device needs beyond its image: these pins from pyproject.toml, and what they need.
# The call's parts need no workflow engine; snakemake (and pulp, 16 MiB) would push the call's
# tree over its 64 MiB, so they travel only in a pack for the Multi30k run (`pack --multi30k`).
CALL_PACKAGES = ("deepspeed", "sacrebleu", "sacremoses", "sentencepiece", "transformers")
MULTI30K_PACKAGES = (*CALL_PACKAGES, "snakemake", "snakemake-executor-plugin-slurm")
# On the device's image already (KINDS.md of the device tool) and too large to carry under the
# call's 64 MiB: the image's own versions serve. torch is never followed into (its CUDA build
# is the device's).
LEFT_TO_THE_DEVICE = frozenset({"torch", "numpy", "pandas", "lxml", "pyarrow", "hf-xet"})
DEVICE_PYTHON = "3.12"  # the device image's python3 (3.12.3)
THIS_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def wheel_tags(python: str) -> list[str]:
    """pip download's options for CPython `python` (3.12) wheels on x86-64 Linux."""
    abi = "cp" + python.replace(".", "")
    return [
        "--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3",
        "--abi", "none", "--platform", "manylinux_2_28_x86_64", "--platform",
        "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "--platform",
        "manylinux1_x86_64", "--platform", "any",
    ]  # fmt: skip


def markers(python: str) -> dict[str, str]:
    """What a requirement's environment marker is evaluated against for that Python."""
    return {"python_version": python, "python_full_version": f"{python}.0", "extra": ""}


PACK_LIMIT_MIB = 60
TRAVEL_LIMIT_MIB = 64  # the device call's working tree, carried paths included
DATA_FILES = {  # .device/data/<name>: ../shared/data/<path>
    "newstest2014.en-de.en": "wmt14_newstest/full/newstest2014.en-de.en",
    "newstest2014.en-de.de": "wmt14_newstest/full/newstest2014.en-de.de",
    "newstest2014-filtered.tok.de": "wmt14_newstest/filtered/newstest2014-filtered.tok.de",
    **{
        f"multi30k/{split}.{lang}.gz": f"multi30k/raw_gz/{split}.{lang}.gz"
        for split in ("train", "val", "test_2016_flickr")
        for lang in ("en", "de")
    },
}
# The device call's limits (device README): 600 s a command and 15 minutes of device time a
# session, start-up included: one call of about 7 minutes, with room for a slow start.
CALL_BUDGET_S = 420
CALL_TIMEOUT_S = CALL_BUDGET_S + 60  # the device call's timeout_s: the budget, then collecting


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
    pins = {}
    for line in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        requirement = Requirement(line)
        if requirement.name in names:
            pins[requirement.name] = str(requirement.specifier).removeprefix("==")
    return pins


def closure(pins: dict[str, str], python: str = DEVICE_PYTHON, left: set | None = None):
    """Every package the pins need on that Python, at the versions installed here (the ones the
    tests ran with), read from the installed metadata; nothing beyond LEFT_TO_THE_DEVICE (the
    ones reached are added to `left`, where given)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, str] = {}
    pending = list(pins)
    while pending:
        name = canonicalize_name(pending.pop())
        if name in LEFT_TO_THE_DEVICE and left is not None:
            left.add(name)
        if name in found or name in LEFT_TO_THE_DEVICE:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            sys.exit(f"pack: {name} is not installed here; first: pip install -e '.[dev]'")
        if name in pins and dist.version != pins[name]:
            sys.exit(f"pack: {name} {dist.version} is installed, pyproject pins {pins[name]}")
        found[name] = dist.version
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(markers(python)):
                pending.append(requirement.name)
    return found


def pip(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"]
    return subprocess.run(command, capture_output=True, text=True)


def fetch_wheels(packages: dict[str, str], folder: Path, python: str = DEVICE_PYTHON) -> list:
    """Binary wheels for that Python where PyPI has them; the rest (pure Python, published as
    source only, deepspeed among them) built into wheels here. Returns the ones built."""
    folder.mkdir(parents=True, exist_ok=True)
    binary = [f"{name}=={version}" for name, version in sorted(packages.items())]
    built = []
    while binary:
        result = pip("download", "--no-deps", "--only-binary=:all:", *wheel_tags(python), "-d",
                      str(folder), *binary)  # fmt: skip
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


def copy_data(shared: Path, folder: Path) -> None:
    for name, relative in DATA_FILES.items():
        source = shared / relative
        if not source.exists():
            sys.exit(f"pack: {source} is missing (../shared/data, or set AIAYN_SHARED_DATA)")
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, folder / name)


def tree_mib() -> float:
    """What travels to the device besides the pack: tracked and untracked, not ignored, files."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=PROJECT, capture_output=True, text=True).stdout  # fmt: skip
    files = [PROJECT / name for name in listed.split("\0") if name]
    return sum(f.stat().st_size for f in files if f.is_file()) / 2**20


def device_commands(commit: str) -> dict[str, tuple[str, int]]:
    """The one call a lend is planned around, and Multi30k for a later lend, each with the
    timeout_s to give the device call."""
    prefix = f"PYTHONUNBUFFERED=1 AIAYN_COPIED_FROM_COMMIT={commit} python3 bench/gpu_suite.py run"
    return {
        "the call": (f"{prefix} --out $OUT --budget {CALL_BUDGET_S}", CALL_TIMEOUT_S),
        "a later lend, after `pack --multi30k` (Multi30k on the GPU)": (
            f"{prefix} --out $OUT --parts multi30k --budget 540",
            600,
        ),
    }


def pack(args) -> None:
    if args.folder.exists():
        shutil.rmtree(args.folder)
    copy_data(args.shared, args.folder / "data")
    if not args.no_wheels:
        pins = pinned_versions(MULTI30K_PACKAGES if args.multi30k else CALL_PACKAGES)
        python = THIS_PYTHON if args.this_python else DEVICE_PYTHON
        left: set[str] = set()
        packages = closure(pins, python, left)
        log(f"pack: {len(packages)} packages for Python {python} into {args.folder / 'wheels'}")
        built = fetch_wheels(packages, args.folder / "wheels", python)
        log(f"pack: built here from source: {', '.join(built) or 'none'}")
        lines = [f"{name}=={version}" for name, version in sorted(pins.items())]
        (args.folder / "requirements.txt").write_text("\n".join(lines) + "\n")
        (args.folder / "python").write_text(python + "\n")
        # what the pack counts on the machine's image to hold: a rehearsal installs these
        (args.folder / "left_to_the_machine.txt").write_text(
            "".join(f"{n}\n" for n in sorted(left))
        )
    commit = benchlib.tree_commit()
    if commit.endswith("-dirty"):
        log("pack: the tree differs from its commit; commit first, or the figures say -dirty")
    (args.folder / "commit").write_text(commit + "\n")
    size = sum(f.stat().st_size for f in args.folder.rglob("*") if f.is_file()) / 2**20
    if size > PACK_LIMIT_MIB:
        largest = sorted(args.folder.rglob("*.whl"), key=lambda f: -f.stat().st_size)[:5]
        names = [f.name for f in largest]
        sys.exit(f"pack: {size:.1f} MiB > {PACK_LIMIT_MIB} MiB; the largest wheels: {names}")
    tree = tree_mib()
    if size + tree > TRAVEL_LIMIT_MIB:
        sys.exit(f"pack: the tree ({tree:.1f} MiB) and the pack ({size:.1f} MiB) are over the "
                 f"device call's {TRAVEL_LIMIT_MIB} MiB")  # fmt: skip
    print(f"packed {args.folder}/: {size:.1f} MiB (+ {tree:.1f} MiB of tree)")
    print('carry: [".device"]')
    for what, (command, timeout) in device_commands(commit).items():
        print(f"device command, {what} (timeout_s {timeout}):\n{command}")


# ----------------------------------------------------------------------------------------- run


def run_capped(command: list[str], deadline: float, out: Path, env: dict | None = None,
               cwd: Path = PROJECT) -> str:  # fmt: skip
    """Run command with its output appended to suite.log; kill its whole process group at the
    deadline. Returns 'done', 'failed (exit N)' or 'cut at its time cap'."""
    command, remaining = [str(word) for word in command], deadline - time.monotonic()
    if remaining < 5:
        return "not started: no time left"
    log(f"$ {' '.join(command)}  (cap {remaining:.0f} s)", out)
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
    """The pinned packages from .device/wheels, without network, over the device's image."""
    wheels, requirements = pack / "wheels", pack / "requirements.txt"
    if smoke:  # the wheels are the device's Python's; here the project's install serves
        return "skipped: --smoke (the packages here serve)"
    if not wheels.is_dir():
        return "skipped: no .device/wheels (the packages here serve)"
    python = (pack / "python").read_text().strip() if (pack / "python").exists() else None
    if python is not None and python != THIS_PYTHON:
        return f"skipped: the wheels are for Python {python}, this is {THIS_PYTHON}"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
               str(wheels), "--disable-pip-version-check"]  # fmt: skip
    status = run_capped([*command, "-r", requirements], deadline, out)
    if status == "done":
        return status
    # One package that will not install must not keep the others out: each on its own.
    pins = requirements.read_text().split()
    each = {pin: run_capped([*command, pin], deadline, out) for pin in pins}
    return f"{status} as a whole; one by one: " + ", ".join(f"{p} {s}" for p, s in each.items())


def part_env() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        str(PROJECT / "src"), os.environ.get("PYTHONPATH")])))  # fmt: skip
    commit_file = PACK / "commit"
    if "AIAYN_COPIED_FROM_COMMIT" not in env and commit_file.exists():
        env["AIAYN_COPIED_FROM_COMMIT"] = commit_file.read_text().strip()
    return env


def data_file(name: str) -> Path:
    """A data file from .device/data, or from ../shared/data where it was not packed (here)."""
    packed = PACK / "data" / name
    return packed if packed.exists() else SHARED_DATA / DATA_FILES[name]


def python(script: str, *args) -> list[str]:
    return [sys.executable, str(PROJECT / "bench" / script), *map(str, args)]


def device_part(args, deadline: float) -> str:
    command = python("gpu_suite.py", "measure-device", "--out", args.out / "device.json")
    return run_capped(command + (["--smoke"] if args.smoke else []), deadline, args.out, part_env())


TRAIN_SIZES = {  # what train_throughput.py runs per preset: the paper's step, 25000 tokens
    "base": ["--presets", "base", "--batch-tokens", "25000"],
    "big": ["--presets", "big", "--batch-tokens", "12500", "--steps", "12"],  # 2 micro-batches
}
SMOKE_TRAIN = ["--presets", "tiny", "--tokens", "1000", "--vocab", "500", "--steps", "2",
               "--warmup", "1", "--pairs", "500"]  # fmt: skip
SMOKE_TRAIN_SIZES = {"base": [*SMOKE_TRAIN, "--batch-tokens", "1000"],
                     "big": [*SMOKE_TRAIN, "--batch-tokens", "500"]}  # fmt: skip


def train_run(
    args, deadline: float, preset: str, trainers: str | None, profile: bool = False
) -> str:
    """One train_throughput.py run of some trainers on one preset, one round each (none: the
    profile only). The script rewrites its record after every trainer; what it holds is merged
    into train_throughput.json by preset, also when the cap cut the run."""
    device = args.out / "device.json"
    peak = json.loads(device.read_text()).get("bf16_tflops") if device.exists() else None
    record = args.out / "train_throughput.run.json"
    sizes = (SMOKE_TRAIN_SIZES if args.smoke else TRAIN_SIZES)[preset]
    command = python("train_throughput.py", *sizes, "--rounds", "1", "--out", record)
    command += ["--trainers", trainers] if trainers else ["--profile-only"]
    if peak:
        command += ["--measured-peak-tflops", peak]
    run_profile = args.out / "train.prof.run.txt"
    if profile:
        command += ["--profile", run_profile]
    status = run_capped(command, deadline, args.out, part_env())
    if run_profile.exists():  # train.prof.txt: the presets' tables so far
        with open(args.out / "train.prof.txt", "a", encoding="utf-8") as handle:
            handle.write(run_profile.read_text())
        run_profile.unlink()
    if record.exists():
        merge_train_record(args.out / "train_throughput.json", json.loads(record.read_text()))
        record.unlink()
    return status


def merge_train_record(path: Path, new: dict) -> None:
    """Rows of the same preset merge trainer by trainer (each run measures some of them), and
    their ratios are recomputed from what the merged row holds."""
    if not path.exists():
        write_json(path, new)
        return
    merged = json.loads(path.read_text())
    rows = {row["preset"]: row for row in merged["results"]}
    for row in new["results"]:
        rows.setdefault(row["preset"], {}).update(row)
    merged["results"] = [benchlib.with_train_ratios(row) for row in rows.values()]
    write_json(path, merged)


def decode_run(args, deadline: float, preset: str, batch_tokens: int, naive: bool = False,
               drop_every: int | None = None, cache_ab: bool = False,
               compile_ab: bool = False) -> str:  # fmt: skip
    """One decode_speed.py run on all of newstest2014 (12 sentences at smoke size): ours, then
    `generate()`, once each; `naive` adds the naive decoder and the profile, `cache_ab` ours
    with the ancestry cache, `compile_ab` ours compiled. Appended to decode_speed.json's runs
    as soon as it finishes."""
    source = data_file("newstest2014.en-de.en")
    record = args.out / "decode_speed.run.json"
    size = ["--sentences", "12", "--vocab", "1000"] if args.smoke else []
    preset = "tiny" if args.smoke else preset
    batch_tokens = batch_tokens // 40 if args.smoke else batch_tokens
    command = python("decode_speed.py", "--source", source, "--preset", preset, "--batch-tokens",
                     batch_tokens, "--repeats", "1", "--out", record, *size)  # fmt: skip
    if drop_every is not None:
        command += ["--drop-every", drop_every]
    command += ["--profile", args.out / "decode.prof.txt"] if naive else ["--no-naive"]
    command += ["--cache-ab"] if cache_ab else []
    command += ["--compile-ab", "--no-peer"] if compile_ab else []  # generate(): decode_base's
    status = run_capped(command, deadline, args.out, part_env())
    if status == "done":
        path = args.out / "decode_speed.json"
        runs = json.loads(path.read_text())["runs"] if path.exists() else []
        write_json(path, {"bench": "decode_speed", "runs": [*runs, json.loads(record.read_text())]})
        record.unlink()
    return status


# ours (on CUDA, the loss through torch.compile's fused kernels); its A/B, the eager sliced
# loss; HF Marian. The optimizer path's A/B (bf16 autocast and torch's fused Adam) lost three
# calls of three (0.85-0.88x) and is an extra.
HEADLINE_TRAINERS = "ours,ours_sliced_loss,hf"


def loss_run(args, deadline: float) -> str:
    """bench/loss_speed.py: the sliced loss against one whole fp32 log-softmax, a quarter of
    the paper's step (6250 tokens of a 37000-token vocabulary); time and the allocator's peak."""
    size = ["--rows", "600", "--vocab", "3000", "--repeats", "1"] if args.smoke else []
    command = python("loss_speed.py", *size, "--out", args.out / "loss_speed.json")
    return run_capped(command, deadline, args.out, part_env())


def train_base_part(args, deadline: float) -> str:
    """The headline figure first: base at the paper's step, ours (DeepSpeed's bf16 optimizer),
    ours with bf16 autocast and torch's fused Adam, then HF Marian; eager."""
    return train_run(args, deadline, "base", HEADLINE_TRAINERS)


def decode_base_part(args, deadline: float) -> str:
    return decode_run(args, deadline, "base", 16000, cache_ab=True)


def train_big_part(args, deadline: float) -> str:
    return train_run(args, deadline, "big", HEADLINE_TRAINERS)


def compile_part(args, deadline: float) -> str:
    return train_run(args, deadline, "base", "ours_compiled")


def extra_runs(args) -> dict:
    """What the time left buys, by name, most wanted first: the profile of our step; the loss
    kernels against the whole log-softmax; the naive trainer beside ours; the naive decoder with
    the decoder's profile; the compiled decoder step; big's naive trainer and profile; big
    compiled; the optimizer path's A/B; the decode sweep (dropping finished sentences at every
    step vs every few, big, 4k and 32k tokens)."""
    return {
        "train_profile": lambda deadline: train_run(args, deadline, "base", None, profile=True),
        "loss": lambda deadline: loss_run(args, deadline),
        "naive_trainer": lambda deadline: train_run(args, deadline, "base", "naive"),
        "decode_profile": lambda deadline: decode_run(args, deadline, "base", 16000, naive=True),
        "decode_compiled": lambda deadline: decode_run(
            args, deadline, "base", 16000, compile_ab=True
        ),
        "big_profile": lambda deadline: train_run(args, deadline, "big", "naive", profile=True),
        "big_compiled": lambda deadline: train_run(args, deadline, "big", "ours_compiled"),
        "autocast": lambda deadline: train_run(args, deadline, "base", "ours_autocast"),
        "decode_drop_every_step": lambda deadline: decode_run(
            args, deadline, "base", 16000, drop_every=1
        ),
        "decode_big": lambda deadline: decode_run(args, deadline, "big", 16000),
        "decode_4k": lambda deadline: decode_run(args, deadline, "base", 4000),
        "decode_32k": lambda deadline: decode_run(args, deadline, "base", 32000),
    }


EXTRAS = tuple(extra_runs(None))
# At smoke size (CI), the extras whose code paths no other part takes (autocast's is the
# trainer's precision, which tests/test_train.py trains with).
SMOKE_EXTRAS = (
    "train_profile",
    "loss",
    "naive_trainer",
    "decode_profile",
    "decode_drop_every_step",
)


def extras_part(args, deadline: float) -> str:
    runs = extra_runs(args)
    names = args.extras or (SMOKE_EXTRAS if args.smoke else EXTRAS)
    return summary([runs[name](deadline) for name in names])


def preflight_part(args, deadline: float) -> str:
    """`gpu_suite.py preflight` in its own process; its findings go into suite.json."""
    record = args.out / "preflight.run.json"
    command = python("gpu_suite.py", "preflight", "--out", record)
    status = run_capped(command, deadline, args.out, part_env())
    if record.exists():
        args.report["preflight"] = json.loads(record.read_text())
        record.unlink()
    return status


def multi30k_inputs(work: Path, smoke: bool) -> Path:
    """The Multi30k files the run reads: the packed ones, or (smoke) their first 300 lines."""
    folder = work / "multi30k_data"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            name = f"multi30k/{split}.{lang}.gz"
            if not smoke:
                shutil.copyfile(data_file(name), folder / Path(name).name)
                continue
            with gzip.open(data_file(name), "rt", encoding="utf-8") as handle:
                lines = [line for _, line in zip(range(300), handle, strict=False)]
            with gzip.open(folder / Path(name).name, "wt", encoding="utf-8") as handle:
                handle.writelines(lines)
    return folder


SMOKE_TRAINING = dict(
    max_steps=3,
    max_minutes=None,
    warmup_steps=2,
    tokens_per_step=500,
    tokens_per_batch=500,
    checkpoint_every_minutes=None,
    checkpoint_every_steps=1,
    average_last=2,
    log_every_steps=1,
    dev_every_steps=3,
)


def multi30k_overlay(work: Path, data: Path, smoke: bool) -> Path:
    """configs/multi30k_gpu.yaml's study, refined: where the data is; at smoke size, a small
    vocabulary and the GPU experiments cut to a few steps of a one-layer model."""
    import yaml

    preset = PROJECT / "configs" / "multi30k_gpu.yaml"
    overlay: dict = {
        "study": "multi30k_gpu",
        "include": [str(preset)],
        "datasets": {"multi30k": {"root": str(data)}},
    }
    if smoke:
        overlay["datasets"]["multi30k"]["subword"] = {"vocab_size": 500}  # 322 characters
        overlay["experiments"] = {
            name: {
                "model": "tiny",
                "overrides": {"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 2},
                "train": SMOKE_TRAINING,
                "decode": {"search": "greedy", "max_length_offset": 5},
            }
            for name in yaml.safe_load(preset.read_text())["experiments"]
        }
    path = work / "suite.yaml"
    path.write_text(yaml.safe_dump(overlay, sort_keys=False))
    return path


ARCHIVED = (".json", ".md", ".csv", ".tex", ".png", ".hyp")


def multi30k_part(args, deadline: float) -> str:
    """The Multi30k GPU budget run from scratch in a work folder; its results/, training
    summaries and run.json go into multi30k_gpu.tar.gz, also when the cap cut it."""
    work = args.work / "multi30k_gpu"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    shutil.copyfile(PROJECT / "config.yaml", work / "config.yaml")
    overlay = multi30k_overlay(work, multi30k_inputs(work, args.smoke), args.smoke)
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(PROJECT / "Snakefile"),
               "--directory", str(work), "--cores", "all",
               "--configfile", str(overlay)]  # fmt: skip
    start = time.monotonic()
    status = run_capped(command, deadline, args.out, part_env(), cwd=work)
    record = {
        "what": "configs/multi30k_gpu.yaml from scratch" + (" at smoke size" if args.smoke else ""),
        "command": "snakemake --cores all --configfile configs/multi30k_gpu.yaml "
        "--config 'datasets={multi30k: {root: DIR}}'",
        "status": status,
        "snakemake_wall_seconds_from_scratch": round(time.monotonic() - start, 1),
        "commit": part_env().get("AIAYN_COPIED_FROM_COMMIT") or benchlib.tree_commit(),
        "date": time.strftime("%Y-%m-%d"),
        "experiments": multi30k_figures(work),
    }
    write_json(work / "suite.json", record)
    study = work / "results" / "multi30k_gpu"  # the workflow's results, run.json included
    with tarfile.open(args.out / "multi30k_gpu.tar.gz", "w:gz") as archive:
        archive.add(work / "suite.json", "suite.json")
        for folder, base in ((study, study), (work / "runs", work)):
            for path in sorted(folder.rglob("*")):
                if path.is_file() and path.suffix in ARCHIVED:
                    archive.add(path, str(path.relative_to(base)))
    return status


def multi30k_figures(work: Path) -> dict:
    """Per experiment: training time, steps and dev perplexity, and every score written."""
    figures = {}
    for summary_file in sorted((work / "runs").glob("*/train.json")):
        name, train = summary_file.parent.name, json.loads(summary_file.read_text())
        scores = {}
        scored = work / "results" / "multi30k_gpu" / "scores" / name
        for score_file in sorted(scored.glob("*/*.json")):
            score = json.loads(score_file.read_text())
            scores[f"{score_file.parent.name}_{score_file.stem}"] = {
                key: score[key]["score"] if isinstance(score[key], dict) else score[key]
                for key in ("sacrebleu", "tokenized_bleu", "chrf")
                if key in score
            }
        figures[name] = {key: train.get(key) for key in ("train_seconds", "steps", "dev_ppl")}
        figures[name]["scores"] = scores
    return figures


def write_json(path: Path, record: dict) -> None:
    """Whole or not at all: a call cut off mid-write must not return half a file."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(path)


def summary(statuses: list[str]) -> str:
    done = statuses.count("done")
    return "done" if done == len(statuses) else f"{done} of {len(statuses)} done: {statuses}"


PART_RUNNERS = {
    "preflight": preflight_part,
    "device": device_part,
    "train_base": train_base_part,
    "decode_base": decode_base_part,
    "train_big": train_big_part,
    "compile": compile_part,
    "extras": extras_part,
    "multi30k": multi30k_part,
}
# Seconds each may take at most; None: whatever the budget has left. The install and the parts of
# one call (ONE_CALL) are capped to fit CALL_BUDGET_S together (a test checks), so a call that
# started late still returns every headline figure; the extras only get what the others left.
PART_CAPS_S = {
    "install": 40,
    "preflight": 35,
    "device": 20,
    "train_base": 75,
    "decode_base": 100,  # 47 s on an H200, 81 s on an H100 (generate() 31 s, 56 s), + ancestry
    "train_big": 60,
    "compile": 90,  # base compiling took over 100 s on an H200 and an H100: never finished
    "extras": None,
    "multi30k": None,
}


# At smoke size the parts run on a CPU shared with other tests, from cold caches (a fresh
# environment compiles its bytecode, DeepSpeed its CPU op): their caps and the budget stretch by
# this much. A part cut at its cap is killed, and a kill during DeepSpeed's op build leaves a
# lock that stalls every later start for minutes.
SMOKE_SLACK = 5


def run(args) -> None:
    """Install (what fails there is logged, and the parts run on the image's packages), then
    the parts in PARTS order, each under its cap; suite.json is rewritten after each."""
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    slack = SMOKE_SLACK if args.smoke else 1
    end = start + args.budget * slack
    args.report = report = {"smoke": args.smoke, "budget_s": args.budget, "parts": {}}
    log(f"run: parts {args.parts}, budget {args.budget} s", args.out)
    install_deadline = min(end, start + PART_CAPS_S["install"] * slack)
    skip = args.smoke and not args.install
    report["install"] = install(args.pack, args.out, install_deadline, skip)
    if report["install"] != "done" and not report["install"].startswith("skipped"):
        log(f"run: the install from .device/wheels {report['install']}; the parts run on the "
            "image's packages (suite.log has pip's message)", args.out)  # fmt: skip
    write_json(args.out / "suite.json", report)
    for part in [part for part in PARTS if part in args.parts]:
        cap = PART_CAPS_S[part]
        deadline = end if cap is None else min(end, time.monotonic() + cap * slack)
        began = time.monotonic()
        status = PART_RUNNERS[part](args, deadline)
        report["parts"][part] = {"status": status, "seconds": round(time.monotonic() - began, 1)}
        log(f"run: {part}: {status}", args.out)
        for partial in args.out.glob("*.partial"):  # a write cut off at the cap
            partial.unlink()
        write_json(args.out / "suite.json", report)
    report["seconds"] = round(time.monotonic() - start, 1)
    write_json(args.out / "suite.json", report)
    failed = [part for part, result in report["parts"].items() if result["status"] != "done"]
    if failed:
        sys.exit(f"run: not all done: {failed} (suite.json, suite.log)")


# ------------------------------------------------------------------------------ measure-device


def matmul_tflops(dtype, size: int, device, tf32: bool = False, repeats: int = 10) -> float:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    benchlib.synchronize(device)
    began = time.perf_counter()
    for _ in range(repeats):
        a @ b
    benchlib.synchronize(device)
    return round(2 * size**3 * repeats / (time.perf_counter() - began) / 1e12, 2)


def measure_device(args) -> None:
    """What the figures were taken on, and the rates MFU can be measured against."""
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    size = 512 if args.smoke else 8192
    record = {
        "bench": "device",
        "device": benchlib.device_name(device),
        **benchlib.stamp(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
        "memory_gib": round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
        if device.type == "cuda"
        else None,
        "matmul_size": size,
        "bf16_tflops": matmul_tflops(torch.bfloat16, size, device),
        "tf32_tflops": matmul_tflops(torch.float32, size, device, tf32=True),
        "fp32_tflops": matmul_tflops(torch.float32, size, device, tf32=False),
    }
    torch.backends.cuda.matmul.allow_tf32 = False
    write_json(args.out, record)
    print(json.dumps(record))


# ----------------------------------------------------------------------------------- preflight

PREFLIGHT_PACKAGES = ("torch", "deepspeed", "transformers", "sentencepiece", "sacrebleu", "numpy")


def preflight(args) -> None:
    """What works here, in well under a minute, before the parts spend the call: the packages,
    one bf16 step of our trainer (DeepSpeed) on a tiny model, one batch of our beam search and
    one of Marian's generate(). Each check records its error instead of stopping the others."""
    checks: dict[str, dict] = {}
    found: dict = {}
    for name, check in (("packages", installed_versions), ("train_step", one_training_step),
                        ("decode_batch", one_decode_batch), ("generate_batch", one_generate),
                        ):  # fmt: skip
        began = time.perf_counter()
        try:
            checks[name] = {"ok": True, **check(found)}
        except Exception as error:  # noqa: BLE001 - a check's failure is its finding
            checks[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}
        checks[name]["seconds"] = round(time.perf_counter() - began, 1)
        write_json(args.out, {"checks": checks})
        print(f"preflight {name}: {json.dumps(checks[name])}", flush=True)


def installed_versions(found: dict) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in PREFLIGHT_PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return {"versions": versions}


def tiny_model(found: dict):
    import torch

    from aiayn.decode.translate import pick_device
    from aiayn.model import Transformer
    from aiayn.model_config import build_config

    if "model" not in found:
        torch.manual_seed(0)
        found["model"] = Transformer(build_config(500, "tiny")).to(pick_device()).eval()
    return found["model"]


def tiny_sentences() -> list:
    import numpy as np

    rng = np.random.default_rng(0)
    return [rng.integers(4, 500, length) for length in (5, 9, 13, 21)]


def one_training_step(found: dict) -> dict:
    import argparse as arguments

    import train_throughput

    from aiayn.model_config import build_config
    from aiayn.train.engine import init_process

    _, _, device = init_process()
    corpus = train_throughput.synthetic_corpus(200, 500)
    sizes = arguments.Namespace(tokens=1000, batch_tokens=1000, steps=1, warmup=0)
    _, precision = train_throughput.ours(build_config(500, "tiny"), corpus, sizes, device)
    return {"device": benchlib.device_name(device), "precision": precision, "finite_loss": True}


def one_decode_batch(found: dict) -> dict:
    from aiayn.decode.settings import DecodeSettings
    from aiayn.decode.translate import translate

    settings = DecodeSettings(beam=4, alpha=0.6, batch_tokens=1000)
    hypotheses, _ = translate(tiny_model(found), tiny_sentences(), settings, desc="preflight")
    return {"sentences": len(hypotheses)}


def one_generate(found: dict) -> dict:
    import marian

    if not marian.available():
        return {"ok": False, "error": "transformers is not installed"}
    peer = marian.marian_from_ours(tiny_model(found)).eval()
    return {"sentences": len(marian.marian_generate(peer, tiny_sentences(), 4, 1000)[0])}


# ------------------------------------------------------------------------------------- collect


def collect(args) -> None:
    """What a device call returned -> bench/results/*-gpu.json and results/multi30k_gpu/ of the
    checkout (or of --into); nothing else is touched."""
    source, written, results = args.folder, [], args.into / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    for name in ("device", "train_throughput", "loss_speed"):
        name, target = f"{name}.json", f"{name}-gpu.json"
        if (source / name).exists():
            record = json.loads((source / name).read_text())
            written.append(save(record, results / target))
    if (source / "decode_speed.json").exists():
        runs = json.loads((source / "decode_speed.json").read_text())["runs"]
        written.append(save({"bench": "decode_speed_sweep", "runs": runs},
                            results / "decode_speed_sweep-gpu.json"))  # fmt: skip
        # the run the README quotes: the decode_base part's, base at 16000 tokens
        written.append(save(runs[0], results / "decode_speed-gpu.json"))
    suite = source / "suite.json"
    if suite.exists() and set(json.loads(suite.read_text())["parts"]) - {"multi30k"}:
        record = json.loads(suite.read_text())  # what ran, for how long; the preflight's findings
        written.append(save({"bench": "gpu_suite", **record}, results / "suite-gpu.json"))
    for name, target in (("decode", "decode_profile"), ("train", "train_profile")):
        if (source / f"{name}.prof.txt").exists() and (source / f"{name}.prof.txt").stat().st_size:
            shutil.copyfile(source / f"{name}.prof.txt", results / f"{target}-gpu.txt")
            written.append(results / f"{target}-gpu.txt")
    if (source / "multi30k_gpu.tar.gz").exists():
        target = args.into / "results" / "multi30k_gpu"
        if target.exists():
            shutil.rmtree(target)
        with tarfile.open(source / "multi30k_gpu.tar.gz") as archive:
            archive.extractall(target, filter="data")
        written.append(target)
    if not written:
        sys.exit(f"collect: nothing to collect in {source}")
    for path in written:
        print(f"wrote {path}")


def save(record: dict, path: Path) -> Path:
    path.write_text(json.dumps(record) + "\n")
    return path


# ---------------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="wheels and data into .device/, then the commands")
    packing.add_argument("--folder", type=Path, default=PACK)
    packing.add_argument("--shared", type=Path, default=SHARED_DATA, help="../shared/data")
    packing.add_argument("--no-wheels", action="store_true", help="the data only")
    packing.add_argument("--multi30k", action="store_true", help="for the Multi30k command")
    packing.add_argument(
        "--this-python", action="store_true", help="wheels for this Python (CI's rehearsal)"
    )
    running = commands.add_parser("run", help="on the device: install, then the parts")
    running.add_argument("--out", type=Path, required=True, help="$OUT on the device")
    parts = benchlib.comma_list(PARTS, "parts")
    running.add_argument(
        "--extras",
        type=benchlib.comma_list(EXTRAS, "extras"),
        help=f"which extras, in this order (default: all: {','.join(EXTRAS)})",
    )
    running.add_argument("--parts", type=parts, default=list(ONE_CALL),
                         help=f"some of {','.join(PARTS)} (default: all but multi30k)")  # fmt: skip
    running.add_argument("--budget", type=float, default=CALL_BUDGET_S, help="seconds in all")
    running.add_argument("--smoke", action="store_true", help="tiny sizes on CPU (CI)")
    running.add_argument("--work", type=Path, default=Path("/tmp/aiayn_gpu_suite"))
    running.add_argument("--pack", type=Path, default=PACK, help="(tests) another pack folder")
    running.add_argument(
        "--install", action="store_true", help="install also with --smoke (CI's rehearsal)"
    )
    collecting = commands.add_parser("collect", help="a device call's files into the project")
    collecting.add_argument("folder", type=Path)
    collecting.add_argument("--into", type=Path, default=PROJECT, help="(tests) another checkout")
    checking = commands.add_parser("preflight", help="(a part of run) what works here")
    checking.add_argument("--out", type=Path, required=True)
    measuring = commands.add_parser("measure-device", help="(a part of run)")
    measuring.add_argument("--out", type=Path, required=True)
    measuring.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    commands = {"pack": pack, "run": run, "collect": collect, "preflight": preflight,
                "measure-device": measure_device}  # fmt: skip
    commands[args.command](args)


if __name__ == "__main__":
    main()
