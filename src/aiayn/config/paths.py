"""Where every stage's files live: the one place their names are spelled.

Each function's arguments default to the Snakemake wildcards of the rule that writes the file,
so a rule writes `paths.split_text("raw", "{src}")` for its output pattern, and code that needs
one concrete file passes the names: `paths.split_text("bin", "de", dataset="toy", split="dev",
pair="en-de")`. Logs and benchmarks follow Snakemake's own layout (logs/<rule>/...) in the rules.
"""

from __future__ import annotations

# Stages of a split: raw (downloaded), clean, bin (token ids as .bin/.idx beside the prefix).
STAGES = ("raw", "clean", "bin")


def split_text(stage, lang, dataset="{dataset}", split="{split}", pair="{src}-{tgt}") -> str:
    """One side of a split: its text at raw and clean, the prefix of its .bin/.idx at bin."""
    return f"data/{dataset}/{stage}/{split}.{pair}.{lang}"


def split_sides(stage, dataset, split, langs) -> list[str]:
    """Both sides of a split, source first, for a dataset translating langs = [src, tgt]."""
    pair = "-".join(langs)
    return [split_text(stage, lang, dataset, split, pair) for lang in langs]


def split_record(stage, dataset="{dataset}", split="{split}", pair="{src}-{tgt}") -> str:
    """What a stage did to a split (counts, settings, sources), beside its files."""
    return f"data/{dataset}/{stage}/{split}.{pair}.json"


def gold_trees(dataset="{dataset}", split="{split}", pair="{src}-{tgt}") -> str:
    """A treebank split's cleaned trees, written beside its raw text."""
    return f"data/{dataset}/raw/{split}.{pair}.trees"


def subword_file(suffix="model", dataset="{dataset}") -> str:
    """The dataset's sentencepiece model (shared by both languages), its .vocab, its .json."""
    return f"data/{dataset}/spm/bpe.{suffix}"


# Files of a run folder besides its checkpoints and weights (aiayn.train.run_folder's):
EXPERIMENT_SPEC = "experiment.json"  # the resolved experiment the trainer reads
TRAIN_LOG = "train.jsonl"  # losses and dev scores, one line per logged step
TRAIN_SUMMARY = "train.json"  # written last: steps, losses, the last checkpoint's weights
INTERRUPTIONS = "interruptions.log"  # why each attempt that did not finish ended


def run_dir(experiment="{experiment}") -> str:
    """Everything training writes: checkpoints, weights, the loss log."""
    return f"runs/{experiment}"


def train_summary(experiment="{experiment}") -> str:
    """The train rule's output."""
    return f"{run_dir(experiment)}/{TRAIN_SUMMARY}"


AVERAGED_MODEL = "averaged.safetensors"  # a run's averaged weights


def averaged_model(experiment="{experiment}") -> str:
    """The experiment's averaged weights: the model that is decoded and shared."""
    return f"{run_dir(experiment)}/{AVERAGED_MODEL}"


def attention_weights(experiment="{experiment}") -> str:
    return f"{run_dir(experiment)}/attention.npz"


def export_dir(fmt="{format}", experiment="{experiment}") -> str:
    """The averaged model as another toolkit loads it (rule export; `aiayn export` anywhere)."""
    return f"{run_dir(experiment)}/export/{fmt}"


def decode_output(suffix, experiment="{experiment}", checkpoint="{checkpoint}", split="{split}"):
    """A decode's hypotheses (.hyp), its record (.json), or the trees built from it (.trees)."""
    return f"{run_dir(experiment)}/decode/{checkpoint}/{split}.{suffix}"


# Results: each study's under results/<study>/ (aiayn.config.study), so studies never touch
# each other's.


def results_dir(study="{study}") -> str:
    return f"results/{study}"


def score_file(
    experiment="{experiment}", checkpoint="{checkpoint}", split="{split}", study="{study}"
) -> str:
    return f"{results_dir(study)}/scores/{experiment}/{checkpoint}/{split}.json"


def seed_score_file(
    experiment="{experiment}", checkpoint="{checkpoint}", split="{split}", study="{study}"
) -> str:
    """An experiment's scores over its seeds: mean, spread, and the seed-aware test."""
    return f"{results_dir(study)}/seeds/{experiment}/{checkpoint}/{split}.json"


def parse_baseline_file(dataset="{dataset}", split="{split}", study="{study}") -> str:
    """Trivial parsers' EVALB figures on a parsing split (aiayn.parsing.baselines)."""
    return f"{results_dir(study)}/baselines/{dataset}/{split}.json"


def table_file(table="{table}", suffix="md", study="{study}") -> str:
    return f"{results_dir(study)}/tables/{table}.{suffix}"


def figure_file(figure="{figure}", suffix="pdf", study="{study}") -> str:
    return f"{results_dir(study)}/figures/{figure}.{suffix}"


def attention_figure(view, suffix="pdf", experiment="{experiment}", study="{study}") -> str:
    return figure_file(f"attention/{experiment}.{view}", suffix, study)


def run_record(study="{study}") -> str:
    """What made the study's results: command, commit, device, times, settings."""
    return f"{results_dir(study)}/run.json"
