"""The `aiayn` command: translate text with a model the workflow trained, check a config.

    aiayn translate --experiment NAME [--configfile F ...] [--input F] [--output F]
                    [--beam N] [--alpha A] [--batch-tokens N] [--finalize t2t|fairseq]
                    [--device auto|cpu|cuda]
    aiayn config [--configfile F ...] [--workdir D]
    aiayn results [--workdir D] [--compare]
    aiayn lengths --experiment NAME [--configfile F ...] [--split S] [--alpha A] [--output F]
    aiayn export --experiment NAME --format ct2|hf --output DIR [--quantization Q]
                 [--configfile F ...]

`translate` is like fairseq-interactive or marian-decoder, but the model, the BPE and the
decoding settings are found from the experiment's name, as the workflow's decode rule finds
them. `config` validates config.yaml and the config files on top as the Snakefile does and
prints the result with every default filled in: what the workflow will run with. `results` says,
for every study committed under results/, whether this checkout's code and configs would rewrite
it, and from which stage on (exit 1 if any would be); with --compare, after a rerun, whether
each figure is the committed one within the study's tolerance (aiayn.report.compare). `lengths`
says whether short translations are the search's fault or the model's (aiayn.decode.lengths).
`export` writes the averaged model for CTranslate2 or Hugging Face transformers (aiayn.export).
"""

from __future__ import annotations

import argparse
import codecs
import logging
import os
import re
import shlex
import signal
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from aiayn.errors import InputError, storage_refusal
from aiayn.logs import setup_logging
from aiayn.textio import atomic_output, marked_encoding, reencoding

if TYPE_CHECKING:
    from aiayn.decode.settings import DecodeSettings

log = logging.getLogger("aiayn")


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="aiayn", description=__doc__.split("\n\n")[0])
    commands = cli.add_subparsers(dest="command", required=True)
    translate = experiment_command(
        commands,
        "translate",
        "translate a file or stdin with an experiment's averaged model",
        "Translate one sentence per line (stdin or --input) with the experiment's averaged "
        "model, its sentencepiece model and its decode settings; detokenized output in input "
        "order (stdout or --output), progress on stderr.",
    )
    translate.add_argument("--input", "-i", type=Path, help="text to translate (default: stdin)")
    translate.add_argument("--output", "-o", type=Path, help="where to write (default: stdout)")
    translate.add_argument("--beam", type=int, help="beam size (default: the experiment's)")
    translate.add_argument("--alpha", type=float, help="length penalty (default: the experiment's)")
    translate.add_argument("--batch-tokens", type=int, help="source tokens per batch")
    translate.add_argument(
        "--finalize",
        choices=("t2t", "fairseq"),
        help="which EOS candidates finish a hypothesis (t2t: the paper's)",
    )
    translate.add_argument(
        "--device", default="auto", help="auto (a GPU when there is one), cpu, cuda, cuda:1, ..."
    )
    check = commands.add_parser(
        "config",
        help="validate the workflow's config and print it with every default",
        description="Merge config.yaml and the --configfile files as snakemake does, validate "
        "the result against the schema and print it as YAML with every default filled in.",
    )
    add_config_arguments(check)
    results = commands.add_parser(
        "results",
        help="which committed results/<study>/ the current code and configs would rewrite",
        description="For each results/<study>/run.json: compare the code and settings versions "
        "it recorded with this checkout's; exit 1 if any study is stale.",
    )
    results.add_argument("--workdir", type=folder, default=Path("."), help="the workflow's folder")
    results.add_argument(
        "--compare",
        action="store_true",
        help="after rerunning a study: whether it is a rerun of the committed one (git's HEAD: "
        "the same code, settings and packages; exit 3 if not), each figure of "
        "results/<study>/run.json beside the committed one, reproduced within the study's "
        "tolerance or not, and what the two records say differently of the hardware and "
        "software; exit 1 if any figure differs or a record is missing or damaged",
    )
    lengths = experiment_command(
        commands,
        "lengths",
        "why an experiment's translations are short: search or model",
        "On one split, decode with each kept checkpoint and the averaged model and report BLEU, "
        "brevity penalty and length ratio; then, for the averaged model, the other EOS rule, "
        "whether the model scores short outputs' references higher, how likely EOS is on the "
        "reference path, and an alpha sweep. One JSON record (stdout or --output).",
    )
    lengths.add_argument("--split", help="which split (default: the experiment's dev split)")
    lengths.add_argument("--alpha", type=float, help="length penalty (default: the experiment's)")
    lengths.add_argument("--alphas", type=float, nargs="+", help="the sweep's (0.6 to 2.0)")
    lengths.add_argument(
        "--threads", type=cpu_threads, help="torch's CPU threads (default: torch's)"
    )
    lengths.add_argument("--output", "-o", type=Path, help="where to write (default: stdout)")
    export = experiment_command(
        commands,
        "export",
        "write an experiment's averaged model for CTranslate2 or transformers",
        "Convert the experiment's averaged model through CTranslate2's converter API (--format "
        "ct2) or into a stock MarianMTModel (--format hf), with its sentencepiece model and "
        "aiayn_export.json (the decode settings, and what the other engine does differently). "
        "The folder is written whole or not at all.",
    )
    export.add_argument("--format", required=True, choices=("ct2", "hf"), help="which toolkit")
    export.add_argument("--output", "-o", required=True, type=Path, help="the folder to write")
    export.add_argument(
        "--quantization",
        help="CTranslate2's weight type: int8, int8_float32, int8_float16, int16, float16, ...",
    )
    return cli


