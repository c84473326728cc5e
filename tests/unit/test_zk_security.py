"""Secure ZooKeeper settings: Kafka's znode ACL rule, the JAAS file, KAFKA_OPTS system properties, refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from kbus.common import jaas_file
from kbus.common.broker_config import ConfigError
from kbus.zk.security import (
    ZkClientSecurity,
    as_system_properties,
    jvm_system_properties,
    tls_settings,
    use_tls_config_file,
    zk_sasl,
)
from kbus.zk.znode_acls import default_acls

ACL = {"zookeeper.set.acl": "true"}
CREATOR_AND_WORLD_READ = [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/brokers/ids/1", CREATOR_AND_WORLD_READ),
        ("/controller", CREATOR_AND_WORLD_READ),
        ("/kafka-acl/Topic/t", CREATOR_AND_WORLD_READ),
        ("/config", CREATOR_AND_WORLD_READ),
        ("/config/topics/t", CREATOR_AND_WORLD_READ),
        ("/config/changes/config_change_", CREATOR_AND_WORLD_READ),
        ("/config/users", CREATOR_ALL_ACL),  # SCRAM credentials
        ("/config/users/alice", CREATOR_ALL_ACL),
        ("/config/users/alice/clients/c", CREATOR_ALL_ACL),
        ("/config/brokers/<default>", CREATOR_ALL_ACL),  # may hold passwords
        ("/delegation_token/tokens/x", CREATOR_ALL_ACL),
        ("/consumers", OPEN_ACL_UNSAFE),  # kept open by Kafka for old consumers
        ("/consumers/g", CREATOR_AND_WORLD_READ),
    ],
)
def test_kafka_default_acls_when_secure(path: str, expected: list[object]) -> None:
    assert default_acls(True, path) == expected
    assert default_acls(False, path) == OPEN_ACL_UNSAFE


def test_jaas_file_sections_comments_and_quotes() -> None:
    sections = jaas_file.parse(
        """
        /* the broker's */ KafkaServer {
            org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="a;b}c";
        };
        // ZooKeeper's client
        Client {
            org.apache.zookeeper.server.auth.DigestLoginModule required username=kafka password="p\\"w";
        };
        """
    )
    assert set(sections) == {"KafkaServer", "Client"}
    assert sections["KafkaServer"][0].options["password"] == "a;b}c"
    assert sections["Client"][0].options == {"username": "kafka", "password": 'p"w'}
    assert sections["Client"][0].flag == "required"


def test_jaas_file_errors_name_the_line_never_the_value() -> None:
    with pytest.raises(ConfigError) as err:
        jaas_file.parse('Client {\n  M required username="u" password="hunter2"\n};\n', "jaas.conf")
    assert "jaas.conf, line 3" in str(err.value) and "hunter2" not in str(err.value)
    with pytest.raises(ConfigError, match=re.escape("unclosed quote")):
        jaas_file.parse('Client { M required password="hunter2 ; };')


def test_kafka_opts_system_properties() -> None:
    env = {"KAFKA_OPTS": "-Xmx1g -Djava.security.auth.login.config='/etc/k a/jaas.conf' -Dzookeeper.client.secure=true"}
    assert jvm_system_properties(env) == {
        "java.security.auth.login.config": "/etc/k a/jaas.conf",
        "zookeeper.client.secure": "true",
    }
    with pytest.raises(ConfigError, match=re.escape("KAFKA_OPTS")):
        jvm_system_properties({"KAFKA_OPTS": "-Dx='unclosed"})


def test_tls_settings_fall_back_to_zookeepers_system_properties() -> None:
    system = {
        "zookeeper.client.secure": "true",
        "zookeeper.ssl.keyStore.location": "/sys.p12",
        "zookeeper.ssl.hostnameVerification": "false",
    }
    settings = tls_settings({"zookeeper.ssl.keystore.location": "/props.pem"}, system)
    assert settings == {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.ssl.keystore.location": "/props.pem",  # server.properties wins
        "zookeeper.ssl.endpoint.identification.algorithm": "",
    }


def _jaas(tmp_path: Path, body: str) -> dict[str, str]:
    path = tmp_path / "jaas.conf"
    path.write_text(body)
    return {"KAFKA_OPTS": f"-Djava.security.auth.login.config={path}"}


def test_sasl_from_the_client_section(tmp_path: Path) -> None:
    env = _jaas(tmp_path, 'Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="k" '
                          'password="pw-secret"; };')  # fmt: skip
    security = ZkClientSecurity.for_broker(ACL, env)
    assert security.sasl is not None and security.sasl.username == "k" and security.secure_acls
    assert "pw-secret" not in repr(security)
    assert ZkClientSecurity.for_tool(env).secure_acls  # a tool that authenticates creates secure znodes
    # another section name, as -Dzookeeper.sasl.clientconfig=... picks it
    assert zk_sasl(jvm_system_properties(env) | {"zookeeper.sasl.clientconfig": "Other"}) is None
    with pytest.raises(ConfigError, match=re.escape("zookeeper.sasl.client is set to false")):
        zk_sasl(jvm_system_properties(env) | {"zookeeper.sasl.client": "false"})


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("zookeeper.set.acl is true, but")):
        ZkClientSecurity.for_broker(ACL, {})
    assert not ZkClientSecurity.for_broker({}, {}).secure_acls
    kerberos = _jaas(tmp_path, 'Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };')
    with pytest.raises(ConfigError, match=re.escape("DIGEST-MD5 only")):
        ZkClientSecurity.for_broker(ACL, kerberos)
    tls = {"zookeeper.ssl.client.enable": "true"}
    with pytest.raises(ConfigError, match=re.escape("zookeeper.ssl.keystore.type: JKS is not supported")):
        ZkClientSecurity.for_broker({**tls, "zookeeper.ssl.keystore.location": "/k.jks"}, {})
    with pytest.raises(ConfigError, match=re.escape("zookeeper.ssl.truststore.type: not set")):
        ZkClientSecurity.for_broker({**tls, "zookeeper.ssl.truststore.location": "/trust"}, {})
    with pytest.raises(ConfigError, match=re.escape("zookeeper.ssl.ocsp.enable")):
        ZkClientSecurity.for_broker({**tls, "zookeeper.ssl.ocsp.enable": "true"}, {})
    with pytest.raises(ConfigError, match=re.escape("zookeeper.ssl.keystore.location: cannot read /missing.pem")):
        ZkClientSecurity.for_broker({**tls, "zookeeper.ssl.keystore.location": "/missing.pem"}, {})


def test_a_zk_tls_config_file_becomes_zookeepers_system_properties(tmp_path: Path) -> None:
    path = tmp_path / "zk-tls.properties"
    path.write_text("zookeeper.ssl.client.enable=true\nzookeeper.ssl.keystore.location=/a b.p12\n"
                    "zookeeper.ssl.endpoint.identification.algorithm=\n")  # fmt: skip
    assert as_system_properties({"zookeeper.ssl.endpoint.identification.algorithm": "HTTPS"}) == [
        "-Dzookeeper.ssl.hostnameVerification=true"
    ]
    env = {"KAFKA_OPTS": "-Djava.security.auth.login.config=/j.conf -Dzookeeper.ssl.keyStore.location=/old.pem"}
    use_tls_config_file(str(path), env)
    system = jvm_system_properties(env)
    assert system["zookeeper.ssl.keyStore.location"] == "/a b.p12"  # the file wins
    assert system["java.security.auth.login.config"] == "/j.conf"
    assert tls_settings({}, system)["zookeeper.ssl.endpoint.identification.algorithm"] == ""
