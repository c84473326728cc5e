"""The stall watch names a phase that overran its limit, with the stack of the thread stuck in it, once."""

from __future__ import annotations

import logging
import threading

import pytest

from kbus.server.util.stall_watch import StallWatch


def _stuck_in_a_lock(watch: StallWatch, entered: threading.Event, release: threading.Event) -> None:
    with watch.phase("Broker 7's ZooKeeper metadata thread"):
        entered.set()
        release.wait(10)


def test_a_phase_over_its_limit_is_reported_once_with_the_stuck_threads_stack(caplog: pytest.LogCaptureFixture) -> None:
    watch = StallWatch(limit_s=0.05, poll_s=3600)  # checked by hand below, not by its thread
    entered, release = threading.Event(), threading.Event()
    stuck = threading.Thread(target=_stuck_in_a_lock, args=(watch, entered, release), name="zk-metadata-7")
    caplog.set_level(logging.INFO, logger="kbus.server")
    stuck.start()
    try:
        assert entered.wait(5)
        watch.check()  # too early: within its limit
        assert not caplog.records
        threading.Event().wait(0.1)
        watch.check()
        watch.check()  # reported once, not at every poll
    finally:
        release.set()
        stuck.join(5)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert text.startswith("Broker 7's ZooKeeper metadata thread has been running for")
    assert 'Thread "zk-metadata-7"' in text and "_stuck_in_a_lock" in text and "release.wait(10)" in text
    assert any(r.levelno == logging.INFO and "finished after" in r.getMessage() for r in caplog.records)


def test_a_phase_that_ends_in_time_is_never_reported(caplog: pytest.LogCaptureFixture) -> None:
    watch = StallWatch(limit_s=0.05, poll_s=3600)
    with watch.phase("quick"):
        pass
    threading.Event().wait(0.1)
    watch.check()
    assert not caplog.records
