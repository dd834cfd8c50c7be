"""Fixtures and tiers for every test: the broker fixtures (`support.kafka_broker`), the markers by
what a test uses, and the repository's root. Builders live in `support.builders`."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ["support.kafka_broker"]  # the `kafka_bootstrap` fixture (tests/ is on sys.path)


BROKERS = {"kafka_bootstrap", "secure_kafka"}  # the fixtures that start or find a broker
ENGINES = {"stack"}  # the fixture that starts the containers


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tiers by what a test uses: `kafka` for any test with a broker fixture, `docker` for
    the containers' (so `-m "not kafka"` never starts a broker)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & BROKERS:
            item.add_marker(pytest.mark.kafka)
        if used & ENGINES:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT
