"""Tables 2 and 3 of the paper regenerated: the paper's rows beside ours, labelled.

Each experiment is described by a record the report rule assembles (see `ExperimentResult`):
its resolved model and training settings, train.json, and its score files.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import pandas as pd

from aiayn.flops import RATE_METHOD
from aiayn.model import count_parameters
from aiayn.model_config import TransformerConfig, build_config
from aiayn.paper import (
    TABLE2,
    TABLE2_PAIRS,
    TABLE2_ROW_OF,
    TABLE3,
    TABLE3_LABEL_SMOOTHING,
    paper_cost,
)
from aiayn.report.marks import Family
from aiayn.textio import read_record

PAPER, OURS = "paper", "ours"


@dataclass
class ExperimentResult:
    name: str  # the run: an experiment's first seed has its name, the others <name>.seed<k>
    group: str  # the experiment
    pair: str  # e.g. en-de
    dev_split: str
    paper_row: str | None
    model: dict  # TransformerConfig fields
    train: dict  # TrainSettings fields
    summary: dict  # train.json
    scores: dict = field(default_factory=dict)  # (checkpoint, split) -> score record
    # (checkpoint, split) -> the experiment's record over seeds (on its first seed's result)
    seed_scores: dict = field(default_factory=dict)


def collect_results(
    experiments: list[dict],
    summary_paths: list[str],
    score_paths: list[str],
    seed_score_paths: list[str] = (),
) -> list[ExperimentResult]:
    """Each run the report rule describes, with its train.json and its score files; the first
    run of each experiment also holds the experiment's records over seeds."""
    summaries = {record["experiment"]: record for record in map(read_record, summary_paths)}
    results = {
        spec["name"]: ExperimentResult(**spec, summary=summaries[spec["name"]])
        for spec in experiments
    }
    for path in score_paths:
        record = read_record(path)
        results[record["experiment"]].scores[(record["checkpoint"], record["split"])] = record
    for path in seed_score_paths:
        record = read_record(path)
        key = (record["checkpoint"], record["split"])
        results[record["experiment"]].seed_scores[key] = record
    return list(results.values())


def by_experiment(results: list[ExperimentResult]) -> list[list[ExperimentResult]]:
    """Runs grouped by experiment, in order, first seed first."""
    groups: dict[str, list[ExperimentResult]] = {}
    for result in results:
        groups.setdefault(result.group, []).append(result)
    return list(groups.values())


