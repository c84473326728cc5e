"""TLS, mTLS, SASL PLAIN and SCRAM on a real broker process with real clients (confluent-kafka, kcat,
kafka-python, aiokafka); certificates made by the test (trustme). Bad input: garbage and stalled handshakes on the
TLS port, wrong passwords, unknown mechanisms, requests before authentication — each costs only its connection."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

from kbus.server.security.principal import SslPrincipalMapper, certificate_principal
from tests.kbus_processes import BrokerProcess, free_port, wait_for

pytestmark = pytest.mark.integration

KBUS = str(Path(sys.executable).parent / "kbus")
KEY_END = "-----END PRIVATE KEY-----"
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)


@dataclass
class Certs:
    dir: Path
    ca: Path
    server_pem: Path
    server_p12: Path
    alice_cert: Path
    alice_key: Path
    alice_der: bytes


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    d = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        load_pem_private_key,
    )

    key = load_pem_private_key(server.private_key_pem.bytes(), None)
    # a PEM keystore as Kafka wants it (KIP-651): a PKCS#8 private key, then the certificate chain
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    (d / "server.pem").write_bytes(key_pem + b"".join(c.bytes() for c in server.cert_chain_pems))
    # the same identity as a password-protected PKCS12 keystore
    chain = [x509.load_pem_x509_certificate(c.bytes()) for c in server.cert_chain_pems]
    p12 = pkcs12.serialize_key_and_certificates(b"server", key, chain[0], chain[1:], BestAvailableEncryption(b"p12pw"))  # type: ignore[arg-type]
    (d / "server.p12").write_bytes(p12)
    alice = ca.issue_cert("alice.example", common_name="alice", organization_unit_name="eng")
    alice.cert_chain_pems[0].write_to_path(str(d / "alice.crt"))
    alice.private_key_pem.write_to_path(str(d / "alice.key"))
    der = x509.load_pem_x509_certificate(alice.cert_chain_pems[0].bytes()).public_bytes(Encoding.DER)
    return Certs(d, d / "ca.pem", d / "server.pem", d / "server.p12", d / "alice.crt", d / "alice.key", der)


@dataclass
class SecureBroker:
    proc: BrokerProcess
    plaintext: int
    ssl: int
    sasl_plaintext: int
    sasl_ssl: int
    certs: Certs


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[SecureBroker]:
    pt, sl, sp, ss = (free_port() for _ in range(4))
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{pt},SSL://127.0.0.1:{sl},SASL_PLAINTEXT://127.0.0.1:{sp},"
        f"SASL_SSL://127.0.0.1:{ss}",
        # SSL listener: PEM keystore (key + chain in one file), mTLS requested, principal mapping
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(certs.server_pem),
        "listener.name.ssl.ssl.truststore.type": "PEM",
        "listener.name.ssl.ssl.truststore.location": str(certs.ca),
        "listener.name.ssl.ssl.client.auth": "requested",
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/L,DEFAULT",
        # SASL_SSL listener: PKCS12 keystore with a password
        "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
        "listener.name.sasl_ssl.ssl.keystore.location": str(certs.server_p12),
        "listener.name.sasl_ssl.ssl.keystore.password": "p12pw",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.jaas.config": PLAIN_JAAS,  # the SASL_SSL listener falls back to it
        "connection.failed.authentication.delay.ms": "300",
    }
    b = BrokerProcess(tmp_path_factory.mktemp("secure"), overrides, port=pt).start()
    cli = [KBUS, "configs", "--bootstrap-server", f"127.0.0.1:{pt}", "--alter"]
    out = subprocess.run(
        [
            *cli,
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Completed updating config for user alice."
    yield SecureBroker(b, pt, sl, sp, ss, certs)
    b.stop()


def client_conf(sb: SecureBroker, protocol: str, mechanism: str = "", password: str = "alice-secret") -> dict:
    port = {"SSL": sb.ssl, "SASL_PLAINTEXT": sb.sasl_plaintext, "SASL_SSL": sb.sasl_ssl}[protocol]
    conf: dict = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol}
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(sb.certs.ca)
    if mechanism:
        conf.update({"sasl.mechanisms": mechanism, "sasl.username": "alice", "sasl.password": password})
    return conf


def roundtrip(conf: dict, n: int = 200) -> None:
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    p = Producer({**conf, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(500, 1.0):
            assert m.error() is None, m.error()
            got.append(m.value())
    c.close()
    assert got == [b"v%d" % i for i in range(n)]


def test_scram_users_are_described_without_secrets(secure: SecureBroker):
    out = subprocess.run(
        [
            KBUS,
            "configs",
            "--bootstrap-server",
            f"127.0.0.1:{secure.plaintext}",
            "--describe",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096"
    )
    assert "alice-secret" not in secure.proc.log_text()
    # no --entity-name: every user with credentials (docs/security.md step 5; Kafka's ConfigCommand lists all)
    every = subprocess.run(
        [KBUS, "configs", "--bootstrap-server", f"127.0.0.1:{secure.plaintext}", "--describe", "--entity-type",
         "users"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert every.returncode == 0, every.stderr
    assert ("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
            "SCRAM-SHA-512=iterations=4096") in every.stdout.splitlines(), every.stdout


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("SSL", ""),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_SSL", "PLAIN"),
    ],
)
def test_confluent_kafka_produces_and_consumes(secure: SecureBroker, protocol: str, mechanism: str):
    roundtrip(client_conf(secure, protocol, mechanism))


def test_mtls_client_certificate(secure: SecureBroker):
    conf = client_conf(secure, "SSL")
    conf.update(
        {"ssl.certificate.location": str(secure.certs.alice_cert), "ssl.key.location": str(secure.certs.alice_key)}
    )
    roundtrip(conf, 10)


def test_principal_from_a_client_certificate():
    ca = trustme.CA()
    cert = ca.issue_cert("x.example", common_name="Alice", organization_unit_name="eng")
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    der = x509.load_pem_x509_certificate(cert.cert_chain_pems[0].bytes()).public_bytes(Encoding.DER)
    assert str(certificate_principal(der, SslPrincipalMapper("DEFAULT"))).startswith("User:CN=Alice,OU=eng,O=")
    rules = SslPrincipalMapper("RULE:^CN=([^,]*),OU=([^,]*),.*$/$1@$2/L,DEFAULT")
    assert str(certificate_principal(der, rules)) == "User:alice@eng"


def test_wrong_password_fails_after_the_delay_and_others_keep_working(secure: SecureBroker):
    errors: list[KafkaError] = []
    conf = client_conf(secure, "SASL_SSL", "SCRAM-SHA-256", password="wrong")
    p = Producer({**conf, "error_cb": errors.append, "reconnect.backoff.ms": 5000})
    started = time.monotonic()
    while not errors and time.monotonic() - started < 15:
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed" in errors[0].str()
    assert time.monotonic() - started >= 0.3  # connection.failed.authentication.delay.ms
    roundtrip(client_conf(secure, "SASL_PLAINTEXT", "SCRAM-SHA-256"), 5)


def _frame(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    payload = struct.pack(">hhih", api_key, version, corr, 4) + b"test" + body
    return struct.pack(">i", len(payload)) + payload


def _recv_all(sock: socket.socket, timeout: float = 10) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_failed_authentication_log_names_the_client_address(secure: SecureBroker):
    """Kafka's Selector logs `Failed authentication with /<client address> ...`: whoever guesses passwords is named,
    through SaslAuthenticate (a real client) and a bare token after a v0 SaslHandshake (hand-made frames)."""
    errors: list[KafkaError] = []
    p = Producer({**client_conf(secure, "SASL_PLAINTEXT", "SCRAM-SHA-512", password="wrong"),
                  "error_cb": errors.append, "reconnect.backoff.ms": 5000})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    del p  # no more retries
    with socket.create_connection(("127.0.0.1", secure.sasl_plaintext)) as s:
        own_port = s.getsockname()[1]
        s.sendall(_frame(17, 0, 1, struct.pack(">h", 5) + b"PLAIN"))
        (size,) = struct.unpack(">i", s.recv(4))
        while size > 0:
            size -= len(s.recv(size))
        token = b"\0alice\0not-her-password"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert _recv_all(s) == b""  # v0: a failed token closes the connection
    wait_for(lambda: f"Failed authentication with /127.0.0.1 (port {own_port} on SASL_PLAINTEXT)"
             in secure.proc.log_text(), 10, "the failed-authentication line")
    failed = [line for line in secure.proc.log_text().splitlines() if "Failed authentication" in line]
    assert all("Failed authentication with /127.0.0.1 (port " in line for line in failed), failed
    assert not any("not-her-password" in line for line in failed)


def test_unknown_mechanism_gets_the_enabled_ones_then_the_connection_closes(secure: SecureBroker):
    with socket.create_connection(("127.0.0.1", secure.sasl_plaintext)) as s:
        s.sendall(_frame(17, 1, 7, struct.pack(">h", 6) + b"GSSAPI"))
        data = _recv_all(s)
    size, corr, code, count = struct.unpack_from(">iihi", data)
    assert (corr, code, count) == (7, 33, 3)  # UNSUPPORTED_SASL_MECHANISM and the three enabled mechanisms
    assert b"SCRAM-SHA-512" in data and len(data) == 4 + size  # then closed


def test_requests_before_authentication_close_the_connection(secure: SecureBroker):
    with socket.create_connection(("127.0.0.1", secure.sasl_plaintext)) as s:
        s.sendall(_frame(18, 0, 1, b"") + _frame(3, 1, 2, struct.pack(">i", -1)))
        data = _recv_all(s)
    (size, corr) = struct.unpack_from(">ii", data)
    assert corr == 1 and len(data) == 4 + size  # ApiVersions is answered, Metadata closes the connection


def test_oversized_token_before_authentication_closes(secure: SecureBroker):
    with socket.create_connection(("127.0.0.1", secure.sasl_plaintext)) as s:
        s.sendall(struct.pack(">i", 600_000))
        assert _recv_all(s) == b""


def test_garbage_and_stalled_handshakes_on_the_tls_port_cost_only_their_connection(secure: SecureBroker):
    garbage = socket.create_connection(("127.0.0.1", secure.ssl))
    garbage.sendall(b"\x00\x00\x00\x0a" + b"GET / HTTP/1.1\r\n\r\n" * 10)  # plaintext Kafka/HTTP on a TLS port
    assert _recv_all(garbage) is not None  # closed by the broker (an alert or nothing)
    garbage.close()
    stalled = socket.create_connection(("127.0.0.1", secure.ssl))  # connects, never says hello
    started = time.monotonic()
    roundtrip(client_conf(secure, "SSL"), 5)  # served meanwhile
    stalled.settimeout(30)
    assert stalled.recv(100) == b""  # the broker hung up on the silent one
    assert 5 < time.monotonic() - started < 25
    stalled.close()
    log = secure.proc.log_text()
    assert "Traceback" not in log and "never retrieved" not in log


def test_kcat_over_sasl_ssl_scram(secure: SecureBroker):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is installed by scripts/setup.sh"
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    args = [
        "-b",
        f"127.0.0.1:{secure.sasl_ssl}",
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-256",
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=alice-secret",
        "-X",
        f"ssl.ca.location={secure.certs.ca}",
    ]
    subprocess.run([kcat, *args, "-P", "-t", topic], input="one\ntwo\n", text=True, check=True, timeout=60)
    out = subprocess.run(
        [kcat, *args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split() == ["one", "two"]


def test_kafka_python_over_ssl_and_sasl_plain(secure: SecureBroker):
    from kafka import KafkaConsumer, KafkaProducer

    for extra in (
        {"bootstrap_servers": f"127.0.0.1:{secure.ssl}", "security_protocol": "SSL"},
        {
            "bootstrap_servers": f"127.0.0.1:{secure.sasl_ssl}",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
        },
        {
            "bootstrap_servers": f"127.0.0.1:{secure.sasl_plaintext}",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
        },
    ):
        if "SSL" in extra["security_protocol"]:
            extra["ssl_cafile"] = str(secure.certs.ca)
        topic = f"kp-{uuid.uuid4().hex[:8]}"
        p = KafkaProducer(**extra)
        for i in range(10):
            p.send(topic, b"m%d" % i)
        p.flush(30)
        p.close()
        c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **extra)
        assert [m.value for m in c] == [b"m%d" % i for i in range(10)]
        c.close()


def test_aiokafka_over_sasl_ssl_scram(secure: SecureBroker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def main() -> list[bytes]:
        kw = dict(
            bootstrap_servers=f"127.0.0.1:{secure.sasl_ssl}",
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="alice",
            sasl_plain_password="alice-secret",
            ssl_context=create_ssl_context(cafile=str(secure.certs.ca)),
        )
        topic = f"aio-{uuid.uuid4().hex[:8]}"
        p = AIOKafkaProducer(**kw)
        await p.start()
        for i in range(10):
            await p.send_and_wait(topic, b"a%d" % i)
        await p.stop()
        c = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **kw)
        await c.start()
        out = []
        try:
            while len(out) < 10:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 30)
                for msgs in batch.values():
                    out += [m.value for m in msgs]
        finally:
            await c.stop()
        return out

    assert asyncio.run(main()) == [b"a%d" % i for i in range(10)]


def test_mtls_required_refuses_a_client_without_a_certificate(tmp_path_factory, certs: Certs):
    port = free_port()
    b = BrokerProcess(
        tmp_path_factory.mktemp("mtls"),
        {
            "listeners": f"SSL://127.0.0.1:{port}",
            "security.inter.broker.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            # KIP-651 inline PEM, written on one line as Kafka allows
            "ssl.keystore.certificate.chain": " ".join(certs.server_pem.read_text().split(KEY_END)[1].split()),
            "ssl.keystore.key": " ".join((certs.server_pem.read_text().split(KEY_END)[0] + KEY_END).split()),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs.ca),
            "ssl.client.auth": "required",
        },
        port=port,
    ).start()
    try:
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        data = b""
        with socket.create_connection(("127.0.0.1", port)) as raw:
            try:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    s.sendall(_frame(18, 0, 1, b""))
                    data = s.recv(100)  # TLS 1.3: the refusal arrives with the first read
            except (ssl.SSLError, ConnectionError):
                pass
        assert data == b""  # no certificate, no Kafka
        ctx.load_cert_chain(str(certs.alice_cert), str(certs.alice_key))
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            ctx.wrap_socket(raw, server_hostname="localhost") as s,
        ):
            s.sendall(_frame(18, 0, 1, b""))
            assert struct.unpack(">ii", s.recv(8))[1] == 1
    finally:
        b.stop()


def test_sessions_reauthenticate_before_connections_max_reauth_ms(tmp_path_factory, certs: Certs):
    """KIP-368: SaslAuthenticate tells the client its session lifetime; librdkafka logs in again on the same
    connection before it ends, so a producer running past several lifetimes sees no error."""
    port = free_port()
    jaas = PLAIN_JAAS
    b = BrokerProcess(
        tmp_path_factory.mktemp("reauth"),
        {
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": jaas,
            "connections.max.reauth.ms": "2000",
        },
        port=port,
    ).start()
    try:
        errors: list[KafkaError] = []
        conf = {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "error_cb": errors.append,
        }
        p = Producer(conf)
        topic = f"reauth-{uuid.uuid4().hex[:8]}"
        delivered: list[bool] = []
        deadline = time.monotonic() + 7  # three and a half session lifetimes
        while time.monotonic() < deadline:
            p.produce(topic, b"x", on_delivery=lambda err, _m: delivered.append(err is None))
            p.poll(0.05)
        assert p.flush(20) == 0
        assert delivered and all(delivered), f"{delivered.count(False)} failed deliveries"
        assert not errors, errors
        assert "before authentication or after the session expired" not in b.log_text()
    finally:
        b.stop()


def test_a_malformed_jaas_config_stops_the_broker_without_quoting_the_password(tmp_path: Path):
    """The start-up error says where sasl.jaas.config is malformed, never what is there (it holds passwords)."""
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(
        f"broker.id=0\nlisteners=SASL_PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\n"
        "security.inter.broker.protocol=SASL_PLAINTEXT\nsasl.enabled.mechanisms=PLAIN\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-s3cret;\n'
    )
    res = subprocess.run([sys.executable, "-m", "kbus.server", str(config)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode != 0
    assert "sasl.jaas.config" in res.stderr and "at character" in res.stderr, res.stderr
    assert "s3cret" not in res.stderr + res.stdout
