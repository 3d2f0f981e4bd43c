"""The paper's own numbers (Vaswani et al., 2017), printed beside ours and always labelled."""

from __future__ import annotations

PAPER_VOCABULARY = 37000  # the shared EN-DE BPE vocabulary of section 5.1

# Table 2: newstest2014 BLEU and training cost in FLOPs (hours x GPUs x sustained TFLOPS).
# (model, BLEU EN-DE, BLEU EN-FR, cost EN-DE, cost EN-FR); None where the paper has no entry.
# BLEU as the paper prints it (26.30 keeps its zero).
TABLE2 = [
    ("ByteNet", "23.75", None, None, None),
    ("Deep-Att + PosUnk", None, "39.2", None, 1.0e20),
    ("GNMT + RL", "24.6", "39.92", 2.3e19, 1.4e20),
    ("ConvS2S", "25.16", "40.46", 9.6e18, 1.5e20),
    ("MoE", "26.03", "40.56", 2.0e19, 1.2e20),
    ("Deep-Att + PosUnk Ensemble", None, "40.4", None, 8.0e20),
    ("GNMT + RL Ensemble", "26.30", "41.16", 1.8e20, 1.1e21),
    ("ConvS2S Ensemble", "26.36", "41.29", 7.7e19, 1.2e21),
    ("Transformer (base model)", "27.3", "38.1", 3.3e18, 3.3e18),
    ("Transformer (big)", "28.4", "41.8", 2.3e19, 2.3e19),
]
# How Table 2 costs a model (footnote 5): hours x GPUs x the GPU's sustained single-precision
# TFLOPS, which the paper gives as K80 2.8, K40 3.7, M40 6.0 and P100 9.5. Its own models trained
# on 8 P100s: base 100k steps in 12 hours, big 300k steps in 3.5 days (section 5.2).
PAPER_GPU_TFLOPS = {"K80": 2.8, "K40": 3.7, "M40": 6.0, "P100": 9.5}
PAPER_TRAINING = {"base": (12.0, 8, "P100", 100_000), "big": (3.5 * 24, 8, "P100", 300_000)}


def paper_cost(hours: float, gpus: int, tflops: float) -> float:
    """Training FLOPs the paper's way: hours x GPUs x sustained TFLOPS."""
    return hours * 3600 * gpus * tflops * 1e12


def paper_training_cost(model: str) -> float:
    """The paper's own cost for its base or big model, from its formula and its hardware."""
    hours, gpus, gpu, _ = PAPER_TRAINING[model]
    return paper_cost(hours, gpus, PAPER_GPU_TFLOPS[gpu])


def paper_steps_per_minute(model: str) -> float:
    """The paper's training speed: its 10-minute checkpoint interval in its steps."""
    hours, _, _, steps = PAPER_TRAINING[model]
    return steps / (hours * 60)


TABLE2_PAIRS = {"en-de": (1, 3), "en-fr": (2, 4)}  # columns of TABLE2 per language pair
TABLE2_ROW_OF = {"base": "Transformer (base model)", "big": "Transformer (big)"}

# Table 3: EN-DE dev newstest2013, single checkpoints (no averaging); BLEU, PPL (per
# wordpiece), parameters in millions (None where the paper leaves the cell empty), train steps.
TABLE3 = {
    "base": (25.8, 4.92, 65, 100_000),
    "A_h1": (24.9, 5.29, None, 100_000),
    "A_h4": (25.5, 5.00, None, 100_000),
    "A_h16": (25.8, 4.91, None, 100_000),
    "A_h32": (25.4, 5.01, None, 100_000),
    "B_dk16": (25.1, 5.16, 58, 100_000),
    "B_dk32": (25.4, 5.01, 60, 100_000),
    "C_N2": (23.7, 6.11, 36, 100_000),
    "C_N4": (25.3, 5.19, 50, 100_000),
    "C_N8": (25.5, 4.88, 80, 100_000),
    "C_d256": (24.5, 5.75, 28, 100_000),
    "C_d1024": (26.0, 4.66, 168, 100_000),
    "C_dff1024": (25.4, 5.12, 53, 100_000),
    "C_dff4096": (26.2, 4.75, 90, 100_000),
    "D_drop0.0": (24.6, 5.77, None, 100_000),
    "D_drop0.2": (25.5, 4.95, None, 100_000),
    "D_ls0.0": (25.3, 4.67, None, 100_000),
    "D_ls0.2": (25.7, 5.47, None, 100_000),
    "E_learned": (25.7, 4.92, None, 100_000),
    "big": (26.4, 4.33, 213, 300_000),
}
# Label smoothing of the paper's Table 3 rows (every row but D_ls uses 0.1).
TABLE3_LABEL_SMOOTHING = {"D_ls0.0": 0.0, "D_ls0.2": 0.2}

# Table 4: English constituency parsing, F1 on WSJ section 23 (section 6.3). (parser, training, F1)
TABLE4 = [
    ("Vinyals & Kaiser et al. (2014)", "WSJ only, discriminative", 88.3),
    ("Petrov et al. (2006)", "WSJ only, discriminative", 90.4),
    ("Zhu et al. (2013)", "WSJ only, discriminative", 90.4),
    ("Dyer et al. (2016)", "WSJ only, discriminative", 91.7),
    ("Transformer (4 layers)", "WSJ only, discriminative", 91.3),
    ("Zhu et al. (2013)", "semi-supervised", 91.3),
    ("Huang & Harper (2009)", "semi-supervised", 91.3),
    ("McClosky et al. (2006)", "semi-supervised", 92.1),
    ("Vinyals & Kaiser et al. (2014)", "semi-supervised", 92.1),
    ("Transformer (4 layers)", "semi-supervised", 92.7),
    ("Luong et al. (2015)", "multi-task", 93.0),
    ("Dyer et al. (2016)", "generative", 93.3),
]
