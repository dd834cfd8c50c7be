"""The workshop's benches (`gpualloc bench NAME`, `gpualloc demo`) beside the data they run on
(package data): the seven seed scenarios and best-known objectives, traces, the corpus, real runs."""

from __future__ import annotations

import json
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent


def scenario_dir() -> Path:
    """Folder of the bundled scenario files."""
    return DATA_DIR / "scenarios"


def scenario_paths() -> list[Path]:
    """The bundled scenario files, sorted by name."""
    return sorted(scenario_dir().glob("*.json"))


def best_known() -> dict[str, dict]:
    """Per scenario name: best objective found, best proven bound, and where they came from."""
    return json.loads((DATA_DIR / "best-known.json").read_text(encoding="utf-8"))
