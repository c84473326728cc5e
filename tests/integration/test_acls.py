"""ACLs on a real broker (authorizer.class.name=kafka.security.authorizer.AclAuthorizer, SASL/PLAIN users):
`kbus acls` with kafka-acls.sh's flags and output, per-API authorization as Kafka does it (Produce needs Write,
Fetch and groups need Read, Metadata hides what one may not Describe), deny beats allow, prefixed patterns."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from kbus.common.acl import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
from kbus.common.security import KafkaPrincipal
from tests.kbus_processes import BrokerProcess, free_port

pytestmark = pytest.mark.integration
KBUS = str(Path(sys.executable).parent / "kbus")
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)


@dataclass
class AclBroker:
    proc: BrokerProcess
    bootstrap: str
    admin_config: Path


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    port = free_port()
    d = tmp_path_factory.mktemp("acl")
    b = BrokerProcess(
        d,
        {
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            "connection.failed.authentication.delay.ms": "0",
        },
        port=port,
    ).start()
    admin_config = d / "admin.properties"
    admin_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret";\n'
    )
    yield AclBroker(b, f"127.0.0.1:{port}", admin_config)
    b.stop()


def conf(ab: AclBroker, user: str) -> dict:
    return {
        "bootstrap.servers": ab.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def kbus_acls(ab: AclBroker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KBUS, "acls", "--bootstrap-server", ab.bootstrap, "--command-config", str(ab.admin_config), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def new_topic(ab: AclBroker, name: str | None = None) -> str:
    name = name or f"acl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf(ab, "admin"))
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    return name


def produce_error(ab: AclBroker, user: str, topic: str) -> str | None:
    errors: list[str] = []
    p = Producer({**conf(ab, user), "message.timeout.ms": 10000})
    p.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(err.name() if err else "OK"))
    p.flush(15)
    return errors[0] if errors else None


def consume_error(ab: AclBroker, user: str, topic: str, group: str) -> str:
    c = Consumer({**conf(ab, user), "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return m.error().name()
            return "OK"
        return "TIMEOUT"
    finally:
        c.close()


def test_producer_acl_with_kafka_acls_output(acl_broker: AclBroker):
    topic = new_topic(acl_broker)
    assert produce_error(acl_broker, "alice", topic) == "TOPIC_AUTHORIZATION_FAILED"
    added = kbus_acls(acl_broker, "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
    assert added.returncode == 0, added.stderr
    resource = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert added.stdout.startswith(f"Adding ACLs for resource `{resource}`: \n \t(principal=User:alice, host=*, ")
    assert f"Current ACLs for resource `{resource}`: \n" in added.stdout
    for op in ("WRITE", "DESCRIBE", "CREATE"):
        assert f"(principal=User:alice, host=*, operation={op}, permissionType=ALLOW)" in added.stdout
    assert produce_error(acl_broker, "alice", topic) == "OK"
    assert produce_error(acl_broker, "bob", topic) == "TOPIC_AUTHORIZATION_FAILED"
    listed = kbus_acls(acl_broker, "--list", "--topic", topic)
    assert listed.returncode == 0 and f"Current ACLs for resource `{resource}`:" in listed.stdout


def test_consumer_needs_read_on_topic_and_group(acl_broker: AclBroker):
    topic = new_topic(acl_broker)
    assert produce_error(acl_broker, "admin", topic) == "OK"
    assert consume_error(acl_broker, "alice", topic, "g-alice") in (
        "GROUP_AUTHORIZATION_FAILED",
        "TOPIC_AUTHORIZATION_FAILED",
    )
    done = kbus_acls(
        acl_broker, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", topic, "--group", "g-alice"
    )
    assert done.returncode == 0, done.stderr
    assert consume_error(acl_broker, "alice", topic, "g-alice") == "OK"


def test_metadata_hides_topics_one_may_not_describe(acl_broker: AclBroker):
    topic = new_topic(acl_broker)
    assert topic in AdminClient(conf(acl_broker, "admin")).list_topics(timeout=10).topics
    assert topic not in AdminClient(conf(acl_broker, "bob")).list_topics(timeout=10).topics


def test_topic_authorized_operations_only_when_asked(acl_broker: AclBroker):
    """librdkafka 0081_admin do_test_DescribeTopics: Metadata v8+ answers a topic's authorized operations only
    when the request includes them (KIP-430); otherwise the field keeps Kafka's Integer.MIN_VALUE, which clients
    read as "not requested"."""
    topic = new_topic(acl_broker)
    admin = AdminClient(conf(acl_broker, "admin"))
    plain = admin.describe_topics(TopicCollection([topic]), request_timeout=10)[topic].result()
    assert plain.authorized_operations is None
    asked = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True, request_timeout=10)
    assert {op.name for op in asked[topic].result().authorized_operations} >= {"READ", "WRITE", "DESCRIBE"}


def test_deny_beats_allow_and_remove(acl_broker: AclBroker):
    topic = new_topic(acl_broker)
    kbus_acls(acl_broker, "--add", "--allow-principal", "User:bob", "--operation", "Write", "--topic", topic)
    assert produce_error(acl_broker, "bob", topic) == "OK"
    kbus_acls(acl_broker, "--add", "--deny-principal", "User:bob", "--operation", "Write", "--topic", topic)
    assert produce_error(acl_broker, "bob", topic) == "TOPIC_AUTHORIZATION_FAILED"
    removed = kbus_acls(
        acl_broker, "--remove", "--force", "--deny-principal", "User:bob", "--operation", "Write", "--topic", topic
    )
    assert removed.returncode == 0, removed.stderr
    assert produce_error(acl_broker, "bob", topic) == "OK"


def test_prefixed_acl(acl_broker: AclBroker):
    prefix = f"pre{uuid.uuid4().hex[:6]}-"
    topic = new_topic(acl_broker, prefix + "orders")
    done = kbus_acls(
        acl_broker,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        prefix,
        "--resource-pattern-type",
        "prefixed",
    )
    assert done.returncode == 0, done.stderr
    assert "patternType=PREFIXED" in done.stdout
    assert produce_error(acl_broker, "alice", topic) == "OK"
    assert produce_error(acl_broker, "alice", new_topic(acl_broker)) == "TOPIC_AUTHORIZATION_FAILED"


def test_acl_apis_need_alter_on_the_cluster(acl_broker: AclBroker):
    alice_props = acl_broker.admin_config.parent / "alice.properties"
    alice_props.write_text(acl_broker.admin_config.read_text().replace("admin", "alice"))
    denied = subprocess.run(
        [
            KBUS,
            "acls",
            "--bootstrap-server",
            acl_broker.bootstrap,
            "--command-config",
            str(alice_props),
            "--add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "All",
            "--cluster",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert denied.returncode != 0
    assert "CLUSTER_AUTHORIZATION_FAILED" in denied.stderr or "authoriz" in denied.stderr.lower()


def test_authorizer_rules():
    alice, bob = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")
    a = Authorizer(super_users=["User:admin"])
    t = ResourceType.TOPIC
    a.set_acls(
        [
            AclBinding(t, "*", PatternType.LITERAL, "User:*", "*", Operation.DESCRIBE, Permission.ALLOW),
            AclBinding(t, "orders", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW),
            AclBinding(t, "orders", PatternType.LITERAL, "User:alice", "10.0.0.9", Operation.ALL, Permission.DENY),
            AclBinding(t, "pay-", PatternType.PREFIXED, "User:bob", "*", Operation.WRITE, Permission.ALLOW),
        ]
    )
    assert a.authorize(alice, "127.0.0.1", Operation.READ, t, "orders")
    assert a.authorize(alice, "127.0.0.1", Operation.DESCRIBE, t, "orders")  # implied by Read (and the wildcard)
    assert not a.authorize(alice, "10.0.0.9", Operation.READ, t, "orders")  # deny beats allow, by host
    assert not a.authorize(alice, "127.0.0.1", Operation.WRITE, t, "orders")
    assert a.authorize(bob, "h", Operation.WRITE, t, "pay-eu") and not a.authorize(bob, "h", Operation.WRITE, t, "p")
    assert a.authorize(KafkaPrincipal("User", "admin"), "h", Operation.DELETE, t, "orders")  # super user
    assert not a.authorize(bob, "h", Operation.READ, ResourceType.GROUP, "g")  # no ACL: denied by default
    assert Authorizer(allow_if_no_acl=True).authorize(bob, "h", Operation.READ, ResourceType.GROUP, "g")


def test_clients_cannot_write_transaction_markers(acl_broker: AclBroker):
    """WriteTxnMarkers is broker-to-broker (ClusterAction): a client's forged COMMIT marker is refused."""
    import asyncio

    from kio.schema.write_txn_markers.v1.request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )
    from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse

    from kbus.protocol.client import ClientSecurity, KafkaConnection

    topic = new_topic(acl_broker)
    host, port = acl_broker.bootstrap.split(":")

    async def forge() -> list[int]:
        conn = KafkaConnection(
            host, int(port), "forger", ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", USERS["alice"])
        )
        try:
            marker = WritableTxnMarker(
                producer_id=1,
                producer_epoch=0,
                transaction_result=True,
                coordinator_epoch=0,
                topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),),
            )
            resp = await conn.request(WriteTxnMarkersRequest(markers=(marker,)), WriteTxnMarkersResponse)
            return [int(p.error_code) for m in resp.markers for t in m.topics for p in t.partitions]
        finally:
            await conn.close()

    assert asyncio.run(forge()) == [31]  # CLUSTER_AUTHORIZATION_FAILED


