"""`gpualloc bench sizing` from the command line."""

from __future__ import annotations

from gpualloc.agent.cli import main


def test_the_command_prints_the_json(capsys):
    assert main(["bench", "sizing", "--samples", "1", "--json"]) == 0
    assert '"gpus": 4096' in capsys.readouterr().out
