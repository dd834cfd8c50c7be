"""Recording better objectives and tighter bounds into best-known.json (bench full-mode --update-best-known)."""

from __future__ import annotations

import json

from gpualloc import benchmarks
from gpualloc.benchmarks.full_mode import FullModeRow, record_best_known


def row(name: str, objective: float, bound: float, legal: bool = True) -> FullModeRow:
    return FullModeRow(
        name, "highs", objective, bound, (bound - objective) / bound, "optimal", "milp", 0.1, 12.0, objective - 1, legal
    )


def test_records_only_real_improvements(tmp_path, monkeypatch):
    (tmp_path / "best-known.json").write_text(
        json.dumps(
            {
                "a": {"objective": 100.0, "bound": 110.0, "source": "ref"},
                "b": {"objective": 50.0, "bound": 50.0, "source": "ref"},
            }
        )
    )
    monkeypatch.setattr(benchmarks, "DATA_DIR", tmp_path)
    said = record_best_known(
        [
            row("a", 101.23456, 105.0),
            row("b", 50.00001, 50.00002),
            row("c", 1.0, 2.0),
            row("a", 999.0, 999.0, legal=False),
        ]
    )
    data = json.loads((tmp_path / "best-known.json").read_text())
    assert data["a"]["objective"] == 101.2346 and data["a"]["bound"] == 105.0
    assert data["a"]["source"].startswith("gpualloc milp") and data["a"]["bound_status"] == "optimal"
    assert data["b"] == {"objective": 50.0, "bound": 50.0, "source": "ref"}  # rounding is not progress
    assert "c" not in data and len(said) == 2
