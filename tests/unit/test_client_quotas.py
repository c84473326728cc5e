"""Client quotas without processes: Kafka's precedence among users/clients entities, the rate windows and throttle
time of ClientQuotaManager, the DescribeClientQuotas filter and AlterClientQuotas validation, and the two APIs and
the Produce/Fetch throttle against fake managers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from kbus.common import quotas as q
from kbus.common.quotas import DEFAULT, QuotaEntity
from kbus.server.quotas.manager import ClientQuotaManager, QuotaManagers
from kbus.server.quotas.rate import RateConfig
from tests.unit.test_api_handlers import call, fetch, managers, part, produce

U, C = "alice", "app"


def level(quotas: dict[QuotaEntity, float]) -> float | None:
    return q.quota_limit(*q.quota_metric_tags(U, C, quotas), quotas)


def test_precedence_is_kafkas_eight_levels() -> None:
    """Each level wins over every level below it (ClientQuotaManager's documented order)."""
    order = [
        QuotaEntity(U, C),
        QuotaEntity(U, DEFAULT),
        QuotaEntity(U, None),
        QuotaEntity(DEFAULT, C),
        QuotaEntity(DEFAULT, DEFAULT),
        QuotaEntity(DEFAULT, None),
        QuotaEntity(None, C),
        QuotaEntity(None, DEFAULT),
    ]
    for i, entity in enumerate(order):
        quotas = {e: float(100 + j) for j, e in enumerate(order[i:], start=i)}
        assert level(quotas) == 100 + i, entity
    assert level({}) is None
    assert level({QuotaEntity("bob", None): 5.0, QuotaEntity(None, "other"): 6.0}) is None


def test_sensor_tags_share_a_user_quota_between_clients() -> None:
    quotas = {QuotaEntity(U, None): 10.0, QuotaEntity(None, C): 20.0}
    assert q.quota_metric_tags(U, C, quotas) == (U, "")
    assert q.quota_metric_tags(U, "other", quotas) == (U, "")
    assert q.quota_metric_tags("bob", C, quotas) == ("", C)
    # one level only: Kafka's fast path keys by that level whether or not this client has an entity
    assert q.quota_metric_tags(U, C, {QuotaEntity(None, DEFAULT): 1.0}) == ("", C)


def test_sanitize_matches_kafkas_sanitizer() -> None:
    assert q.sanitize("User:CN=a b,O=x*") == "User%3ACN%3Da%20b%2CO%3Dx%2A"
    assert q.desanitize(q.sanitize("a/b c*")) == "a/b c*"
    assert q.sanitize("app-1.x_y") == "app-1.x_y"


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    m = ClientQuotaManager("Produce", q.PRODUCER_BYTE_RATE, RateConfig())
    m.update({QuotaEntity(None, C): 1000.0})
    assert m.enabled
    assert m.record("ANONYMOUS", C, 5000, 0) == 0  # 500 B/s over a 10 s window
    # 15,000 B over a 10.1 s window: 1,485 B/s; (1485 - 1000) / 1000 * 10,100 ms
    assert m.record("ANONYMOUS", C, 10_000, 100) == 4900
    assert m.record("ANONYMOUS", "free", 1_000_000, 100) == 0  # no quota for that client
    assert m.max_value_in_window("ANONYMOUS", C, 100) == 10_000
    m.update({})
    assert not m.enabled


def test_request_quota_throttle_is_bounded_by_one_window() -> None:
    quotas = QuotaManagers()
    quotas.entity_changed(QuotaEntity(None, C), {"request_percentage": "1"})
    assert quotas.request.enabled and not quotas.produce.enabled
    assert quotas.request.record("ANONYMOUS", C, 5000.0, 0) == 1000


def test_quota_changes_apply_to_existing_sensors() -> None:
    quotas = QuotaManagers()
    quotas.entity_changed(QuotaEntity(None, C), {"producer_byte_rate": "1000"})
    assert quotas.produce.record("ANONYMOUS", C, 20_000, 0) > 0
    quotas.entity_changed(QuotaEntity(None, C), {"producer_byte_rate": "1000000"})
    assert quotas.produce.record("ANONYMOUS", C, 1, 1) == 0
    # a user entity's SCRAM credentials are not quotas
    quotas.replace_all({QuotaEntity(U, None): {"SCRAM-SHA-256": "salt=..."}})
    assert not quotas.produce.enabled


def test_alterations_keep_other_keys_and_validate_types() -> None:
    before = {"SCRAM-SHA-256": "cred", "producer_byte_rate": "10"}
    after = q.apply_alterations(before, [("consumer_byte_rate", 2048.0), ("producer_byte_rate", None)])
    assert after == {"SCRAM-SHA-256": "cred", "consumer_byte_rate": "2048"}
    assert q.apply_alterations({}, [("request_percentage", 12.5)]) == {"request_percentage": "12.5"}
    with pytest.raises(q.QuotaRequestError, match="Invalid configuration key bogus"):
        q.apply_alterations({}, [("bogus", 1.0)])
    with pytest.raises(q.QuotaRequestError, match="must be a LONG"):
        q.apply_alterations({}, [("producer_byte_rate", 1.5)])
    with pytest.raises(q.QuotaRequestError, match="Empty user not supported"):
        q.entity_from_components([("user", "")])
    with pytest.raises(q.QuotaRequestError, match="Invalid empty"):
        q.entity_from_components([])
    assert q.entity_from_components([("user", "a b"), ("client-id", None)]) == QuotaEntity("a%20b", DEFAULT)


CONFIGS = {
    QuotaEntity(U, None): {"producer_byte_rate": "1", "SCRAM-SHA-256": "x"},
    QuotaEntity(U, C): {"consumer_byte_rate": "2"},
    QuotaEntity(None, C): {"producer_byte_rate": "3"},
    QuotaEntity(None, DEFAULT): {"request_percentage": "4.5"},
    QuotaEntity("bob", None): {"SCRAM-SHA-512": "y"},  # credentials only: not listed
}


def paths(found: dict[QuotaEntity, Any]) -> set[str]:
    return {e.path for e in found}


def test_describe_filter_matches_kafka() -> None:
    f = q.FilterComponent
    assert paths(q.describe_filter([], False, CONFIGS)) == {"users/alice", "users/alice/clients/app", "clients/app",
                                                           "clients/<default>"}  # fmt: skip
    assert paths(q.describe_filter([f("user", 0, U)], True, CONFIGS)) == {"users/alice"}
    assert paths(q.describe_filter([f("user", 0, U)], False, CONFIGS)) == {"users/alice", "users/alice/clients/app"}
    assert paths(q.describe_filter([f("client-id", 1)], True, CONFIGS)) == {"clients/<default>"}
    assert paths(q.describe_filter([f("client-id", 2)], True, CONFIGS)) == {"clients/app", "clients/<default>"}
    assert paths(q.describe_filter([f("user", 2), f("client-id", 0, C)], True, CONFIGS)) == {
        "users/alice/clients/app"}  # fmt: skip
    assert q.describe_filter([f("user", 0, U)], True, CONFIGS)[QuotaEntity(U, None)] == {"producer_byte_rate": 1.0}
    with pytest.raises(q.QuotaRequestError, match="Duplicate user"):
        q.describe_filter([f("user", 2), f("user", 1)], False, CONFIGS)
    with pytest.raises(q.QuotaUnsupportedError):
        q.describe_filter([f("group", 2)], False, CONFIGS)


# ------------------------------------------------------------------------------------------------- the APIs
class FakeQuotaStore:
    def __init__(self) -> None:
        self.configs: dict[QuotaEntity, dict[str, str]] = {QuotaEntity(U, None): {"SCRAM-SHA-256": "cred"}}

    def quota_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        return {e: dict(c) for e, c in self.configs.items()}

    def quota_entity_config(self, entity: QuotaEntity) -> dict[str, str]:
        return dict(self.configs.get(entity, {}))

    def set_quota_entity_config(self, entity: QuotaEntity, configs: dict[str, str]) -> None:
        self.configs[entity] = dict(configs)


def alter(m: Any, version: int, entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]],
          validate_only: bool = False) -> Any:  # fmt: skip
    entry = part(49, version, "EntryData",
                 entity=tuple(part(49, version, "EntityData", entity_type=t, entity_name=n) for t, n in entity),
                 ops=tuple(part(49, version, "OpData", key=k, value=v, remove=r) for k, v, r in ops))  # fmt: skip
    return call(m, 49, version, entries=(entry,), validate_only=validate_only)


