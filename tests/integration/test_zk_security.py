"""Secure ZooKeeper, as Kafka runs it: a real ZooKeeper with SASL (DIGEST-MD5, JAAS `Server` section) on its plain
port and TLS with client certificates on its secureClientPort, started by `kbus zookeeper-start`; brokers with
`zookeeper.set.acl=true` authenticating over SASL (KAFKA_OPTS naming the JAAS `Client` section), two of them over
TLS as well (PEM and PKCS12 keystores), and the CLI tools. A kazoo client without credentials may then read only
what Kafka leaves world-readable and write nothing."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
    pkcs12,
)
from cryptography.x509 import load_pem_x509_certificate
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

from tests.kbus_processes import KBUS, BrokerProcess, Cluster, wait_for
from tests.zk_server import ZooKeeperServer, free_port, write_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVER_JAAS = """Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_kafka="kafka-secret"
    user_other="other-secret";
};
"""
CLIENT_JAAS = """// what the brokers and tools present to ZooKeeper
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="%s"
    password="%s";
};
"""
SASL_OPTIONS = {"mechanism": "DIGEST-MD5", "username": "kafka", "password": "kafka-secret"}


class SecureZk:
    def __init__(self, base: Path) -> None:
        self.base = base
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(base / "ca.pem"))
        self.ca_pem = base / "ca.pem"
        self.server_pem = base / "zk-server.pem"
        self.server_pem.write_bytes(_bundle(ca.issue_cert("localhost", "127.0.0.1", common_name="zookeeper")))
        self.client_pem = base / "kafka.pem"
        client = ca.issue_cert("localhost", "127.0.0.1", common_name="kafka")
        self.client_pem.write_bytes(_bundle(client))
        # the same client certificate as a PKCS12 keystore with a password, as keytool would make it
        key = load_pem_private_key(client.private_key_pem.bytes(), None)
        cert = load_pem_x509_certificate(client.cert_chain_pems[0].bytes())
        self.client_p12 = base / "kafka.p12"
        self.client_p12.write_bytes(
            pkcs12.serialize_key_and_certificates(b"kafka", key, cert, None, BestAvailableEncryption(b"ks-secret"))  # type: ignore[arg-type]
        )
        (base / "zk_server_jaas.conf").write_text(SERVER_JAAS)
        self.client_jaas = base / "kafka_client_jaas.conf"
        self.client_jaas.write_text(CLIENT_JAAS % ("kafka", "kafka-secret"))
        self.tls_port = free_port()
        self.server = ZooKeeperServer(
            base,
            free_port(),
            extra_config=(
                "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"secureClientPort={self.tls_port}",
                f"ssl.keyStore.location={self.server_pem}",
                "ssl.keyStore.type=PEM",
                f"ssl.trustStore.location={self.ca_pem}",
                "ssl.trustStore.type=PEM",
            ),
            extra_env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={base / 'zk_server_jaas.conf'}"},
        )

    @property
    def kafka_opts(self) -> str:
        return f"-Djava.security.auth.login.config={self.client_jaas}"

    def tls_config(self, p12: bool = False) -> dict[str, str]:
        keystore = (
            {
                "zookeeper.ssl.keystore.location": str(self.client_p12),
                "zookeeper.ssl.keystore.type": "PKCS12",
                "zookeeper.ssl.keystore.password": "ks-secret",
            }
            if p12
            else {"zookeeper.ssl.keystore.location": str(self.client_pem)}  # type told by the .pem suffix
        )
        return {
            "zookeeper.ssl.client.enable": "true",
            "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
            **keystore,
            "zookeeper.ssl.truststore.location": str(self.ca_pem),
            "zookeeper.ssl.truststore.type": "PEM",
        }


def _bundle(leaf: trustme.LeafCert) -> bytes:
    key = load_pem_private_key(leaf.private_key_pem.bytes(), None)
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) + b"".join(
        c.bytes() for c in leaf.cert_chain_pems
    )


@pytest.fixture(scope="module")
def secure_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureZk]:
    zk = SecureZk(tmp_path_factory.mktemp("secure-zk"))
    zk.server.start()
    try:
        yield zk
    finally:
        zk.server.stop()


def _kbus(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [KBUS, *args], capture_output=True, text=True, timeout=90, env={**os.environ, **(env or {})}, check=False
    )


def _anonymous(connect: str) -> KazooClient:
    zk = KazooClient(hosts=connect)
    zk.start(timeout=10)
    return zk


def _acl_ids(zk: KazooClient, path: str) -> set[tuple[str, str, int]]:
    acls, _ = zk.get_acls(path)
    return {(a.id.scheme, a.id.id if a.id.scheme != "x509" else "x509", a.perms) for a in acls}


def test_set_acl_cluster_over_sasl_and_tls_leaves_the_world_read_only(
    secure_zk: SecureZk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chroot = f"/kbus-secure-{uuid.uuid4().hex[:8]}"
    plain = f"{secure_zk.server.connect}{chroot}"
    tls = f"127.0.0.1:{secure_zk.tls_port}{chroot}"
    # brokers and tools read the JAAS file from KAFKA_OPTS, as Kafka's scripts do
    monkeypatch.setenv("KAFKA_OPTS", secure_zk.kafka_opts)

    # a SCRAM user written by the tool before any broker starts (Kafka's bootstrap step): creator-only
    created = _kbus("configs", "--zookeeper", plain, "--alter", "--add-config",
                    "SCRAM-SHA-512=[iterations=4096,password=alice-secret]", "--entity-type", "users",
                    "--entity-name", "alice")  # fmt: skip
    assert created.returncode == 0, created.stderr

    cluster = Cluster(tmp_path, plain)
    secure = {
        "zookeeper.set.acl": "true",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    cluster.brokers[1].overrides.update({**secure, "zookeeper.connect": tls, **secure_zk.tls_config()})
    cluster.brokers[2].overrides.update({**secure, "zookeeper.connect": tls, **secure_zk.tls_config(p12=True)})
    cluster.brokers[3].overrides.update(secure)  # SASL on the plain port only
    anon = _anonymous(plain)
    try:
        cluster.start_all()
        topic = f"secure-{uuid.uuid4().hex[:8]}"
        made = _kbus("topics", "--zookeeper", plain, "--create", "--topic", topic, "--partitions", "2",
                     "--replication-factor", "3")  # fmt: skip
        assert made.returncode == 0, made.stderr
        wait_for(lambda: len(cluster.partitions(topic)) == 2, 30, "the topic's leaders")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(100):
            producer.produce(topic, b"m%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 1.0) if m.error() is None]
        consumer.close()
        assert sorted(got) == sorted(b"m%d" % i for i in range(100))
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        acl = AclBinding(ResourceType.TOPIC, "acl-target", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
        admin.create_acls([acl])[acl].result(20)

        # what Kafka leaves world-readable is readable...
        assert anon.get_children("/brokers/ids") == ["1", "2", "3"]
        assert json.loads(anon.get("/controller")[0])["brokerid"] in (1, 2, 3)
        assert json.loads(anon.get(f"/brokers/topics/{topic}")[0])["partitions"]
        assert json.loads(anon.get("/kafka-acl/Topic/acl-target")[0])["acls"][0]["principal"] == "User:alice"
        # ...SCRAM credentials and dynamic broker configs are not
        with pytest.raises(NoAuthError):
            anon.get("/config/users/alice")
        with pytest.raises(NoAuthError):
            anon.get_children("/config/users")
        with pytest.raises(NoAuthError):
            anon.get_children("/config/brokers")
        # and nothing is writable
        for attempt in (
            lambda: anon.set("/controller", b'{"version":1,"brokerid":99}'),
            lambda: anon.delete("/controller"),
            lambda: anon.create("/brokers/ids/99", b"{}"),
            lambda: anon.set(f"/brokers/topics/{topic}/partitions/0/state", b"{}"),
            lambda: anon.set("/kafka-acl/Topic/acl-target", b'{"version":1,"acls":[]}'),
            lambda: anon.create("/kafka-acl/Topic/mine", b"{}"),
            lambda: anon.create("/config/users/mallory", b"{}"),
            lambda: anon.create("/admin/delete_topics/" + topic, b""),
            lambda: anon.set("/cluster/id", b"{}"),
        ):
            with pytest.raises(NoAuthError):
                attempt()
        # Kafka's ACLs exactly: creator-all for the SASL user (and the TLS brokers' certificate), world-read
        # except on the sensitive roots; /consumers stays open (old consumers of any identity write there)
        read = ("world", "anyone", 1)
        for path in ("/brokers", "/brokers/ids", "/brokers/ids/1", "/brokers/ids/3", "/controller",
                     f"/brokers/topics/{topic}", "/kafka-acl/Topic/acl-target", "/config/changes"):  # fmt: skip
            ids = _acl_ids(anon, path)
            assert read in ids and ("sasl", "kafka", 31) in ids, (path, ids)
            assert all(scheme != "world" or perms == 1 for scheme, _, perms in ids), (path, ids)
        assert ("x509", "x509", 31) in _acl_ids(anon, "/brokers/ids/1")  # created over TLS
        kafka = KazooClient(hosts=plain, sasl_options=SASL_OPTIONS)
        kafka.start(timeout=10)
        try:
            # only the creator may even read these ACLs
            assert _acl_ids(kafka, "/config/users") == {("sasl", "kafka", 31)}
            assert _acl_ids(kafka, "/config/users/alice") == {("sasl", "kafka", 31)}
            assert not {scheme for scheme, _, _ in _acl_ids(kafka, "/config/brokers")} - {"sasl", "x509"}
        finally:
            kafka.stop()
            kafka.close()
        assert anon.get_acls("/consumers")[0] == OPEN_ACL_UNSAFE
        for b in cluster.brokers.values():
            assert "Traceback" not in b.log_text()
    finally:
        anon.stop()
        anon.close()
        cluster.stop()


def test_set_acl_without_zookeeper_credentials_is_refused_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's KafkaServer.initZkClient: zookeeper.set.acl=true needs SASL or a TLS client certificate."""
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    cases = {
        "no-credentials": ({}, "zookeeper.set.acl is true, but ZooKeeper client TLS configuration"),
        "jks": (
            {"zookeeper.ssl.client.enable": "true", "zookeeper.ssl.keystore.location": str(tmp_path / "ks.jks")},
            "zookeeper.ssl.keystore.type: JKS is not supported by kbus",
        ),
        "nio": (
            {"zookeeper.ssl.client.enable": "true", "zookeeper.clientCnxnSocket": "ClientCnxnSocketNIO"},
            "zookeeper.clientCnxnSocket: ClientCnxnSocketNIO does not do TLS",
        ),
    }
    for name, (extra, expected) in cases.items():
        broker = BrokerProcess(
            tmp_path / name, {"zookeeper.connect": f"127.0.0.1:{free_port()}", "zookeeper.set.acl": "true", **extra}
        )
        broker.write_config()
        done = _kbus("server-start", str(broker.config_path))
        assert done.returncode == 1, (name, done.stdout, done.stderr)
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        assert len(errors) == 1 and expected in errors[0], (name, done.stderr)
        assert "Traceback" not in done.stderr + done.stdout


