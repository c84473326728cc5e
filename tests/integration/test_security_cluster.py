"""A 3-broker cluster whose brokers talk to each other over SASL_SSL (SCRAM-SHA-512, credentials created in
ZooKeeper with `kbus configs --zookeeper` before any broker starts): replication and transaction markers use the
inter-broker listener; a leader killed -9 loses nothing acknowledged."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

from tests.kbus_processes import Cluster, free_port, wait_for

pytestmark = pytest.mark.integration
KBUS = str(Path(sys.executable).parent / "kbus")
SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";'
)


def test_sasl_ssl_between_brokers_survives_a_leader_kill(tmp_path: Path, zk_connect: str):
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    key = load_pem_private_key(leaf.private_key_pem.bytes(), None)
    (tmp_path / "server.pem").write_bytes(
        key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        + b"".join(c.bytes() for c in leaf.cert_chain_pems)
    )
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    created = subprocess.run(
        [
            KBUS,
            "configs",
            "--zookeeper",
            zk_connect,
            "--alter",
            "--add-config",
            "SCRAM-SHA-512=[iterations=4096,password=broker-secret]",
            "--entity-type",
            "users",
            "--entity-name",
            "broker",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "Completed updating config for entity: user-principal 'broker'."

    cluster = Cluster(tmp_path, zk_connect)
    for b in cluster.brokers.values():
        internal = free_port()
        b.overrides.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{internal}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
                "inter.broker.listener.name": "INTERNAL",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
                "listener.name.internal.ssl.keystore.type": "PEM",
                "listener.name.internal.ssl.keystore.location": str(tmp_path / "server.pem"),
                "listener.name.internal.ssl.truststore.type": "PEM",
                "listener.name.internal.ssl.truststore.location": str(tmp_path / "ca.pem"),
            }
        )
    try:
        cluster.start_all()
        topic = f"secure-repl-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(20)
        # followers fetch over SASL_SSL: the ISR fills up only if they authenticated
        wait_for(lambda: cluster.partitions(topic).get(0, (0, []))[1] == [1, 2, 3], 40, "a full ISR")
        acked: list[bytes] = []

        def produce(n: int, start: int) -> None:
            p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
            for i in range(start, start + n):
                p.produce(topic, b"m%d" % i, on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
            assert p.flush(60) == 0

        produce(500, 0)
        leader = cluster.partitions(topic)[0][0]
        cluster.brokers[leader].kill()
        wait_for(lambda: cluster.partitions(topic).get(0, (-1, []))[0] not in (-1, leader), 40, "a new leader")
        produce(500, 500)
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(acked) and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(1000, 1.0) if m.error() is None]
        c.close()
        assert len(acked) == 1000 and got == acked
        for b in cluster.brokers.values():
            assert "Traceback" not in b.log_text()
            assert "Failed authentication" not in b.log_text()
    finally:
        cluster.stop()


PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)


def test_acls_live_in_zookeeper_and_every_broker_follows_them(tmp_path: Path, zk_connect: str, raw_zk):
    cluster = Cluster(tmp_path, zk_connect)
    sasl_ports = {}
    for i, b in cluster.brokers.items():
        sasl_ports[i] = free_port()
        b.overrides.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_ports[i]}",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": PLAIN_JAAS,
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "allow.everyone.if.no.acl.found": "true",  # the PLAINTEXT listener (ANONYMOUS) runs the cluster
                "super.users": "User:admin",
            }
        )
    try:
        cluster.start_all()
        topic = f"acl-zk-{uuid.uuid4().hex[:8]}"
        creator = AdminClient({"bootstrap.servers": cluster.bootstrap})
        creator.create_topics([NewTopic(topic, 1, 3)])[topic].result(20)
        admin_conf = tmp_path / "admin.properties"
        admin_conf.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="admin" password="admin-secret";\n'
        )
        added = subprocess.run(
            [
                KBUS,
                "acls",
                "--bootstrap-server",
                f"127.0.0.1:{sasl_ports[1]}",
                "--command-config",
                str(admin_conf),
                "--add",
                "--allow-principal",
                "User:alice",
                "--operation",
                "Write",
                "--topic",
                topic,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert added.returncode == 0, added.stderr
        # Kafka's layout and wording, so Kafka's own tools read the same ACLs
        data, _ = raw_zk.get(f"/kafka-acl/Topic/{topic}")
        assert json.loads(data) == {
            "version": 1,
            "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}],
        }
        assert raw_zk.get_children("/kafka-acl-changes")
        # brokers 2 and 3 heard of it: the topic now has an ACL, so ANONYMOUS (no ACL of its own) may not see it,
        # and alice may write to it through them
        for i in (2, 3):
            plain = {"bootstrap.servers": cluster.brokers[i].bootstrap}
            wait_for(
                lambda plain=plain: topic not in AdminClient(plain).list_topics(timeout=5).topics,
                20,
                f"broker {i} applying the new ACL",
            )
            alice = {
                "bootstrap.servers": f"127.0.0.1:{sasl_ports[i]}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            }
            assert topic in AdminClient(alice).list_topics(timeout=10).topics
    finally:
        cluster.stop()
