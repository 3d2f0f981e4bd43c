"""Shared by the system tests on real corpora (tests/test_real_*.py): config overlays and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def write_overlay(project: Path, name: str, overlay: dict) -> str:
    (project / name).write_text(yaml.safe_dump(overlay, sort_keys=False))
    return name


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())