def test_wrong_sasl_password_is_one_clear_error(secure_zk: SecureZk, tmp_path: Path) -> None:
    bad = tmp_path / "bad_jaas.conf"
    bad.write_text(CLIENT_JAAS % ("kafka", "not-the-password"))
    done = _kbus("topics", "--zookeeper", secure_zk.server.connect, "--list",
                 env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={bad}"})  # fmt: skip
    assert done.returncode != 0
    assert "refused SASL authentication for user 'kafka'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_tools_over_tls_from_kafka_opts_and_a_tls_only_zookeeper(tmp_path: Path, secure_zk: SecureZk) -> None:
    """`kbus zookeeper-start` with only a secureClientPort; a tool reaching it with ZooKeeper's own TLS system
    properties in KAFKA_OPTS (no SASL: the certificate is the identity) creates creator-only/world-read znodes."""
    tls_port = free_port()
    server = ZooKeeperServer(
        tmp_path,
        0,
        extra_config=(
            f"secureClientPort={tls_port}",
            "secureClientPortAddress=127.0.0.1",
            "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"ssl.keyStore.location={secure_zk.server_pem}",
            "ssl.keyStore.type=PEM",
            f"ssl.trustStore.location={secure_zk.ca_pem}",
            "ssl.trustStore.type=PEM",
        ),
    )
    write_config(tmp_path, 0, extra=server.extra_config)
    started = server.kbus("zookeeper-start", str(server.config), "--daemon")
    assert started.returncode == 0, started.stderr
    assert f"on 127.0.0.1:{tls_port} (TLS)" in started.stdout
    try:
        opts = " ".join(
            [
                "-Dzookeeper.client.secure=true",
                "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
                f"-Dzookeeper.ssl.keyStore.location={secure_zk.client_pem}",
                f"-Dzookeeper.ssl.trustStore.location={secure_zk.ca_pem}",
            ]
        )
        connect = f"127.0.0.1:{tls_port}/tools"
        made = _kbus("configs", "--zookeeper", connect, "--alter", "--add-config",
                     "SCRAM-SHA-256=[iterations=4096,password=bob-secret]", "--entity-type", "users",
                     "--entity-name", "bob", env={"KAFKA_OPTS": opts})  # fmt: skip
        assert made.returncode == 0, made.stderr
        from kbus.zk.client import KafkaZkClient
        from kbus.zk.security import ZkClientSecurity

        zk = KafkaZkClient.connect(connect, 10, 10, security=ZkClientSecurity.for_tool({"KAFKA_OPTS": opts}))
        try:
            assert _acl_ids(zk.zk, "/config/users/bob") == {("x509", "x509", 31)}
            (change,) = zk.zk.get_children("/config/changes")
            assert _acl_ids(zk.zk, f"/config/changes/{change}") == {("x509", "x509", 31), ("world", "anyone", 1)}
        finally:
            zk.close()
        # Kafka's --zk-tls-config-file instead of KAFKA_OPTS: kbus configs, zookeeper-shell, and the migration
        tls_file = tmp_path / "zk-tls.properties"
        tls_file.write_text("".join(f"{k}={v}\n" for k, v in secure_zk.tls_config().items()))
        made = _kbus("configs", "--zookeeper", connect, "--zk-tls-config-file", str(tls_file), "--alter",
                     "--add-config", "SCRAM-SHA-256=[iterations=4096,password=carol-secret]", "--entity-type", "users",
                     "--entity-name", "carol", env={"KAFKA_OPTS": ""})  # fmt: skip
        assert made.returncode == 0, made.stderr
        shell = _kbus("zookeeper-shell", f"127.0.0.1:{tls_port}", "-zk-tls-config-file", str(tls_file),
                      "getAcl", "/tools/config/users/carol", env={"KAFKA_OPTS": ""})  # fmt: skip
        assert shell.returncode == 0, shell.stderr
        assert "'x509,'CN=kafka" in shell.stdout and "world" not in shell.stdout, shell.stdout
        bad = tmp_path / "bad-tls.properties"
        bad.write_text("zookeeper.ssl.client.enable=true\nssl.keystore.location=/x.pem\n")
        refused = _kbus("configs", "--zookeeper", connect, "--zk-tls-config-file", str(bad), "--describe",
                        "--entity-type", "users")  # fmt: skip
        assert refused.returncode == 1 and "invalid config(s): ssl.keystore.location" in refused.stderr
        opened = _kbus("zookeeper-security-migration", "--zookeeper.acl", "unsecure", "--zookeeper.connect", connect,
                       "--zk-tls-config-file", str(tls_file), env={"KAFKA_OPTS": ""})  # fmt: skip
        assert opened.returncode == 0, opened.stderr
        zk = KafkaZkClient.connect(connect, 10, 10, security=ZkClientSecurity.for_tool({"KAFKA_OPTS": opts}))
        try:
            assert zk.zk.get_acls("/config/users/bob")[0] == OPEN_ACL_UNSAFE
        finally:
            zk.close()
    finally:
        server.stop()


def test_a_broker_of_another_zookeeper_identity_is_told_why(secure_zk: SecureZk, tmp_path: Path) -> None:
    """The znodes belong to `kafka`; a broker logging in as `other` may read but not register: one clear line
    (kazoo's NoAuthError has no message, so the broker used to die with an empty 'Fatal error')."""
    connect = f"{secure_zk.server.connect}/kbus-owned-{uuid.uuid4().hex[:8]}"
    made = _kbus("configs", "--zookeeper", connect, "--alter", "--add-config",
                 "SCRAM-SHA-256=[iterations=4096,password=x-secret]", "--entity-type", "users", "--entity-name", "x",
                 env={"KAFKA_OPTS": secure_zk.kafka_opts})  # fmt: skip
    assert made.returncode == 0, made.stderr
    other = tmp_path / "other_jaas.conf"
    other.write_text(CLIENT_JAAS % ("other", "other-secret"))
    broker = BrokerProcess(tmp_path / "b", {"zookeeper.connect": connect, "zookeeper.set.acl": "true"})
    broker.write_config()
    done = _kbus("server-start", str(broker.config_path),
                 env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={other}"})  # fmt: skip
    assert done.returncode == 1
    assert "refused this broker's writes (NoAuth)" in done.stderr, done.stderr


def test_security_migration_locks_and_unlocks_an_existing_cluster(secure_zk: SecureZk) -> None:
    """zookeeper-security-migration.sh: znodes made before zookeeper.set.acl (here by an unauthenticated client)
    get Kafka's ACLs, owned by the identity the tool runs as; `unsecure` opens them again."""
    from kbus.zk.client import KafkaZkClient
    from kbus.zk.security import ZkClientSecurity

    connect = f"{secure_zk.server.connect}/kbus-migrate-{uuid.uuid4().hex[:8]}"
    old = KafkaZkClient.connect(connect, 10, 10, security=ZkClientSecurity())
    try:
        old.ensure_persistent_paths()
        old.get_or_create_cluster_id()
        old.change_entity_config("users", "alice", {"SCRAM-SHA-256": "salt=x,stored_key=y,server_key=z"})
        old.zk.create("/kafka-acl/Topic/t", b'{"version":1,"acls":[]}', makepath=True)
    finally:
        old.close()
    anon = _anonymous(connect)
    try:
        anon.create("/brokers/ids/7", b"{}", ephemeral=True)  # open before the migration
        anon.delete("/brokers/ids/7")
        refused = _kbus("zookeeper-security-migration", "--zookeeper.acl=secure", "--zookeeper.connect", connect)
        assert refused.returncode == 1 and "No JAAS configuration file has been specified" in refused.stderr

        done = _kbus("zookeeper-security-migration", "--zookeeper.acl=secure", "--zookeeper.connect", connect,
                     env={"KAFKA_OPTS": secure_zk.kafka_opts})  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Set secure ACLs on ")
        with pytest.raises(NoAuthError):
            anon.create("/brokers/ids/7", b"{}", ephemeral=True)
        with pytest.raises(NoAuthError):
            anon.get("/config/users/alice")
        with pytest.raises(NoAuthError):
            anon.set("/kafka-acl/Topic/t", b"{}")
        assert json.loads(anon.get("/cluster/id")[0])["id"]  # world-readable
        assert _acl_ids(anon, "/kafka-acl/Topic/t") == {("sasl", "kafka", 31), ("world", "anyone", 1)}
        assert anon.get_acls("/consumers")[0] == OPEN_ACL_UNSAFE  # not one of Kafka's secure roots

        opened = _kbus("zookeeper-security-migration", "--zookeeper.acl", "unsecure", "--zookeeper.connect", connect,
                       env={"KAFKA_OPTS": secure_zk.kafka_opts})  # fmt: skip
        assert opened.returncode == 0, opened.stderr
        assert anon.get_acls("/config/users/alice")[0] == OPEN_ACL_UNSAFE
        anon.set("/kafka-acl/Topic/t", b'{"version":1,"acls":[]}')
    finally:
        anon.stop()
        anon.close()


@pytest.mark.parametrize("case", ["sasl_ssl_between_brokers", "acls_in_zookeeper"])
def test_the_security_cluster_suite_on_a_secure_zookeeper(
    case: str, secure_zk: SecureZk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/integration/test_security_cluster.py's 3-broker tests again, every broker and tool on ZooKeeper's TLS
    port with SASL too and zookeeper.set.acl=true. The TLS settings come from ZooKeeper's system properties in
    KAFKA_OPTS, the fallback a broker uses for zookeeper.ssl.* keys server.properties does not set."""
    from tests.integration import test_security_cluster as suite
    from tests.kbus_processes import CLUSTER_OVERRIDES

    tls = " ".join(
        [
            "-Dzookeeper.client.secure=true",
            "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
            f"-Dzookeeper.ssl.keyStore.location={secure_zk.client_pem}",
            f"-Dzookeeper.ssl.trustStore.location={secure_zk.ca_pem}",
        ]
    )
    monkeypatch.setenv("KAFKA_OPTS", f"{secure_zk.kafka_opts} {tls}")
    monkeypatch.setitem(CLUSTER_OVERRIDES, "zookeeper.set.acl", "true")
    chroot = f"/kbus-suite-{uuid.uuid4().hex[:8]}"
    connect = f"127.0.0.1:{secure_zk.tls_port}{chroot}"
    if case == "sasl_ssl_between_brokers":
        suite.test_sasl_ssl_between_brokers_survives_a_leader_kill(tmp_path, connect)
    else:
        with warnings.catch_warnings():  # the brokers create the chroot
            warnings.simplefilter("ignore")
            anon = _anonymous(f"{secure_zk.server.connect}{chroot}")  # /kafka-acl is world-readable
        try:
            suite.test_acls_live_in_zookeeper_and_every_broker_follows_them(tmp_path, connect, anon)
            with pytest.raises(NoAuthError):
                anon.create("/kafka-acl/Topic/mine", b"{}")
        finally:
            anon.stop()
            anon.close()
    kafka = KazooClient(hosts=f"{secure_zk.server.connect}{chroot}", sasl_options=SASL_OPTIONS)
    kafka.start(timeout=10)
    try:
        ids = _acl_ids(kafka, "/brokers/topics")
        assert ("x509", "x509", 31) in ids and ("sasl", "kafka", 31) in ids and ("world", "anyone", 1) in ids
    finally:
        kafka.stop()
        kafka.close()
