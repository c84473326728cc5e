"""Kafka's connection limits as pure rules (kbus.server.network.connection_quotas, kbus.common.connection_limits): what
the acceptor waits for, which connection is closed, the IP rate quota, idle expiry. Behaviour checked against
Kafka 3.9's ConnectionQuotas / ConnectionQuotasTest."""

from __future__ import annotations

import pytest

from kbus.common.connection_limits import (
    INT_MAX,
    ConnectionLimitError,
    ConnectionLimits,
    listener_key,
    normalize_ip,
    parse_csv_map,
)
from kbus.server.network.connection_quotas import Admission, ConnectionQuotas, IdleExpiry
from kbus.server.quotas.rate import RateConfig

WINDOW = RateConfig(samples=11, window_ms=1000)


def quotas(limits: ConnectionLimits, listeners: tuple[str, ...] = ("EXTERNAL", "REPLICATION")) -> ConnectionQuotas:
    return ConnectionQuotas(listeners, "REPLICATION", limits, WINDOW)


def accept(q: ConnectionQuotas, listener: str, ip: str, now: int = 0) -> Admission:
    assert q.record_connection(listener, now) == 0
    assert q.slot_available(listener)
    return q.admit(listener, ip, now).admission


def test_limits_from_layers_later_layers_win_and_per_listener_keys_are_read() -> None:
    limits = ConnectionLimits.from_layers([
        {"max.connections": "10", "max.connections.per.ip.overrides": "127.0.0.1:2, ::ffff:10.0.0.1:4"},
        {"max.connections": "20", "listener.name.external.max.connections": "5"},
        {"listener.name.EXTERNAL.max.connection.creation.rate": "7", "unrelated": "x"},
    ])  # fmt: skip
    assert limits.max_connections == 20
    assert limits.max_connections_per_ip == INT_MAX
    assert limits.max_connections_per_ip_overrides == {"127.0.0.1": 2, "10.0.0.1": 4}
    assert limits.listener_max_connections == {"EXTERNAL": 5}
    assert limits.listener_max_connection_creation_rate == {"EXTERNAL": 7}


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        ({"max.connections.per.ip": "0"}, "can be set to zero only if max.connections.per.ip.overrides"),
        ({"max.connections": "-1"}, "Value must be at least 0"),
        ({"max.connections": "many"}, "Not a number of type INT"),
        ({"listener.name.a.max.connection.creation.rate": "0"}, "Invalid max.connection.creation.rate 0"),
        ({"max.connections.per.ip.overrides": "a b:1"}, "contains invalid addresses"),
        ({"max.connections.per.ip.overrides": "host:x"}, "For input string"),
    ],
)
def test_limits_kafka_refuses(layer: dict[str, str], message: str) -> None:
    with pytest.raises(ConnectionLimitError, match=message):
        ConnectionLimits.from_layers([layer])


def test_helpers() -> None:
    assert parse_csv_map("k", "a:1,::1:2") == {"a": "1", "::1": "2"}  # split at the last ':'
    assert listener_key("listener.name.internal.max.connections") == ("INTERNAL", "max.connections")
    assert listener_key("listener.name.internal.max.connections.per.ip") is None  # broker-wide only in Kafka
    assert normalize_ip("::ffff:127.0.0.2") == "127.0.0.2"


def test_per_ip_limit_closes_the_connection_over_it_and_override_wins() -> None:
    q = quotas(ConnectionLimits(max_connections_per_ip=2, max_connections_per_ip_overrides={"10.0.0.9": 3}))
    assert [accept(q, "EXTERNAL", "10.0.0.1") for _ in range(3)] == [Admission.ACCEPTED] * 2 + [Admission.TOO_MANY]
    assert q.get("10.0.0.1") == 2  # the rejected one is not counted
    assert [accept(q, "EXTERNAL", "10.0.0.9") for _ in range(4)][-2:] == [Admission.ACCEPTED, Admission.TOO_MANY]
    q.dec("EXTERNAL", "10.0.0.1")
    assert accept(q, "EXTERNAL", "10.0.0.1") is Admission.ACCEPTED


