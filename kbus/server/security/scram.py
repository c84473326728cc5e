"""SCRAM credentials as Kafka stores them (ScramCredentialUtils): `salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>` under the mechanism's name in the user's entity config (ZooKeeper `/config/users/<user>`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# DescribeUserScramCredentials / AlterUserScramCredentials name mechanisms by number (Kafka's ScramMechanism.type)
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds for both mechanisms


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def encode(self) -> str:
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(
                base64.b64decode(fields["salt"]),
                base64.b64decode(fields["stored_key"]),
                base64.b64decode(fields["server_key"]),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def from_salted_password(mechanism: str, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """What the broker keeps of an AlterUserScramCredentials upsertion (the client sends the salted password)."""
    digest = MECHANISMS[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(), server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def from_password(mechanism: str, password: str, iterations: int, salt: bytes | None = None) -> ScramCredential:
    salt = salt or os.urandom(32)
    return from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)
