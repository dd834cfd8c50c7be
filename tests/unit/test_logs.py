"""The agents' logs: one JSON object a line off a terminal, console lines on one, the bound
context and a call's own fields on every line, levels honoured."""

from __future__ import annotations

import io
import json
import logging

import pytest

from gpualloc.agent import logs


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_off_a_terminal_each_line_is_json_with_the_bound_context():
    out = io.StringIO()
    logs.configure("info", "auto", out)
    with logs.bind(pool="gpu-a"):
        logging.getLogger("gpualloc.agent").warning("dead-lettered %s", "e7", extra={"event_id": "e7"})
        logging.getLogger("gpualloc.agent").debug("not shown at info")
    logging.getLogger("gpualloc.node_agent").info("outside", extra={"node": 3})
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["dead-lettered e7", "outside"]
    assert lines[0]["pool"] == "gpu-a" and lines[0]["event_id"] == "e7" and lines[0]["level"] == "warning"
    assert lines[0]["logger"] == "gpualloc.agent" and lines[0]["ts"].endswith("Z")
    assert "pool" not in lines[1] and lines[1]["node"] == 3


def test_on_a_terminal_lines_are_for_people_and_debug_shows_when_asked():
    out = Terminal()
    logs.configure("debug", "auto", out)
    logging.getLogger("gpualloc.agent").debug("job %s: start", "j1", extra={"job_id": "j1"})
    text = out.getvalue()
    assert "job j1: start" in text and "job_id=j1" in text and not text.lstrip().startswith("{")


def test_json_can_be_forced_and_exceptions_are_kept():
    out = Terminal()
    logs.configure("error", "json", out)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("x").exception("failed")
    line = json.loads(out.getvalue().splitlines()[0])
    assert line["level"] == "error" and "RuntimeError: boom" in line["exception"]
