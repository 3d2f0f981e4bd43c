"""Data stages: sources (download), cleaning, and the toy corpus generator."""
