"""A rerun checked against what was committed (aiayn.report.compare, `aiayn results --compare`):
the verdicts, the tolerance's level by simulation, the committed tolerances' derivation, and
the command on a real git checkout."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pandas as pd
import pytest
import yaml

from aiayn.cli import main
from aiayn.report import compare
from tests.conftest import PROJECT, copy_project


def record(sacrebleu=97.14, sentences=500, dev_ppl=1.094, capability="AVX512", chrf=98.61) -> dict:
    return {
        "host": {"machine": "x86_64", "cpus": 2},
        "software": {"torch": "2.13.0+cpu"},
        "experiments": {"tiny": {"dev_ppl": dev_ppl, "device": "CPU", "cpu": {"capability": capability}}},
        "scores": {"tiny/averaged/test": {"sacrebleu": sacrebleu, "tokenized_bleu": 97.29,
                                          "chrf": chrf, "sentences": sentences}},
    }  # fmt: skip


def verdicts(here: dict, committed: dict, **tolerances) -> dict[str, compare.Verdict]:
    return {v.name: v for v in compare.compare(here, committed, tolerances)}


def test_a_figure_within_its_tolerance_is_reproduced_and_one_beyond_it_differs():
    found = verdicts(record(sacrebleu=95.0), record(), bleu=2.5, perplexity=0.05)
    assert found["tiny/averaged/test sacrebleu"].reproduced
    assert found["tiny/averaged/test sacrebleu"].line() == (
        "tiny/averaged/test sacrebleu: reproduced: 95.0 here, 97.14 committed (tolerance 2.5)"
    )
    found = verdicts(record(sacrebleu=94.0, dev_ppl=1.2), record(), bleu=2.5, perplexity=0.05)
    assert found["tiny/averaged/test sacrebleu"].line() == (
        "tiny/averaged/test sacrebleu: differs: 94.0 here, 97.14 committed (tolerance 2.5)"
    )
    assert found["tiny dev_ppl"].line() == (  # relative: 1.2 is 9.7% above 1.094
        "tiny dev_ppl: differs: 1.2 here, 1.094 committed (tolerance 5.0%)"
    )
    assert found["tiny/averaged/test chrf"].reproduced
    edge = verdicts(record(dev_ppl=1.094 * 1.05), record(), perplexity=0.05)["tiny dev_ppl"]
    assert edge.reproduced and edge.difference == pytest.approx(0.05)  # at the edge it holds
    # chrF is held to its own tolerance, not BLEU's
    found = verdicts(record(sacrebleu=95.64, chrf=97.11), record(), bleu=2.5, chrf=1.0)
    assert found["tiny/averaged/test sacrebleu"].reproduced
    assert found["tiny/averaged/test chrf"].line() == (
        "tiny/averaged/test chrf: differs: 97.11 here, 98.61 committed (tolerance 1)"
    )


def test_other_data_scored_a_missing_figure_and_no_tolerance_all_differ():
    found = verdicts(record(sentences=499), record(), bleu=10.0)
    assert found["tiny/averaged/test sentences"].line() == (
        "tiny/averaged/test sentences: differs: 499 here, 500 committed (must be equal)"
    )
    here = record()
    del here["scores"]["tiny/averaged/test"]["chrf"]
    assert verdicts(here, record())["tiny/averaged/test chrf"].line() == (
        "tiny/averaged/test chrf: differs: missing here"
    )
    moved = verdicts(record(sacrebleu=97.15), record(), bleu=None)
    assert (
        moved["tiny/averaged/test sacrebleu"].line().endswith("(no tolerance stated: equal only)")
    )
    assert not moved["tiny/averaged/test sacrebleu"].reproduced


def test_the_largest_difference_of_each_figure_is_given_beside_its_tolerance():
    here, committed = record(sacrebleu=95.0, dev_ppl=1.2, chrf=97.11), record()
    for ours, theirs in ((here, 90.0), (committed, 90.5)):  # a second score, 0.5 apart
        ours["scores"]["tiny/last/dev"] = {"sacrebleu": theirs, "sentences": 500}
    found = compare.compare(here, committed, {"bleu": 2.5, "chrf": 1.0, "perplexity": 0.05})
    assert compare.largest_differences(found) == [
        "sacrebleu 2.14 of 2.5 (tiny/averaged/test)",  # 97.14 - 95.0, not the other's 0.5
        "tokenized_bleu 0.00 of 2.5 (tiny/averaged/test)",
        "chrf 1.50 of 1 (tiny/averaged/test)",
        "dev_ppl 9.7% of 5.0% (tiny)",  # relative, as its tolerance is
    ]
    untoleranced = compare.compare(here, committed, {})
    assert compare.largest_differences(untoleranced)[0] == "sacrebleu 2.14 (tiny/averaged/test)"


def test_what_the_records_say_differently_of_hardware_and_software_is_listed():
    here = record(capability="AVX2")
    here["software"]["torch"] = "2.13.0+cu128"
    assert compare.environment_changes(here, record()) == [
        "software.torch: 2.13.0+cu128 here, 2.13.0+cpu committed",
        "experiments' cpu.capability: AVX2 here, AVX512 committed (tiny)",
    ]
    # the same difference in every experiment is one line
    many, one = record(capability="AVX2"), record()
    for name in ("tiny.seed2", "tiny.seed3"):
        many["experiments"][name] = {**many["experiments"]["tiny"]}
        one["experiments"][name] = {**one["experiments"]["tiny"]}
    many["experiments"]["tiny.seed3"]["device"] = "GPU"
    assert compare.environment_changes(many, one) == [
        "experiments' cpu.capability: AVX2 here, AVX512 committed (all 3 experiments)",
        "experiments' device: GPU here, CPU committed (tiny.seed3)",
    ]
    assert compare.environment_changes(record(), record()) == []
    # a kernel variable set on one side is unset on the other, where both records list them
    preloaded, plain = record(), record()
    preloaded["host"]["kernel_variables"] = {"LD_PRELOAD": "/tmp/libmkl_intel_cpu.so"}
    plain["host"]["kernel_variables"] = {}
    assert compare.environment_changes(preloaded, plain) == [
        "host.kernel_variables.LD_PRELOAD: /tmp/libmkl_intel_cpu.so here, unset committed"
    ]
    assert compare.environment_changes(preloaded, record()) == []  # committed before the field


@pytest.mark.parametrize(("experiments", "seeds", "figures"), [(12, 3, 16), (4, 5, 40)])
def test_a_study_that_reproduced_in_full_is_called_so_at_the_stated_level(
    experiments, seeds, figures
):
    """The tolerance's claim, simulated: every figure of a rerun is the committed one plus the
    difference of two training runs (normal, the same sd everywhere), the sd estimated from
    `seeds` seeds of `experiments` experiments; at most 5% of such studies may show any figure
    that differs (Bonferroni over the figures keeps it at or under the level)."""
    rng = np.random.default_rng(74)
    trials, sd, false_calls = 2000, 1.3, 0
    for _ in range(trials):
        runs = rng.normal(0.0, sd, size=(experiments, seeds))
        spreads = [(float(np.std(row, ddof=1)), seeds) for row in runs]
        tolerance = compare.tolerance_from_seeds(spreads, figures)
        differences = rng.normal(0.0, sd, figures) - rng.normal(0.0, sd, figures)
        false_calls += bool(np.any(np.abs(differences) > tolerance))
    rate = false_calls / trials
    assert 0.01 <= rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / trials), rate


def seeded_record(means: dict[str, float], sds: dict[str, float], seeds: int, rng) -> dict:
    """A study's record: each experiment's test sacreBLEU per seed, drawn around its mean."""
    scores = {}
    for name, mean in means.items():
        for k, value in enumerate(rng.normal(mean, sds[name], seeds), 1):
            run = name if k == 1 else f"{name}.seed{k}"
            scores[f"{run}/averaged/test"] = {"sacrebleu": float(value)}
    return {"scores": scores, "experiments": {}}


def false_and_caught(sds: dict[str, float], seeds: int, trials: int, shift: float):
    """Over simulated reruns of one study (its experiments' sds over `seeds` seeds): how often
    one that moved nothing gets a differing mean, and one whose first experiment moved by
    `shift` is caught."""
    rng = np.random.default_rng(75)
    means = dict.fromkeys(sds, 30.0)
    moved = {**means, next(iter(sds)): 30.0 + shift}
    false_calls = caught = 0
    for _ in range(trials):
        committed = seeded_record(means, sds, seeds, rng)
        same, other = (seeded_record(m, sds, seeds, rng) for m in (means, moved))
        false_calls += any(not v.reproduced for v in compare.compare_means(same, committed))
        caught += any(not v.reproduced for v in compare.compare_means(other, committed))
    return false_calls / trials, caught / trials


# toy_seeds' test sacreBLEU sds, the noisiest first (the one moved), and Multi30k's
TOY_SEEDS_SDS = {"learned": 1.18, "tiny": 0.79, "one_head": 1.05, "one_layer": 0.55}


@pytest.mark.parametrize(("sds", "seeds"), [(TOY_SEEDS_SDS, 12), ({"a": 0.37}, 3)])
def test_seed_means_keep_the_level_and_catch_a_2_bleu_shift_of_one_experiment(sds, seeds):
    """The verdict of a study of seeds rests on its seed means, each with its own band (spreads
    differ by experiment, as the toy seed study's do): a rerun that moved nothing is called
    differing in at most 5% of studies, and one experiment moved by 2 BLEU is caught in at
    least 90%. The toy's spreads need 12 seeds for its noisiest experiment (its committed 5
    catch it in 40%, tiny's in 77%: docs/results.md)."""
    trials = 600
    false_rate, power = false_and_caught(sds, seeds, trials, shift=2.0)
    assert false_rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / trials), false_rate
    assert power >= 0.9, power


def test_each_experiment_has_the_band_its_own_seeds_give():
    """A steady experiment is held to a narrow band and a noisy one to a wide one; a figure of
    one seed has no mean to compare."""
    rng = np.random.default_rng(3)
    sds = {"steady": 0.1, "noisy": 1.0}
    committed, here = (seeded_record(dict.fromkeys(sds, 30.0), sds, 5, rng) for _ in range(2))
    bands = {v.name.split("/")[0]: v.band for v in compare.compare_means(here, committed)}
    assert bands["steady"] < 0.5 < 2.0 < bands["noisy"], bands
    single = seeded_record({"alone": 30.0}, {"alone": 1.0}, 1, rng)
    assert compare.compare_means(single, single) == []


# each committed study with a tolerance: the study whose seeds it is derived from, its config
DERIVED_FROM = {
    "toy": ("toy_seeds", "config.yaml"),
    "toy_seeds": ("toy_seeds", "configs/toy_seeds.yaml"),
    "multi30k": ("multi30k", "configs/multi30k.yaml"),
    "wmt14_en_de_sample": ("wmt14_en_de_sample", "configs/wmt14_en_de_sample.yaml"),
    "ptb_sample": ("ptb_sample", "configs/parsing.yaml"),
}


def two_digits(value: float) -> float:
    """A tolerance as the configs write it: two significant digits."""
    return float(f"{value:.2g}")


@pytest.mark.parametrize("study", sorted(DERIVED_FROM))
def test_a_studys_tolerance_is_derived_from_the_committed_seeds(study):
    """The config's `reproduction` is what derived_tolerances gives from the seeds of the
    committed study it names (two significant digits), as docs/results.md says."""
    seeded_study, config = DERIVED_FROM[study]
    seeded = json.loads((PROJECT / f"results/{seeded_study}/run.json").read_text())
    compared = json.loads((PROJECT / f"results/{study}/run.json").read_text())
    derived = compare.derived_tolerances(seeded, compared)
    stated = yaml.safe_load((PROJECT / config).read_text())["reproduction"]
    assert stated == {kind: two_digits(value) for kind, value in derived.items()}
    docs = (PROJECT / "docs/results.md").read_text()
    points = [f"{stated[kind]} {name}" if kind in stated else "none"
              for kind, name in (("bleu", "BLEU"), ("chrf", "chrF"), ("f1", "F1"))]  # fmt: skip
    row = f"| {study} | {' | '.join(points)} | {stated['perplexity']:.1%} |"
    assert row in docs


def test_every_committed_study_states_a_derived_tolerance():
    """A study trained with one seed and no seed study behind it has no spread to derive a
    tolerance from, and its rerun would be reproduced only where equal: each committed study has
    one (the test above checks its derivation)."""
    committed = {path.parent.name for path in (PROJECT / "results").glob("*/run.json")}
    assert committed == set(DERIVED_FROM)


def committed_checkout(root) -> None:
    """A git checkout of the configs and the committed results, as a user's clone has them."""
    copy_project(root, ["config.yaml", "configs", "schemas", "src", "results"])
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "config.yaml", "configs", "results"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "results"], cwd=root, check=True)