def experiment_command(commands, name: str, summary: str, description: str):
    """A command about one experiment: --experiment, and the study's config as snakemake's."""
    command = commands.add_parser(name, help=summary, description=description)
    command.add_argument("--experiment", "-e", required=True, help="an experiment's name")
    add_config_arguments(command)
    return command


def add_config_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--configfile",
        nargs="+",
        type=Path,
        default=[],
        help="the study's config files, as given to snakemake (default: config.yaml)",
    )
    command.add_argument("--workdir", type=folder, default=Path("."), help="the workflow's folder")


def cpu_threads(text: str) -> int:
    """--threads: from 1 to this machine's CPUs (torch refuses fewer, and crashes far past)."""
    most = os.cpu_count() or 1
    try:
        threads = int(text)
    except ValueError:
        threads = None
    if threads is None or not 1 <= threads <= most:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1 to {most}, "
                                         "this machine's CPUs")  # fmt: skip
    return threads


RECEIVED: list[signal.Signals] = []  # the stop signals this process was sent


class Stopped(KeyboardInterrupt):
    """A signal that asks the command to stop (SIGINT, SIGTERM, SIGHUP), raised where the
    command is, so that every output being written is cleaned away."""


def folder(text: str) -> Path:
    """--workdir: a folder that is there (a file or a missing path read as one found nothing)."""
    path = Path(text)
    try:
        what = None if path.is_dir() else "is not a folder" if path.exists() else "does not exist"
    except OSError as err:  # a name too long, say
        what = f"cannot be looked at ({err.strerror})"
    if what:
        raise argparse.ArgumentTypeError(f"{text} {what}: give the workflow's checkout")
    return path


def stop(number: int, _frame) -> None:
    """Remember the signal, then stop: native code (safetensors, say) may turn the exception
    into one of its own, and the remembered signal still names why the command stopped."""
    RECEIVED.append(signal.Signals(number))
    raise Stopped(number)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    setup_logging()
    stops = [signal.SIGTERM, signal.SIGHUP]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored (`&`)
        stops.append(signal.SIGINT)
    before = {number: signal.signal(number, stop) for number in stops}
    try:
        code = run_command(args)
    except BaseException:
        if not RECEIVED:
            raise
    finally:  # a caller in this process (a test, a script) keeps its own handlers
        for number, handler in before.items():
            signal.signal(number, handler)
    if RECEIVED:
        log.error("%s: stopped by %s before it finished; no file is left half-written "
                  "(each is written whole or not at all): run it again", args.command,
                  RECEIVED[0].name)  # fmt: skip
        return 128 + RECEIVED[0]
    return code


