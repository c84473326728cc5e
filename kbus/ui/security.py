"""The console's own protection: optional HTTP basic auth (users from a file, each optionally read-only), and a
CSRF token for every POST (double submit: a random cookie that a cross-site form cannot read, repeated in a hidden
field, compared in constant time; the cookie is also SameSite=Strict)."""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path

CSRF_COOKIE = "kbus_ui_csrf"
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True)
class UiUser:
    name: str
    password: str
    read_only: bool


class UsersFileError(ValueError):
    pass


def load_users(path: str) -> dict[str, UiUser]:
    """One user per line, `name:password` or `name:password:read-only`; `#` starts a comment line."""
    users: dict[str, UiUser] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsersFileError(f"{path}: {exc.strerror}") from None
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        read_only = line.endswith(":read-only")
        name, sep, password = line.removesuffix(":read-only").partition(":")  # a password may hold colons
        if not sep or not name or not password:
            raise UsersFileError(f"{path}:{n}: expected name:password or name:password:read-only")
        users[name] = UiUser(name, password, read_only)
    if not users:
        raise UsersFileError(f"{path}: no users")
    return users


def check_basic(header: str | None, users: dict[str, UiUser]) -> UiUser | None:
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        name, _, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user = users.get(name)
    # compare even for an unknown name, so the time taken does not tell which names exist
    expected = user.password if user else secrets.token_hex(16)
    if hmac.compare_digest(password.encode(), expected.encode()) and user is not None:
        return user
    return None


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_ok(cookie: str | None, submitted: str | None) -> bool:
    return bool(cookie) and bool(submitted) and hmac.compare_digest(str(cookie), str(submitted))