@pytest.mark.parametrize("version", [0, 1])
def test_alter_and_describe_client_quotas(version: int) -> None:
    m, _, _, _ = managers()
    store = FakeQuotaStore()
    m.quota_store = store
    r = alter(m, version, [("user", U), ("client-id", None)], [("producer_byte_rate", 1024, False)])
    assert r.entries[0].error_code == E.none
    r = alter(m, version, [("user", U)], [("consumer_byte_rate", 2048, False)])
    assert r.entries[0].error_code == E.none
    assert store.configs[QuotaEntity(U, None)] == {"SCRAM-SHA-256": "cred", "consumer_byte_rate": "2048"}
    assert store.configs[QuotaEntity(U, DEFAULT)] == {"producer_byte_rate": "1024"}
    r = alter(m, version, [("user", U)], [("nope", 1, False)])
    entry = r.entries[0]
    assert (entry.error_code, entry.error_message) == (E.invalid_request, "Invalid configuration key nope")
    r = alter(m, version, [("client-id", C)], [("producer_byte_rate", 5, False)], validate_only=True)
    assert r.entries[0].error_code == E.none and QuotaEntity(None, C) not in store.configs

    comp = part(48, version, "ComponentData", entity_type="user", match_type=0, match=U)
    r = call(m, 48, version, components=(comp,), strict=False)
    assert r.error_code == E.none
    got = {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
           for entry in r.entries}  # fmt: skip
    assert got == {(("user", U),): {"consumer_byte_rate": 2048.0},
                   (("user", U), ("client-id", None)): {"producer_byte_rate": 1024.0}}  # fmt: skip
    bad = part(48, version, "ComponentData", entity_type="", match_type=2, match=None)
    r = call(m, 48, version, components=(bad,), strict=False)
    assert r.error_code == E.invalid_request and r.entries is None


