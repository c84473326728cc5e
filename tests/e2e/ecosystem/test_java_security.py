"""The Java client over kbus's TLS and SASL listeners (SCRAM-SHA-256/512, PLAIN; a PEM truststore with host name
verification): the producer, a consumer group and AdminClient checks of the Maven module in java/ beside this
file, with only security settings added to each client."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.ecosystem.java_checks import VERSIONS, JavaChecks
from tests.integration import test_security
from tests.integration.test_security import SecureBroker

pytestmark = pytest.mark.integration

# the secure broker of the security tests (TLS, SASL PLAIN and SCRAM listeners, user alice) and its certificates
certs = test_security.certs
secure = test_security.secure

CHECKS = ("producer_acks_all_idempotent_compression_headers", "consumer_group_range", "admin_topics")
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def client_config(sb: SecureBroker, protocol: str, mechanism: str) -> dict[str, str]:
    conf = {"security.protocol": protocol}
    if "SSL" in protocol:
        conf |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(sb.certs.ca)}
    if mechanism:
        module = PLAIN if mechanism == "PLAIN" else SCRAM
        conf |= {
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} required username="alice" password="alice-secret";',
        }
    return conf


@pytest.mark.parametrize(
    ("protocol", "mechanism", "version"),
    [
        ("SASL_SSL", "SCRAM-SHA-512", VERSIONS[0]),
        ("SASL_SSL", "SCRAM-SHA-256", VERSIONS[1]),
        ("SASL_PLAINTEXT", "PLAIN", VERSIONS[0]),
        ("SSL", "", VERSIONS[1]),
    ],
)
def test_java_client_over_tls_and_sasl(
    protocol: str, mechanism: str, version: str, java_checks: dict[str, JavaChecks], secure: SecureBroker,
    tmp_path: Path,
) -> None:  # fmt: skip
    port = {"SSL": secure.ssl, "SASL_PLAINTEXT": secure.sasl_plaintext, "SASL_SSL": secure.sasl_ssl}[protocol]
    props = tmp_path / "client.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in client_config(secure, protocol, mechanism).items()))
    suffix = f"sec{protocol}{mechanism}{version}".replace("_", "").replace("-", "").replace(".", "").lower()
    results, stderr = java_checks[version].run(f"127.0.0.1:{port}", suffix, CHECKS, client_config=props)
    for check in CHECKS:
        assert results.get(check, (False, "no result"))[0], f"{protocol} {mechanism} {version}: {check}: " \
            f"{results.get(check)}\n{stderr[-3000:]}"  # fmt: skip


def test_java_client_wrong_password_is_refused(java_checks: dict[str, JavaChecks], secure: SecureBroker,
                                               tmp_path: Path) -> None:  # fmt: skip
    conf = client_config(secure, "SASL_SSL", "SCRAM-SHA-512")
    conf["sasl.jaas.config"] = conf["sasl.jaas.config"].replace("alice-secret", "wrong")
    props = tmp_path / "client.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    results, _ = java_checks[VERSIONS[0]].run(f"127.0.0.1:{secure.sasl_ssl}", "secwrong", ("admin_topics",),
                                                   client_config=props)  # fmt: skip
    passed, detail = results["admin_topics"]
    assert not passed and "SaslAuthenticationException" in detail, detail
