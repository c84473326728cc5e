"""Errors of the sans-I/O protocol layer."""

from __future__ import annotations


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid Kafka request: the connection must be closed."""
