"""The install: one `gpualloc` namespace, every package listed, no generic top-level names."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest
from support.builders import ROOT

GENERIC = ("agent", "bus", "solvers", "schemas", "forecasting", "benchmarks", "generators")


def test_every_folder_with_an_init_is_an_installed_package():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"gpualloc"} | {
        "gpualloc." + ".".join(p.parent.relative_to(ROOT).parts)
        for p in ROOT.glob("*/**/__init__.py")
        if not {".venv", "tests", "build"} & set(p.relative_to(ROOT).parts)
    }
    assert found == listed


@pytest.mark.slow
def test_every_module_imports_under_gpualloc_alone(tmp_path):
    """From a folder outside the checkout, so a stale `import solvers` cannot be rescued by the
    working directory; afterwards no generic top-level package is loaded."""
    code = (
        "import importlib, pkgutil, sys, gpualloc\n"
        "for m in pkgutil.walk_packages(gpualloc.__path__, 'gpualloc.'):\n"
        "    if m.name != 'gpualloc.__main__':\n"
        "        importlib.import_module(m.name)\n"
        f"print(sorted(n for n in sys.modules if n.split('.')[0] in {GENERIC!r}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_version_and_module_entry_point(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gpualloc", "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.startswith("gpualloc ") and proc.stdout.split()[1][0].isdigit()