def test_broker_max_connections_blocks_the_acceptor_but_not_the_inter_broker_listener() -> None:
    q = quotas(ConnectionLimits(max_connections=2))
    accept(q, "EXTERNAL", "10.0.0.1")
    accept(q, "EXTERNAL", "10.0.0.2")
    assert not q.slot_available("EXTERNAL")  # the acceptor waits
    assert q.slot_available("REPLICATION")  # protected: brokers still reach each other
    accept(q, "REPLICATION", "10.0.0.3")
    assert q.max_connections_exceeded("EXTERNAL")  # over the limit: EXTERNAL closes its least recent one
    assert not q.max_connections_exceeded("REPLICATION")
    q.dec("EXTERNAL", "10.0.0.1")
    q.dec("EXTERNAL", "10.0.0.2")
    assert q.slot_available("EXTERNAL")


def test_a_single_listener_is_not_protected() -> None:
    q = ConnectionQuotas(["REPLICATION"], "REPLICATION", ConnectionLimits(max_connections=1), WINDOW)
    accept(q, "REPLICATION", "10.0.0.1")
    assert not q.slot_available("REPLICATION")


def test_listener_max_connections_applies_to_the_inter_broker_listener_too() -> None:
    q = quotas(ConnectionLimits(listener_max_connections={"REPLICATION": 1, "EXTERNAL": 5}))
    accept(q, "REPLICATION", "10.0.0.1")
    assert not q.slot_available("REPLICATION")
    assert q.slot_available("EXTERNAL")
    q.configure(ConnectionLimits(listener_max_connections={"REPLICATION": 2}))  # dynamic: raised
    assert q.slot_available("REPLICATION")


def test_creation_rate_throttles_the_acceptor_by_kafkas_rate_arithmetic() -> None:
    q = quotas(ConnectionLimits(max_connection_creation_rate=5))
    # Rate over 11 windows of 1 s counts at least 10 s: 55 connections at t=0 are 5.5/s, the 56th is over
    delays = [q.record_connection("EXTERNAL", 0) for _ in range(60)]
    assert delays[:50] == [0] * 50
    assert all(0 < d <= 1000 for d in delays[56:])  # capped at one quota window
    assert q.record_connection("REPLICATION", 0) == 0  # the protected listener skips the broker-wide rate
    later = 60_000  # a minute on, the windows have expired
    assert q.record_connection("EXTERNAL", later) == 0
    assert q.listener_metrics("EXTERNAL", 0)["connection-accept-throttle-time"] > 0


def test_listener_creation_rate_applies_to_the_protected_listener() -> None:
    q = quotas(ConnectionLimits(listener_max_connection_creation_rate={"REPLICATION": 1}))
    delays = [q.record_connection("REPLICATION", 0) for _ in range(20)]
    assert delays[-1] > 0


def test_ip_connection_rate_closes_after_the_throttle_and_unrecords_everywhere() -> None:
    q = quotas(ConnectionLimits())
    q.set_ip_connection_rates(None, {"10.0.0.1": 1})
    results = []
    for _ in range(15):
        q.record_connection("EXTERNAL", 0)
        results.append(q.admit("EXTERNAL", "10.0.0.1", 0))
    assert results[0].admission is Admission.ACCEPTED
    throttled = [r for r in results if r.admission is Admission.THROTTLED]
    assert throttled and all(0 < r.close_at_ms <= 1000 for r in throttled)
    assert q.get("10.0.0.1") == 15 - len(throttled)  # throttled connections are never counted
    # another address is not limited; the default applies to every address without its own quota
    q.record_connection("EXTERNAL", 0)
    assert q.admit("EXTERNAL", "10.0.0.2", 0).admission is Admission.ACCEPTED
    q.set_ip_connection_rates(0, {})
    q.record_connection("EXTERNAL", 0)
    assert q.admit("EXTERNAL", "10.0.0.2", 0).admission is Admission.THROTTLED
    assert q.listener_metrics("EXTERNAL", 0)["ip-connection-accept-throttle-time"] > 0


def test_idle_expiry_is_least_recently_active_first() -> None:
    idle = IdleExpiry(1000)
    idle.update("a", 0)
    idle.update("b", 500)
    idle.update("a", 600)  # activity moves it back
    assert idle.expired(1400) == []
    assert idle.expired(1501) == ["b"]
    assert idle.expired(1601) == ["b", "a"]
    assert idle.least_recent(lambda c: True) == "b"
    assert idle.least_recent(lambda c: c != "b") == "a"
    idle.update("b", 700)  # taken out and put back: the most recent again
    assert idle.least_recent(lambda c: True) == "a"
    idle.remove("b")
    idle.remove("b")  # twice: a no-op
    assert idle.least_recent(lambda c: True) == "a"
    assert IdleExpiry(-1).expired(10**12) == []  # negative: never (Kafka's Selector)


