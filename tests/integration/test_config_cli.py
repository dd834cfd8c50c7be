"""`gpualloc config`: the effective settings with secrets masked, and the table of every option
that docs/configuration.md carries."""

from __future__ import annotations

import json
from pathlib import Path

from gpualloc.agent.cli import build_parser, main
from gpualloc.agent.operator.config_table import markdown, options
from gpualloc.schemas.settings import Settings

README = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_show_applies_the_environment_and_masks_secrets(monkeypatch, capsys):
    monkeypatch.setenv("GPUALLOC_AGENT__HOT_PATH_EFFORT", "0.5")
    monkeypatch.setenv("GPUALLOC_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("GPUALLOC_KAFKA__SASL_MECHANISM", "PLAIN")
    monkeypatch.setenv("GPUALLOC_KAFKA__SASL_USERNAME", "svc")
    monkeypatch.setenv("GPUALLOC_KAFKA__SASL_PASSWORD", "hunter2")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    shown = json.loads(out)
    assert shown["agent"]["hot_path_effort"] == 0.5 and shown["kafka"]["sasl_username"] == "svc"
    assert "hunter2" not in out and shown["kafka"]["sasl_password"] == "**********"


def test_a_bad_setting_in_the_environment_exits_2_naming_it(monkeypatch, capsys):
    monkeypatch.setenv("GPUALLOC_AGENT__STEP_SECONDS", "-1")
    assert main(["config", "show"]) == 2
    assert "agent.step_seconds" in capsys.readouterr().err


def test_every_setting_is_listed_with_its_variable_and_the_flags_that_exist():
    opts = {o.path: o for o in options(build_parser())}
    assert "agent.forecast.training_quantile" in opts and "kafka.sasl_password" in opts
    assert opts["simulation.full_mode.every"].default == 6  # the nested default instance's, not the class's
    assert "simulate --full-mode-every" in opts["simulation.full_mode.every"].flags
    assert opts["agent.step_seconds"].env == "GPUALLOC_AGENT__STEP_SECONDS"
    assert len(opts) >= len(Settings.model_fields)


def test_the_readme_carries_the_table():
    text = README.read_text(encoding="utf-8")
    start, end = "<!-- gpualloc config options -->\n", "<!-- end gpualloc config options -->"
    table = text[text.index(start) + len(start) : text.index(end)]
    assert table == markdown(options(build_parser())), (
        "run `gpualloc config options` and paste it into docs/configuration.md"
    )


def test_every_setting_takes_its_default_written_as_its_environment_variable(monkeypatch, capsys):
    """A variable is text: each scalar setting, given its own default as text, loads to it (so no
    setting's type refuses what a variable can say, as a `Literal[1, 2]` refuses "1")."""
    given = {}
    for o in options(build_parser()):
        if o.default is None or isinstance(o.default, (list, tuple, dict)):
            continue
        text = str(o.default).lower() if isinstance(o.default, bool) else str(o.default)
        monkeypatch.setenv(o.env, text)
        given[o.path] = o.default
    assert len(given) > 50
    assert main(["config", "show"]) == 0, capsys.readouterr().err
    shown = json.loads(capsys.readouterr().out)
    for path, default in given.items():
        value = shown
        for part in path.split("."):
            value = value[part]
        assert value == default or value == "**********", path
