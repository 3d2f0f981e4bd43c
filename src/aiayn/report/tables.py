"""Tables 2 and 3 of the paper regenerated: the paper's rows beside ours, labelled.

Each experiment is described by a record the report rule assembles (see `ExperimentResult`):
its resolved model and training settings, train.json, and its score files.
"""

from __future__ import annotations

import json
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

PAPER, OURS = "paper", "ours"


@dataclass
class ExperimentResult:
    name: str
    pair: str  # e.g. en-de
    dev_split: str
    paper_row: str | None
    model: dict  # TransformerConfig fields
    train: dict  # TrainSettings fields
    summary: dict  # train.json
    scores: dict = field(default_factory=dict)  # (checkpoint, split) -> score record


def collect_results(
    experiments: list[dict], summary_paths: list[str], score_paths: list[str]
) -> list[ExperimentResult]:
    """Each experiment the report rule describes, with its train.json and its score files."""
    summaries = {load_json(p)["experiment"]: load_json(p) for p in summary_paths}
    results = {
        spec["name"]: ExperimentResult(**spec, summary=summaries[spec["name"]])
        for spec in experiments
    }
    for path in score_paths:
        record = load_json(path)
        results[record["experiment"]].scores[(record["checkpoint"], record["split"])] = record
    return list(results.values())


def load_json(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def paper_way_cost(summary: dict, rate: str = "fp32") -> float | None:
    """The paper's estimate, hours x devices x sustained TFLOPS, at our device's measured fp32
    rate (TF32 off: the paper's single precision) or, labelled apart, its bf16 rate."""
    tflops = summary.get(f"device_tflops_{rate}")
    if tflops is None and summary.get("precision") == rate:
        tflops = summary.get("device_tflops")  # train.json before both rates were measured
    if not tflops:
        return None
    return paper_cost(summary["seconds"] / 3600, summary["processes"], tflops)


def confidence(record: dict | None, significance: float, prefix: str = "") -> dict:
    """The 95% bootstrap intervals of a score record's BLEUs (half-widths) and its paired test
    against the baseline: p, and `*` where p < `significance`."""
    columns = {
        f"{prefix}BLEU (tok.) ±95%": None,
        f"{prefix}sacreBLEU ±95%": None,
        "vs. baseline": None,
        "p": None,
        "sig.": None,
    }
    if record is None:
        return columns
    for key, metric in (
        (f"{prefix}BLEU (tok.) ±95%", "tokenized_bleu"),
        (f"{prefix}sacreBLEU ±95%", "sacrebleu"),
    ):
        bootstrap = record[metric].get("bootstrap")
        columns[key] = round(bootstrap["ci95"], 2) if bootstrap else None
    test = record.get("paired_bootstrap") or {}
    if test.get("is_baseline"):
        columns["vs. baseline"] = "(baseline)"
    elif test.get("p_value") is not None:
        columns["vs. baseline"] = test["baseline"]
        columns["p"] = round(test["p_value"], 4)
        columns["sig."] = "*" if test["p_value"] < significance else ""
    return columns


def describe_test_set(record: dict) -> str:
    spec = record.get("test_set") or {}
    if spec.get("source") == "sacrebleu":
        return f"{record['split']} (sacrebleu {spec['test_set']}, {record['sentences']} lines)"
    return f"{record['split']} ({record['sentences']} lines)"


def table2(results: list[ExperimentResult], significance: float = 0.05) -> pd.DataFrame:
    """Per language pair: the paper's Table 2 rows, then ours on every test split (averaged
    model). BLEU is the paper's protocol (tokenized, compounds split); sacreBLEU beside it, each
    with its bootstrap interval, and sacreBLEU's paired test against the baseline."""
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
                        "BLEU (tok., compound split)": entry[bleu_column],
                        "sacreBLEU": None,
                        **confidence(None, significance),
                        "chrF": None,
                        "train cost, paper's way (FLOPs)": entry[cost_column],
                        "train cost at bf16 rate (FLOPs)": None,
                        "train FLOPs, counted": None,
                        "train hours x devices": None,
                        "device": None,
                    }
                )
        for result in (r for r in results if r.pair == pair):
            summary = result.summary
            compare = TABLE2_ROW_OF.get(result.paper_row or "")
            label = result.name + (f" (vs. {compare})" if compare else "")
            for (checkpoint, split), record in result.scores.items():
                if checkpoint != "averaged" or split == result.dev_split:
                    continue
                rows.append(
                    {
                        "pair": pair,
                        "source": OURS,
                        "model": label,
                        "test set": describe_test_set(record),
                        "BLEU (tok., compound split)": round(record["tokenized_bleu"]["score"], 2),
                        "sacreBLEU": round(record["sacrebleu"]["score"], 2),
                        **confidence(record, significance),
                        "chrF": round(record["chrf"]["score"], 2),
                        "train cost, paper's way (FLOPs)": paper_way_cost(summary),
                        "train cost at bf16 rate (FLOPs)": paper_way_cost(summary, "bf16"),
                        "train FLOPs, counted": summary.get("train_flops"),
                        "train hours x devices": round(
                            summary["seconds"] / 3600 * summary["processes"], 4
                        ),
                        "device": summary.get("device_name", summary.get("device")),
                    }
                )
    table = pd.DataFrame(rows)
    for column in (
        "train cost, paper's way (FLOPs)",
        "train cost at bf16 rate (FLOPs)",
        "train FLOPs, counted",
    ):
        if column in table:
            table[column] = table[column].map(lambda v: None if pd.isna(v) else f"{v:.1e}")
    return table


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
        "dev PPL": ppl,
        "dev BLEU (tok.)": bleu,
        "dev sacreBLEU": None,
        **confidence(None, 0, "dev "),
        "params (M)": params,
        "dev set": "newstest2013",
    }


