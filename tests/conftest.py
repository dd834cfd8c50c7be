"""Fixtures and tiers for every test: the broker fixtures (`support.kafka_broker`), the markers by
what a test uses, the hypothesis profiles of the tiers, and the repository's root. Builders live
in `support.builders`."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ["support.kafka_broker"]  # the `kafka_bootstrap` fixture (tests/ is on sys.path)


BROKERS = {"kafka_bootstrap", "secure_kafka"}  # the fixtures that start or find a broker
ENGINES = {"stack"}  # the fixture that starts the containers

# Property runs by tier: `full` (hypothesis' own count) unless pytest is given
# `--hypothesis-profile=check`, as `make check` is; a test's own count goes through
# `support.examples.examples`, which scales it by the same share.
settings.register_profile("full", max_examples=100)
settings.register_profile("check", max_examples=10)
settings.load_profile("full")


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
