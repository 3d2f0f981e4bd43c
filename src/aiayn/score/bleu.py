"""BLEU as others can compare it and as the paper computed it, and chrF.

- sacreBLEU on detokenized text (13a tokenization, mixed case), reported with its signature.
- The paper's protocol (tensor2tensor's get_ende_bleu.sh): Moses tokenizer.perl on hypothesis and
  reference (sacremoses, same rules and escaping), compounds split by
  `perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'`, then multi-bleu.perl: BLEU on those tokens,
  case-sensitive, unsmoothed (sacreBLEU with tokenize=none and smooth=none computes the same).
- chrF (chrF2, character 6-grams) with its signature.

Each BLEU carries sacreBLEU's bootstrap 95% confidence interval (its `--confidence`), and a
system can be compared with a baseline on the same test set by sacreBLEU's paired bootstrap
test (its `--paired-bs`), both seeded by SACREBLEU_SEED (default 12345), so reruns agree.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest
from sacremoses import MosesTokenizer

from aiayn.errors import InputError

# On UTF-8 bytes, as perl runs the one-liner (no -C): every byte of a non-ASCII character is a
# non-space, so `vis-à-vis` splits at both hyphens, as the paper's script split it.
COMPOUND = re.compile(rb"(\S)-(\S)")
PAPER_PROTOCOL = (
    "Moses tokenizer.perl (sacremoses) -> compounds split as a ##AT##-##AT## b -> "
    "multi-bleu.perl (case-sensitive, no smoothing)"
)


def split_compounds(line: str) -> str:
    """`a-b` -> `a ##AT##-##AT## b`, left to right without overlaps, byte for byte as the perl
    one-liner. A hyphen is never part of a multi-byte character, so the text stays UTF-8."""
    return COMPOUND.sub(rb"\1 ##AT##-##AT## \2", line.encode("utf-8")).decode("utf-8")


@lru_cache(maxsize=8)
def moses_tokenizer(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


def paper_tokenize(lines: list[str], lang: str) -> list[str]:
    """The text the paper's BLEU is computed on."""
    tokenizer = moses_tokenizer(lang)
    return [split_compounds(tokenizer.tokenize(line, return_str=True)) for line in lines]


# sacreBLEU's default number of resamples for --confidence and --paired-bs.
BOOTSTRAP_RESAMPLES = 1000


def bleu_figures(
    metric: BLEU, hypotheses: list[str], references: list[str], resamples: int
) -> dict:
    result = metric.corpus_score(hypotheses, [references])
    figures = {
        "score": result.score,
        "signature": str(metric.get_signature()),
        "precisions": result.precisions,
        "brevity_penalty": result.bp,
        "hyp_len": result.sys_len,
        "ref_len": result.ref_len,
    }
    if resamples > 1 and len(hypotheses) > 1:
        resampled = metric.corpus_score(hypotheses, [references], n_bootstrap=resamples)
        figures["bootstrap"] = {
            "mean": resampled._mean,  # sacreBLEU keeps these two private; its format() rounds
            "ci95": resampled._ci,  # half-width: mean +- ci95 covers 95% of the resamples
            "signature": str(metric.get_signature()),
        }
    return figures


def paired_bootstrap(
    hypotheses: list[str],
    baseline: list[str],
    references: list[str],
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict:
    """sacreBLEU's paired bootstrap test of a system against a baseline on the same test set:
    p is the share of resamples where the difference in sacreBLEU is not larger than chance."""
    if not len(hypotheses) == len(baseline) == len(references):
        raise InputError(
            f"paired test: {len(hypotheses)} hypotheses, {len(baseline)} baseline hypotheses, "
            f"{len(references)} references: both systems must translate the same test set"
        )
    if hypotheses == baseline:
        # sacreBLEU counts resampled differences strictly above the observed one, which for
        # identical outputs (observed 0) gives its smallest p, not "no difference".
        return {"p_value": 1.0, "baseline_score": None, "difference": 0.0, "identical": True}
    test = PairedTest(
        [("baseline", baseline), ("system", hypotheses)],
        {"BLEU": BLEU()},
        [references],
        test_type="bs",
        n_samples=resamples,
    )
    signatures, results = test()
    base, system = results["BLEU"]
    return {
        "p_value": system.p_value,
        "baseline_score": base.score,
        "difference": system.score - base.score,
        "signature": str(signatures["BLEU"]),
    }


def score(
    hypotheses: list[str],
    references: list[str],
    target_lang: str,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict:
    """Every figure for one test set: sacreBLEU, the paper's tokenized BLEU, chrF."""
    if len(hypotheses) != len(references):
        raise InputError(
            f"{len(hypotheses)} hypotheses for {len(references)} references: the decode output "
            "does not belong to this test set (rerun decode for it)"
        )
    chrf = CHRF()
    chrf_result = chrf.corpus_score(hypotheses, [references])
    paper = bleu_figures(
        BLEU(tokenize="none", smooth_method="none", force=True),
        paper_tokenize(hypotheses, target_lang),
        paper_tokenize(references, target_lang),
        resamples,
    )
    return {
        "sentences": len(hypotheses),
        "sacrebleu": bleu_figures(BLEU(), hypotheses, references, resamples),
        "tokenized_bleu": {**paper, "protocol": PAPER_PROTOCOL},
        "chrf": {"score": chrf_result.score, "signature": str(chrf.get_signature())},
    }
