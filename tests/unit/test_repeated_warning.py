"""RepeatedWarning: a failure retried every 0.5 s logs once, then one summary per interval, then one recovery line."""

import logging

import pytest

from kbus.server.util.repeated_warning import RepeatedWarning


def test_retries_every_half_second_log_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    warning = RepeatedWarning(logging.getLogger("t"), interval_s=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="t"):
        for _ in range(60):  # 30 s of a follower retrying a dead leader every 0.5 s
            warning.failed("Fetcher for leader 2: Connection refused; retrying")
            now[0] += 0.5
        warning.succeeded("Fetcher for leader 2: fetching again")
        warning.succeeded("Fetcher for leader 2: fetching again")  # nothing to say when all is well
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "Fetcher for leader 2: Connection refused; retrying",
        "Fetcher for leader 2: Connection refused; retrying (20 times since the last report)",
        "Fetcher for leader 2: Connection refused; retrying (20 times since the last report)",
        "Fetcher for leader 2: fetching again after 60 failed attempt(s)",
    ]


def test_a_new_failure_after_recovery_is_logged_at_once(caplog: pytest.LogCaptureFixture) -> None:
    warning = RepeatedWarning(logging.getLogger("t"), interval_s=10.0, clock=lambda: 0.0)
    with caplog.at_level(logging.INFO, logger="t"):
        warning.failed("down")
        warning.succeeded("up")
        warning.failed("down")
    assert [r.getMessage() for r in caplog.records] == ["down", "up after 1 failed attempt(s)", "down"]
