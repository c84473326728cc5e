"""Loopback ports for the servers a test starts (brokers, ZooKeeper, metrics, Kafka and Spark peers).

A port the kernel hands out for `bind(0)` comes from the ephemeral range, the same range it draws the local port
of every outgoing connection from. Choosing a server's port that way and binding it seconds later (a cluster
fixture picks three brokers' ports up front, then starts them one by one) loses the port whenever some client
socket - a broker's ZooKeeper session, a consumer - was given it in between: CI saw a broker fail with "Address
already in use" that way. Ports below (or above) the ephemeral range are never given to outgoing connections, so
a port picked there and found free stays free until its server binds it.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

_FALLBACK_EPHEMERAL = (32768, 60999)  # Linux's default net.ipv4.ip_local_port_range


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return _FALLBACK_EPHEMERAL
    return low, high


def _candidates() -> list[int]:
    low, high = ephemeral_range()
    below = range(max(1024, low - 20000), low) if low > 2048 else range(0)
    above = range(high + 1, 65536)
    ports = [*below, *above]
    if len(ports) < 1000:  # an unusual range that leaves no room outside it: fall back to the kernel's choice
        return []
    ports = _worker_share(ports)
    # each process starts at its own place, so two test runs on one machine rarely try the same ports
    start = random.Random(os.getpid()).randrange(len(ports))
    return ports[start:] + ports[:start]


def _worker_share(ports: list[int]) -> list[int]:
    """Under pytest-xdist (scripts/test.sh runs the suite on several workers), worker gwN's own slice of the ports:
    two workers never pick the same port, even in the moment between picking it and binding it. The processes a
    worker's tests start inherit its PYTEST_XDIST_WORKER and use the same slice, each from its own place in it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        index = int(worker.removeprefix("gw")) % count if worker.startswith("gw") else -1
    except ValueError:
        return ports
    if count <= 1 or index < 0 or len(ports) // count < 500:
        return ports
    size = len(ports) // count
    return ports[index * size : (index + 1) * size]


_POOL = _candidates()
_next = 0
_given: set[int] = set()


def _is_free(port: int) -> bool:
    """Nothing bound to it on loopback, listening or connected (no SO_REUSEADDR: a TIME_WAIT counts as taken)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port outside the ephemeral range that nothing holds now and that this process has not handed out."""
    global _next
    for _ in range(len(_POOL)):
        port = _POOL[_next % len(_POOL)]
        _next += 1
        if port not in _given and _is_free(port):
            _given.add(port)
            return port
    with socket.socket() as s:  # no room outside the ephemeral range
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
