"""Produce with transactional records needs Write on the request's TransactionalId (Kafka's KafkaApis), on a real
SASL/PLAIN broker with the AclAuthorizer: Write on the topic alone is not enough to write into a transaction
(issue 21: a forged transactional batch froze read_committed consumers)."""

from __future__ import annotations

import uuid

import pytest

from kbus.protocol.client import ClientSecurity
from tests.integration.test_acls import USERS, AclBroker, acl_broker, conf, kbus_acls, new_topic  # noqa: F401
from tests.txn_forgery import forge_produce, transactional_batch

pytestmark = pytest.mark.integration


def alice() -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", USERS["alice"])


def test_transactional_produce_needs_write_on_the_transactional_id(acl_broker: AclBroker):  # noqa: F811
    from confluent_kafka import Producer

    topic, tid = new_topic(acl_broker), f"acl-txp-{uuid.uuid4().hex[:6]}"
    assert kbus_acls(acl_broker, "--add", "--allow-principal", "User:alice", "--producer", "--topic",
                     topic).returncode == 0
    # the id exists (a real transaction of admin's), so only authorization can stop alice
    p = Producer({**conf(acl_broker, "admin"), "transactional.id": tid})
    p.init_transactions(30)
    batch = transactional_batch(777, 0)
    error, _ = forge_produce(acl_broker.bootstrap, topic, 0, batch, tid, alice())
    assert error == "transactional_id_authorization_failed"
    error, _ = forge_produce(acl_broker.bootstrap, topic, 0, batch, None, alice())
    assert error == "transactional_id_authorization_failed"
    assert kbus_acls(acl_broker, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                     "--transactional-id", tid).returncode == 0
    # authorized now; the coordinator (asked broker to broker) knows no such producer id for the id
    error, _ = forge_produce(acl_broker.bootstrap, topic, 0, batch, tid, alice())
    assert error == "invalid_producer_id_mapping"
