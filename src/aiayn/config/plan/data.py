"""The study's datasets: their entries, splits and the files each stage makes of them."""

from __future__ import annotations

from aiayn.config import paths
from aiayn.errors import InputError


class DataPlan:
    def __init__(self, config: dict):
        self.datasets = config["datasets"]
        self.config = config

    def entry(self, name: str) -> dict:
        try:
            return self.datasets[name]
        except KeyError:
            raise InputError(
                f"dataset {name!r} is not defined under `datasets` in the config "
                f"(defined: {sorted(self.datasets)})"
            ) from None

    def pair(self, name: str) -> str:
        """The dataset's language pair as file names spell it: en-de."""
        return "-".join(self.entry(name)["langs"])

    def split_sides(self, stage: str, name: str, split: str, suffixes=("",)) -> list[str]:
        """The files of one split at one stage, source side then target, each with every suffix."""
        sides = paths.split_sides(stage, name, split, self.entry(name)["langs"])
        return [side + suffix for side in sides for suffix in suffixes]

    def split_source(self, name: str, split: str) -> dict:
        """Where a split comes from (its `splits` entry), also named in score files and tables."""
        splits = self.entry(name)["splits"]
        if split not in splits:
            raise InputError(f"dataset {name!r} has no split {split!r} (splits: {sorted(splits)})")
        return splits[split]

    def treebanks(self) -> list[str]:
        """Datasets whose splits are Penn Treebank files: parsed (Table 4), not translated."""
        names = []
        for name, spec in self.datasets.items():
            sources = {split["source"] for split in spec["splits"].values()}
            if "ptb" in sources and sources != {"ptb"}:
                raise InputError(
                    f"dataset {name!r} mixes `ptb` splits with {sorted(sources - {'ptb'})} ones: "
                    "every split of a parsing dataset must come from treebank files (its gold "
                    "trees are read from them); put the other splits in a dataset of their own"
                )
            if "ptb" in sources:
                names.append(name)
        return names

    def check_prepare(self) -> None:
        """Every name in `prepare` is a dataset of the config."""
        for name in self.config["prepare"]:
            if name not in self.datasets:
                raise InputError(
                    f"prepare names {name!r}, which is not a dataset under `datasets` "
                    f"(defined: {sorted(self.datasets)}): define it there or take it out"
                )

    def prepared_files(self) -> list[str]:
        """The BPE model and binarized splits of every dataset in `prepare` or that an
        experiment uses."""
        files = []
        used = [entry["dataset"] for entry in self.config["experiments"].values()]
        for name in dict.fromkeys(self.config["prepare"] + used):
            files.append(paths.subword_file("model", name))
            for split in self.entry(name)["splits"]:
                files += self.split_sides("bin", name, split, (".bin", ".idx"))
        return files
