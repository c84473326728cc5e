"""TLS contexts from Kafka's ssl.* keys (Python's ssl module; OpenSSL underneath).

Keystores: PEM (KIP-651: a file holding the private key and the certificate chain, or the inline
`ssl.keystore.certificate.chain` / `ssl.keystore.key`) and PKCS12. Truststores: PEM (file or inline
`ssl.truststore.certificates`) and PKCS12. JKS is Java's own format: refused at start with the keytool command that
converts it.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from kbus.common.broker_config import ConfigError

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _get(props: Mapping[str, str], key: str) -> str:
    return props.get(key, "").strip()


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """Key material for OpenSSL, which only loads chains from files: a 0600 temp file, removed at once."""
    fd, path = tempfile.mkstemp(prefix="kbus-tls-", suffix=".pem")
    try:
        os.write(fd, data)
        os.close(fd)
        yield path
    finally:
        os.unlink(path)


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def _inline_pem(text: str, key: str) -> bytes:
    """PEM given inline in a property (KIP-651): Kafka tolerates any whitespace (or none) inside the base64, e.g.
    a value written on one line; rewrap it the way OpenSSL wants."""
    blocks = []
    for kind, body in _PEM_BLOCK.findall(text.replace("\\n", "\n")):
        b64 = re.sub(r"\s+", "", body)
        lines = "\n".join(b64[i : i + 64] for i in range(0, len(b64), 64))
        blocks.append(f"-----BEGIN {kind}-----\n{lines}\n-----END {kind}-----\n")
    if not blocks:
        raise ConfigError(f"{key}: no PEM block (-----BEGIN ...-----) found")
    return "".join(blocks).encode()


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror}") from None


def _pkcs12(data: bytes, password: str, key: str) -> tuple[bytes, list[bytes]]:
    """(PEM private key + chain or b"", PEM certificates) of a PKCS12 store."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise ConfigError(f"{key}: cannot open the PKCS12 store (wrong password?): {exc}") from None
    pem = serialization.Encoding.PEM
    certs = [c.certificate.public_bytes(pem) for c in store.additional_certs]
    if store.key is None or store.cert is None:
        return b"", certs
    key_pem = store.key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return key_pem + store.cert.certificate.public_bytes(pem) + b"".join(certs), certs


def _store_type(props: Mapping[str, str], key: str) -> str:
    value = (_get(props, key) or "JKS").upper()
    if value == "JKS":
        raise ConfigError(
            f"{key}: JKS is not supported by kbus (Java's own format): convert the store with `keytool "
            "-importkeystore -srckeystore store.jks -destkeystore store.p12 -deststoretype PKCS12` and set "
            f"{key}=PKCS12, or use PEM"
        )
    if value not in ("PEM", "PKCS12"):
        raise ConfigError(f"{key}: unknown store type {value} (kbus reads PEM and PKCS12)")
    return value


def _load_keystore(ctx: ssl.SSLContext, props: Mapping[str, str]) -> bool:
    """Load this side's certificate; False when none is configured."""
    location = _get(props, "ssl.keystore.location")
    chain = _get(props, "ssl.keystore.certificate.chain")
    inline_key = _get(props, "ssl.keystore.key")
    if not (location or chain or inline_key):
        return False
    kind = _store_type(props, "ssl.keystore.type")
    key_password = _get(props, "ssl.key.password") or None
    if kind == "PKCS12":
        if not location:
            raise ConfigError("ssl.keystore.location: required with ssl.keystore.type=PKCS12")
        bundle, _ = _pkcs12(
            _read(location, "ssl.keystore.location"), _get(props, "ssl.keystore.password"), "ssl.keystore.location"
        )
        if not bundle:
            raise ConfigError(f"ssl.keystore.location: {location} holds no private key")
        key_password = None
    elif location:
        if chain or inline_key:
            raise ConfigError("ssl.keystore.location: cannot be set with ssl.keystore.certificate.chain/key")
        bundle = _read(location, "ssl.keystore.location")
    else:
        if not (chain and inline_key):
            raise ConfigError("ssl.keystore.certificate.chain: must be set together with ssl.keystore.key")
        bundle = _inline_pem(inline_key, "ssl.keystore.key") + _inline_pem(chain, "ssl.keystore.certificate.chain")
    with _private_file(bundle) as path:
        try:
            ctx.load_cert_chain(path, password=key_password)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"ssl.keystore.location: cannot load the key and certificate chain: {exc.reason or exc}"
            ) from None
    return True


