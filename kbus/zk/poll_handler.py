"""kazoo's threading handler with a select() that costs no file descriptor per call.

kazoo's connection thread calls its handler's select() before every read and write of the ZooKeeper socket (the
wait for a request or reply, then again before each recv of a reply's length and body). SequentialThreadingHandler
answers each call with a new selectors.DefaultSelector: epoll_create1, one epoll_ctl per descriptor, epoll_wait and
close, five system calls and a file object for one wait. A broker re-reading 1,150 partition states (zk_view's
reconciliation, pipelined) spent 140-180 ms of CPU on it, a third of that in creating and closing those epoll
instances (perf, bench/notes/msgsize-2026-11-27-s12.md). poll(2) takes the descriptors with each call: one system call
per wait, no limit on descriptor numbers either (why kazoo left select(2)).
"""

from __future__ import annotations

import errno
import math
import os
import select
from collections.abc import Sequence
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR


def poll_select(
    rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """select.select's contract (kazoo.handlers.utils.selector_select's, which it replaces): the objects of
    `rlist` ready to read and of `wlist` ready to write, within `timeout` seconds (None: no limit). A closed
    descriptor is an OSError (EBADF), as select(2) reports it; `xlist` is never ready (kazoo passes none)."""
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be non-negative")
    wanted: dict[int, int] = {}
    for objs, mask in ((rlist, _READABLE), (wlist, _WRITABLE)):
        for obj in objs:
            fd = fileobj_to_fd(obj)  # TypeError for a closed socket (fileno -1), as in selector_select
            wanted[fd] = wanted.get(fd, 0) | mask
    poller = select.poll()
    for fd, mask in wanted.items():
        poller.register(fd, mask)
    ready = dict(poller.poll(None if timeout is None else math.ceil(timeout * 1000)))
    if any(events & select.POLLNVAL for events in ready.values()):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    readable = [obj for obj in rlist if ready.get(fileobj_to_fd(obj), 0) & _READABLE]
    writable = [obj for obj in wlist if ready.get(fileobj_to_fd(obj), 0) & _WRITABLE]
    return readable, writable, []


class PollingHandler(SequentialThreadingHandler):
    """SequentialThreadingHandler whose select() is poll_select."""

    def select(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return poll_select(*args, **kwargs)