def run_command(args: argparse.Namespace) -> int:
    """The command `args` names; a refusal as one line and exit 1, never a traceback."""
    try:
        commands = {"config": run_config, "results": run_results, "translate": run_translate,
                    "lengths": run_lengths, "export": run_export}  # fmt: skip
        code = commands[args.command](args)
        sys.stdout.flush()  # a reader gone (a closed pipe) is found here, not at exit
        return code
    except InputError as err:
        log.error("%s", err)
        return 1
    except BrokenPipeError:  # `aiayn results | head`: the reader has all it wanted
        stop_writing_stdout()
        return 1
    except OSError as err:  # a path the system refuses (too long, say) where none was expected
        where = f"{err.filename}: " if err.filename is not None else ""
        refusal = f"{where}{err.strerror} (the system refused it; check the path or the file)"
        log.error("%s", storage_refusal(err) or refusal)
        return 1


def stop_writing_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit finds no closed pipe (the
    recipe of Python's signal docs: a closed pipe is no error of ours worth a traceback)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def run_translate(args: argparse.Namespace) -> int:
    from aiayn.decode.translate import translate_lines

    check_input(args.input)
    check_output(args.output)
    device = check_device(args.device)
    found = locate(args)
    lines = read_input(args.input)
    log.info("%s: %d lines, %s", found.model, len(lines), found.settings)
    longest = trained_tokens(args.workdir, found)
    translations = translate_lines(
        found.model, found.subword, lines, found.settings, device, args.experiment, longest
    )
    write_output(args.output, "".join(line + "\n" for line in translations))
    return 0


def write_output(path: Path | None, text: str) -> None:
    """To --output whole or not at all (a failed run leaves no half file), else to stdout. An
    --output naming one of this process's open descriptors (`/dev/stdout`, `/dev/fd/3`) is
    written to that descriptor, as the shell opened it: reopening the file behind it would
    truncate what `>> app.log` appends to, and replacing it would lose its earlier lines."""
    if path is None:
        sys.stdout.write(text)
        return
    descriptor = open_descriptor(path)
    if descriptor is not None:
        sys.stdout.flush()
        with os.fdopen(os.dup(descriptor), "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        return
    with atomic_output(path) as handle:
        handle.write(text)


DESCRIPTOR_LINK = re.compile(r"^/(?:proc/(?P<owner>self|\d+)/fd|dev/fd)/(?P<descriptor>\d+)$")
NAMED_DESCRIPTORS = {"/dev/stdout": 1, "/dev/stderr": 2}


def open_descriptor(path: Path) -> int | None:
    """The descriptor of this process that `path` names through its links (None: a file)."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on a chain of links
        if current in NAMED_DESCRIPTORS:
            return NAMED_DESCRIPTORS[current]
        found = DESCRIPTOR_LINK.match(current)
        if found and found["owner"] in (None, "self", str(os.getpid())):
            return int(found["descriptor"])
        if not os.path.islink(current):
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return None


def run_lengths(args: argparse.Namespace) -> int:
    import datetime
    import json

    import torch

    from aiayn.config import paths
    from aiayn.decode.lengths import ALPHAS, Split, measure, split_files
    from aiayn.decode.settings import check_alpha
    from aiayn.flops import device_name
    from aiayn.report.run_record import commit_of

    check_output(args.output)
    for alpha in args.alphas or ():
        try:
            check_alpha(alpha, "--alphas: each")
        except ValueError as err:
            raise InputError(str(err)) from None
    found = locate(args)
    split = args.split or found.entry["dev_split"]
    if split not in found.dataset["splits"]:
        known = ", ".join(found.dataset["splits"])
        raise InputError(f"--split {split}: dataset {found.entry['dataset']} has no such split "
                         f"(it has {known})")  # fmt: skip
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    files = split_files(args.workdir, found.entry, found.dataset, split)
    if not Path(files["source"] + ".bin").is_file() or not files["reference"].is_file():
        raise InputError(f"split {split} of {found.entry['dataset']} is not binarized in "
                         f"{args.workdir} ({files['source']}.bin): run the workflow's stages "
                         "for it first, e.g. its decode rule")  # fmt: skip
    run_dir = args.workdir / paths.run_dir(args.experiment)
    split_data = Split.read(found.subword, files)
    figures = measure(found.model, run_dir, split_data, found.settings, args.alphas or ALPHAS)
    code = commit_of(Path(__file__).resolve().parents[2])  # None outside a git checkout
    finished = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    record = {"experiment": args.experiment, "split": split, "workdir": str(args.workdir),
              "device": device_name(torch.device("cpu")), **code, "finished": finished,
              "command": shlex.join(["aiayn", *sys.argv[1:]]), **figures}  # fmt: skip
    write_output(args.output, json.dumps(record, indent=1) + "\n")
    return 0


def run_config(args: argparse.Namespace) -> int:
    import yaml

    from aiayn.config.load import load_config
    from aiayn.config.plan import Plan

    root = args.workdir
    config = load_config(root, [root / path for path in args.configfile])
    sys.stdout.write(yaml.safe_dump(config, sort_keys=False))
    for message in Plan(config).runs.warnings():  # as the Snakefile warns
        print(f"warning: {message}", file=sys.stderr)
    return 0


def run_results(args: argparse.Namespace) -> int:
    """One line per committed study: current, or stale with what changed and the command."""
    if args.compare:
        return run_compare(args.workdir)
    root, stale = args.workdir, 0
    records = sorted((root / "results").glob("*/run.json"))
    if not records:
        raise InputError(f"{(root / 'results').resolve()} holds no <study>/run.json")
    for path in records:
        where = path.parent.relative_to(root)
        try:
            state = study_state(root, path)
        except (InputError, OSError) as err:  # one study's missing config stops no other's check
            state = (
                f"cannot be checked here: {err}. Restore what is named, or run `aiayn results` "
                "in the workflow's checkout (--workdir), where its config files and code are"
            )
        stale += state != "current"
        sys.stdout.write(f"{where}: {state}\n")
    return 1 if stale else 0


def run_compare(root: Path) -> int:
    """Per study, after a rerun: whether it is a rerun of the committed study at all, each figure
    here against the committed one, then the environment's changes, each once. Exit 0: all
    reproduced; 1: a figure differs, or a record is missing, damaged or unreadable;
    NOT_A_RERUN: a study's code, settings or packages are not the committed ones."""
    from aiayn.report import compare

    here_studies = {path.parent.name for path in (root / "results").glob("*/run.json")}
    studies = sorted(here_studies | set(compare.committed_studies(root)))
    if not studies:
        raise InputError(f"{(root / 'results').resolve()} holds no <study>/run.json, here or "
                         "in git's HEAD")  # fmt: skip
    worst = 0
    for study in studies:
        where = Path("results") / study
        code = compare_study(root, where, study in here_studies)
        worst = max(worst, code)  # NOT_A_RERUN above a difference above none
    return worst


def compare_study(root: Path, where: Path, present: bool) -> int:
    """One study's part of `run_compare`: its lines on stdout, its exit code."""
    import json

    from aiayn.config.load import load_config
    from aiayn.report import compare
    from aiayn.report.run_record import file_digest

    if not present:
        sys.stdout.write(f"{where}: no run.json here, and git's HEAD has one: rerun the study, "
                         f"or restore it (git checkout -- {where})\n")  # fmt: skip
        return 1
    path = root / where / "run.json"
    try:
        here = compare.checked_record(json.loads(path.read_text(encoding="utf-8")), str(where))
        config = load_config(root, [root / name for name in here["configfiles"]],
                             here.get("config_overrides") or None)  # fmt: skip
        committed = compare.committed_record(root, path)
    except (OSError, ValueError, KeyError, TypeError, InputError) as err:
        sys.stdout.write(f"{where}: unreadable here ({type(err).__name__}: {err})\n")
        return 1
    if committed is None:
        sys.stdout.write(f"{where}: not committed (git's HEAD has no {where}/run.json)\n")
        return 0
    code = 0
    damaged = [name for name, digest in (here.get("files") or {}).items()
               if not (root / name).is_file() or file_digest(root / name) != digest]  # fmt: skip
    if damaged:
        sys.stdout.write(f"{where}: damaged: {', '.join(damaged)} (not what its run.json "
                         "recorded): rerun the study, or git checkout them\n")  # fmt: skip
        code = 1
    other = compare.rerun_differences(here, committed)
    if other:
        sys.stdout.write(f"{where}: not a rerun of the committed study: {'; '.join(other)}; "
                         "its figures follow as information only\n")  # fmt: skip
        code = compare.NOT_A_RERUN
    verdicts = compare.compare(here, committed, config["reproduction"])
    means = compare.compare_means(here, committed)
    # a study of seeds claims its seed means (and the data it scored); its seeds' own figures
    # are information, each beside its own tolerance
    decisive = [*means, *(v for v in verdicts if v.kind == "data")] if means else verdicts
    failed = [verdict for verdict in decisive if not verdict.reproduced]
    code = max(code, int(bool(failed)))
    summary = f"{len(decisive) - len(failed)} reproduced, {len(failed)} differ"
    if here == committed:
        summary += " (the committed record itself: nothing rerun since)"
    kind = "seed means and data figures" if means else "figures"
    sys.stdout.write(f"{where}: {len(decisive)} {kind} against git's HEAD: {summary}\n")
    for verdict in means:
        sys.stdout.write(f"  {verdict.line()}\n")
    if means:
        within = sum(verdict.reproduced for verdict in verdicts)
        sys.stdout.write(f"  each seed's figures, as information: {within} of {len(verdicts)} "
                         "within their own tolerance\n")  # fmt: skip
    for verdict in verdicts:
        sys.stdout.write(f"{'    ' if means else '  '}{verdict.line()}\n")
    largest = compare.largest_differences(verdicts)
    if largest and here != committed:  # how close the rerun came, beside each tolerance
        sys.stdout.write(f"  largest differences: {'; '.join(largest)}\n")
    code = max(code, study_conclusions(root, where.name))
    changes = compare.environment_changes(here, committed)
    sys.stdout.write(f"  recorded environment:{'' if changes else ' the same'}\n")
    for change in changes:
        sys.stdout.write(f"    {change}\n")
    return code


def study_conclusions(root: Path, study: str) -> int:
    """The committed tables' marked rows against the rerun's: one line, and one per change;
    1 where a conclusion is lost, reversed or new."""
    from aiayn.report import compare

    committed = compare.conclusions(compare.table_texts(root, study, committed=True))
    here = compare.conclusions(compare.table_texts(root, study, committed=False))
    changes = compare.conclusion_changes(here, committed)
    if not committed and not here:
        sys.stdout.write("  conclusions: none (no row of its tables is marked)\n")
        return 0
    held = [claim for key, claim in committed.items() if here.get(key) == claim]
    verdict = "reproduced" if not changes else "not reproduced"
    sys.stdout.write(f"  conclusions: {verdict}: {len(held)} of {len(committed)} hold\n")
    for line in [*(f"holds: {claim.text()}" for claim in held), *changes]:
        sys.stdout.write(f"    {line}\n")
    return 1 if changes else 0


def study_state(root: Path, path: Path) -> str:
    """`current`, or what makes the study's committed results differ from what this checkout
    computes: its run.json unreadable, a result edited by hand, or code and settings changed."""
    import json

    from aiayn.config.load import load_config
    from aiayn.config.plan import Plan
    from aiayn.config.versions import changes, package_changes, study_versions
    from aiayn.report.run_record import file_digest

    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        command = record["command"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        return (
            f"unreadable: {path.relative_to(root)} ({type(err).__name__}: {err}); restore it "
            f"(git checkout -- {path.relative_to(root)}) or rerun the study"
        )
    edited = [
        name
        for name, digest in record.get("files", {}).items()
        if not (root / name).is_file() or file_digest(root / name) != digest
    ]
    if edited:
        return (
            f"edited by hand: {', '.join(edited)} (not what run.json recorded: restore with "
            f"`git checkout -- FILE`, or rerun: {command})"
        )
    if "versions" not in record:
        found = [f"written at {record.get('commit')}, before run.json recorded versions "
                 "(every stage)"]  # fmt: skip
    else:
        configfiles = [root / name for name in record["configfiles"]]
        config = load_config(root, configfiles, record.get("config_overrides") or None)
        current = study_versions(Plan(config), root)
        found = changes(record["versions"], current, root)
        found += package_changes(record.get("software"), list(current["code"]), root)
    return f"stale: {'; '.join(found)}; rerun: {command}" if found else "current"


class Located(NamedTuple):
    model: Path  # the averaged model
    subword: Path  # its sentencepiece model
    settings: DecodeSettings  # the experiment's, with the command line's overrides
    entry: dict  # the experiment, as the workflow resolved it
    dataset: dict  # its dataset's settings


def locate(args: argparse.Namespace) -> Located:
    """The averaged model, BPE model and decode settings of the experiment, with overrides."""
    from aiayn.config import paths
    from aiayn.config.experiments import resolve_evaluation
    from aiayn.config.load import load_config
    from aiayn.config.plan import Plan
    from aiayn.prepare.pieces import load as load_subword

    root = args.workdir
    config = load_config(root, [root / path for path in args.configfile])
    entry = Plan(config).runs.entry(args.experiment)
    settings = resolve_evaluation(entry, config["datasets"])["decode"]
    dataset = config["datasets"][entry["dataset"]]
    names = ("beam", "alpha", "batch_tokens", "finalize")
    overrides = {name: getattr(args, name, None) for name in names}
    try:
        settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    except ValueError as err:
        raise InputError(str(err)) from None
    if settings.constrain != "none":
        trees = paths.decode_output("trees", entry["name"], "averaged", "test")
        raise InputError(
            f"experiment {entry['name']!r} parses (decode.constrain: {settings.constrain}): "
            f"`aiayn {args.command}` works on translations; a parser's trees come from the "
            f"workflow, e.g. `snakemake --cores all {trees}`"
        )
    model_path = root / paths.averaged_model(entry["name"])
    subword_path = root / paths.subword_file("model", entry["dataset"])
    if model_path.exists() and not model_path.is_file():
        raise InputError(
            f"{model_path} is not a file, where experiment {entry['name']!r}'s averaged model "
            f"belongs: move it away, then `snakemake --cores all "
            f"{paths.averaged_model(entry['name'])}` (and the same --configfile) averages the "
            "run's checkpoints again"
        )
    if not model_path.is_file():
        raise InputError(
            f"experiment {entry['name']!r} has no averaged model yet ({model_path}): train it "
            f"first with `snakemake --cores all {paths.averaged_model(entry['name'])}` (and the "
            "same --configfile)"
        )
    load_subword(subword_path, paths.subword_file("model", entry["dataset"]))  # its own check
    check_average_is_newest(root, model_path, root / paths.run_dir(entry["name"]))
    log.info("decode settings: %s", asdict(settings))
    return Located(model_path, subword_path, settings, entry, dataset)


def check_average_is_newest(root: Path, model: Path, run: Path) -> None:
    """The averaged model must postdate its run: weights or a train.json written after it mean
    training went on (a raised max_steps, a resumed run) or still runs, and the average is of
    older checkpoints. Snakemake averages again once training has ended (by the same times)."""
    from aiayn.config import paths
    from aiayn.train.checkpoint import weights_files

    written = [run / paths.TRAIN_SUMMARY, *weights_files(run / "weights")]
    later = [
        path
        for path in written
        if path.is_file() and path.stat().st_mtime_ns > model.stat().st_mtime_ns
    ]
    if later:
        raise InputError(
            f"{model} is older than its run's {later[-1].relative_to(root)}: training went on "
            f"after the average was made, or still runs. When training has ended, average "
            f"again: `snakemake --cores all {model.relative_to(root)}` (and the same "
            "--configfile)"
        )


def trained_tokens(workdir: Path, found: Located) -> int | None:
    """The longest training source sentence in tokens, from the binarize stage's record (None
    where the run's data is not here: a model copied without it)."""
    import json

    from aiayn.config import paths

    record = workdir / paths.split_record(
        "bin", found.entry["dataset"], "train", "-".join(found.dataset["langs"])
    )
    try:
        sides = json.loads(record.read_text(encoding="utf-8"))
        return int(sides[found.dataset["langs"][0]]["max_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


INPUT_CHUNK = 1 << 20  # bytes read at a time: a device that never ends is refused at its first


def read_input(path: Path | None) -> list[str]:
    """Lines to translate, without their line ends, split on "\\n" only, as the data stages
    split them (U+2028, U+0085, a form feed or a lone CR are text inside a line). Read a chunk at
    a time, so that what is not text (invalid UTF-8, a NUL byte: a binary file, /dev/zero or
    /dev/urandom) is refused where it starts, not after filling memory."""
    try:
        if path is None:
            text = decoded_text(sys.stdin.buffer, "stdin")
        else:
            with open(path, "rb") as source:
                text = decoded_text(source, str(path))
    except FileNotFoundError:
        raise InputError(f"input file {path} does not exist") from None
    except OSError as err:
        raise InputError(f"--input {path or 'stdin'} cannot be read: {err.strerror}") from None
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines[-1] == "":  # the final newline ends the last line; it does not start another
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def decoded_text(source, where: str) -> str:
    """The stream's UTF-8 text, refused at the first byte that is not text."""
    decoder, parts, offset, start = codecs.getincrementaldecoder("utf-8")(), [], 0, b""
    named = "FILE" if where == "stdin" else where  # in the iconv advice
    while True:
        chunk = source.read(INPUT_CHUNK)
        start = (start + chunk)[:4]  # a byte-order mark that names another encoding
        pending, invalid = len(decoder.getstate()[0]), None
        try:
            parts.append(decoder.decode(chunk, final=not chunk))
        except UnicodeDecodeError as err:
            invalid = (offset - pending + err.start, err.reason)
        nul = chunk.find(b"\0")
        if nul >= 0 and (invalid is None or offset + nul < invalid[0]):
            if marked_encoding(start):  # UTF-32 big-endian's mark starts with NUL bytes
                raise InputError(f"{where} is not UTF-8 text: {reencoding(start, named)}")
            raise InputError(
                f"{where} is not text: a NUL byte at byte {offset + nul} (a binary file, a "
                "device, or UTF-16 text?); give UTF-8 text, one sentence per line"
            )
        if invalid:
            raise InputError(f"{where} is not UTF-8 text (byte {invalid[0]}): {invalid[1]}; "
                             f"re-encode it: {reencoding(start, named)}")  # fmt: skip
        if not chunk:
            return "".join(parts)
        offset += len(chunk)


def run_export(args: argparse.Namespace) -> int:
    from aiayn.export.bundle import export

    found = locate(args)
    log.info("%s: writing the %s model of %s", args.output, args.format, found.model)
    record = export(found.model, found.subword, found.settings, args.output, args.format,
                    args.quantization, found.entry["name"])  # fmt: skip
    log.info("%s: %s model of %s (step %s)", args.output, args.format, found.model, record["step"])
    return 0


def check_input(path: Path | None) -> None:
    """Before any work: --input is a file."""
    if path is not None and path.is_dir():
        raise InputError(f"--input {path} is a folder: name a text file, one sentence per line")
    if path is not None and not path.exists():
        raise InputError(f"input file {path} does not exist")


def check_output(path: Path | None) -> None:
    """Before any work: an --output whose folder is missing or cannot be written would lose
    every translation at the end (a device, a pipe or a descriptor is written as it is)."""
    if path is None or open_descriptor(path) is not None:
        return
    if path.exists() and not path.is_file() and not path.is_dir():
        return
    if path.is_dir():
        raise InputError(f"--output {path} is a folder: name the file to write")
    if path.is_symlink() and not path.exists():  # written through: its target's folder counts
        path = Path(os.path.realpath(path))
    if not path.parent.is_dir():
        raise InputError(
            f"--output {path}: the folder {path.parent} does not exist; create it first "
            f"(mkdir -p {path.parent})"
        )
    try:  # the output is written beside its place, then renamed: the folder must take a file
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as err:
        raise InputError(
            f"--output {path}: the folder {path.parent} cannot be written ({err.strerror}): "
            "name a file in a folder you can write, or make it writable (chmod u+w)"
        ) from None


def check_device(name: str) -> str:
    """Before any work: a device torch knows and this machine has."""
    import torch

    if name == "auto":
        return name
    try:
        device = torch.device(name)
    except RuntimeError:
        raise InputError(
            f"--device {name!r} is not a device: use auto, cpu, cuda or cuda:N"
        ) from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (device.index is not None and device.index >= count):
            raise InputError(
                f"--device {name}: this machine has {count} CUDA device(s); use --device cpu "
                "(or auto, which takes a GPU when there is one)"
            )
    elif device.type != "cpu":
        raise InputError(f"--device {name!r}: use auto, cpu, cuda or cuda:N")
    return name


if __name__ == "__main__":
    sys.exit(main())
