"""Logging for the agents: structlog over the standard library, so every logger in the process
(ours, aiokafka's) writes one JSON object a line when the output is not a terminal (a pipeline
parses it) and readable lines when it is. Context bound with `bind` (the pool, the node) rides on
every line of the task that bound it; a call's own fields come as `extra={...}`."""

from __future__ import annotations

import logging
import sys
from typing import IO, Any

import structlog
from structlog.contextvars import bound_contextvars

__all__ = ["bind", "configure"]

bind = bound_contextvars  # `with bind(pool="a"):` everything logged inside carries pool="a"


def configure(level: str = "info", fmt: str = "auto", stream: IO[str] | None = None) -> None:
    """Route every logger of the process through one handler on `stream` (stderr): JSON when
    `fmt` is json, or auto and the stream is not a terminal; console lines otherwise."""
    stream = stream or sys.stderr
    as_json = fmt == "json" or (fmt == "auto" and not _is_terminal(stream))
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
    ]
    renderer = structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=False)
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *([structlog.processors.format_exc_info] if as_json else []),
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiokafka").setLevel(max(root.level, logging.WARNING))  # its INFO is per connection
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
