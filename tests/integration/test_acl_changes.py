"""ACL changes on a broker with its ACLs in ZooKeeper: every change notification reloads the ACLs, and the reloads
apply in order, so an older reload never undoes a newer change; the broker's own CreateAcls/DeleteAcls are in force
when it answers (Kafka's AclAuthorizer updates its cache before the response)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_acls.v3.response import CreateAclsResponse
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.delete_acls.v3.response import DeleteAclsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName
from kio.static.primitive import i8

from kbus.common.acl import Operation, PatternType, Permission, ResourceType
from kbus.protocol.client import ClientSecurity, KafkaConnection
from tests.kbus_processes import BrokerProcess, free_port

pytestmark = pytest.mark.integration
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
ROUNDS = 20
TOPICS = 4
FILLER_ACLS = 60  # other topics' ACLs: each reload reads them all, which widens any window between read and apply


def _creation(topic: str, principal: str) -> AclCreation:
    return AclCreation(
        resource_type=i8(ResourceType.TOPIC), resource_name=topic, resource_pattern_type=i8(PatternType.LITERAL),
        principal=principal, host="*", operation=i8(Operation.DESCRIBE), permission_type=i8(Permission.ALLOW),
    )


def test_acl_bursts_apply_in_order_and_at_once(tmp_path: Path, zk_connect: str):
    port = free_port()
    broker = BrokerProcess(
        tmp_path / "broker",
        {
            "zookeeper.connect": zk_connect,
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
        },
        port=port,
    ).start()

    def login(user: str) -> KafkaConnection:
        return KafkaConnection("127.0.0.1", port, f"acl-burst-{user}",
                               ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", user, USERS[user]))

    async def toggle(topic: str) -> list[str]:
        """ROUNDS times: allow alice to Describe `topic`, check she may; remove it, check she may not."""
        admin, alice = login("admin"), login("alice")
        wrong: list[str] = []
        ask = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        remove = DeleteAclsFilter(
            resource_type_filter=i8(ResourceType.TOPIC), resource_name_filter=topic,
            pattern_type_filter=i8(PatternType.LITERAL), principal_filter="User:alice", host_filter="*",
            operation=i8(Operation.DESCRIBE), permission_type=i8(Permission.ALLOW),
        )
        try:
            for n in range(ROUNDS):
                added = await admin.request(CreateAclsRequest(creations=(_creation(topic, "User:alice"),)),
                                            CreateAclsResponse)
                assert [r.error_code for r in added.results] == [0]
                seen = await alice.request(ask, MetadataResponse)
                if seen.topics[0].error_code != 0:
                    wrong.append(f"{topic} round {n}: denied right after CreateAcls ({seen.topics[0].error_code})")
                removed = await admin.request(DeleteAclsRequest(filters=(remove,)), DeleteAclsResponse)
                assert [len(r.matching_acls) for r in removed.filter_results] == [1]
                seen = await alice.request(ask, MetadataResponse)
                if seen.topics[0].error_code != 29:  # TOPIC_AUTHORIZATION_FAILED
                    wrong.append(f"{topic} round {n}: allowed right after DeleteAcls ({seen.topics[0].error_code})")
            # nothing undoes the last change afterwards (a late, older reload would)
            await asyncio.sleep(1.0)
            seen = await alice.request(ask, MetadataResponse)
            if seen.topics[0].error_code != 29:
                wrong.append(f"{topic}: allowed again a second after the last DeleteAcls")
            return wrong
        finally:
            await admin.close()
            await alice.close()

    async def burst(topics: list[str]) -> list[str]:
        admin = login("admin")
        try:
            fillers = tuple(_creation(f"filler-{i}", "User:nobody") for i in range(FILLER_ACLS))
            created = await admin.request(CreateAclsRequest(creations=fillers), CreateAclsResponse)
            assert all(r.error_code == 0 for r in created.results)
        finally:
            await admin.close()
        # several topics at once: each change's reload runs while others' changes are written and answered
        return [w for wrong in await asyncio.gather(*(toggle(t) for t in topics)) for w in wrong]

    try:
        topics = [f"burst-{uuid.uuid4().hex[:8]}" for _ in range(TOPICS)]
        admin_conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanisms": "PLAIN", "sasl.username": "admin", "sasl.password": USERS["admin"]}
        creator = AdminClient(admin_conf)
        for future in creator.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            future.result(20)
        assert asyncio.run(burst(topics)) == []
    finally:
        broker.stop()
