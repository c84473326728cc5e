"""Listener-scoped properties: Kafka reads `listener.name.<listener>.<key>` before `<key>` for SSL and SASL
settings, so each listener can have its own keystore, mechanisms and JAAS users."""

from __future__ import annotations

from collections.abc import Mapping

LISTENER_PREFIX = "listener.name."


def for_listener(raw: Mapping[str, str], listener: str) -> dict[str, str]:
    """The broker's properties as one listener sees them: the listener's prefixed keys win over plain ones."""
    prefix = f"{LISTENER_PREFIX}{listener.lower()}."
    out = {k: v for k, v in raw.items() if not k.startswith(LISTENER_PREFIX)}
    out.update({k[len(prefix) :]: v for k, v in raw.items() if k.startswith(prefix)})
    return out
