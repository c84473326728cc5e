"""How kbus authenticates to ZooKeeper, as Kafka does: SASL DIGEST-MD5 with the `Client` section of the JAAS file
named by the `java.security.auth.login.config` system property, and/or TLS (`zookeeper.ssl.*`).

kbus has no JVM, so the system properties Kafka's scripts take from KAFKA_OPTS are read from KAFKA_OPTS too:
`KAFKA_OPTS="-Djava.security.auth.login.config=/etc/kbus/zk_jaas.conf"`. A broker's TLS settings come from
server.properties (`zookeeper.ssl.client.enable`, `zookeeper.ssl.keystore.*`, ...) and, where a key is not set
there, from ZooKeeper's own system properties in KAFKA_OPTS (`-Dzookeeper.client.secure=true`,
`-Dzookeeper.ssl.keyStore.location=...`), as Kafka's KafkaConfig falls back to them; the command-line tools read
only KAFKA_OPTS, as Kafka's tools do without --zk-tls-config-file.
"""

from __future__ import annotations

import re
import shlex
import socket
import ssl
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from kbus.common import jaas_file, tls
from kbus.common.broker_config import ZOOKEEPER_SECURITY_KEYS, ConfigError
from kbus.common.topic_config import parse_bool
from kbus.zk.poll_handler import PollingHandler

OPTS_ENV = "KAFKA_OPTS"
JAAS_PROPERTY = "java.security.auth.login.config"
SASL_CLIENT_PROPERTY = "zookeeper.sasl.client"  # "false" turns SASL off
LOGIN_CONTEXT_PROPERTY = "zookeeper.sasl.clientconfig"  # the JAAS section, "Client" by default
NETTY_SOCKET = "org.apache.zookeeper.ClientCnxnSocketNetty"

# Kafka's KafkaConfig.ZkSslConfigToSystemPropertyMap: server.properties key -> ZooKeeper's system property
ZK_TLS_SYSTEM_PROPERTIES = {
    "zookeeper.ssl.client.enable": "zookeeper.client.secure",
    "zookeeper.clientCnxnSocket": "zookeeper.clientCnxnSocket",
    "zookeeper.ssl.keystore.location": "zookeeper.ssl.keyStore.location",
    "zookeeper.ssl.keystore.password": "zookeeper.ssl.keyStore.password",
    "zookeeper.ssl.keystore.type": "zookeeper.ssl.keyStore.type",
    "zookeeper.ssl.truststore.location": "zookeeper.ssl.trustStore.location",
    "zookeeper.ssl.truststore.password": "zookeeper.ssl.trustStore.password",
    "zookeeper.ssl.truststore.type": "zookeeper.ssl.trustStore.type",
    "zookeeper.ssl.protocol": "zookeeper.ssl.protocol",
    "zookeeper.ssl.enabled.protocols": "zookeeper.ssl.enabledProtocols",
    "zookeeper.ssl.cipher.suites": "zookeeper.ssl.ciphersuites",
    "zookeeper.ssl.endpoint.identification.algorithm": "zookeeper.ssl.hostnameVerification",
    "zookeeper.ssl.crl.enable": "zookeeper.ssl.crl",
    "zookeeper.ssl.ocsp.enable": "zookeeper.ssl.ocsp",
}
assert {*ZK_TLS_SYSTEM_PROPERTIES, "zookeeper.set.acl"} == ZOOKEEPER_SECURITY_KEYS
# ZooKeeper's KeyStoreFileType.fromFilename, when the type is not set
_STORE_TYPE_BY_SUFFIX = {".jks": "JKS", ".pem": "PEM", ".p12": "PKCS12", ".pfx": "PKCS12"}


