"""Reproducing "Attention Is All You Need" (Vaswani et al., 2017) as one Snakemake workflow."""

__version__ = "0.1.0"
