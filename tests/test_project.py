"""Project hygiene that users rely on: lint-clean workflow and code, and a working benchmark."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from tests.conftest import CHECKED_FILES, PROJECT, copy_project, shared


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


def test_rules_name_their_functions():
    """Snakemake's best practices: no lambdas in rules; their input, params and resources
    functions are named in rules/common.smk."""
    for source in sorted((PROJECT / "rules").glob("*.smk")):
        assert "lambda" not in source.read_text(), f"{source.name} holds a lambda"


def test_loading_the_workflow_imports_no_heavy_package():
    """Snakemake parses the Snakefile at every start, and again inside every cluster job: what it
    imports from aiayn must not pull in torch (about 2 s a start here) or its peers."""
    sources = [PROJECT / "Snakefile", *sorted((PROJECT / "rules").glob("*.smk"))]
    statement = re.compile(r"^(?:from aiayn\S* import (?:\([^)]*\)|.*)|import aiayn.*)$", re.M)
    imports = [found for source in sources for found in statement.findall(source.read_text())]
    assert imports, "the workflow imports nothing from aiayn: this test checks nothing"
    heavy = ["torch", "deepspeed", "sentencepiece", "numpy", "pandas", "matplotlib", "sacrebleu"]
    check = "\n".join(["import sys", *imports, f"print(sorted(set({heavy}) & set(sys.modules)))"])
    env = {**os.environ, "PYTHONPATH": str(PROJECT / "src")}
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=PROJECT, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"{imports} load {result.stdout.strip()}"


def test_wmt_rehearsal_runs_every_data_stage_with_the_paper_preset():
    result = run(sys.executable, "bench/wmt_rehearsal.py", "--pairs", "2000", "8000")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["bench"] == "wmt_rehearsal" and record["preset"] == "configs/wmt14_en_de.yaml"
    head = subprocess.run(
        ["git", "rev-parse", "--short=7", "HEAD"], cwd=PROJECT, text=True, capture_output=True
    ).stdout.strip()
    assert record["commit"].startswith(head or "unknown")  # -dirty when the code is uncommitted
    assert record["command"].startswith("python bench/wmt_rehearsal.py --pairs 2000 8000")
    assert [r["pairs"] for r in record["results"]] == [2000, 8000]
    for row in record["results"]:
        for stage in ("download", "clean", "subword", "binarize", "plan_epoch"):
            assert row[stage]["seconds"] > 0 and row[stage]["peak_rss_mib"] > 0
        assert row["clean"]["kept_pairs"] == row["pairs"]  # ratio 9 keeps every toy pair
        assert row["subword"]["input_sentence_size"] == 4_000_000
        assert row["plan_epoch"]["too_long"] == 0 and row["plan_epoch"]["batches"] > 0


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
        "2",
        "--profile",
        str(tmp_path / "profile.txt"),
        "--ab-against",
        "HEAD",
        "--ab-commit",
        "HEAD",
        "--ct2",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["source"] == "newstest2014.en-de.en, 12 sentences" and record["beam"] == 4
    for kind in ("float32", "int8"):  # CTranslate2 on the exported model, in the same run
        figures = record[f"ctranslate2_{kind}"]
        assert (
            figures["sentences_per_s"] > 0 and 0 <= record[f"same_translations_as_ct2_{kind}"] <= 1
        )
        assert record[f"ours_vs_ct2_{kind}"] == pytest.approx(
            figures["seconds"] / record["ours_cached"]["seconds"], rel=0.05
        )
    ab = record["ab"]  # the committed code against itself: the same translations
    assert ab["against"] == git_head() and ab["same_translations"] == 1.0 and ab["repeats"] == 2
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
    assert record["repeats"] == 2
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


DOCS = PROJECT / "docs"


def doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def readme_row(start: str) -> str:
    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    return next(line for line in readme.splitlines() if line.startswith(start))


def same_command(recorded: str, page: str) -> bool:
    """A committed run's command is on the page, its data folder (`root`) left as a placeholder:
    where the files were on the machine that ran it says nothing to a reader."""
    placeholder = re.compile(r"root: [^}]*")
    return placeholder.sub("root: DIR", recorded) in page.replace(" \\\n    ", " ")


def pages() -> dict[str, str]:
    found = {"README.md": (PROJECT / "README.md").read_text(encoding="utf-8")}
    found |= {f"docs/{path.name}": path.read_text(encoding="utf-8") for path in DOCS.glob("*.md")}
    return found


def test_readme_fits_a_screen_and_links_every_docs_page():
    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 12 * 1024
    linked = set(re.findall(r"\(docs/([\w-]+\.md)", readme))
    assert linked == {path.name for path in DOCS.glob("*.md")}


def test_docs_links_paths_and_commands_are_true():
    """Every relative link resolves, no page names a path of the machine it was written on, and
    every preset, benchmark script and workflow path a command names exists."""
    for name, text in pages().items():
        base = (PROJECT / name).parent
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (base / target).exists(), f"{name}: link to missing {target}"
        for anchor_page, anchor in re.findall(r"\]\(([\w/.-]+\.md)#([\w-]+)\)", text):
            headings = (base / anchor_page).read_text(encoding="utf-8")
            slugs = {
                re.sub(r"[^\w -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
                for line in headings.splitlines()
                if line.startswith("#")
            }
            assert anchor in slugs, f"{name}: no heading #{anchor} in {anchor_page}"
        for machine_path in ("/work/", "/home/", "/root/", "../shared/data/"):
            lines = [line for line in text.splitlines() if machine_path in line]
            if machine_path == "../shared/data/":  # only where the tests' data is described
                lines = [line for line in lines if "snakemake" in line or "root:" in line]
            assert not lines, f"{name} names a machine's path: {lines}"
        for path in re.findall(
            r"(?:configs|bench|profiles|schemas|rules)/[\w/.-]+\.(?:yaml|py|smk)", text
        ):
            assert (PROJECT / path).exists(), f"{name} names {path}, which does not exist"


def shows_all(cells: list[str], values: list) -> bool:
    """Each cell shows its value (`shows`), `a ± b` both halves, `N s` the seconds."""
    for cell, value in zip(cells, values, strict=True):
        if isinstance(value, tuple):
            halves = cell.split(" ± ")
            if len(halves) != 2 or not shows_all(halves, list(value)):
                return False
        elif not shows(cell.removesuffix(" s"), value):
            return False
    return True


EXPERIMENTS = ("tiny", "tiny_one_head", "tiny_learned_positions", "tiny_one_layer")


def holm(p_values: dict[str, float | None]) -> dict[str, float | None]:
    """Each p adjusted over the others (statsmodels' Holm); None (the baseline) stays None."""
    from statsmodels.stats.multitest import multipletests

    tested = {name: p for name, p in p_values.items() if p is not None}
    adjusted = dict(
        zip(tested, multipletests(list(tested.values()), method="holm")[1], strict=True)
    )
    return {name: adjusted.get(name) for name in p_values}


def interval(figures: dict) -> str:
    """A score and its bootstrap 95% interval as the README prints them: 97.1 [95.6, 98.6]."""
    bootstrap = figures["bootstrap"]
    low, high = bootstrap["mean"] - bootstrap["ci95"], bootstrap["mean"] + bootstrap["ci95"]
    return f"{figures['score']:.1f} [{low:.1f}, {high:.1f}]"


def test_readme_toy_table_is_the_committed_toy_study():
    """Each figure of the README's toy table rounds once what the toy study recorded: the
    training figures from its run.json, the scores unrounded from its score files, p adjusted
    over the table's three comparisons."""
    root = PROJECT / "results" / "toy"
    record = json.loads((root / "run.json").read_text())
    assert record["command"] == "snakemake --cores all" and not record["config_overrides"]
    assert set(record["experiments"]) == set(EXPERIMENTS)
    scores = {
        name: {
            key: json.loads((root / f"scores/{name}/{key[0]}/{key[1]}.json").read_text())
            for key in (("last", "dev"), ("averaged", "dev"), ("averaged", "test"))
        }
        for name in EXPERIMENTS
    }
    adjusted = holm({name: scores[name]["averaged", "test"]["paired_bootstrap"].get("p_value")
                     for name in EXPERIMENTS})  # fmt: skip
    for name, run_ in record["experiments"].items():
        cells = [cell.strip() for cell in readme_row(f"| `{name}` |").split("|")[3:-1]]
        found = scores[name]
        assert cells[3] == interval(found["averaged", "test"]["sacrebleu"]), (name, cells)
        assert shows_all(cells[:3] + cells[4:], [
            run_["dev_ppl"],
            found["last", "dev"]["sacrebleu"]["score"],
            found["averaged", "dev"]["sacrebleu"]["score"],
            "baseline" if adjusted[name] is None else adjusted[name],
            run_["train_seconds"],
        ]), (name, cells)  # fmt: skip
    seconds = round(record["invocation_seconds"])
    readme = " ".join((PROJECT / "README.md").read_text(encoding="utf-8").split())
    assert f"the report: {seconds} s in a fresh clone" in readme
    # beside the trivial baseline on the same test split: its source copied as the translation
    from aiayn.data.toy import generate
    from aiayn.score.bleu import score

    split = yaml.safe_load((PROJECT / "configs/data/toy.yaml").read_text())["datasets"]["toy"]
    test = split["splits"]["test"]
    source, reference = zip(*generate(test["size"], test["seed"], "test"), strict=True)
    copied = score(list(source), list(reference), "de", resamples=0)["sacrebleu"]["score"]
    quoted = re.search(r"copying the source ([\d.]+);", readme).group(1)
    assert shows(quoted, copied), (quoted, copied)


def test_readme_seed_table_is_the_committed_toy_seeds_study():
    """The README's seed table: each experiment's mean ± sd over seeds (sacreBLEU), and the
    seed test's p, raw and adjusted over the table's comparisons, as results/toy_seeds/ holds
    them."""
    root = PROJECT / "results" / "toy_seeds"
    last = {n: json.loads((root / f"seeds/{n}/last/dev.json").read_text()) for n in EXPERIMENTS}
    test = {
        n: json.loads((root / f"seeds/{n}/averaged/test.json").read_text()) for n in EXPERIMENTS
    }
    raw = {name: test[name]["test"].get("p_value") for name in EXPERIMENTS}
    adjusted = holm(raw)
    for name in EXPERIMENTS:
        row = readme_row(f"| `{name}` | {test[name]['seeds']} |")
        cells = [cell.strip() for cell in row.split("|")[3:-1]]

        def p(value):
            return "baseline" if value is None else value

        per_seed = cells[1].split(" / ")
        assert shows_all(per_seed, test[name]["sacrebleu"]["per_seed"]), (name, cells)
        assert shows_all(cells[:1] + cells[2:], [
            (last[name]["sacrebleu"]["mean"], last[name]["sacrebleu"]["sd"]),
            (test[name]["sacrebleu"]["mean"], test[name]["sacrebleu"]["sd"]),
            p(raw[name]),
            p(adjusted[name]),
        ]), (name, cells)  # fmt: skip


def test_the_fidelity_page_quotes_the_recorded_step_fill():
    """docs/fidelity.md's share of the step's real target tokens is the default run's."""
    record = json.loads((PROJECT / "results/toy/run.json").read_text())
    real = record["experiments"]["tiny"]["real_tokens_per_step"]["target"]
    assert f"hold {real / 2000:.1%} of their 2000 target" in doc("fidelity.md")


def markdown_tables(text: str) -> list[list[dict[str, str]]]:
    """Every table of a markdown page, as rows of {header: cell}."""
    tables, lines = [], text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("|") and lines[i + 1].startswith("|---"):
            header = [cell.strip() for cell in line.strip("|").split("|")]
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                cells = [cell.strip() for cell in row.strip("|").split("|")]
                rows.append(dict(zip(header, cells, strict=True)))
            tables.append(rows)
    return tables


def shows(cell: str, value) -> bool:
    """A page's cell shows a table's value: the same text, or the number to the digits shown."""
    if pd.isna(value) or value == "":
        return cell == ""
    try:
        shown = float(cell)
    except ValueError:
        return cell == str(value)
    mantissa, _, exponent = cell.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    unit = 10.0 ** (int(exponent or 0) - decimals)
    return abs(shown - float(value)) <= unit / 2 + 1e-12


def test_the_decoding_page_quotes_the_committed_tables():
    """Each row quoted on docs/decoding.md is the committed default run's table, cell by cell."""
    excerpts = [table for table in markdown_tables(doc("decoding.md")) if "source" in table[0]]
    assert len(excerpts) == 2
    for excerpt, name, key in ((excerpts[0], "table3", "row"), (excerpts[1], "table2", "model")):
        table = pd.read_csv(PROJECT / f"results/toy/tables/{name}.csv").set_index(["source", key])
        for row in excerpt:
            full = table.loc[(row["source"], row[key])]
            for column, cell in row.items():
                if column in ("source", key):
                    continue
                assert shows(cell, full[column]), f"{name} {row[key]} {column}: {cell!r}"


def test_the_code_is_licensed_and_says_so():
    """MIT: the LICENSE file, the installed package's metadata (what pip shows), the README."""
    from importlib.metadata import metadata

    assert (PROJECT / "LICENSE").read_text().startswith("MIT License\n")
    assert metadata("aiayn")["License-Expression"] == "MIT"
    assert "[MIT](LICENSE)" in (PROJECT / "README.md").read_text()


def test_ci_runs_exactly_the_readme_install_and_test_commands():
    readme = (PROJECT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick_start.strip().splitlines()]
    assert commands == ['pip install -e ".[dev]"', "snakemake --cores all", "pytest"]
    ci = (PROJECT / ".ci" / "run").read_text()
    assert 'python -m pip install -e ".[dev]"' in ci and "\npytest || status=$?" in ci


COMMITTED_STUDIES = ("toy", "toy_seeds", "multi30k", "wmt14_en_de_sample", "ptb_sample")


def study_record(study: str) -> dict:
    return json.loads((PROJECT / "results" / study / "run.json").read_text())


@pytest.mark.parametrize("study", COMMITTED_STUDIES)
def test_committed_studies_are_what_the_workflow_wrote_at_a_commit(study):
    """Each committed study is one workflow run's results/<study>/: its run.json (written by the
    workflow) names the study, a commit with no uncommitted code, and every score file there."""
    record = study_record(study)
    assert record["study"] == study and record["command"].startswith("snakemake ")
    assert record["commit"] and record["uncommitted_changes"] is False
    for kind, key in (("scores", "scores"), ("seeds", "seed_scores")):
        folder = PROJECT / "results" / study / kind
        on_disk = {p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.json")}
        assert on_disk == set(record.get(key, {})), kind
    assert sorted(p.name for p in (PROJECT / "results").iterdir() if p.is_dir()) == sorted(
        COMMITTED_STUDIES
    )


def bold(row: str) -> str:
    """The first **figure** of a table row."""
    return re.search(r"\*\*([^*]+)\*\*", row).group(1)


PENDING = yaml.safe_load((PROJECT / "results/regeneration.yaml").read_text())["pending"]


def stale_by_code_alone(state: str) -> bool:
    """Whether `aiayn results`' state of a study names only stages whose code changed."""
    if not state.startswith("stale: "):
        return False
    causes = state.removeprefix("stale: ").rsplit("; rerun: ", 1)[0].split("; ")
    return all(re.fullmatch(r"code of \w+ \([^;]*\)", cause) for cause in causes)


def test_every_committed_study_is_what_this_checkout_computes_or_waits_by_code(capsys):
    """`aiayn results` on the committed tree: every study is listed; one that waits for the
    round's regeneration (results/regeneration.yaml) is stale by its stages' code alone, every
    other one current. A listed study that is current fails, so the list cannot outlive it."""
    from aiayn.cli import main

    assert set(PENDING) <= set(COMMITTED_STUDIES)
    code = main(["results", "--workdir", str(PROJECT)])
    lines = capsys.readouterr().out.splitlines()
    found = dict(line.split(": ", 1) for line in lines)
    assert sorted(found) == [f"results/{study}" for study in sorted(COMMITTED_STUDIES)]
    for study in COMMITTED_STUDIES:
        state = found[f"results/{study}"]
        assert stale_by_code_alone(state) if study in PENDING else state == "current", state
    assert code == int(bool(PENDING))


def test_a_regenerated_study_leaves_the_pending_list_and_its_comments_stay(tmp_path):
    """What .ci/regenerate does once it copied a study's new results in."""
    from tests.conftest import regenerated

    (tmp_path / "results").mkdir()
    original = (PROJECT / "results/regeneration.yaml").read_text()
    path = tmp_path / "results/regeneration.yaml"
    path.write_text(re.sub(r"(?m)^pending:.*$", "pending: [multi30k, toy, toy_seeds]", original))
    regenerated(tmp_path, "toy")
    assert yaml.safe_load(path.read_text())["pending"] == ["multi30k", "toy_seeds"]
    regenerated(tmp_path, "ptb_sample")  # not pending: nothing changes
    for study in ("multi30k", "toy_seeds"):
        regenerated(tmp_path, study)
    assert yaml.safe_load(path.read_text())["pending"] == []
    assert path.read_text().splitlines()[:-1] == original.splitlines()[:-1]  # the comments


@pytest.mark.parametrize(
    ("state", "by_code"),
    [("stale: code of train (src/aiayn/model.py, src/aiayn/train/schedule.py); code of "
      "score (rules/score.smk: params of score); rerun: snakemake --cores all", True),
     ("current", False),
     ("stale: code of train (src/a.py); train settings of tiny (train on); rerun: x", False),
     ("stale: code of train (src/a.py); sacrebleu 2.6.0 here, 2.5.1 recorded (download on); "
      "rerun: x", False),
     ("edited by hand: results/toy/tables/table2.md (not what run.json recorded)", False)],
)  # fmt: skip
def test_a_study_waits_by_code_only_where_nothing_else_changed(state, by_code):
    assert stale_by_code_alone(state) == by_code


def test_aiayn_results_names_a_hand_edit_a_literal_param_and_an_unreadable_record(tmp_path, capsys):
    """On a copy of the checkout: a number edited in a committed table or score file is named
    (exit 1), a rule's literal param that moves numbers makes its stage stale, and a truncated
    run.json is named while the other studies are still checked."""
    from aiayn.cli import main

    copy_project(tmp_path, [*CHECKED_FILES, "results"])

    def states() -> dict[str, str]:
        code = main(["results", "--workdir", str(tmp_path)])
        lines = capsys.readouterr().out.splitlines()
        found = dict(line.split(": ", 1) for line in lines)
        assert code == (0 if set(found.values()) == {"current"} else 1)
        return found

    before = states()  # current, or stale by code alone while a regeneration is pending
    assert all(s == "current" or stale_by_code_alone(s) for s in before.values()), before
    table = tmp_path / "results/toy/tables/table2.md"
    table.write_text(table.read_text().replace("| tiny |", "| tiny | 9", 1))
    score = tmp_path / "results/multi30k/scores/multi30k_small/averaged/val.json"
    score.write_text(score.read_text().replace('"score": ', '"score": 1', 1))
    found = states()
    assert found["results/toy"].startswith("edited by hand: results/toy/tables/table2.md (")
    assert found["results/multi30k"].startswith(
        "edited by hand: results/multi30k/scores/multi30k_small/averaged/val.json"
    )
    assert found["results/toy_seeds"] == before["results/toy_seeds"]

    (tmp_path / "results/toy_seeds/run.json").write_text('{"study": "toy_se')  # truncated
    rules = tmp_path / "rules/score.smk"
    rules.write_text(
        rules.read_text().replace(
            'resamples=config["report"]["bootstrap_resamples"]', "resamples=500", 1
        )
    )
    found = states()
    assert found["results/toy_seeds"].startswith("unreadable: results/toy_seeds/run.json (")
    wmt = found["results/wmt14_en_de_sample"]
    assert wmt.startswith("stale: ") and "rules/score.smk: params of score)" in wmt
    assert "rules/score.smk" not in before["results/wmt14_en_de_sample"]
    assert found["results/ptb_sample"] == before["results/ptb_sample"]  # no score rule


def test_aiayn_results_names_another_package_version_and_table1s_settings(tmp_path, capsys):
    """On a copy of the checkout: a package whose output moves numbers, installed at another
    version than the study recorded, is named with the first stage that imports it; Table 1's
    settings, and Table 1 turned off, make the study stale from the complexity stage."""
    from aiayn.cli import main
    from aiayn.software import package_versions

    copy_project(tmp_path, [*CHECKED_FILES, "results"])

    def toy() -> str:
        code = main(["results", "--workdir", str(tmp_path)])
        found = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
        assert code == (0 if set(found.values()) == {"current"} else 1)
        return found["results/toy"]

    def causes(state: str) -> str:  # what follows the code a pending regeneration names
        return re.sub(r"^(stale: )?(code of \w+ \([^;]*\); )*", "", state)

    before = toy()
    record_path = tmp_path / "results/toy/run.json"
    record = json.loads(record_path.read_text())
    record["software"]["sacrebleu"] = "2.5.1"
    record_path.write_text(json.dumps(record))
    here = package_versions()["sacrebleu"]
    assert causes(toy()).startswith(f"sacrebleu {here} here, 2.5.1 recorded (download on);")
    record_path.write_text((PROJECT / "results/toy/run.json").read_text())
    assert toy() == before

    config = tmp_path / "config.yaml"
    config.write_text(
        config.read_text().replace("lengths: [16, 32, 64, 128, 256]", "lengths: [16, 32, 64]")
    )
    assert causes(toy()).startswith("complexity settings (complexity on);")
    config.write_text(config.read_text().replace("  enabled: true", "  enabled: false", 1))
    assert "stage complexity is no longer in the study" in toy()


def test_readme_quotes_the_committed_multi30k_run():
    """docs/results.md's CPU row is seed 1 of the run recorded in results/multi30k/run.json, and
    the README's Multi30k row the mean and sd over its seeds, as Table 2's."""
    run_record = study_record("multi30k")
    experiment = run_record["experiments"]["multi30k_small"]
    scores = json.loads(
        (
            PROJECT / "results/multi30k/scores/multi30k_small/averaged/test_2016_flickr.json"
        ).read_text()
    )
    test = run_record["scores"]["multi30k_small/averaged/test_2016_flickr"]
    assert round(scores["sacrebleu"]["score"], 2) == test["sacrebleu"] >= 30
    assert round(scores["sacrebleu"]["brevity_penalty"], 3) == test["brevity_penalty"] >= 0.95
    assert scores["decode"]["alpha"] == experiment["decode"]["alpha"]
    page = doc("results.md")
    row = next(line for line in page.splitlines() if line.startswith("| CPU, seed 1 "))
    assert shows(bold(row), scores["sacrebleu"]["score"]), row
    assert f"{experiment['train_seconds']:.0f} s" in row
    assert same_command(run_record["command"], page)
    seeds = PROJECT / "results/multi30k/seeds/multi30k_small/averaged/test_2016_flickr.json"
    over_seeds = json.loads(seeds.read_text())["sacrebleu"]
    assert len(over_seeds["per_seed"]) == 3
    row = next(line for line in page.splitlines() if line.startswith("| sacreBLEU, test_2016"))
    cells = [cell.strip() for cell in row.split("|")][2:-1]
    expected = [*over_seeds["per_seed"], (over_seeds["mean"], over_seeds["sd"])]
    assert shows_all(cells, expected), cells
    row = readme_row("| Multi30k")
    assert shows(bold(row), over_seeds["mean"]) and f"± {over_seeds['sd']:.2f} (" in row, row
    assert f"{experiment['train_seconds']:.0f} s a seed" in row and "3 seeds" in row, row


def test_the_reruns_index_quotes_each_kernel_rerun_it_keeps():
    """docs/reruns/ holds `aiayn results --compare`'s output of the reruns under other kernels;
    its README links each, in a row that says how many figures reproduced as its file does, and
    quotes each headline score (sacreBLEU, a parser's F1) that differs, or else the largest
    difference in it; docs/results.md links the index."""
    assert "(reruns/README.md)" in doc("results.md")
    index = doc("reruns/README.md")
    reruns = sorted((DOCS / "reruns").glob("*.txt"))
    assert reruns
    verdict = re.compile(r"^results/\w+: (\d+) figures against git's HEAD: (\d+) reproduced", re.M)
    for rerun in reruns:
        text = rerun.read_text(encoding="utf-8")
        page = next((row for row in index.splitlines() if f"]({rerun.name})" in row), "")
        assert page, f"docs/reruns/README.md has no row for {rerun.name}"
        total, reproduced = verdict.search(text).groups()
        said = f"all {total} figures" if total == reproduced else f"{reproduced} of {total}"
        assert said in page, (rerun.name, said)
        headline = [(field, label) for field, label in (("sacrebleu", "sacreBLEU"), ("f1", "F1"))
                    if f" {field}: " in text]  # fmt: skip
        assert headline, rerun.name
        for field, label in headline:
            figure = re.compile(rf" {field}: (\w+): ([\d.]+) here, ([\d.]+) committed")
            found = figure.findall(text)
            differ = [f"{ours} against {theirs}" for v, ours, theirs in found if v == "differs"]
            largest = max(abs(float(ours) - float(theirs)) for _, ours, theirs in found)
            for quoted in differ or [f"{largest:.2f} {label}"]:
                assert quoted in page, (rerun.name, quoted)


def test_the_fidelity_page_quotes_the_short_outputs_measurements():
    """docs/fidelity.md's Multi30k tables are bench/results/short_outputs-cpu.json's, measured on
    the committed run, and the config decodes with the alpha that was best on val."""
    record = json.loads((PROJECT / "bench/results/short_outputs-cpu.json").read_text())
    page = doc("fidelity.md")
    for row in record["checkpoints"]:
        cells = [row["weights"].removeprefix("step").lstrip("0") or "0"]
        for search in ("beam", "greedy"):
            figures = row[search]
            cells += [str(figures[key]) for key in ("bleu", "brevity_penalty", "length_ratio")]
        assert "| " + " | ".join(cells) + " |" in page, cells
    sweep = record["averaged"]["alpha_sweep"]
    for label, key in (("val BLEU", "bleu"), ("brevity penalty", "brevity_penalty")):
        assert f"| {label} | " + " | ".join(str(row[key]) for row in sweep) + " |" in page
    best = record["averaged"]["best_alpha"]
    for label, key in ((f"p, {best} against it", "best_alpha_paired_p"),
                       ("the same, Holm over the sweep", "best_alpha_paired_p_holm")):  # fmt: skip
        tests = record["averaged"][key]
        cells = [str(tests.get(str(row["alpha"]), "—")) for row in sweep]
        assert f"| {label} | " + " | ".join(cells) + " |" in page
    config = yaml.safe_load((PROJECT / "configs/multi30k.yaml").read_text())
    experiment = config["experiments"]["multi30k_small"]
    assert experiment["decode"]["alpha"] == record["averaged"]["best_alpha"]
    run_record = study_record("multi30k")["experiments"]["multi30k_small"]
    assert record["settings"]["alpha"] == 0.6  # the paper's, whose effect was measured
    assert run_record["decode"]["alpha"] == experiment["decode"]["alpha"]
    # the committed model's: the sweep at the config's alpha is the committed val score
    val = PROJECT / "results/multi30k/scores/multi30k_small/averaged/val.json"
    at_alpha = next(row for row in sweep if row["alpha"] == experiment["decode"]["alpha"])
    assert at_alpha["bleu"] == round(json.loads(val.read_text())["sacrebleu"]["score"], 2)


def test_readme_quotes_the_committed_wmt14_sample_run():
    run_record = study_record("wmt14_en_de_sample")
    scores = "small_en_de_sample/averaged/newstest2014"
    page = doc("results.md")
    folder = PROJECT / "results/wmt14_en_de_sample/scores"
    for key, label in (("", "full"), ("_filtered", "filtered")):
        score = json.loads((folder / f"{scores}{key}.json").read_text())
        row = next(
            line for line in page.splitlines() if line.startswith(f"| newstest2014, {label}")
        )
        cells = [cell.strip() for cell in row.split("|")]
        assert cells[2:4] == [str(score["sentences"]), str(score["sacrebleu"]["ref_len"])]
        values = [score[name]["score"] for name in ("tokenized_bleu", "sacrebleu", "chrf")]
        assert shows_all(cells[4:7], values), cells
    seeds = PROJECT / "results/wmt14_en_de_sample/seeds" / f"{scores}.json"
    full = json.loads(seeds.read_text())["sacrebleu"]  # the mean over seeds, as Table 2's
    seconds = run_record["experiments"]["small_en_de_sample"]["train_seconds"]  # seed 1's
    row = readme_row("| WMT14 EN→DE, a 10000-pair sample")
    assert shows(bold(row), full["mean"]) and f"± {full['sd']:.2f} (" in row, row
    assert f"{seconds:.0f} s a seed" in row and f"{len(full['per_seed'])} seeds" in row
    table = (PROJECT / "results/wmt14_en_de_sample/tables/table2_detail.md").read_text()
    assert "Transformer (base model)" in table and "(sacrebleu wmt14/full, 3003 lines)" in table


COPY_BASELINES = {  # README row, docs/results.md row and its figures, the split's files
    "multi30k": (
        "| Multi30k",
        "| the English source copied (a trivial baseline) |",
        ("sacrebleu", "tokenized_bleu", "chrf"),
        ("multi30k/test_2016_flickr.en", "multi30k/test_2016_flickr.de"),
    ),
    "wmt14_en_de_sample": (
        "| WMT14 EN→DE, a 10000-pair sample",
        "| newstest2014, full: the English source copied (a trivial baseline) |",
        ("tokenized_bleu", "sacrebleu", "chrf"),
        ("wmt14_newstest/full/newstest2014.en-de.en", "wmt14_newstest/full/newstest2014.en-de.de"),
    ),
}


@pytest.mark.parametrize("study", COPY_BASELINES)
def test_a_translation_result_stands_beside_copying_its_source(study):
    """A result is evidence only beside a trivial baseline on the same data: the README's
    sacreBLEU of the test split's source copied as its translation, and docs/results.md's
    figures of it, are what the workflow's scorer gives."""
    from aiayn.score.bleu import score

    readme_start, page_start, columns, files = COPY_BASELINES[study]
    source, reference = (shared(*name.split("/")).read_text().splitlines() for name in files)
    figures = score(source, reference, target_lang="de", resamples=1)
    row = readme_row(readme_start)
    quoted = re.search(r"copying the source ([\d.]+)\)", row).group(1)
    assert shows(quoted, figures["sacrebleu"]["score"]), row
    page_row = next(line for line in doc("results.md").splitlines() if line.startswith(page_start))
    cells = [cell.strip() for cell in page_row.split("|") if cell.strip()][-3:]
    assert all(
        shows(cell, figures[name]["score"]) for cell, name in zip(cells, columns, strict=True)
    ), cells


def test_readme_quotes_the_committed_parsing_run():
    """Each seed of the parser in results/ptb_sample/run.json is a row of docs/results.md and of
    the committed Table 4, its score file agreeing; the README gives their mean and sd."""
    import statistics

    folder = PROJECT / "results" / "ptb_sample"
    run_record = study_record("ptb_sample")
    page = doc("results.md")
    table = (folder / "tables/table4.md").read_text()  # the paper's layout: one decimal
    seeds = sorted(run_record["experiments"])  # parser_sample, parser_sample.seed2, ...
    assert len(seeds) == 3
    test_f1 = []
    for run in seeds:
        scores = json.loads((folder / f"scores/{run}/averaged/test.json").read_text())
        figures = run_record["scores"][f"{run}/averaged/test"]
        f1 = scores["evalb"]["all"]["f1"]
        assert round(f1, 2) == figures["f1"]
        assert scores["sentences"] == figures["sentences"] == 168
        seconds = run_record["experiments"][run]["train_seconds"]
        row = next(line for line in page.splitlines() if line.startswith(f"| `{run}` |"))
        assert shows(bold(row), f1) and f"{seconds:.0f} s" in row, row
        assert f"| {run} (ours) | " in table and f"| {f1:.1f} |" in table
        test_f1.append(f1)
    assert same_command(run_record["command"], page)
    row = readme_row("| Penn Treebank sample")
    assert shows(bold(row), statistics.fmean(test_f1)), row
    assert f"± {statistics.stdev(test_f1):.1f} (3 seeds;" in row, row
    seconds = run_record["experiments"]["parser_sample"]["train_seconds"]  # seed 1's
    assert f"{seconds:.0f} s a seed" in row, row


def test_readme_benchmark_tables_are_the_committed_figures():
    """Every figure the benchmarks page quotes is the committed result's (the prose around it
    is free to change)."""
    readme = doc("benchmarks.md")
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
    assert f"{collate['speedup']}x" in readme and collate["same_tensors"]
    stages = json.loads((results / "data_stages-cpu.json").read_text())
    for row in stages["results"]:
        cells = [f"{row['lines']:,}"] + [
            f"{row[method]['lines_per_s']:,} / {row[method]['peak_rss_mib']} MiB"
            for method in ("bpe_sampled", "bpe_all_lines", "streaming", "naive")
        ]
        assert "| " + " | ".join(cells) + " |" in readme
    rehearsal = json.loads((results / "wmt_rehearsal-cpu.json").read_text())
    for row in rehearsal["results"]:
        cells = [f"{row['pairs']:,}"] + [
            f"{row[stage]['seconds']} s / {row[stage]['peak_rss_mib']} MiB"
            for stage in ("download", "clean", "subword", "binarize")
        ]
        planned = row["plan_epoch"]
        cells.append(f"{planned['planning_seconds']} s / {planned['peak_rss_mib']} MiB")
        assert "| " + " | ".join(cells) + " |" in readme
    largest = rehearsal["results"][-1]["plan_epoch"]["real_target_tokens_per_step"]
    assert f"held {largest:.0f} real target tokens" in readme
    workflow = json.loads((results / "default_workflow-cpu.json").read_text())
    for run_ in (workflow["all_cores"], workflow["one_core"]):
        train = run_["stages"]["train"]
        assert (
            f"| {run_['seconds']:.0f} s | {run_['jobs']} | {train['seconds']:.0f} s "
            f"(peak {train['max_rss_mib']:.0f} MiB) | {run_['stages']['decode']['seconds']:.0f} s |"
        ) in readme
    assert f"{workflow['speedup']}x" in readme
    ct2 = json.loads((results / "decode_ct2-cpu.json").read_text())  # #66: beside CTranslate2
    for kind in ("float32", "int8"):
        figures = ct2[f"ctranslate2_{kind}"]
        assert f"| {figures['seconds']} s | {ct2[f'ours_vs_ct2_{kind}']}x |" in readme, kind
    assert ct2["ours_cached"]["sacrebleu"] > 90  # a trained model, not a random one's worst case
    init_ab = json.loads((results / "fairseq_learning_init_ab-cpu.json").read_text())
    for run_ in init_ab["runs"]:  # each run's dev NLL by step, in a row of its own
        figures = " | ".join(f"{value:.4f}" for value in run_["dev_nll"].values())
        assert f"| {figures} |" in readme, run_["name"]
    learning = json.loads((results / "fairseq_learning-cpu.json").read_text())
    for side, runs in learning["runs"].items():  # each seed's dev NLL by step, a row each
        for run_ in runs:
            figures = " | ".join(f"{value:.4f}" for value in run_["dev_nll"].values())
            assert f"| {run_['seed']} | {side} | {figures} |" in readme, (side, run_["seed"])
    assert f"({learning['speed_ours_over_fairseq']}x;" in readme
    memory = json.loads((results / "fairseq_memory-cpu.json").read_text())  # #104: what holds it
    for row in memory["rows"]:
        assert f"| {row['run']} |" in readme and f"| {row['peak_rss_gib']} GiB |" in readme
    capped = memory["rows"][0]["padded_target_tokens"]
    assert f"| {capped['median']:,} / {capped['max']:,} |" in readme
    startup = json.loads((results / "translate_startup-cpu.json").read_text())["seconds"]
    assert f"`aiayn translate`\ntakes {startup['aiayn_translate']} s" in readme
    assert f"takes {startup['ctranslate2_script']} s" in readme
    decode = json.loads((results / "decode_speed-cpu.json").read_text())
    for key in ("ours_cached", "naive_recompute", "hf_marian_generate"):
        assert decode_row(decode[key]) in readme, ("cpu", key)
    for change in decode.get("ab_commits", []):  # what each decoder commit bought
        assert f"| {change['commit']} |" in readme, change["commit"]
        assert f"| {change['speedup']} | {change['same_translations']} |" in readme
    # the GPU call: ours and generate() in decode_base, the naive decoder among the extras
    gpu = json.loads((results / "decode_speed-gpu.json").read_text())
    sweep = json.loads((results / "decode_speed_sweep-gpu.json").read_text())["runs"]
    naive = next(run for run in sweep if isinstance(run["naive_recompute"], dict))
    assert (
        decode_row(gpu["ours_cached"]) in readme and decode_row(gpu["hf_marian_generate"]) in readme
    )
    assert decode_row(naive["naive_recompute"]) in readme
    assert gpu["device"] in readme and f"{gpu['batch_tokens']} source tokens" in readme
    assert f"{gpu['speedup_vs_hf']}x" in readme and f"{naive['speedup']}x" in readme
    for name in ("train_throughput-gpu.json", "train_throughput_ab-gpu.json"):
        for row in json.loads((results / name).read_text())["results"]:
            assert f"{row['ours']['target_tokens_per_s']:,}" in readme, (name, row["preset"])
            assert f"{row['ours']['mfu']:.1%}" in readme, (name, row["preset"])
            assert f"{row['hf_marian']['target_tokens_per_s']:,}" in readme
    loss = json.loads((results / "loss_speed-cpu.json").read_text())
    assert f"{loss['speedup']}x faster than the whole log-softmax" in readme
    # the fourth lend's A/B of the loss kernels, and the compiled decoder step
    for row in json.loads((results / "train_throughput_lend4_ab-gpu.json").read_text())["results"]:
        for key in ("ours", "ours_compiled_loss"):
            figures = row[key]
            assert (
                f"{figures['target_tokens_per_s']:,} tokens/s, MFU {figures['mfu']:.1%}" in readme
            )
        assert f"| {row['compiled_loss_speedup']}x |" in readme
    loss = json.loads((results / "loss_speed_lend4_ab-gpu.json").read_text())
    assert f"compiled {loss['compiled']['ms']} ms" in readme
    assert f"sliced {loss['sliced']['ms']:.2f} ms ({loss['compiled_vs_sliced']}x)" in readme
    decode = json.loads((results / "decode_speed_lend4_ab-gpu.json").read_text())
    assert (
        f"{decode['ours_compiled']['seconds']} s against {decode['ours_cached']['seconds']} s eager"
        in readme
    )
    assert f"({decode['compiled_speedup']}x)" in readme
    # the fifth lend: ZeRO 2 and the layers compiled, then flat bf16 gradients (#46 item 1)
    for name, ab in (("lend5", "ours_zero2"), ("lend5_ab", "ours_flat_grads")):
        for row in json.loads((results / f"train_throughput_{name}-gpu.json").read_text())[
            "results"
        ]:
            for key in ("ours", ab):
                figures = row[key]
                assert f"{figures['target_tokens_per_s']:,} tokens/s, MFU {figures['mfu']:.1%}" in (
                    readme
                ), (name, row["preset"], key)
            ratio = row["zero2_speedup" if name == "lend5" else "flat_grads_speedup"]
            assert f"| {ratio}x |" in readme
    suite = json.loads((results / "suite_lend5_ab-gpu.json").read_text())
    hours = suite["projected_hours_one_device"]
    assert f"base {hours['base']} h, big {hours['big']} h" in readme
    assert f"in {hours['table2_en_de']} h on one H200" in readme
    decode = json.loads((results / "decode_speed_lend5_ab-gpu.json").read_text())
    assert f"ran {decode['ours_cached']['output_to_reference_length']} times" in readme


def decode_row(figures: dict) -> str:
    return (
        f"| {figures['sentences_per_s']:.1f} | {figures['target_tokens_per_s']:,.0f} | "
        f"{figures['seconds']:.1f} s |"
    )


def test_readme_layout_map_is_true():
    """Each row's rules are in the named rules file and run the named scripts, and each named
    module (a note in brackets after it) is one those scripts import (so the map says what a
    rule reruns for)."""
    from aiayn.config.workflow import package_modules

    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) >= 10
    package = PROJECT / "src" / "aiayn"
    for row in rows:
        _, rules_cell, scripts_cell, modules_cell = [c.strip() for c in row.strip("|").split("|")]
        rule_file = PROJECT / "rules" / re.search(r"\((\w+\.smk)\)", rules_cell).group(1)
        text = rule_file.read_text(encoding="utf-8")
        scripts = [s.strip() for s in scripts_cell.split(",")]
        for rule in re.findall(r"`(\w+)`", rules_cell):
            body = text.split(f"\nrule {rule}:", 1)[1].split("\nrule ", 1)[0]
            assert re.search(r'"\.\./workflow_scripts/(\w+\.py)"', body).group(1) in scripts, row
        hashed = set()
        for script in scripts:
            found = package_modules(PROJECT / "workflow_scripts" / script, PROJECT / "src")
            hashed |= {path.relative_to(package).as_posix() for path in found}
        for module in (re.sub(r" \(.*\)$", "", m.strip()) for m in modules_cell.split(",")):
            if module.endswith("/"):
                assert any(name.startswith(module) for name in hashed), (row, module)
            else:
                assert module in hashed, (row, module)


def test_the_package_keeps_the_layout_of_the_pipeline():
    """#49's shape, kept: few modules at the top level (the rest in one package per stage), no
    import circle, translation and training knowing nothing of parsing (it plugs in as a task),
    and no class too long to read."""
    import ast
    from graphlib import CycleError, TopologicalSorter

    from aiayn.config.workflow import files_of, imported_names, package_modules

    src = (PROJECT / "src").resolve()
    package = src / "aiayn"
    files = sorted(package.rglob("*.py"))
    assert len(list(package.glob("*.py"))) <= 12
    # Arrows between modules; the package __init__.py files Python runs on the way are not.
    arrows = {
        file: {found[-1] for name in imported_names(file, src) if (found := files_of(name, src))}
        - {file}
        for file in files
    }
    try:
        TopologicalSorter(arrows).prepare()
    except CycleError as circle:
        pytest.fail(f"an import circle: {[str(p.relative_to(src)) for p in circle.args[1]]}")
    for stage in ("decode", "train"):
        for file in (package / stage).glob("*.py"):
            reached = package_modules(file, src)
            assert not [p for p in reached if p.is_relative_to(package / "parsing")], file
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno - node.lineno < 200, (file, node.name)


def test_every_bad_input_row_is_checked_by_the_test_it_names():
    """docs/bad-input.md: each row's test exists and asserts the row's first quoted words."""
    rows = [line for line in doc("bad-input.md").splitlines() if line.startswith("| ")][2:]
    assert len(rows) >= 15
    for row in rows:
        _, seen, _, test = [cell.strip() for cell in row.strip("|").split("|")]
        path, name = test.split("::")
        source = (PROJECT / path).read_text(encoding="utf-8")
        # The test with its decorators (its parameters): top-level blocks are two blank lines apart.
        [body] = [block for block in source.split("\n\n\n") if f"\ndef {name}(" in "\n" + block]
        quoted = re.search(r"`([^`]+)`", seen).group(1)
        assert quoted in body, (test, quoted)


def test_readme_states_the_fault_matrix_the_tests_run():
    from tests.test_faults import KILLS, KILLS_PER_STAGE

    readme = (PROJECT / "README.md").read_text(encoding="utf-8").replace("\n", " ")
    assert (
        f"`kill -9` at {sum(KILLS.values())} seeded points: {KILLS['train']} training steps,"
        f" {KILLS_PER_STAGE} in each of the {len(KILLS) - 1} other stages" in readme
    )


def test_regenerate_says_how_to_call_it_and_deletes_no_folder_unasked(tmp_path):
    """`.ci/regenerate --help` is its usage; a ../regen_<study> already there (a folder of
    yours) stops it before any clone, the folder untouched, unless --replace (#77); a kernel
    set torch does not run, or --as-intel without a kernel set, is refused before any clone
    (#75)."""
    checkout = tmp_path / "checkout"
    (checkout / ".ci").mkdir(parents=True)
    shutil.copy2(PROJECT / ".ci" / "regenerate", checkout / ".ci" / "regenerate")
    script = ["bash", str(checkout / ".ci" / "regenerate")]
    usage = subprocess.run([*script, "--help"], capture_output=True, text=True)
    assert usage.returncode == 0 and "--replace toy" in usage.stdout
    assert "in ../rerun_<CAP>_as_intel_<study>." in usage.stdout  # the last line of the usage
    unknown = subprocess.run([*script, "toyy"], capture_output=True, text=True)
    assert unknown.returncode == 1 and "regenerate: no study toyy" in unknown.stderr
    # torch runs its best kernels, with a warning only, under a capability it does not know
    typo = subprocess.run([*script, "--capability", "avx3", "toy"], capture_output=True, text=True)
    assert typo.returncode == 2 and "--capability avx3: torch runs" in typo.stderr
    as_intel = subprocess.run([*script, "--as-intel", "toy"], capture_output=True, text=True)
    assert as_intel.returncode == 2 and "--as-intel is for a rerun" in as_intel.stderr
    (tmp_path / "regen_toy").mkdir()
    (tmp_path / "regen_toy" / "mine.txt").write_text("mine")
    kept = subprocess.run([*script, "toy"], capture_output=True, text=True)
    assert kept.returncode == 1 and "regen_toy exists" in kept.stderr and "--replace" in kept.stderr
    assert (tmp_path / "regen_toy" / "mine.txt").read_text() == "mine"


def test_the_code_names_no_issue_numbers():
    """Comments and docstrings say why; which issue asked for a change is git's to keep."""
    found = [
        f"{path.relative_to(PROJECT)}:{number}: {line.strip()}"
        for folder in ("src", "rules", "workflow_scripts")
        for path in sorted((PROJECT / folder).rglob("*"))
        if path.suffix in (".py", ".smk") and "__pycache__" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"#\d{2,3}\b", line)
    ]
    assert found == []