@dataclass(frozen=True)
class ZkSasl:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class ZkClientSecurity:
    """What a kbus ZooKeeper client presents, and whether the znodes it creates get Kafka's secure ACLs."""

    sasl: ZkSasl | None = None
    tls: ssl.SSLContext | None = None
    tls_client_auth: bool = False  # TLS with a keystore: ZooKeeper's x509 provider authenticates the certificate
    secure_acls: bool = False

    @property
    def authenticated(self) -> bool:
        """Kafka's `JaasUtils.isZkSaslEnabled || zkTlsClientAuthEnabled`."""
        return self.sasl is not None or self.tls_client_auth

    def kazoo_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.sasl is not None:
            options["sasl_options"] = {
                "mechanism": "DIGEST-MD5",
                "username": self.sasl.username,
                "password": self.sasl.password,
            }
        if self.tls is not None:
            options["handler"] = TlsHandler(self.tls)
        return options

    @classmethod
    def for_broker(cls, props: Mapping[str, str], env: Mapping[str, str]) -> ZkClientSecurity:
        """A broker's: server.properties (`props`), then KAFKA_OPTS; zookeeper.set.acl=true without SASL or a TLS
        client certificate is refused, as Kafka refuses it (KafkaServer.initZkClient)."""
        try:
            set_acl = parse_bool(props.get("zookeeper.set.acl", "false"))
        except ValueError as exc:
            raise ConfigError(f"Invalid value for configuration zookeeper.set.acl: {exc}") from None
        system = jvm_system_properties(env)
        context, client_auth = tls_context(tls_settings(props, system))
        security = cls(zk_sasl(system), context, client_auth, set_acl)
        if set_acl and not security.authenticated:
            raise ConfigError(
                "zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying at least "
                "zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location was "
                f"not present and no JAAS login file with a '{system.get(LOGIN_CONTEXT_PROPERTY, 'Client')}' "
                f"section is given (KAFKA_OPTS=-D{JAAS_PROPERTY}=FILE)"
            )
        return security

    @classmethod
    def for_tool(cls, env: Mapping[str, str], tls_config: Mapping[str, str] | None = None) -> ZkClientSecurity:
        """A command-line tool's (kbus topics/configs --zookeeper): KAFKA_OPTS, and `tls_config` (the zookeeper.ssl.*
        keys of a --zk-tls-config-file) before ZooKeeper's system properties; like Kafka's tools it creates znodes
        with secure ACLs whenever it authenticates."""
        system = jvm_system_properties(env)
        context, client_auth = tls_context(tls_settings(tls_config or {}, system))
        sasl = zk_sasl(system)
        return cls(sasl, context, client_auth, sasl is not None or client_auth)


def jvm_system_properties(env: Mapping[str, str]) -> dict[str, str]:
    """The `-Dkey=value` flags of KAFKA_OPTS (other JVM flags are ignored)."""
    try:
        words = shlex.split(env.get(OPTS_ENV, ""))
    except ValueError as exc:
        raise ConfigError(f"{OPTS_ENV}: cannot split it into flags ({exc})") from None
    out: dict[str, str] = {}
    for word in words:
        if word.startswith("-D") and len(word) > 2:
            key, _, value = word[2:].partition("=")
            out[key] = value
    return out


def zk_sasl(system: Mapping[str, str]) -> ZkSasl | None:
    """The credentials of the JAAS file's `Client` section (JaasUtils.isZkSaslEnabled); None without one."""
    path = system.get(JAAS_PROPERTY, "").strip()
    if not path:
        return None
    section = system.get(LOGIN_CONTEXT_PROPERTY, "Client")
    modules = jaas_file.parse_file(path).get(section)
    if not modules:
        return None
    if system.get(SASL_CLIENT_PROPERTY, "true").strip().lower() != "true":
        raise ConfigError(
            f"JAAS configuration is present ({path}, section {section}), but system property {SASL_CLIENT_PROPERTY} "
            "is set to false, which disables SASL in the ZooKeeper client"
        )
    module = modules[0]
    if module.login_module.endswith("Krb5LoginModule"):
        raise ConfigError(
            f"{path}: section {section} uses Kerberos (GSSAPI); kbus authenticates to ZooKeeper with DIGEST-MD5 "
            "only (org.apache.zookeeper.server.auth.DigestLoginModule with username and password)"
        )
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise ConfigError(f"{path}: section {section} needs username and password (SASL DIGEST-MD5 to ZooKeeper)")
    return ZkSasl(username, password)


def tls_config_file(path: str) -> dict[str, str]:
    """Kafka's --zk-tls-config-file: only the zookeeper.ssl.* / zookeeper.clientCnxnSocket keys are allowed."""
    from kbus.common.properties import PropertiesError, load_properties

    try:
        props = load_properties(path)
    except (OSError, PropertiesError) as exc:
        raise ConfigError(f"--zk-tls-config-file: cannot read {path}: {exc}") from None
    invalid = sorted(set(props) - set(ZK_TLS_SYSTEM_PROPERTIES))
    if invalid:
        raise ConfigError(f"--zk-tls-config-file: invalid config(s): {', '.join(invalid)} (allowed: "
                          "zookeeper.ssl.* and zookeeper.clientCnxnSocket)")  # fmt: skip
    return props


def as_system_properties(tls_config: Mapping[str, str]) -> list[str]:
    """The keys of a --zk-tls-config-file as ZooKeeper's -D system properties: what ZooKeeper's Java shell reads,
    and what kbus's tools read from KAFKA_OPTS."""
    out = []
    for key, value in tls_config.items():
        if key == "zookeeper.ssl.endpoint.identification.algorithm":
            value = "true" if value.strip().upper() == "HTTPS" else "false"
        out.append(f"-D{ZK_TLS_SYSTEM_PROPERTIES[key]}={value.strip()}")
    return out