def mean_of(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def spread(values: list[float]) -> float | None:
    """Sample standard deviation over seeds; none for one seed."""
    return statistics.stdev(values) if len(values) > 1 else None


def rounded(value, digits: int = 2):
    return None if value is None else round(value, digits)


def paper_way_cost(summary: dict, rate: str = "fp32") -> float | None:
    """The paper's estimate, hours x devices x sustained TFLOPS, at our device's measured fp32
    rate (TF32 off: the paper's single precision) or, labelled apart, its bf16 rate."""
    tflops = summary.get(f"device_tflops_{rate}")
    if tflops is None and summary.get("precision") == rate:
        tflops = summary.get("device_tflops")  # train.json before both rates were measured
    if not tflops:
        return None
    return paper_cost(summary["seconds"] / 3600, summary["processes"], tflops)


def confidence(record: dict | None, prefix: str = "") -> dict:
    """The 95% intervals of a score record's BLEUs (half-widths: the bootstrap's over sentences
    for one run, Student's t over seeds for several) and its test against the baseline: which
    baseline, the raw p and the test (`mark` and the adjusted p come from the table's family)."""
    columns = {
        f"{prefix}BLEU (tok.) 95% half-width": None,
        f"{prefix}sacreBLEU 95% half-width": None,
        "vs. baseline": None,
        "test": None,
        "p": None,
    }
    if record is None:
        return columns
    if "per_seed" in record["sacrebleu"]:
        columns[f"{prefix}BLEU (tok.) 95% half-width"] = round(record["tokenized_bleu"]["ci95"], 2)
        columns[f"{prefix}sacreBLEU 95% half-width"] = round(record["sacrebleu"]["ci95"], 2)
        return with_test(columns, record["test"])
    for key, metric in (
        (f"{prefix}BLEU (tok.) 95% half-width", "tokenized_bleu"),
        (f"{prefix}sacreBLEU 95% half-width", "sacrebleu"),
    ):
        bootstrap = record[metric].get("bootstrap")
        columns[key] = round(bootstrap["ci95"], 2) if bootstrap else None
    return with_test(columns, record.get("paired_bootstrap") or {})


def with_test(columns: dict, test: dict) -> dict:
    """The baseline, the test and its raw p from a test record (one run's or over seeds)."""
    if test.get("is_baseline"):
        columns["vs. baseline"] = "(baseline)"
    elif test.get("p_value") is not None:
        columns["vs. baseline"] = test.get("baseline")
        columns["test"] = test.get("method") or PAIRED_BOOTSTRAP
        columns["p"] = round(test["p_value"], 4)
    return columns


PAIRED_BOOTSTRAP = "sacreBLEU's paired bootstrap (one run each: these two trained models)"


def test_of(result: ExperimentResult, key: tuple) -> dict:
    """The test of an experiment's score against the baseline's: over its seeds where it has
    several, else its one run's paired bootstrap."""
    over_seeds = result.seed_scores.get(key)
    if over_seeds is not None:
        return over_seeds.get("test") or {}
    return (result.scores.get(key) or {}).get("paired_bootstrap") or {}


def table2_keys(result: ExperimentResult) -> list[tuple]:
    """The scores Table 2 shows of an experiment: its averaged model on every test split."""
    return [key for key in result.scores if key[0] == "averaged" and key[1] != result.dev_split]


def table3_keys(result: ExperimentResult) -> list[tuple]:
    """The score Table 3 shows: the last checkpoint on the dev split, as the paper."""
    key = ("last", result.dev_split)
    return [key] if key in result.scores else []


def family(results: list[ExperimentResult], keys, significance: float) -> Family:
    """Every comparison a table shows with the baseline, one family: marks hold for the table."""
    found = Family(significance)
    for runs in by_experiment(results):
        for key in keys(runs[0]):
            found.add((runs[0].group, key), test_of(runs[0], key), len(runs))
    return found


def with_marks(rows: list[dict], comparisons: Family) -> pd.DataFrame:
    """The rows with their Holm-adjusted p and mark, from their `_key` in the family."""
    adjusted, marked = comparisons.adjusted(), comparisons.marked()
    for row in rows:
        key = row.pop("_key", None)
        row["p, Holm over the table"] = rounded(adjusted.get(key), 4)
        row["mark"] = mark_of(key, comparisons, marked)
    return pd.DataFrame(rows)


def mark_of(key, comparisons: Family, marked: set) -> str | None:
    """`*`, or `none` and why (a row with no test: nothing)."""
    if key in marked:
        return "*"
    if key not in comparisons.tests:
        return None
    reason = comparisons.why_unmarked(key)
    return f"none ({reason})" if reason else "none"


def describe_test_set(record: dict) -> str:
    spec = record.get("test_set") or {}
    if spec.get("source") == "sacrebleu":
        return f"{record['split']} (sacrebleu {spec['test_set']}, {record['sentences']} lines)"
    return f"{record['split']} ({record['sentences']} lines)"


def table2(
    results: list[ExperimentResult], significance: float = 0.05, comparisons: Family | None = None
) -> pd.DataFrame:
    """Per language pair: the paper's Table 2 rows, then ours on every test split (averaged
    model). BLEU is the paper's protocol (tokenized, compounds split); sacreBLEU beside it, each
    with its bootstrap interval, and sacreBLEU's paired test against the baseline. `comparisons`:
    the table's family (`family(results, table2_keys, ...)`), which the layout shares."""
    rows = []
    for pair in dict.fromkeys(r.pair for r in results):
        if pair in TABLE2_PAIRS:
            bleu_column, cost_column = TABLE2_PAIRS[pair]
            for entry in TABLE2:
                if entry[bleu_column] is None and entry[cost_column] is None:
                    continue
                rows.append(
                    {
                        "pair": pair,
                        "source": PAPER,
                        "model": entry[0],
                        "test set": "newstest2014",
                        "seeds": None,
                        "BLEU (tok., compound split)": entry[bleu_column],
                        "BLEU (tok.) sd over seeds": None,
                        "sacreBLEU": None,
                        "sacreBLEU sd over seeds": None,
                        **confidence(None),
                        "chrF": None,
                        "train cost, paper's way (FLOPs)": entry[cost_column],
                        "train cost at bf16 rate (FLOPs)": None,
                        "train FLOPs, counted": None,
                        "train hours x devices": None,
                        "device": None,
                    }
                )
        for runs in by_experiment([r for r in results if r.pair == pair]):
            rows += table2_rows(runs, pair)
    if comparisons is None:
        comparisons = family(results, table2_keys, significance)
    table = with_marks(rows, comparisons)
    for column in (
        "train cost, paper's way (FLOPs)",
        "train cost at bf16 rate (FLOPs)",
        "train FLOPs, counted",
    ):
        if column in table:
            table[column] = table[column].map(lambda v: None if pd.isna(v) else f"{v:.1e}")
    return table


TABLE2_BLEU = (
    "BLEU (tok., compound split)",
    "BLEU (tok.) sd over seeds",
    "sacreBLEU",
    "sacreBLEU sd over seeds",
)
TABLE3_BLEU = (
    "dev BLEU (tok.)",
    "dev BLEU (tok.) sd over seeds",
    "dev sacreBLEU",
    "dev sacreBLEU sd over seeds",
)


def bleu_columns(record: dict | None, over_seeds: dict | None, names: tuple) -> dict:
    """Both BLEUs and their spreads over seeds, under `names`: one run's scores (no spread), or
    the mean and standard deviation of an experiment's seeds."""
    tokenized, tokenized_sd, sacre, sacre_sd = names
    if over_seeds is not None:
        return {
            tokenized: round(over_seeds["tokenized_bleu"]["mean"], 2),
            tokenized_sd: round(over_seeds["tokenized_bleu"]["sd"], 2),
            sacre: round(over_seeds["sacrebleu"]["mean"], 2),
            sacre_sd: round(over_seeds["sacrebleu"]["sd"], 2),
        }
    return {
        tokenized: round(record["tokenized_bleu"]["score"], 2) if record else None,
        tokenized_sd: None,
        sacre: round(record["sacrebleu"]["score"], 2) if record else None,
        sacre_sd: None,
    }


def table2_rows(runs: list[ExperimentResult], pair: str) -> list[dict]:
    """One experiment's rows of Table 2, one per test split: its run's scores, or with several
    seeds their mean, spread and seed-aware test, and the mean training cost of a run."""
    first = runs[0]
    compare = TABLE2_ROW_OF.get(first.paper_row or "")
    label = first.group + (f" (vs. {compare})" if compare else "")
    summaries = [run.summary for run in runs]
    rows = []
    for checkpoint, split in table2_keys(first):
        record = first.scores[(checkpoint, split)]
        over_seeds = first.seed_scores.get((checkpoint, split))
        bleu = bleu_columns(record, over_seeds, TABLE2_BLEU)
        if over_seeds is not None:
            chrf = mean_of(run.scores[(checkpoint, split)]["chrf"]["score"] for run in runs)
        else:
            chrf = record["chrf"]["score"]
        rows.append(
            {
                "pair": pair,
                "source": OURS,
                "model": label,
                "test set": describe_test_set(record),
                "seeds": len(runs),
                **bleu,
                **confidence(over_seeds or record),
                "chrF": rounded(chrf),
                "train cost, paper's way (FLOPs)": mean_of(map(paper_way_cost, summaries)),
                "train cost at bf16 rate (FLOPs)": mean_of(
                    paper_way_cost(summary, "bf16") for summary in summaries
                ),
                "train FLOPs, counted": mean_of(s.get("train_flops") for s in summaries),
                "train hours x devices": round(
                    mean_of(s["seconds"] / 3600 * s["processes"] for s in summaries), 4
                ),
                "device": first.summary.get("device_name", first.summary.get("device")),
                "_key": (first.group, (checkpoint, split)),
            }
        )
    return rows


def architecture(config: TransformerConfig) -> dict:
    d_k, d_v = config.head_dims
    return {
        "N": config.n_layers,
        "d_model": config.d_model,
        "d_ff": config.d_ff,
        "h": config.n_heads,
        "d_k": d_k,
        "d_v": d_v,
        "P_drop": config.dropout,
        "positions": config.positions,
    }


def paper_table3_row(row: str, vocab_size: int = 37000) -> dict:
    preset = "base" if row in TABLE3_LABEL_SMOOTHING else row
    bleu, ppl, params, steps = TABLE3[row]
    return {
        "pair": "en-de",
        "source": PAPER,
        "row": row,
        **architecture(build_config(vocab_size, preset)),
        "eps_ls": TABLE3_LABEL_SMOOTHING.get(row, 0.1),
        "train steps": steps,
        "real tokens/step (src, tgt)": "~25000, ~25000",
        "seeds": None,
        "dev PPL": ppl,
        "dev PPL sd over seeds": None,
        "dev BLEU (tok.)": bleu,
        "dev BLEU (tok.) sd over seeds": None,
        "dev sacreBLEU": None,
        "dev sacreBLEU sd over seeds": None,
        **confidence(None, "dev "),
        "params (M)": params,
        "dev set": "newstest2013",
    }


def tokens_per_step(summary: dict) -> str | None:
    """The mean real source and target tokens a step held (train.json), as the paper's
    "approximately 25000 source tokens and 25000 target tokens"."""
    real = summary.get("real_tokens_per_step")
    return f"{real['source']:.0f}, {real['target']:.0f}" if real else None


def table3(
    results: list[ExperimentResult], significance: float = 0.05, comparisons: Family | None = None
) -> pd.DataFrame:
    """Every experiment (its last checkpoint on its dev split, no averaging, as the paper),
    each after the paper's row it is compared with; several seeds give their mean and spread.
    `comparisons`: the table's family (`family(results, table3_keys, ...)`), as for table2."""
    rows = []
    for runs in by_experiment(results):
        first = runs[0]
        if first.paper_row:
            rows.append(paper_table3_row(first.paper_row))
        config = TransformerConfig(**first.model)
        key = ("last", first.dev_split)
        record = first.scores.get(key)
        over_seeds = first.seed_scores.get(key)
        perplexities = [run.summary["dev_ppl"] for run in runs]
        bleu = bleu_columns(record, over_seeds, TABLE3_BLEU)
        rows.append(
            {
                "pair": first.pair,
                "source": OURS,
                "row": first.group,
                **architecture(config),
                "eps_ls": first.train["label_smoothing"],
                "train steps": first.summary["steps"],
                "real tokens/step (src, tgt)": tokens_per_step(first.summary),
                "seeds": len(runs),
                "dev PPL": round(mean_of(perplexities), 2),
                "dev PPL sd over seeds": rounded(spread(perplexities)),
                **bleu,
                **confidence(over_seeds or record, "dev "),
                "params (M)": round(count_parameters(config) / 1e6, 2),
                "dev set": first.dev_split,
                "_key": (first.group, key),
            }
        )
    if comparisons is None:
        comparisons = family(results, table3_keys, significance)
    return with_marks(rows, comparisons)


MARKS_NOTE = (
    "The comparisons with the baseline (`vs. baseline`; the same dataset, split and kind of "
    "model) are one family: `p` is each test's own, `p, Holm over the table` is adjusted over "
    "every comparison in this table (Holm's step-down method), and `mark` is * where the "
    "adjusted p is below the config's report.significance and the test compares settings: "
    "Welch's t-test with at least 3 seeds a side (aiayn.report.marks). One run each (sacreBLEU's "
    "paired bootstrap, which compares two trained models), one seed against several, or fewer "
    "than 3 seeds a side get no mark, and `mark` says why."
)
TABLE2_CAPTION = (
    "Table 2 in full. Rows marked paper are Vaswani et al. (2017), newstest2014; rows "
    "marked ours are this run's averaged models on the test split named. BLEU (tok., compound "
    "split) is the paper's protocol; sacreBLEU is detokenized 13a (signatures in "
    "results/<study>/scores/); each has its 95% half-width (one run: sacreBLEU's bootstrap over "
    "sentences). Training cost the paper's "
    "way is hours x devices x sustained single-precision TFLOPS (the paper's own rows: 8 P100 "
    "at 9.5; ours: the device's sustained fp32 matrix-multiply rate, TF32 off, the "
    f"{RATE_METHOD}); the bf16 column "
    "is the same hours at the device's measured bf16 rate, for runs trained in bf16; counted "
    "FLOPs are 3 x the forward pass on the padded batches trained on. " + MARKS_NOTE + " {seeds}"
)
SEEDS_NOTE = (
    "An experiment trained with several seeds (`seeds` column) shows the mean over seeds, "
    "the sample standard deviation over seeds (sd; in the pasted tables a ± s (n)), the mean "
    "cost of one run, Student's t 95% half-width of the mean over its seeds, and p from Welch's "
    "t-test of its seeds' corpus sacreBLEU against the baseline's (aiayn.score.seed_stats, "
    "results/<study>/seeds/); no p where neither side varies over seeds. With 3 seeds a side "
    "the test has 2 to 4 degrees of freedom and marks only large differences: no mark is no "
    "evidence of no difference."
)
TABLE3_CAPTION = (
    "Table 3 in full. Each of our experiments (ours) follows the paper's row it is "
    "compared with (paper, EN-DE newstest2013, base-size models). Ours: the last checkpoint "
    "(no averaging) on the experiment's dev split, with 95% half-widths (one run: sacreBLEU's "
    "bootstrap over sentences); PPL per BPE token; real tokens/step is the mean of unpadded "
    "source and target tokens per optimizer step over all processes (the paper's: approximately "
    "25000 each); params counted from the model code with the experiment's vocabulary (the "
    "paper's rows use 37000). " + MARKS_NOTE + " {seeds}"
)


def caption(template: str, results: list[ExperimentResult]) -> str:
    """A table's caption, saying how seeds are summarised where an experiment has several."""
    seeded = any(result.seed_scores for result in results)
    return template.format(seeds=SEEDS_NOTE if seeded else "").strip()