def test_produce_and_fetch_carry_the_throttle_time(tmp_path: Path) -> None:
    m, _, _, _ = managers(tmp_path)
    m.quotas = QuotaManagers(RateConfig())
    m.quotas.entity_changed(QuotaEntity(None, "client"), {"producer_byte_rate": "1", "consumer_byte_rate": "1"})
    first = produce(m, 9, 1, [("t", 0)])
    assert first.throttle_time.total_seconds() > 0  # even one small request is over 1 B/s
    r = fetch(m, 12, [("t", 0, 5)])
    assert r.throttle_time.total_seconds() > 0 and r.responses == ()  # a throttled fetch carries no data
    # a follower's fetch is exempt
    r = fetch(m, 12, [("t", 0, 5)], replica_id=1)
    assert r.throttle_time.total_seconds() == 0 and r.responses


# ------------------------------------------------------------------------------------------------- the CLI's rules
def test_java_number_and_order_formats() -> None:
    from kbus.admin.java_order import hashtable_order, java_double, string_hash

    assert [java_double(v) for v in (1024.0, 12.5, 1e7, 10485760.0, 5e-4)] == [
        "1024.0", "12.5", "1.0E7", "1.048576E7", "5.0E-4"]  # fmt: skip
    # java.util.Properties of these two keys iterates producer_byte_rate first (Hashtable buckets from the end)
    keys = ["consumer_byte_rate", "producer_byte_rate"]
    assert hashtable_order(keys, string_hash) == ["producer_byte_rate", "consumer_byte_rate"]


