"""The release before this one, runnable beside it: its commit's tree in an environment of its own.

Its tree comes from the repository's history (`git archive`); its environment is a venv whose
path holds that tree, its own package metadata, and this venv's third-party packages (the same
dependencies; the previous release added none), but neither this release's package nor the
compiled heuristic built from this tree: the previous release plans with its own Python
heuristic, the reference its compiled one matches.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

PREVIOUS = "c15feddaf28c2c14f5987ff81fb9a3916364e2bc"  # 0.1.0: ledger entries without facts or release
PREVIOUS_VERSION = "0.1.0"
ROOT = Path(__file__).resolve().parents[2]
OURS = ("gpualloc", "__editable__", "_gpualloc", "gpualloc_native")  # what this venv holds of this tree


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the previous release cannot be built: {reason}")
    pytest.skip(f"the previous release cannot be built: {reason}")


def build_previous(where: Path) -> list[str]:
    """Build the previous release under `where`; the command line that runs its `gpualloc` (from
    a working directory outside this checkout, whose metadata would name this release)."""
    if shutil.which("git") is None:
        _unavailable("no git")
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{PREVIOUS}^{{commit}}"], capture_output=True)
    if found.returncode:
        _unavailable(f"commit {PREVIOUS[:12]} is not in this clone's history")
    tree = where / "src" / "gpualloc"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", PREVIOUS], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], check=True)  # a start as quick as ours
    meta = where / "src" / f"gpualloc-{PREVIOUS_VERSION}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: gpualloc\nVersion: {PREVIOUS_VERSION}\n")
    deps = where / "deps"
    deps.mkdir()
    ours = Path(sysconfig.get_paths()["purelib"])
    for entry in ours.iterdir():
        if not entry.name.startswith(OURS) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    env = where / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "previous-release.pth").write_text(f"{where / 'src'}\n{deps}\n")
    probe = subprocess.run([str(python), "-m", "gpualloc", "--version"], capture_output=True, text=True, cwd=where)
    if probe.returncode or PREVIOUS_VERSION not in probe.stdout:
        _unavailable(f"its gpualloc does not start: {probe.stdout}{probe.stderr}"[-2000:])
    return [str(python), "-m", "gpualloc"]


def ours() -> list[str]:
    """The command line that runs this release's `gpualloc`."""
    return [sys.executable, "-m", "gpualloc"]
