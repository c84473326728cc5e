"""Kafka's connection limits on a real broker process, with real sockets: connections.max.idle.ms closes idle and
half-sent connections; max.connections.per.ip (+ overrides) closes the connection over it; max.connections makes
the acceptor wait (the inter-broker listener is protected, and its excess closes other listeners' least recently
used connections); max.connection.creation.rate delays accepting; all of them dynamic. 127.0.0.2 is "another
address" on the loopback."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from kbus.protocol.codec import encode_request
from tests.kbus_processes import BrokerProcess, free_port, kbus, wait_for

pytestmark = pytest.mark.integration

API_VERSIONS = encode_request(ApiVersionsRequest(), 7, "limits")


def connect(port: int, source: str = "127.0.0.1", timeout: float = 5.0) -> socket.socket:
    sock = socket.socket()
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def served(sock: socket.socket, timeout: float = 5.0) -> bool:
    """One ApiVersions round trip: True when answered, False when the broker closed or reset the connection or
    did not answer within `timeout`."""
    sock.settimeout(timeout)
    try:
        sock.sendall(API_VERSIONS)
        head = b""
        while len(head) < 8:
            chunk = sock.recv(8 - len(head))
            if not chunk:
                return False
            head += chunk
    except (ConnectionResetError, BrokenPipeError, TimeoutError):
        return False
    size, corr = struct.unpack(">ii", head)
    remaining = size - 4
    while remaining > 0:
        chunk = sock.recv(min(remaining, 65536))
        if not chunk:
            return False
        remaining -= len(chunk)
    return corr == 7


def closed_by_broker(sock: socket.socket, timeout: float) -> bool:
    """True when the broker closes the connection within `timeout` (the client sends nothing)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.fixture
def limited(broker_factory):
    """A broker whose start-up probe connection (tests.kbus_processes.wait_for_port's) is no longer counted."""

    def start(overrides: dict[str, str], **kwargs: object) -> BrokerProcess:
        b = broker_factory(overrides, **kwargs)
        time.sleep(0.5)
        return b

    return start


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for s in opened:
        s.close()


def test_idle_and_half_sent_connections_are_closed(broker_factory, sockets) -> None:
    b: BrokerProcess = broker_factory({"connections.max.idle.ms": "1500"})
    idle = connect(b.port)
    half = connect(b.port)
    half.sendall(struct.pack(">i", 100) + b"\x00\x12")  # a frame that never completes
    busy = connect(b.port)
    sockets += [idle, half, busy]
    started = time.monotonic()
    while time.monotonic() - started < 2.5:  # a client sending requests is never idle
        assert served(busy)
        time.sleep(0.3)
    assert closed_by_broker(idle, 3) and closed_by_broker(half, 3)
    assert time.monotonic() - started < 6
    assert served(busy)


def test_unauthenticated_sasl_connection_is_closed_when_idle(broker_factory, sockets) -> None:
    """A client that starts a SASL exchange and never finishes it is closed as idle (it is served ApiVersions and
    SaslHandshake only, so without the idle timeout it would hold the connection forever)."""
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    plain, sasl = free_port(), free_port()
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret";')  # fmt: skip
    broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                    "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                    "connections.max.idle.ms": "1500"}, port=plain)  # fmt: skip
    s = connect_into(sockets, sasl)
    assert served(s)  # ApiVersions is served before authentication
    s.sendall(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 8, "limits"))
    started = time.monotonic()
    s.settimeout(5)
    assert len(s.recv(4096)) > 0  # the handshake answer; then the client says nothing more
    assert closed_by_broker(s, 5)
    assert 1.0 < time.monotonic() - started < 4.5


def test_max_connections_per_ip_closes_the_new_connection_and_overrides_win(limited, sockets) -> None:
    b = limited({"max.connections.per.ip": "3", "max.connections.per.ip.overrides": "127.0.0.2:5"})
    first = [connect(b.port) for _ in range(5)]
    other = [connect(b.port, "127.0.0.2") for _ in range(6)]
    sockets += first + other
    assert [served(s) for s in first] == [True, True, True, False, False]
    assert [served(s) for s in other] == [True] * 5 + [False]
    assert "Rejected connection from /127.0.0.1, address already has the configured maximum of 3" in b.log_text()
    first[0].close()  # a slot for 127.0.0.1 again
    wait_for(lambda: served(connect_into(sockets, b.port)), 10, "a new connection once one closed")


def connect_into(sockets: list[socket.socket], port: int, source: str = "127.0.0.1") -> socket.socket:
    s = connect(port, source)
    sockets.append(s)
    return s


def test_max_connections_makes_the_acceptor_wait_until_a_connection_closes(limited, sockets) -> None:
    b = limited({"max.connections": "3"})
    held = [connect_into(sockets, b.port) for _ in range(3)]
    assert all(served(s) for s in held)
    waiting = connect_into(sockets, b.port)  # the kernel completes it; the broker does not take it yet
    assert not served(waiting, timeout=1.5)
    held[0].close()
    waiting.settimeout(5)
    head = waiting.recv(8)  # the request sent above is answered once the acceptor takes the connection
    assert len(head) >= 4