def _load_truststore(ctx: ssl.SSLContext, props: Mapping[str, str]) -> bool:
    location = _get(props, "ssl.truststore.location")
    inline = _get(props, "ssl.truststore.certificates")
    if not (location or inline):
        return False
    kind = _store_type(props, "ssl.truststore.type")
    if kind == "PKCS12":
        if not location:
            raise ConfigError("ssl.truststore.location: required with ssl.truststore.type=PKCS12")
        _, certs = _pkcs12(
            _read(location, "ssl.truststore.location"),
            _get(props, "ssl.truststore.password"),
            "ssl.truststore.location",
        )
        pem = b"".join(certs)
    else:
        pem = (
            _read(location, "ssl.truststore.location")
            if location
            else _inline_pem(inline, "ssl.truststore.certificates")
        )
    try:
        ctx.load_verify_locations(cadata=pem.decode())
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"ssl.truststore.location: no usable certificate: {exc}") from None
    return True


def _protocols(ctx: ssl.SSLContext, props: Mapping[str, str]) -> None:
    enabled = [p.strip() for p in (_get(props, "ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    versions = []
    for name in enabled:
        if name not in _PROTOCOLS:
            raise ConfigError(f"ssl.enabled.protocols: {name} is not supported (TLSv1.2, TLSv1.3)")
        versions.append(_PROTOCOLS[name])
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    ciphers = _get(props, "ssl.cipher.suites")
    if ciphers:
        # Kafka lists IANA names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); OpenSSL wants its own. TLS 1.3's suites
        # are fixed by OpenSSL; the TLS 1.2 ones are mapped to OpenSSL's names.
        names = [_openssl_cipher(c.strip()) for c in ciphers.split(",") if c.strip()]
        tls12 = [n for n in names if n]
        if tls12:
            try:
                ctx.set_ciphers(":".join(tls12))
            except ssl.SSLError:
                raise ConfigError(f"ssl.cipher.suites: none of {ciphers} is available") from None


_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})
_TLS12_SUITES = {
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
}


def _openssl_cipher(iana: str) -> str:
    """Kafka's (IANA) cipher suite name -> OpenSSL's; "" for TLS 1.3 suites, which OpenSSL always offers."""
    if iana in _TLS13_SUITES:
        return ""
    try:
        return _TLS12_SUITES[iana]
    except KeyError:
        raise ConfigError(f"ssl.cipher.suites: {iana} is not a cipher suite kbus knows") from None


def server_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener (props already scoped to that listener)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if not _load_keystore(ctx, props):
        raise ConfigError(
            "ssl.keystore.location: required on an SSL or SASL_SSL listener (or ssl.keystore.certificate.chain and "
            "ssl.keystore.key)"
        )
    client_auth = (_get(props, "ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth: {client_auth} is not one of none, requested, required")
    has_trust = _load_truststore(ctx, props)
    if client_auth != "none" and not has_trust:
        raise ConfigError(
            f"ssl.client.auth: {client_auth} needs ssl.truststore.location or ssl.truststore.certificates"
        )
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    _protocols(ctx, props)
    return ctx


def client_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of a client (the inter-broker one): trust, optional client certificate for mTLS,
    ssl.endpoint.identification.algorithm=https (Kafka's default) checks the host name."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not _load_truststore(ctx, props):
        ctx.load_default_certs()
    _load_keystore(ctx, props)
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _protocols(ctx, props)
    return ctx
