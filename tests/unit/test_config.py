"""One configuration: flags over GPUALLOC_* variables (and KAFKA_BOOTSTRAP_SERVERS) over the
settings file over the defaults, with bad settings named by field."""

from __future__ import annotations

import json

import pytest

from gpualloc.agent.cli import build_parser, main
from gpualloc.agent.cli.arguments import settings_of
from gpualloc.schemas.settings import AgentSettings, Settings, load_settings

MIXED = "benchmarks/scenarios/mixed_control.json"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in (
        "KAFKA_BOOTSTRAP_SERVERS",
        "GPUALLOC_SETTINGS",
        "GPUALLOC_BOOTSTRAP",
        "GPUALLOC_AGENT__STEP_SECONDS",
        "GPUALLOC_AGENT__FULL_MODE__EVERY",
    ):
        monkeypatch.delenv(name, raising=False)


def test_defaults_are_the_plain_models():
    s = load_settings()
    assert s.agent == AgentSettings() and s.bootstrap is None and s.pool == "default"
    assert s.simulation.full_mode.every == 6 and s.agent.full_mode.every == 1
    assert s.solve.full_mode.time_limit == 60.0


def test_flags_beat_the_environment_which_beats_the_file(tmp_path, monkeypatch):
    file = tmp_path / "gpualloc.toml"
    file.write_text(
        'topic_prefix = "file."\npool = "from-file"\n[agent]\nstep_seconds = 9\n[agent.full_mode]\nevery = 4\n'
    )
    monkeypatch.setenv("GPUALLOC_SETTINGS", str(file))
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "env:9092")
    monkeypatch.setenv("GPUALLOC_AGENT__STEP_SECONDS", "5")
    args = build_parser().parse_args(["agent", "--topic-prefix", "flag."])
    s = settings_of(args)
    assert (s.topic_prefix, s.bootstrap, s.agent.step_seconds, s.agent.full_mode.every, s.pool) == (
        "flag.",
        "env:9092",
        5.0,
        4,
        "from-file",
    )


def test_json_settings_file_given_as_a_flag(tmp_path):
    file = tmp_path / "s.json"
    file.write_text(json.dumps({"simulation": {"full_mode": {"every": 3, "options": {"node_limit": 7}}}}))
    s = settings_of(
        build_parser().parse_args(["simulate", "t.jsonl", "--settings", str(file), "--full-mode-jobs", "5"])
    )
    assert (
        s.simulation.full_mode.every,
        s.simulation.full_mode.options.node_limit,
        s.simulation.full_mode.max_jobs,
    ) == (3, 7, 5)


@pytest.mark.parametrize(
    "content, needle",
    [
        ('{"agent": {"step_seconds": -1}}', "agent.step_seconds: Input should be greater than 0"),
        ('{"agent": {"stepseconds": 1}}', "agent.stepseconds: Extra inputs are not permitted"),
        ("{not json", "not JSON"),
    ],
)
def test_bad_settings_exit_2_naming_the_field(tmp_path, capsys, content, needle):
    file = tmp_path / "s.json"
    file.write_text(content)
    assert main(["solve", MIXED, "--settings", str(file)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_a_bad_environment_variable_is_named(monkeypatch, capsys):
    monkeypatch.setenv("GPUALLOC_AGENT__FULL_MODE__EVERY", "often")
    assert main(["agent", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "agent.full_mode.every" in capsys.readouterr().err


def test_the_agent_without_a_broker_address_says_how_to_give_one(capsys):
    assert main(["agent"]) == 2
    assert "KAFKA_BOOTSTRAP_SERVERS" in capsys.readouterr().err


def test_help_shows_the_configured_default_and_its_variable(capsys):
    assert main(["simulate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "default: 6; GPUALLOC_SIMULATION__FULL_MODE__EVERY" in " ".join(out.split())


def test_every_settings_field_has_a_default():
    assert Settings.model_validate({}) is not None


def test_one_nested_setting_keeps_its_siblings_defaults(monkeypatch):
    """A flag or variable for one field of a nested model (full mode's node limit, its cadence)
    keeps the other fields' defaults of that model, not the class defaults (nor fails)."""
    from gpualloc.schemas.settings import SimulationSettings, load_settings

    default = SimulationSettings().full_mode
    s = load_settings({"simulation": {"full_mode": {"options": {"lns": True}}}})
    assert s.simulation.full_mode.options.lns and s.simulation.full_mode.every == default.every
    assert s.simulation.full_mode.options.time_limit == default.options.time_limit == 10.0
    monkeypatch.setenv("GPUALLOC_SIMULATION__FULL_MODE__EVERY", "3")
    s = load_settings({"simulation": {"full_mode": {"options": {"node_limit": 7}}}})
    assert (s.simulation.full_mode.every, s.simulation.full_mode.options.node_limit) == (3, 7)
    assert s.simulation.full_mode.options.time_limit == 10.0