# ---- the ip entity of AlterClientQuotas / DescribeClientQuotas (kbus.common.quotas, ZkAdminManager's rules)


def test_ip_entities_as_kafka_stores_and_validates_them() -> None:
    from kbus.common import quotas as q

    entity = q.entity_from_components([(q.IP, "127.0.0.1")])
    assert entity.path == "ips/127.0.0.1" and q.QuotaEntity.from_path("ips/127.0.0.1") == entity
    assert q.entity_from_components([(q.IP, None)]).path == "ips/<default>"
    with pytest.raises(q.QuotaRequestError, match="IP entity should not be used with user/client ID entity"):
        q.entity_from_components([(q.IP, "127.0.0.1"), (q.USER, "alice")])
    with pytest.raises(q.QuotaRequestError, match="not a valid IP or resolvable host"):
        q.entity_from_components([(q.IP, "not an address")])
    keys = q.entity_quota_keys(entity)
    assert q.apply_alterations({}, [("connection_creation_rate", 5.0)], keys) == {"connection_creation_rate": "5"}
    for bad in (("producer_byte_rate", 5.0), ("connection_creation_rate", 1.5), ("connection_creation_rate", -1.0)):
        with pytest.raises(q.QuotaRequestError):
            q.apply_alterations({}, [bad], keys)
    with pytest.raises(q.QuotaRequestError, match="Invalid configuration key connection_creation_rate"):
        q.apply_alterations({}, [("connection_creation_rate", 5.0)])  # not a user/client key


def test_describe_filter_keeps_ip_and_user_client_entities_apart() -> None:
    from kbus.common import quotas as q

    configs = {
        q.QuotaEntity(ip="127.0.0.1"): {"connection_creation_rate": "5"},
        q.QuotaEntity(ip=q.DEFAULT): {"connection_creation_rate": "9"},
        q.QuotaEntity("alice", None): {"producer_byte_rate": "100"},
    }
    ip = q.FilterComponent
    assert set(q.describe_filter([ip(q.IP, q.MATCH_EXACT, "127.0.0.1")], True, configs)) == {
        q.QuotaEntity(ip="127.0.0.1")}  # fmt: skip
    assert set(q.describe_filter([ip(q.IP, q.MATCH_DEFAULT)], True, configs)) == {q.QuotaEntity(ip=q.DEFAULT)}
    assert len(q.describe_filter([ip(q.IP, q.MATCH_SPECIFIED)], True, configs)) == 2
    assert set(q.describe_filter([ip(q.USER, q.MATCH_SPECIFIED)], False, configs)) == {q.QuotaEntity("alice")}
    assert len(q.describe_filter([], False, configs)) == 3  # not strict, no component: everything
    with pytest.raises(q.QuotaRequestError, match="IP filter component should not be used"):
        q.describe_filter([ip(q.IP, q.MATCH_SPECIFIED), ip(q.USER, q.MATCH_SPECIFIED)], True, configs)


def test_quota_managers_hand_ip_rates_to_the_network_layer() -> None:
    from kbus.common import quotas as q
    from kbus.server.quotas.manager import QuotaManagers

    managers = QuotaManagers()
    seen: list[dict[str, int]] = []
    managers.replace_all({q.QuotaEntity(ip="127.0.0.1"): {"connection_creation_rate": "5"},
                          q.QuotaEntity("alice"): {"producer_byte_rate": "100"}})  # fmt: skip
    managers.add_ip_listener(seen.append)  # told the current state at once
    managers.entity_changed(q.QuotaEntity(ip=q.DEFAULT), {"connection_creation_rate": "2"})
    managers.entity_changed(q.QuotaEntity(ip="127.0.0.1"), {})
    assert seen == [{"127.0.0.1": 5}, {"127.0.0.1": 5, "<default>": 2}, {"<default>": 2}]
    assert managers.produce.enabled  # user quotas unaffected
