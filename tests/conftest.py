"""Shared fixtures: real kbus broker processes on free loopback ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.kbus_processes import BrokerProcess


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the whole session (tests must use their own topic names)."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker")).start()
    yield b
    b.stop()


@pytest.fixture
def broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., BrokerProcess]]:
    """Start dedicated brokers: `broker_factory({"log.segment.bytes": "1024"})`. All are stopped afterwards."""
    started: list[BrokerProcess] = []

    def start(overrides: dict[str, str] | None = None, **kwargs: object) -> BrokerProcess:
        b = BrokerProcess(tmp_path_factory.mktemp("broker"), dict(overrides or {}), **kwargs).start()  # type: ignore[arg-type]
        started.append(b)
        return b

    yield start
    for b in started:
        try:
            b.stop()
        except Exception:
            b.kill()