def use_tls_config_file(path: str, env: MutableMapping[str, str]) -> None:
    """A tool's --zk-tls-config-file: its keys join KAFKA_OPTS as ZooKeeper's system properties, after (so ahead
    of) those already there, where the tool's ZooKeeper client (for_tool) reads them."""
    flags = " ".join(shlex.quote(flag) for flag in as_system_properties(tls_config_file(path)))
    env[OPTS_ENV] = f"{env.get(OPTS_ENV, '')} {flags}".strip()


def tls_settings(props: Mapping[str, str], system: Mapping[str, str]) -> dict[str, str]:
    """The zookeeper.ssl.* keys in effect: server.properties first, then ZooKeeper's system properties."""
    out: dict[str, str] = {}
    for key, system_key in ZK_TLS_SYSTEM_PROPERTIES.items():
        if props.get(key, "").strip():
            out[key] = props[key].strip()
        elif system_key in system:
            value = system[system_key].strip()
            if key == "zookeeper.ssl.endpoint.identification.algorithm":
                value = "HTTPS" if value.lower() == "true" else ""
            out[key] = value
    return out


def _enabled(settings: Mapping[str, str], key: str) -> bool:
    return settings.get(key, "false").strip().lower() == "true"


def _store_type(settings: Mapping[str, str], store: str) -> str:
    kind = settings.get(f"zookeeper.ssl.{store}.type", "").strip()
    if kind:
        return kind
    location = settings.get(f"zookeeper.ssl.{store}.location", "")
    for suffix, inferred in _STORE_TYPE_BY_SUFFIX.items():
        if location.lower().endswith(suffix):
            return inferred
    raise ConfigError(
        f"zookeeper.ssl.{store}.type: not set, and the type cannot be told from the file name {location}; "
        "set PEM or PKCS12"
    )


def tls_context(settings: Mapping[str, str]) -> tuple[ssl.SSLContext | None, bool]:
    """(the TLS context, whether it presents a client certificate); (None, False) without
    zookeeper.ssl.client.enable=true. Stores are read as the listeners' are (kbus.common.tls: PEM and PKCS12; JKS
    is refused with the keytool command that converts it)."""
    if not _enabled(settings, "zookeeper.ssl.client.enable"):
        return None, False
    socket_class = settings.get("zookeeper.clientCnxnSocket", "")
    if socket_class and socket_class not in (NETTY_SOCKET, "ClientCnxnSocketNetty"):
        raise ConfigError(
            f"zookeeper.clientCnxnSocket: {socket_class} does not do TLS; with zookeeper.ssl.client.enable=true "
            f"set {NETTY_SOCKET}"
        )
    for key in ("zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable"):
        if _enabled(settings, key):
            raise ConfigError(f"{key}: kbus does not check certificate revocation (CRL/OCSP); remove the key")
    mapped: dict[str, str] = {}
    for store in ("keystore", "truststore"):
        location = settings.get(f"zookeeper.ssl.{store}.location", "")
        if location:
            mapped[f"ssl.{store}.location"] = location
            mapped[f"ssl.{store}.type"] = _store_type(settings, store)
            mapped[f"ssl.{store}.password"] = settings.get(f"zookeeper.ssl.{store}.password", "")
    # a PEM keystore's password is its key's (ZooKeeper's PEMFileLoader)
    mapped["ssl.key.password"] = mapped.get("ssl.keystore.password", "")
    protocols = settings.get("zookeeper.ssl.enabled.protocols") or settings.get("zookeeper.ssl.protocol", "")
    if protocols:
        mapped["ssl.enabled.protocols"] = protocols
    if settings.get("zookeeper.ssl.cipher.suites"):
        mapped["ssl.cipher.suites"] = settings["zookeeper.ssl.cipher.suites"]
    mapped["ssl.endpoint.identification.algorithm"] = settings.get(
        "zookeeper.ssl.endpoint.identification.algorithm", "HTTPS"
    )
    try:
        context = tls.client_context(mapped)
    except ConfigError as exc:
        # the listener rules name the listener keys; say which zookeeper.ssl.* key is wrong
        raise ConfigError(re.sub(r"(?<![\w.])ssl\.", "zookeeper.ssl.", str(exc))) from None
    return context, "ssl.keystore.location" in mapped


class TlsHandler(PollingHandler):
    """kazoo's threading handler (PollingHandler: waits with poll(2)) with connections made through kbus's TLS
    context (kazoo's own TLS takes only PEM file names and no protocol or cipher settings)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self._context = context

    def create_connection(
        self, address: tuple[str, int], hostname: str | None = None, timeout: float | None = None, **_kazoo: Any
    ) -> ssl.SSLSocket:
        raw = socket.create_connection(address, timeout)
        try:
            sock = self._context.wrap_socket(raw, server_hostname=hostname or address[0])
        except BaseException:
            raw.close()
            raise
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
