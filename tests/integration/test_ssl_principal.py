"""ssl.principal.mapping.rules on a real mTLS broker with super.users: a certificate whose DN merely CONTAINS what
a rule's pattern matches must not be mapped by that rule (issue 21: `CN=admin,OU=kafkaX` became User:admin)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

from tests.kbus_processes import BrokerProcess, free_port

pytestmark = pytest.mark.integration

# the issue's rule (unanchored), then one that maps the real admin certificate; DEFAULT for everyone else
RULES = "RULE:CN=([a-z]+),OU=kafka/$1/L,RULE:^CN=([a-z]+),OU=kafka,O=kbus$/$1/L,DEFAULT"


@dataclass
class MtlsBroker:
    proc: BrokerProcess
    ssl_port: int
    dir: Path


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MtlsBroker]:
    d = tmp_path_factory.mktemp("mtls")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    server = ca.issue_cert("localhost", "127.0.0.1")
    key = load_pem_private_key(server.private_key_pem.bytes(), None)
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    (d / "server.pem").write_bytes(key_pem + b"".join(c.bytes() for c in server.cert_chain_pems))
    for name, ou, org in [("admin", "kafka", "kbus"), ("attacker", "kafkaX", "kbus"), ("evil", "kafka", "evil")]:
        leaf = ca.issue_cert(f"{name}.example", common_name="admin", organization_unit_name=ou, organization_name=org)
        leaf.cert_chain_pems[0].write_to_path(str(d / f"{name}.crt"))
        leaf.private_key_pem.write_to_path(str(d / f"{name}.key"))
    pt, sl = free_port(), free_port()
    b = BrokerProcess(
        d / "broker",
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{pt},SSL://127.0.0.1:{sl}",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(d / "server.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(d / "ca.pem"),
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": RULES,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # the PLAINTEXT listener is the broker's own (inter-broker) one
            "super.users": "User:admin;User:ANONYMOUS",
        },
        port=pt,
    ).start()
    yield MtlsBroker(b, sl, d)
    b.stop()


def create_topic_as(mb: MtlsBroker, cert: str) -> str:
    admin = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{mb.ssl_port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(mb.dir / "ca.pem"),
            "ssl.certificate.location": str(mb.dir / f"{cert}.crt"),
            "ssl.key.location": str(mb.dir / f"{cert}.key"),
        }
    )
    topic = f"mtls-{cert}"
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    except KafkaException as exc:
        return str(exc.args[0].name())
    return "OK"


def test_admin_certificate_is_a_super_user(mtls: MtlsBroker):
    assert create_topic_as(mtls, "admin") == "OK"  # CN=admin,OU=kafka,O=kbus -> User:admin


@pytest.mark.parametrize("cert", ["attacker", "evil"])
def test_a_dn_that_only_contains_the_pattern_is_not_admin(mtls: MtlsBroker, cert: str):
    # CN=admin,OU=kafkaX,O=kbus and CN=admin,OU=kafka,O=evil: the first rule is found inside them, but applies only
    # to a whole DN; DEFAULT maps them to the whole DN, which has no ACLs
    assert create_topic_as(mtls, cert) == "TOPIC_AUTHORIZATION_FAILED"
