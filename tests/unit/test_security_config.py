"""Security settings, sans processes: JAAS parsing, principal mapping rules, Kafka's client keys for librdkafka
(the CLI and the Spark source), and the start-time refusals of what kbus cannot honour."""

from __future__ import annotations

import pytest

from kbus.common.broker_config import ConfigError, KafkaConfig
from kbus.common.client_security import translate_security
from kbus.common.jaas import parse
from kbus.server.security.manager import SecurityManager
from kbus.server.security.principal import SslPrincipalMapper
from kbus.spark.options import client_config

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a\\"b";'


def test_jaas_options_and_errors() -> None:
    module = parse(JAAS)
    assert module.login_module.endswith("ScramLoginModule") and module.flag == "required"
    assert module.options == {"username": "alice", "password": 'a"b'}
    with pytest.raises(ConfigError, match="must end with ';'"):
        parse('x required a="b"')
    with pytest.raises(ConfigError, match="control flag"):
        parse("x maybe;")


@pytest.mark.parametrize(
    "text",
    [
        'x required username="admin" password="s3cret-pw;',  # unterminated quote
        'x required username="admin" "s3cret-pw";',  # a value without its key
        'x required password="s3cret-pw" user_bob s3cret-pw;',  # a key without '='
        "x s3cret-pw;",  # the password where the control flag goes
    ],
)
def test_a_malformed_jaas_config_error_says_where_never_what(text: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(text)
    assert "s3cret" not in str(raised.value)
    assert "at character" in str(raised.value)


def test_principal_mapping_rules_as_kafka_documents_them() -> None:
    rules = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT"
    )
    assert rules.name("CN=kafka1,OU=ServiceUsers,O=Org,L=City,ST=State,C=US") == "kafka1"
    assert rules.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US") == "duke@javasoft"
    assert rules.name("CN=other") == "CN=other"
    with pytest.raises(ConfigError):
        SslPrincipalMapper("RULE:nonsense")


def test_java_client_keys_become_librdkafka_keys() -> None:
    conf = translate_security(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": JAAS,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert conf == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": 'a"b',
        "ssl.ca.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_spark_source_passes_security_options() -> None:
    conf = client_config(
        {
            "kafka.bootstrap.servers": "h:9093",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": JAAS,
            "kafka.ssl.truststore.location": "/ca.pem",
        }
    )
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.username"] == "alice"
    assert conf["ssl.ca.location"] == "/ca.pem" and "sasl.jaas.config" not in conf


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL"}, "ssl.keystore.location"),
        (
            {"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL", "ssl.keystore.location": "/k"},
            "ssl.keystore.type",
        ),  # JKS, Kafka's default type
        (
            {"listeners": "SASL_PLAINTEXT://:9093", "security.inter.broker.protocol": "SASL_PLAINTEXT"},
            "sasl.enabled.mechanisms",
        ),  # GSSAPI, Kafka's default mechanism
        (
            {
                "listeners": "SASL_PLAINTEXT://:9093",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
            },
            "sasl.jaas.config",
        ),
        ({"authorizer.class.name": "com.example.MyAuthorizer"}, "authorizer.class.name"),
    ],
)
def test_what_kbus_cannot_honour_is_refused_at_start(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=f"^{named.replace('.', '[.]')}: "):
        SecurityManager(KafkaConfig.from_properties(props), lambda _user: {})