def two_listener_overrides(external: int, replication: int) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{external},REPLICATION://127.0.0.1:{replication}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION",
    }


def test_inter_broker_listener_is_protected_and_its_excess_closes_the_oldest_client(limited, sockets) -> None:
    external, replication = free_port(), free_port()
    b = limited({**two_listener_overrides(external, replication), "max.connections": "2"}, port=external)
    clients = [connect_into(sockets, b.port) for _ in range(2)]
    assert all(served(s) for s in clients)
    time.sleep(0.1)
    assert served(clients[1])  # clients[0] is now the least recently used
    brokers = [connect_into(sockets, replication) for _ in range(2)]
    assert all(served(s) for s in brokers)  # over max.connections, yet served: the inter-broker listener
    # the broker is now over its limit: the other listener closes its least recently used connections
    assert closed_by_broker(clients[0], 5)
    assert closed_by_broker(clients[1], 5)
    assert all(served(s) for s in brokers)


def test_listener_max_connections(limited, sockets) -> None:
    external, replication = free_port(), free_port()
    b = limited({**two_listener_overrides(external, replication),
                        "listener.name.replication.max.connections": "1"}, port=external)  # fmt: skip
    assert served(connect_into(sockets, replication))
    assert not served(connect_into(sockets, replication), timeout=1.5)  # waits for a slot on that listener
    assert all(served(connect_into(sockets, b.port)) for _ in range(5))  # the other listener is unaffected


def test_connection_creation_rate_delays_accepting(broker_factory, sockets) -> None:
    from tests.integration.test_metrics_endpoint import samples, scrape

    metrics_port = free_port()
    b = broker_factory({"listener.name.plaintext.max.connection.creation.rate": "1",
                        "metrics.port": str(metrics_port)})  # fmt: skip
    started = time.monotonic()
    for _ in range(14):  # Kafka's Rate over 11 windows of 1 s: ~10 at once, then about one a second
        assert served(connect_into(sockets, b.port), timeout=10)
        sockets.pop().close()
    elapsed = time.monotonic() - started
    assert elapsed > 2.5, elapsed
    # Kafka's per-listener socket-server-metrics, by their kbus names
    s = samples(scrape(metrics_port)[2])
    listener = frozenset({("listener", "PLAINTEXT")})
    assert s[("kbus_connection_accept_throttle_time", listener)] > 0  # ms the acceptor waited, on average
    assert s[("kbus_acceptor_blocked_seconds_total", listener)] > 1.5
    assert s[("kbus_connection_creation_total", listener)] >= 14
    assert s[("kbus_connection_accept_rate", listener)] > 0
    assert ("kbus_connection_count", listener) in s and ("kbus_broker_connection_accept_rate", frozenset()) in s


def test_limits_change_without_restart(broker_factory, sockets) -> None:
    b = broker_factory()
    assert all(served(connect_into(sockets, b.port)) for _ in range(4))
    out = kbus("configs", "--bootstrap-server", b.bootstrap, "--entity-type", "brokers", "--entity-default",
               "--alter", "--add-config", "max.connections.per.ip=5")  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    time.sleep(1)  # the change notification reaches the broker
    assert served(connect_into(sockets, b.port))  # the 5th
    assert not served(connect_into(sockets, b.port))  # the 6th: closed
    for s in sockets:
        s.close()  # room for the tool's own connection
    sockets.clear()
    out = kbus("configs", "--bootstrap-server", b.bootstrap, "--entity-type", "brokers", "--entity-name", "0",
               "--alter", "--add-config", "max.connections.per.ip=2147483647")  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    wait_for(lambda: served(connect_into(sockets, b.port)), 10, "no per-IP limit once the broker's own value wins")
    out = kbus("configs", "--bootstrap-server", b.bootstrap, "--entity-type", "brokers", "--entity-name", "0",
               "--alter", "--add-config", "max.connections.per.ip=0")  # fmt: skip
    assert out.returncode != 0 and "max.connections.per.ip.overrides" in out.stdout + out.stderr


def ok(out) -> str:
    assert out.returncode == 0, out.stderr + out.stdout
    return out.stdout


