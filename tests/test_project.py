"""Project hygiene that users rely on: lint-clean workflow and code, and a working benchmark."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import PROJECT, quick_experiment, shared


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=PROJECT, capture_output=True, text=True)


def test_snakemake_lint_is_clean():
    result = run(sys.executable, "-m", "snakemake", "--lint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_snakefmt_and_ruff_are_clean():
    for command in (
        ["snakefmt", "--check", "Snakefile", "rules"],
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
    ):
        result = run(sys.executable, "-m", *command)
        assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout}{result.stderr}"


def test_loading_the_workflow_imports_no_heavy_package():
    """Snakemake parses the Snakefile at every start, and again inside every cluster job: what it
    imports from aiayn must not pull in torch (about 2 s a start here) or its peers."""
    sources = [PROJECT / "Snakefile", *sorted((PROJECT / "rules").glob("*.smk"))]
    imports = [
        line
        for source in sources
        for line in source.read_text().splitlines()
        if line.startswith(("from aiayn", "import aiayn"))
    ]
    assert imports, "the workflow imports nothing from aiayn: this test checks nothing"
    heavy = ["torch", "deepspeed", "sentencepiece", "numpy", "pandas", "matplotlib", "sacrebleu"]
    check = "\n".join(["import sys", *imports, f"print(sorted(set({heavy}) & set(sys.modules)))"])
    env = {**os.environ, "PYTHONPATH": str(PROJECT / "src")}
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=PROJECT, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"{imports} load {result.stdout.strip()}"


def test_data_stages_benchmark_prints_bpe_and_binarization_figures():
    result = run(
        sys.executable, "bench/data_stages.py", "--sizes", "2000", "4000", "--bpe-sample", "1000"
    )
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["bench"] == "data_stages"
    head = subprocess.run(
        ["git", "rev-parse", "--short=7", "HEAD"], cwd=PROJECT, text=True, capture_output=True
    ).stdout.strip()
    assert record["commit"].startswith(head or "unknown")  # -dirty when the code is uncommitted
    assert record["command"].startswith(
        "python bench/data_stages.py --sizes 2000 4000 --bpe-sample 1000"
    )
    assert [r["lines"] for r in record["results"]] == [2000, 4000]
    for row in record["results"]:
        for method in ("bpe_sampled", "bpe_all_lines", "streaming", "naive"):
            assert row[method]["lines_per_s"] > 0 and row[method]["peak_rss_mib"] > 0
    assert set(record["rss_growth"]) == {"bpe_sampled", "bpe_all_lines", "streaming", "naive"}


def test_train_throughput_benchmark_compares_ours_eager_and_compiled_with_the_baselines():
    result = run(
        sys.executable,
        "bench/train_throughput.py",
        "--presets",
        "tiny",
        "--tokens",
        "1000",
        "--batch-tokens",
        "1000",
        "--vocab",
        "500",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--pairs",
        "500",
        "--compile",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    row = record["results"][0]
    compiled = row["ours_compiled"]["target_tokens_per_s"]
    assert compiled > 0 and row["compile_speedup"] == pytest.approx(
        compiled / row["ours"]["target_tokens_per_s"], abs=0.01
    )
    assert row["preset"] == "tiny" and row["model_flops_per_target_token"] > 0
    assert (
        row["ours"]["target_tokens_per_s"] > 0
        and row["naive_fp32_nn_transformer"]["target_tokens_per_s"] > 0
    )
    ratio = (
        row["ours"]["target_tokens_per_s"] / row["naive_fp32_nn_transformer"]["target_tokens_per_s"]
    )
    assert row["speedup"] == pytest.approx(ratio, abs=0.01)
    peer = row["hf_marian"]["target_tokens_per_s"]
    assert peer > 0 and row["speedup_vs_hf"] == pytest.approx(
        row["ours"]["target_tokens_per_s"] / peer, abs=0.01
    )


def test_collate_benchmark_checks_ours_against_the_sentence_by_sentence_baseline():
    result = run(sys.executable, "bench/collate_speed.py", "--pairs", "3000", "--tokens", "2000")
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["bench"] == "collate_speed" and record["batches"] > 10
    assert record["same_tensors"] is True  # every batch of the epoch, tensor for tensor
    ratio = record["sentence_by_sentence_ms_per_batch"] / record["ours_ms_per_batch"]
    assert record["speedup"] == pytest.approx(ratio, rel=0.05)


def test_decode_speed_benchmark_compares_ours_with_recomputing_and_hf_generate(tmp_path):
    source = shared("wmt14_newstest", "full", "newstest2014.en-de.en")
    result = run(
        sys.executable,
        "bench/decode_speed.py",
        "--source",
        str(source),
        "--preset",
        "tiny",
        "--sentences",
        "12",
        "--vocab",
        "1000",
        "--repeats",
        "3",
        "--profile",
        str(tmp_path / "profile.txt"),
        "--ab-against",
        "HEAD",
        "--ab-commit",
        "HEAD",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["source"] == "newstest2014.en-de.en, 12 sentences" and record["beam"] == 4
    ab = record["ab"]  # the committed code against itself: the same translations
    assert ab["against"] == git_head() and ab["same_translations"] == 1.0 and ab["repeats"] == 3
    assert ab["speedup"] == pytest.approx(ab["baseline_seconds"] / ab["ours_seconds"], abs=0.01)
    [change] = record["ab_commits"]  # the last commit against its parent: what it bought
    subject = subprocess.run(
        ["git", "log", "-1", "--format=%s"], cwd=PROJECT, capture_output=True, text=True
    )
    assert change["commit"] == git_head() and change["change"] == subject.stdout.strip()[:200]
    assert change["against"] == git_rev("HEAD~1") and 0 <= change["same_translations"] <= 1
    assert change["speedup"] == pytest.approx(
        change["baseline_seconds"] / change["ours_seconds"], abs=0.01
    )
    assert record["repeats"] == 3
    profile = (tmp_path / "profile.txt").read_text()
    assert "self_cpu_time_total" in profile and "aten::" in profile
    for decoder in ("ours_cached", "naive_recompute"):
        assert record[decoder]["sentences_per_s"] > 0 and record[decoder]["target_tokens_per_s"] > 0
    assert record["same_translations"] == 1.0
    assert record["speedup"] > 1.0
    peer = record["hf_marian_generate"]
    assert peer["sentences_per_s"] > 0
    assert record["speedup_vs_hf"] == pytest.approx(
        peer["seconds"] / record["ours_cached"]["seconds"], rel=0.05
    )


def git_head() -> str:
    return git_rev("HEAD")


def git_rev(revision: str) -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short=7", revision], cwd=PROJECT, capture_output=True, text=True
    )
    return found.stdout.strip()


def test_default_workflow_benchmark_times_all_cores_against_one(tmp_path):
    shutil.copy2(PROJECT / "config.yaml", tmp_path / "config.yaml")
    quick_experiment(tmp_path, max_steps=10)
    result = run(
        sys.executable, "bench/default_workflow.py", "--config-file", str(tmp_path / "config.yaml")
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["bench"] == "default_workflow" and record["config"].endswith("config.yaml")
    for run_ in (record["all_cores"], record["one_core"]):
        assert run_["jobs"] == record["all_cores"]["jobs"] > 10 and run_["seconds"] > 0
        assert set(run_["stages"]) == {"download", "subword", "binarize", "train", "decode"}
        assert run_["stages"]["train"]["jobs"] == 1
    assert record["one_core"]["cores"] == 1 and record["all_cores"]["cores"] == os.cpu_count()
    speedup = record["one_core"]["seconds"] / record["all_cores"]["seconds"]
    assert record["speedup"] == pytest.approx(speedup, abs=0.01)


def test_ci_runs_exactly_the_readme_install_and_test_commands():
    readme = (PROJECT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick_start.strip().splitlines()]
    assert commands == ['pip install -e ".[dev]"', "snakemake --cores all", "pytest"]
    ci = (PROJECT / ".ci" / "run").read_text()
    assert 'python -m pip install -e ".[dev]"' in ci and "\npytest || status=$?" in ci


def test_readme_quotes_the_committed_multi30k_run():
    """The README's Multi30k row is the run recorded in results/multi30k/run.json."""
    run_record = json.loads((PROJECT / "results" / "multi30k" / "run.json").read_text())
    scores = json.loads(
        (
            PROJECT / "results/multi30k/scores/multi30k_small/averaged/test_2016_flickr.json"
        ).read_text()
    )
    test = run_record["scores"]["averaged_test_2016_flickr"]
    assert round(scores["sacrebleu"]["score"], 2) == test["sacrebleu"] >= 30
    assert run_record["train_seconds"] <= 30 * 60
    readme = (PROJECT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| CPU, ≤ 30 min"))
    assert f"**{test['sacrebleu']:.1f}**" in row
    assert f"{run_record['train_seconds']:.0f} s" in row
    assert run_record["command"] in readme.replace(" \\\n    ", " ")


def test_readme_quotes_the_committed_wmt14_sample_run():
    run_record = json.loads((PROJECT / "results" / "wmt14_en_de_sample" / "run.json").read_text())
    readme = (PROJECT / "README.md").read_text()
    for key, label in (("full", "full"), ("filtered", "filtered")):
        score = run_record["scores"][f"averaged_newstest2014_{key}"]
        row = next(
            line for line in readme.splitlines() if line.startswith(f"| newstest2014, {label}")
        )
        cells = [cell.strip() for cell in row.split("|")]
        assert cells[2:7] == [
            str(score["sentences"]),
            str(score["ref_len_13a"]),
            f"{score['tokenized_bleu']:.2f}",
            f"{score['sacrebleu']:.2f}",
            f"{score['chrf']:.1f}",
        ]
    table = (PROJECT / "results/wmt14_en_de_sample/tables/table2.md").read_text()
    assert "Transformer (base model)" in table and "(sacrebleu wmt14/full, 3003 lines)" in table


def test_readme_quotes_the_committed_parsing_run():
    """The README's Table 4 row is the run recorded in results/ptb_sample/run.json, and the
    committed Table 4 and score file agree with it."""
    folder = PROJECT / "results" / "ptb_sample"
    run_record = json.loads((folder / "run.json").read_text())
    scores = json.loads((folder / "scores/parser_sample/averaged/test.json").read_text())
    figures = run_record["scores"]["averaged_test"]
    assert round(scores["evalb"]["all"]["f1"], 2) == figures["f1"]
    assert scores["sentences"] == figures["sentences"] == 168
    readme = (PROJECT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| Penn Treebank sample"))
    assert f"**{figures['f1']:.1f}**" in row and f"{run_record['train_seconds']:.0f} s" in row
    assert run_record["command"] in readme.replace(" \\\n    ", " ")
    table = (folder / "tables/table4.md").read_text()
    assert f"{figures['f1']:.2f}".rstrip("0").rstrip(".") in table


def test_readme_benchmark_tables_are_the_committed_figures():
    readme = (PROJECT / "README.md").read_text()
    results = PROJECT / "bench" / "results"
    train = json.loads((results / "train_throughput-cpu.json").read_text())
    for row in train["results"]:
        figures = [
            row["ours"]["target_tokens_per_s"],
            row["naive_fp32_nn_transformer"]["target_tokens_per_s"],
            row["hf_marian"]["target_tokens_per_s"],
        ]
        expected = " | ".join(f"{figure:,}" for figure in figures)
        expected += f" | {row['speedup']:.2f} | {row['speedup_vs_hf']:.2f} |"
        assert f"| {row['preset']} | {expected}" in readme
    collate = json.loads((results / "collate_speed-cpu.json").read_text())
    assert f"| {collate['ours_ms_per_batch']} |" in readme
    assert f"| {collate['sentence_by_sentence_ms_per_batch']} |" in readme
    assert f"Ours is {collate['speedup']}x faster" in readme and collate["same_tensors"]
    stages = json.loads((results / "data_stages-cpu.json").read_text())
    for row in stages["results"]:
        cells = [f"{row['lines']:,}"] + [
            f"{row[method]['lines_per_s']:,} / {row[method]['peak_rss_mib']} MiB"
            for method in ("bpe_sampled", "bpe_all_lines", "streaming", "naive")
        ]
        assert "| " + " | ".join(cells) + " |" in readme
    workflow = json.loads((results / "default_workflow-cpu.json").read_text())
    for run_ in (workflow["all_cores"], workflow["one_core"]):
        train = run_["stages"]["train"]
        assert (
            f"| {run_['seconds']:.0f} s | {run_['jobs']} | {train['seconds']:.0f} s "
            f"(peak {train['max_rss_mib']:.0f} MiB) | {run_['stages']['decode']['seconds']:.0f} s |"
        ) in readme
    assert f"the default run {workflow['speedup']}x faster" in readme
    for kind in ("cpu", "gpu"):
        decode = json.loads((results / f"decode_speed-{kind}.json").read_text())
        for key in ("ours_cached", "naive_recompute", "hf_marian_generate"):
            figures = decode[key]
            assert (
                f"| {figures['sentences_per_s']:.1f} | {figures['target_tokens_per_s']:,.0f} | "
                f"{figures['seconds']:.1f} s |" in readme
            ), (kind, key)
        for change in decode.get("ab_commits", []):  # what each decoder commit bought
            assert f"| {change['commit']} |" in readme, (kind, change["commit"])
            assert f"| {change['speedup']} | {change['same_translations']} |" in readme
    gpu = json.loads((results / "decode_speed-gpu.json").read_text())
    assert gpu["device"] in readme and f"{gpu['batch_tokens']} source tokens" in readme
    assert f"{1 / gpu['speedup_vs_hf']:.1f}x *slower*" in readme
    assert f"only {gpu['speedup']}x faster" in readme