def tokens_per_step(summary: dict) -> str | None:
    """The mean real source and target tokens a step held (train.json), as the paper's
    "approximately 25000 source tokens and 25000 target tokens"."""
    real = summary.get("real_tokens_per_step")
    return f"{real['source']:.0f}, {real['target']:.0f}" if real else None


def table3(results: list[ExperimentResult], significance: float = 0.05) -> pd.DataFrame:
    """Every experiment (its last checkpoint on its dev split, no averaging, as the paper),
    each after the paper's row it is compared with."""
    rows = []
    for result in results:
        if result.paper_row:
            rows.append(paper_table3_row(result.paper_row))
        config = TransformerConfig(**result.model)
        record = result.scores.get(("last", result.dev_split))
        rows.append(
            {
                "pair": result.pair,
                "source": OURS,
                "row": result.name,
                **architecture(config),
                "eps_ls": result.train["label_smoothing"],
                "train steps": result.summary["steps"],
                "real tokens/step (src, tgt)": tokens_per_step(result.summary),
                "dev PPL": round(result.summary["dev_ppl"], 2),
                "dev BLEU (tok.)": round(record["tokenized_bleu"]["score"], 2) if record else None,
                "dev sacreBLEU": round(record["sacrebleu"]["score"], 2) if record else None,
                **confidence(record, significance, "dev "),
                "params (M)": round(count_parameters(config) / 1e6, 2),
                "dev set": result.dev_split,
            }
        )
    return pd.DataFrame(rows)


TABLE2_CAPTION = (
    "Table 2, regenerated. Rows marked paper are Vaswani et al. (2017), newstest2014; rows "
    "marked ours are this run's averaged models on the test split named. BLEU (tok., compound "
    "split) is the paper's protocol; sacreBLEU is detokenized 13a (signatures in "
    "results/<study>/scores/); ±95% is the half-width of each one's bootstrap 95% interval; p is "
    "sacreBLEU's paired bootstrap test of the row's sacreBLEU against the baseline's on the same "
    "test set, * where p is below the config's report.significance. Training cost the paper's "
    "way is hours x devices x sustained single-precision TFLOPS (the paper's own rows: 8 P100 "
    "at 9.5; ours: the device's sustained fp32 matrix-multiply rate, TF32 off, the "
    f"{RATE_METHOD} at the end of training); the bf16 column "
    "is the same hours at the device's measured bf16 rate, for runs trained in bf16; counted "
    "FLOPs are 3 x the forward pass on the padded batches trained on."
)
TABLE3_CAPTION = (
    "Table 3, regenerated. Each of our experiments (ours) follows the paper's row it is "
    "compared with (paper, EN-DE newstest2013, base-size models). Ours: the last checkpoint "
    "(no averaging) on the experiment's dev split, with bootstrap 95% half-widths and the paired "
    "test of its dev sacreBLEU against the baseline's (* where p is below report.significance); "
    "PPL per BPE token; real tokens/step is the mean of unpadded source and target tokens per "
    "optimizer step over all processes (the paper's: approximately 25000 each); params counted "
    "from the model code with the experiment's vocabulary (the paper's rows use 37000)."
)