def test_configs_entity_pairing() -> None:
    from kbus.cli.common import UsageError
    from kbus.cli.quota_configs import normalize

    assert normalize(["clients", "users"], ["c", "u"], alter=True) == (["users", "clients"], ["u", "c"])
    assert normalize(["users", "clients"], ["u"], alter=False) == (["users", "clients"], ["u"])
    with pytest.raises(UsageError, match="must be specified with each --entity-type"):
        normalize(["users", "clients"], ["u"], alter=True)
    with pytest.raises(UsageError):
        normalize(["users", "topics"], [], alter=False)


def test_quota_apis_are_authorized_as_kafka_does() -> None:
    """DescribeConfigs on the cluster for DescribeClientQuotas, AlterConfigs for AlterClientQuotas."""
    import asyncio

    from kbus.common.acl import CLUSTER_NAME, AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
    from kbus.protocol.codec import RequestHeader, build, request_type
    from kbus.server.apis.registry import API_TABLE, RequestContext

    m, _, _, _ = managers()
    store = FakeQuotaStore()
    m.quota_store = store
    authorizer = Authorizer()

    def run(key: int, **fields: Any) -> Any:
        header = RequestHeader(key, 1, 7, "client", True)
        ctx = RequestContext(header, "127.0.0.1", 50000, "c1", authorizer=authorizer)
        return asyncio.run(API_TABLE[key].handler(m, ctx, build(request_type(key, 1), **fields)))

    entry = part(49, 1, "EntryData", entity=(part(49, 1, "EntityData", entity_type="client-id", entity_name=C),),
                 ops=(part(49, 1, "OpData", key="producer_byte_rate", value=10.0, remove=False),))  # fmt: skip
    assert run(48, components=(), strict=False).error_code == E.cluster_authorization_failed
    assert run(49, entries=(entry,), validate_only=False).entries[0].error_code == E.cluster_authorization_failed
    assert QuotaEntity(None, C) not in store.configs

    def allow(op: Operation) -> AclBinding:
        return AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, "User:ANONYMOUS", "*", op,
                          Permission.ALLOW)  # fmt: skip

    authorizer.set_acls([allow(Operation.DESCRIBE_CONFIGS), allow(Operation.ALTER_CONFIGS)])
    assert run(49, entries=(entry,), validate_only=False).entries[0].error_code == E.none
    assert run(48, components=(), strict=False).entries[0].values[0].value == 10.0


@pytest.mark.parametrize(("version", "strict"), [(7, True), (5, False)])
def test_controller_mutation_rate_on_create_topics(version: int, strict: bool) -> None:
    """KIP-599: a token bucket of controller_mutation_rate * quota.window.num * window partitions; CreateTopics
    v6+ refuses a topic while the bucket is below zero, older versions only throttle."""
    from tests.unit.test_api_handlers import creatable

    m, _, _, admin = managers()
    m.quotas.entity_changed(QuotaEntity(None, "client"), {"controller_mutation_rate": "2"})  # burst: 22
    r = call(m, 19, version, topics=(creatable(version, "a", 20), creatable(version, "b", 10)), timeout=1000,
             validate_only=False)  # fmt: skip
    assert [t.error_code for t in r.topics] == [E.none, E.none]  # 22 -> 2 -> -8: the last one may overdraw
    # 8 partitions short at 2/s: 4 s; a strict quota says so only when it refuses something (as Kafka's)
    assert r.throttle_time.total_seconds() == 0 if strict else 3.9 <= r.throttle_time.total_seconds() <= 4.0
    r = call(m, 19, version, topics=(creatable(version, "c", 1),), timeout=1000, validate_only=False)
    if strict:
        assert (r.topics[0].error_code, r.topics[0].error_message) == (
            E.throttling_quota_exceeded, "The throttling quota has been exceeded.")  # fmt: skip
        assert [c[1] for c in admin.calls] == ["a", "b"]
        assert 3.9 <= r.throttle_time.total_seconds() <= 4.0
    else:
        assert r.topics[0].error_code == E.none and [c[1] for c in admin.calls] == ["a", "b", "c"]
        assert r.throttle_time.total_seconds() > 4.0
