"""Entity names in znode paths (org.apache.kafka.common.utils.Sanitizer): a user principal or client id may hold
any character, a znode name may not, so Kafka URL-encodes every user and client entity name under /config — SCRAM
credentials and quotas alike (`/config/users/alice%40example.com`)."""

from __future__ import annotations

import urllib.parse


def sanitize(name: str) -> str:
    """URL-encode as java.net.URLEncoder does (letters, digits and `.-*_` kept, space as `+`), then `+` as
    `%20` and `*` as `%2A`, so any principal or client id is one legal znode name."""
    return urllib.parse.quote_plus(name, safe=".-*_").replace("+", "%20").replace("*", "%2A")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)