def test_broker_health_against_a_sasl_listener(acl_broker: AclBroker):
    ok = subprocess.run(
        [
            KBUS,
            "broker-health",
            "--bootstrap-server",
            acl_broker.bootstrap,
            "--command-config",
            str(acl_broker.admin_config),
            "--timeout",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and ok.stdout.startswith("OK "), ok.stderr
    refused = subprocess.run(
        [KBUS, "broker-health", "--bootstrap-server", acl_broker.bootstrap, "--timeout", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1


def test_tools_with_their_own_protocol_client_log_in_too(acl_broker: AclBroker):
    """log-dirs (and leader-election, reassign-partitions, transactions) speak the protocol through kbus's own
    client: --command-config gives it the listener's SASL login."""
    done = subprocess.run(
        [
            KBUS,
            "log-dirs",
            "--describe",
            "--bootstrap-server",
            acl_broker.bootstrap,
            "--command-config",
            str(acl_broker.admin_config),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '"logDirs"' in done.stdout or "logDir" in done.stdout


def test_transaction_describe_apis_are_authorized(acl_broker: AclBroker, tmp_path: Path):
    """Kafka's rules: ListTransactions shows only ids one may Describe, DescribeTransactions needs Describe on the
    id, DescribeProducers needs Read on the topic."""
    topic, tid = new_topic(acl_broker), f"acl-tx-{uuid.uuid4().hex[:6]}"
    p = Producer({**conf(acl_broker, "admin"), "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"x")
    p.commit_transaction(30)
    alice = tmp_path / "alice.properties"
    alice.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        f'password="{USERS["alice"]}";\n'
    )

    def txns(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KBUS, "transactions", "--bootstrap-server", acl_broker.bootstrap, "--command-config",
                               str(alice), *args], capture_output=True, text=True, timeout=60)

    assert tid not in txns("list").stdout
    denied = txns("describe", "--transactional-id", tid)
    assert denied.returncode == 1 and "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in denied.stderr
    # asked straight (--broker-id: no metadata lookup, which hides the topic from alice anyway)
    denied = txns("describe-producers", "--topic", topic, "--partition", "0", "--broker-id", "0")
    assert denied.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED" in denied.stderr
    assert kbus_acls(acl_broker, "--add", "--allow-principal", "User:alice", "--operation", "Describe",
                     "--transactional-id", tid).returncode == 0
    assert kbus_acls(acl_broker, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                     "--topic", topic).returncode == 0
    assert tid in txns("list").stdout
    assert txns("describe", "--transactional-id", tid).returncode == 0
    assert txns("describe-producers", "--topic", topic, "--partition", "0").returncode == 0


def _offset_fetch_all_versions(ab: AclBroker, user: str, group: str, by_name: list[str]) -> dict[tuple[int, str], list]:
    """OffsetFetch v1-v9 as hand-made frames, as `user`: per (version, "all" | "named") the (topic, partition,
    offset, error) answered (v1 has no all-topics form; v8+ asks for both forms in one multi-group request)."""
    import asyncio

    from kbus.protocol.client import ClientSecurity, KafkaConnection
    from kbus.protocol.codec import build, nested, request_type, response_type

    host, port = ab.bootstrap.split(":")

    def parts(topics: object) -> list:
        return [(t.name, p.partition_index, p.committed_offset, int(p.error_code))
                for t in topics for p in t.partitions]

    async def fetch() -> dict[tuple[int, str], list]:
        conn = KafkaConnection(host, int(port), "offset-fetcher",
                               ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", user, USERS[user]))
        got: dict[tuple[int, str], list] = {}
        try:
            for v in range(1, 10):
                cls, resp_cls = request_type(9, v), response_type(9, v)
                if v >= 8:
                    named = tuple(build(nested(cls, "OffsetFetchRequestTopics"), name=t, partition_indexes=(0,))
                                  for t in by_name)
                    groups = (build(nested(cls, "OffsetFetchRequestGroup"), group_id=group, topics=None),
                              build(nested(cls, "OffsetFetchRequestGroup"), group_id=group, topics=named))
                    resp = await conn.request(build(cls, groups=groups, require_stable=False), resp_cls)
                    got[(v, "all")], got[(v, "named")] = parts(resp.groups[0].topics), parts(resp.groups[1].topics)
                    continue
                named = tuple(build(nested(cls, "OffsetFetchRequestTopic"), name=t, partition_indexes=(0,))
                              for t in by_name)
                extra = {"require_stable": False} if v >= 7 else {}
                got[(v, "named")] = parts((await conn.request(build(cls, group_id=group, topics=named, **extra),
                                                               resp_cls)).topics)
                if v >= 2:
                    got[(v, "all")] = parts((await conn.request(build(cls, group_id=group, topics=None, **extra),
                                                                 resp_cls)).topics)
            return got
        finally:
            await conn.close()

    return asyncio.run(fetch())


def test_offset_fetch_hides_topics_one_may_not_describe(acl_broker: AclBroker):
    """Kafka's handleOffsetFetchRequestFromCoordinator: Read on the group is not enough to see a topic's committed
    offsets; an all-topics fetch leaves out topics one may not Describe, and a topic asked for by name answers
    TOPIC_AUTHORIZATION_FAILED with offset -1 — in every OffsetFetch version, v8+ multi-group included."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    seen, secret = new_topic(acl_broker), new_topic(acl_broker)
    group = f"of-{uuid.uuid4().hex[:8]}"
    committer = Consumer({**conf(acl_broker, "admin"), "group.id": group})
    committer.commit(offsets=[TopicPartition(seen, 0, 5), TopicPartition(secret, 0, 7)], asynchronous=False)
    committer.close()
    for args in (("--group", group), ("--topic", seen)):
        assert kbus_acls(acl_broker, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                         *args).returncode == 0
    got = _offset_fetch_all_versions(acl_broker, "alice", group, [seen, secret])
    for (version, form), answered in got.items():
        if form == "all":
            assert answered == [(seen, 0, 5, 0)], (version, answered)
        else:
            assert answered == [(seen, 0, 5, 0), (secret, 0, -1, 29)], (version, answered)  # TOPIC_AUTH_FAILED
    # a real client's all-topics fetch (AdminClient.list_consumer_group_offsets) sees the same
    admin = AdminClient(conf(acl_broker, "alice"))
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    assert [(tp.topic, tp.offset) for tp in listed.topic_partitions] == [(seen, 5)]
    # the admin (a super user) still sees both
    assert sorted(answered[:3] for answered in _offset_fetch_all_versions(
        acl_broker, "admin", group, [seen, secret])[(9, "all")]) == sorted([(seen, 0, 5), (secret, 0, 7)])


def test_an_acl_with_an_empty_host_matches_no_client(acl_broker: AclBroker):
    """Kafka stores the host of a CreateAcls entry as given: '' is not '*' and matches no client."""
    import asyncio

    from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
    from kio.schema.create_acls.v3.response import CreateAclsResponse
    from kio.static.primitive import i8

    from kbus.protocol.client import ClientSecurity, KafkaConnection

    topic = new_topic(acl_broker)
    host, port = acl_broker.bootstrap.split(":")

    async def create() -> list[int]:
        conn = KafkaConnection(host, int(port), "acl-maker",
                               ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "admin", USERS["admin"]))
        try:
            creation = AclCreation(
                resource_type=i8(ResourceType.TOPIC), resource_name=topic,
                resource_pattern_type=i8(PatternType.LITERAL), principal="User:alice", host="",
                operation=i8(Operation.DESCRIBE), permission_type=i8(Permission.ALLOW),
            )
            resp = await conn.request(CreateAclsRequest(creations=(creation,)), CreateAclsResponse)
            return [int(r.error_code) for r in resp.results]
        finally:
            await conn.close()

    assert asyncio.run(create()) == [0]
    listed = kbus_acls(acl_broker, "--list", "--topic", topic)
    assert "(principal=User:alice, host=, operation=DESCRIBE, permissionType=ALLOW)" in listed.stdout, listed.stdout
    assert topic not in AdminClient(conf(acl_broker, "alice")).list_topics(timeout=10).topics


def test_metadata_by_topic_id_does_not_name_a_topic_one_may_not_describe(acl_broker: AclBroker):
    """Metadata v12 by topic id: Kafka answers TOPIC_AUTHORIZATION_FAILED with a null name (ids are no secret, names
    are), the admin gets the name."""
    import asyncio

    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.metadata.v12.response import MetadataResponse
    from kio.schema.types import TopicName

    from kbus.protocol.client import ClientSecurity, KafkaConnection

    topic = new_topic(acl_broker)
    host, port = acl_broker.bootstrap.split(":")

    async def ask(user: str, by_name: bool, topic_id: uuid.UUID | None = None) -> tuple[str | None, uuid.UUID, int]:
        conn = KafkaConnection(host, int(port), "metadata-by-id",
                               ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", user, USERS[user]))
        wanted = MetadataRequestTopic(topic_id=None, name=TopicName(topic)) if by_name else \
            MetadataRequestTopic(topic_id=topic_id, name=None)
        try:
            resp = await conn.request(MetadataRequest(topics=(wanted,), allow_auto_topic_creation=False,
                                                      include_topic_authorized_operations=False), MetadataResponse)
            t = resp.topics[0]
            return t.name, t.topic_id, int(t.error_code)
        finally:
            await conn.close()

    _, topic_id, error = asyncio.run(ask("admin", by_name=True))
    assert error == 0
    assert asyncio.run(ask("bob", by_name=False, topic_id=topic_id)) == (None, topic_id, 29)
    assert asyncio.run(ask("admin", by_name=False, topic_id=topic_id)) == (topic, topic_id, 0)


def share_consume(ab: AclBroker, user: str, topic: str, group: str, seconds: float) -> tuple[list[bytes], set[str]]:
    """A librdkafka share consumer of `user`: (the values it got, the error names it saw), records sent meanwhile
    (share.auto.offset.reset=latest: only records sent after it joined reach it)."""
    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

    errors: set[str] = set()
    got: list[bytes] = []
    c = ShareConsumer({**conf(ab, user), "group.id": group, "share.acknowledgement.mode": "explicit",
                       "error_cb": lambda e: errors.add(e.name())})
    p = Producer(conf(ab, "admin"))
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not got:
            p.produce(topic, b"v")
            p.flush(5)
            try:
                for msg in c.poll(0.5):
                    if msg.error() is not None:
                        errors.add(msg.error().name())
                    else:
                        got.append(msg.value())
                        c.acknowledge(msg, AcknowledgeType.ACCEPT)
            except KafkaException as exc:
                errors.add(exc.args[0].name())
    finally:
        c.close()
    return got, errors


def test_share_groups_need_read_on_the_group_and_the_topic(acl_broker: AclBroker) -> None:
    """KIP-932's APIs as Kafka's KafkaApis authorizes them: ShareGroupHeartbeat needs READ on the group and
    DESCRIBE on the subscribed topics, ShareFetch READ on the group and the topic (FindCoordinator needs DESCRIBE
    on the group before any of them)."""
    topic, group = new_topic(acl_broker), f"sg-{uuid.uuid4().hex[:8]}"

    def allow(operation: str, *resource: str) -> None:
        assert kbus_acls(acl_broker, "--add", "--allow-principal", "User:bob", "--operation", operation,
                         *resource).returncode == 0

    allow("Describe", "--group", group)  # FindCoordinator passes; the heartbeat needs READ
    got, errors = share_consume(acl_broker, "bob", topic, group, 6)
    assert not got and "GROUP_AUTHORIZATION_FAILED" in errors, errors
    allow("Read", "--group", group)  # the heartbeat needs DESCRIBE on the topic
    got, errors = share_consume(acl_broker, "bob", topic, group, 6)
    assert not got and "TOPIC_AUTHORIZATION_FAILED" in errors, errors
    allow("Describe", "--topic", topic)  # the member joins; ShareFetch needs READ on the topic
    got, errors = share_consume(acl_broker, "bob", topic, group, 8)
    assert not got and "TOPIC_AUTHORIZATION_FAILED" in errors, errors
    allow("Read", "--topic", topic)
    got, errors = share_consume(acl_broker, "bob", topic, group, 30)
    assert got, errors