HANG_GUARD = """
def test_the_hang_guard(request):
    print("hang guard:", request.config._env_timeout)  # the limit pytest-timeout applies
"""


@pytest.mark.parametrize(("cpus", "given", "limit"), [("0,1", None, "1200.0"), ("0", None, "2400.0"),
                                                      ("0", "77", "77.0")])  # fmt: skip
def test_the_hang_guard_grows_on_fewer_cores_than_ci_has(cpus, given, limit, tmp_path):
    """pytest-timeout's 1200 s, sized for CI's two cores, doubles on one (the suite there takes
    twice as long: a slow test is no hung one); a limit the user gives is kept."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores to pin one or both")
    (tmp_path / "test_guard.py").write_text(HANG_GUARD)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_TIMEOUT"}
    env |= {"AIAYN_SLURM_UP": "1"} | ({"PYTEST_TIMEOUT": given} if given else {})
    command = ["taskset", "-c", cpus, sys.executable, "-m", "pytest", "-c", "pyproject.toml", "-q", "-s", "-n", "0",
               "-p", "tests.conftest", "-p", "no:cacheprovider", str(tmp_path / "test_guard.py")]  # fmt: skip
    result = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True, env=env)
    assert f"hang guard: {limit}" in result.stdout, result.stdout + result.stderr
