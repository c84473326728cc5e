"""kbus.zk.poll_handler: kazoo's select() contract on poll(2), with no descriptor opened per call."""

from __future__ import annotations

import os
import socket
import time

import pytest

from kbus.zk.poll_handler import PollingHandler, poll_select


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_poll_select_reports_readable_and_writable_like_select() -> None:
    a, b = socket.socketpair()
    try:
        assert poll_select([a], [], [], 0) == ([], [], [])  # nothing to read yet
        assert poll_select([], [a], [], 0) == ([], [a], [])  # an empty send buffer is writable
        b.send(b"x")
        readable, writable, _ = poll_select([a, b], [a], [], 1.0)
        assert readable == [a] and writable == [a]
        assert poll_select([a], [], [], 0)[0] == [a]  # still unread: level-triggered, as select is
    finally:
        a.close()
        b.close()


def test_poll_select_waits_out_its_timeout_and_rejects_a_closed_socket() -> None:
    a, b = socket.socketpair()
    try:
        t0 = time.monotonic()
        assert poll_select([a], [], [], 0.05) == ([], [], [])
        assert time.monotonic() - t0 >= 0.045
        with pytest.raises(ValueError):
            poll_select([a], [], [], -1)
        b.close()
        assert poll_select([a], [], [], 1.0)[0] == [a]  # the peer's close reads as readable (EOF), as in select
    finally:
        a.close()
    with pytest.raises(TypeError):  # fileno -1: kazoo's fileobj_to_fd, as in its selector_select
        poll_select([a], [], [], 0)


def test_the_handler_opens_no_descriptor_per_select() -> None:
    """kazoo's own SequentialThreadingHandler.select opens (and closes) an epoll instance per call: what made the
    broker's ZooKeeper thread spend a third of a pipelined read's CPU in epoll_create1 and close."""
    from kazoo.handlers import utils

    a, b = socket.socketpair()
    created: list[object] = []
    real = utils.selectors.DefaultSelector

    def counting() -> object:
        created.append(None)
        return real()

    utils.selectors.DefaultSelector = counting  # type: ignore[assignment,misc]
    try:
        before = open_fds()
        for _ in range(100):
            assert PollingHandler().select([a], [a], [], 0)[1] == [a]
        assert open_fds() == before and not created
    finally:
        utils.selectors.DefaultSelector = real  # type: ignore[misc]
        a.close()
        b.close()