@pytest.mark.slow  # ~15-30 s: throttled connections are held up to a second each before they are closed
def test_ip_connection_creation_rate_quota_without_restart(broker_factory, zk_connect, raw_zk, sockets) -> None:
    """127.0.0.3 gets a quota (kbus configs comes from 127.0.0.1, which keeps none until the default is set)."""
    b = broker_factory({"zookeeper.connect": zk_connect})
    ok(kbus("configs", "--bootstrap-server", b.bootstrap, "--entity-type", "ips", "--entity-name", "127.0.0.3",
            "--alter", "--add-config", "connection_creation_rate=1"))  # fmt: skip
    data, _ = raw_zk.get("/config/ips/127.0.0.3")  # Kafka's znode, Kafka's format
    assert b'"connection_creation_rate":"1"' in data
    described = ok(kbus("configs", "--bootstrap-server", b.bootstrap, "--describe", "--entity-type", "ips"))
    assert "Quota configs for ip '127.0.0.3' are connection_creation_rate=1.0" in described
    bad = kbus("configs", "--bootstrap-server", b.bootstrap, "--entity-type", "ips", "--entity-name", "127.0.0.9",
               "--alter", "--add-config", "producer_byte_rate=5")  # fmt: skip
    assert bad.returncode != 0 and "Only connection quota configs can be added for 'ips'" in bad.stderr + bad.stdout

    def outcomes(source: str, n: int) -> list[bool]:
        return [served(connect_into(sockets, b.port, source), timeout=3) for _ in range(n)]

    # Rate over 11 windows of 1 s: about 10 connections at once, then the address is over its quota: those are
    # held unanswered for the throttle time, then closed
    results = wait_for_outcomes(lambda: outcomes("127.0.0.3", 14))
    assert results[:5] == [True] * 5 and results[-3:] == [False] * 3, results
    assert all(outcomes("127.0.0.2", 14))  # another address has no quota
    # the default applies to every address without its own quota, without a restart either
    ok(kbus("configs", "--bootstrap-server", b.bootstrap, "--entity-type", "ips", "--entity-default",
            "--alter", "--add-config", "connection_creation_rate=1"))  # fmt: skip
    assert raw_zk.exists("/config/ips/<default>")
    assert wait_for_outcomes(lambda: outcomes("127.0.0.4", 14))[-3:] == [False] * 3


def wait_for_outcomes(attempt):
    """The quota reaches the broker through ZooKeeper's change notification: retry until it bites."""
    deadline = time.monotonic() + 15
    while True:
        results = attempt()
        if not results[-1] or time.monotonic() > deadline:
            return results
        time.sleep(1.5)


@pytest.mark.slow
def test_thousands_of_connections_from_one_address_leave_another_client_served(broker_factory, sockets) -> None:
    """An attacker opens 3,000 connections from 127.0.0.1 as fast as it can and keeps them; a client on
    127.0.0.2 is still answered promptly, and the broker holds no more than max.connections.per.ip of them."""
    metrics_port = free_port()
    b = broker_factory({"max.connections.per.ip": "200", "max.connections": "1000",
                        "connections.max.idle.ms": "20000", "metrics.port": str(metrics_port)})  # fmt: skip
    victim = connect_into(sockets, b.port, "127.0.0.2")
    assert served(victim)
    attack: list[socket.socket] = []
    started = time.monotonic()
    latencies = []
    try:
        for i in range(3000):
            s = socket.socket()
            s.setblocking(False)
            s.bind(("127.0.0.1", 0))
            with contextlib.suppress(BlockingIOError):  # non-blocking: the handshake completes in the kernel
                s.connect(("127.0.0.1", b.port))
            attack.append(s)
            if i % 300 == 0:
                t = time.monotonic()
                assert served(victim, timeout=5)
                latencies.append(time.monotonic() - t)
        assert time.monotonic() - started < 60
        t = time.monotonic()
        assert served(connect_into(sockets, b.port, "127.0.0.2"), timeout=5)  # a new connection from elsewhere
        latencies.append(time.monotonic() - t)
        print("victim latencies during the attack (ms):", [round(x * 1000, 1) for x in latencies])
        assert max(latencies) < 2.0, latencies
        from tests.integration.test_metrics_endpoint import samples, scrape

        def count() -> float:
            return samples(scrape(metrics_port)[2])[("kbus_connection_count", frozenset({("listener", "PLAINTEXT")}))]

        assert count() <= 200 + 2
        assert "Rejected connection from /127.0.0.1" in b.log_text()
    finally:
        for s in attack:
            s.close()
    wait_for(lambda: count() <= 2, 15, "the attacker's connections to be released")


def test_ip_quotas_straight_in_zookeeper(zk_connect, raw_zk) -> None:
    """kbus configs --zookeeper --entity-type ips writes Kafka's znode and change notification (no broker needed)."""
    ok(kbus("configs", "--zookeeper", zk_connect, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.5",
            "--add-config", "connection_creation_rate=3"))  # fmt: skip
    assert b'"connection_creation_rate":"3"' in raw_zk.get("/config/ips/127.0.0.5")[0]
    changes = [raw_zk.get(f"/config/changes/{c}")[0] for c in raw_zk.get_children("/config/changes")]
    assert any(b'"entity_path":"ips/127.0.0.5"' in c for c in changes)
    shown = ok(kbus("configs", "--zookeeper", zk_connect, "--describe", "--entity-type", "ips"))
    assert "Configs for ip '127.0.0.5' are connection_creation_rate=3" in shown
    bad = kbus("configs", "--zookeeper", zk_connect, "--alter", "--ip", "127.0.0.5", "--add-config",
               "consumer_byte_rate=3")  # fmt: skip
    assert bad.returncode != 0 and "Unknown Dynamic Configuration 'consumer_byte_rate'" in bad.stdout + bad.stderr