def compared(root, capsys) -> tuple[int, dict[str, str]]:
    """`aiayn results --compare`'s exit code and each study's first line."""
    code = main(["results", "--compare", "--workdir", str(root)])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("results/")]
    found: dict[str, str] = {}
    for line in lines:
        study, text = line.split(": ", 1)
        found.setdefault(study, text)
    return code, found


def test_aiayn_results_compare_on_a_git_checkout(tmp_path, capsys):
    """The command as a user runs it after a rerun: unchanged results are the committed record;
    a figure moved beyond the tolerance is named with both values and exit 1."""
    committed_checkout(tmp_path)

    assert main(["results", "--compare", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (
        "results/toy: 64 figures against git's HEAD: 64 reproduced, 0 differ (the committed" in out
    )
    assert "largest differences" not in out  # nothing rerun: nothing to measure

    path = tmp_path / "results/toy/run.json"
    rerun = json.loads(path.read_text())
    figure = rerun["scores"]["tiny_learned_positions/averaged/test"]
    committed, stated = figure["sacrebleu"], yaml.safe_load((tmp_path / "config.yaml").read_text())
    moved = round(committed - stated["reproduction"]["bleu"] - 0.5, 2)  # just beyond it
    figure["sacrebleu"] = moved
    rerun["experiments"]["tiny"]["precision"] = "bf16"
    path.write_text(json.dumps(rerun, indent=2))
    assert main(["results", "--compare", "--workdir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "results/toy: 64 figures against git's HEAD: 63 reproduced, 1 differ\n" in out
    tolerance = f"{stated['reproduction']['bleu']:g}"
    assert (
        f"  tiny_learned_positions/averaged/test sacrebleu: differs: {moved} here, {committed} "
        f"committed (tolerance {tolerance})\n"
    ) in out
    furthest = (
        f"sacrebleu {committed - moved:.2f} of {tolerance} (tiny_learned_positions/averaged/test);"
    )
    assert f"  largest differences: {furthest}" in out
    assert (
        "  recorded environment:\n    experiments' precision: bf16 here, fp32 committed (tiny)\n"
        in out
    )


def test_a_run_belongs_to_the_experiment_its_seed_suffix_names():
    """Only the `.seed<k>` suffix seed_runs appends is taken off; `.` is allowed in names."""
    from aiayn.config.plan.runs import seed_runs

    runs = seed_runs({"tiny": {"seeds": 3}, "tiny.seeds_ablation": {"seeds": 2}})
    assert {run: compare.experiment_of(run) for run in runs} == {
        run: experiment for run, (experiment, _) in runs.items()
    }


def test_a_parsers_tolerance_comes_from_its_f1_and_perplexity_over_seeds():
    """A parser has no BLEU, chrF or seed_scores: its F1 over seeds (each figure apart, pooled)
    and its dev perplexity's give its tolerances, over the 2 x 3 figures of its three seeds."""
    f1 = {"parser": (60.0, 62.0), "parser.seed2": (61.0, 65.0), "parser.seed3": (62.0, 62.0)}
    seeded = {
        "experiments": {run: {"dev_ppl": ppl} for run, ppl in
                        [("parser", 2.0), ("parser.seed2", 2.2), ("parser.seed3", 2.4)]},
        "scores": {f"{run}/averaged/{split}": {"f1": value, "sentences": 100}
                   for run, values in f1.items()
                   for split, value in zip(("dev", "test"), values, strict=True)},
    }  # fmt: skip
    spreads = compare.seed_spreads(seeded)
    assert spreads["bleu"] == spreads["chrf"] == []
    assert sorted(spreads["f1"]) == [(1.0, 3), (pytest.approx(3**0.5), 3)]  # dev; test
    assert spreads["perplexity"] == [(pytest.approx(0.2 / 2.2), 3)]
    derived = compare.derived_tolerances(seeded, seeded)
    assert set(derived) == {"f1", "perplexity"}
    pooled = compare.tolerance_from_seeds([(1.0, 3), (3**0.5, 3)], comparisons=6 + 3)
    assert derived["f1"] == pytest.approx(pooled)  # pooled sd sqrt(2), 4 degrees of freedom


def test_a_record_of_other_code_settings_or_packages_is_not_a_rerun(tmp_path, capsys):
    """A record whose training code, settings or a package differ from the committed study's is
    named as another study (exit NOT_A_RERUN), every difference said, its figures information
    only, even where each of them is within the tolerance."""
    committed_checkout(tmp_path)
    path = tmp_path / "results/toy/run.json"
    record = json.loads(path.read_text())
    record["versions"]["code"]["train"] = "0" * 16
    record["versions"]["modules"]["src/aiayn/train/schedule.py"] = "0" * 16
    record["versions"]["train"]["tiny"] = "1" * 16
    record["software"]["sacrebleu"] = "2.5.1"
    path.write_text(json.dumps(record))
    code, found = compared(tmp_path, capsys)
    assert code == compare.NOT_A_RERUN
    assert found["results/toy"] == (
        "not a rerun of the committed study: code of train: src/aiayn/train/schedule.py; train "
        "settings of tiny; sacrebleu 2.5.1 here, 2.6.0 committed; its figures follow as "
        "information only"
    )
    assert found["results/multi30k"].endswith("0 differ (the committed record itself: nothing "
                                              "rerun since)")  # fmt: skip


def test_missing_damaged_and_unreadable_records_are_named_with_a_nonzero_exit(tmp_path, capsys):
    """A truncated score file, a run.json moved away and a score entry that is not an object:
    each named, exit 1, the other studies still checked; a study folder that is a link out of
    the checkout is compared as that study. A --workdir that is not there or is a file:
    argparse's refusal, exit 2 (any command's)."""
    committed_checkout(tmp_path)
    score = tmp_path / "results/toy/scores/tiny/averaged/test.json"
    score.write_text(score.read_text()[:50])
    (tmp_path / "results/ptb_sample/run.json").rename(tmp_path / "ptb_run.json")
    path = tmp_path / "results/multi30k/run.json"
    record = json.loads(path.read_text())
    first = next(iter(record["scores"]))
    record["scores"][first] = "garbage"
    path.write_text(json.dumps(record))
    elsewhere = tmp_path.parent / f"{tmp_path.name}_wmt"
    (tmp_path / "results/wmt14_en_de_sample").rename(elsewhere)
    (tmp_path / "results/wmt14_en_de_sample").symlink_to(elsewhere)
    code, found = compared(tmp_path, capsys)
    assert code == 1
    assert found["results/toy"] == (
        "damaged: results/toy/scores/tiny/averaged/test.json (not what its run.json recorded): "
        "rerun the study, or git checkout them"
    )
    assert found["results/ptb_sample"].startswith("no run.json here, and git's HEAD has one")
    assert found["results/multi30k"] == (
        f'unreadable here (InputError: results/multi30k: scores[{first!r}] is "garbage", not '
        "an object)"
    )
    assert found["results/wmt14_en_de_sample"].endswith("(the committed record itself: nothing "
                                                        "rerun since)")  # fmt: skip
    assert found["results/toy_seeds"].endswith("nothing rerun since)")
    for workdir in (tmp_path / "not_there", tmp_path / "results/toy/run.json"):
        with pytest.raises(SystemExit) as refused:  # argparse's refusal, every command's
            main(["results", "--compare", "--workdir", str(workdir)])
        assert refused.value.code == 2
    told = capsys.readouterr().err
    assert f"--workdir: {tmp_path / 'not_there'} does not exist: give the workflow's" in told
    assert "results/toy/run.json is not a folder: give the workflow's checkout" in told


def test_a_rerun_that_loses_reverses_or_adds_a_marked_conclusion_is_not_reproduced(
    tmp_path, capsys
):
    """The committed study's conclusions are its tables' marked rows, each with its direction
    against the baseline: a rerun whose tables reverse one, lose one's mark or mark another
    row is not reproduced (exit 1), each change named, even with every figure in tolerance."""
    from aiayn.report.run_record import file_digest

    committed_checkout(tmp_path)
    table = tmp_path / "results/toy_seeds/tables/table3.csv"
    record_path = tmp_path / "results/toy_seeds/run.json"

    def edit_table3(cells: dict[tuple[str, str], object]) -> None:
        """Set (row, column) cells of the seed study's Table 3, as a run records its tables."""
        frame = pd.read_csv(table)
        for (row, column), value in cells.items():
            frame.loc[frame.index[frame["row"] == row][0], column] = value
        frame.to_csv(table, index=False)
        record = json.loads(record_path.read_text())
        record["files"]["results/toy_seeds/tables/table3.csv"] = file_digest(table)
        record_path.write_text(json.dumps(record, indent=2))

    # committed with one head unmarked in Table 3, so that a rerun can add a mark
    edit_table3({("tiny_one_head", "mark"): "none"})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "commit", "-qam", "one head unmarked"], cwd=tmp_path, check=True)
    assert main(["results", "--compare", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "  conclusions: reproduced: 5 of 5 hold\n" in out
    assert "    holds: table3: tiny_learned_positions below tiny, marked\n" in out

    edit_table3({("tiny_learned_positions", "dev sacreBLEU"): 99.9,  # above tiny's
                 ("tiny_one_layer", "mark"): "none", ("tiny_one_head", "mark"): "*"})  # fmt: skip
    assert main(["results", "--compare", "--workdir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "  conclusions: not reproduced: 3 of 5 hold\n" in out
    assert "    table3: tiny_learned_positions below tiny, marked: above here\n" in out
    assert "    table3: tiny_one_layer below tiny, marked: not marked here\n" in out
    assert (
        "    table3: tiny_one_head below tiny, marked here: not marked in the committed study\n"
        in out
    )


def test_a_seeded_study_is_judged_by_its_seed_means_and_each_seed_is_information(tmp_path, capsys):
    """Multi30k's three seeds: two seeds moved apart beyond their own tolerance leave the mean
    where it was (reproduced, exit 0, the seeds listed as differing information); every seed
    moved by 1.5 BLEU, each within its 4.5, moves the mean beyond its band (exit 1)."""
    committed_checkout(tmp_path)
    path = tmp_path / "results/multi30k/run.json"
    committed = json.loads(path.read_text())
    test = "averaged/test_2016_flickr"
    runs = ["multi30k_small", "multi30k_small.seed2", "multi30k_small.seed3"]

    def rerun(shifts: list[float]) -> tuple[int, str]:
        record = json.loads(json.dumps(committed))
        for run, shift in zip(runs, shifts, strict=True):
            record["scores"][f"{run}/{test}"]["sacrebleu"] += shift
        path.write_text(json.dumps(record, indent=2))
        code = main(["results", "--compare", "--workdir", str(tmp_path)])
        out = capsys.readouterr().out
        return code, out.split("results/multi30k: ", 1)[1].split("\nresults/", 1)[0]

    code, out = rerun([4.6, -4.6, 0.0])
    assert code == 0, out
    assert f"multi30k_small/{test} sacrebleu, mean of 3 and 3 seeds: reproduced" in out
    assert "each seed's figures, as information: 46 of 48 within their own tolerance" in out
    assert f"    multi30k_small/{test} sacrebleu: differs" in out
    code, out = rerun([1.5, 1.5, 1.5])
    assert code == 1, out
    assert f"multi30k_small/{test} sacrebleu, mean of 3 and 3 seeds: differs" in out
    assert "each seed's figures, as information: 48 of 48 within their own tolerance" in out
