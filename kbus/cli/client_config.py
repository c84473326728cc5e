"""Java client properties (what Kafka's tools accept in --producer.config, --producer-property, ...) ->
librdkafka configuration, so the same .properties files work with kbus's tools."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaException

from kbus.cli.common import UsageError, load_properties, warn
from kbus.common.broker_config import ConfigError
from kbus.common.client_security import client_security, translate_security
from kbus.protocol.client import PLAINTEXT, ClientSecurity

T = TypeVar("T")

# Java-only settings that have no librdkafka meaning: the tools choose their own (de)serializers.
_IGNORED = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "partitioner.class",
        "interceptor.classes",
        "max.block.ms",
        "max.poll.records",
        "exclude.internal.topics",
        "default.api.timeout.ms",
        "metric.reporters",
        "auto.include.jmx.reporter",
    }
)

# Same meaning, different name (or unit) in librdkafka.
_RENAMED: dict[str, Callable[[str], tuple[str, str]]] = {
    "max.request.size": lambda v: ("message.max.bytes", v),
    "send.buffer.bytes": lambda v: ("socket.send.buffer.bytes", v),
    "receive.buffer.bytes": lambda v: ("socket.receive.buffer.bytes", v),
    "buffer.memory": lambda v: ("queue.buffering.max.kbytes", str(max(1, int(v) // 1024))),
    "delivery.timeout.ms": lambda v: ("message.timeout.ms", v),
}


def translate(props: dict[str, str]) -> dict[str, Any]:
    """Drop Java-only keys (with Kafka's warning) and rename the ones librdkafka spells differently."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key in _IGNORED:
            continue
        if key in _RENAMED:
            with contextlib.suppress(ValueError):
                key, value = _RENAMED[key](value)
        out[key] = value
    return translate_security(out)


class ClientConfigError(Exception):
    """A configuration librdkafka refuses (bad value, wrong type): one line for the user."""


def build_client(factory: Callable[[dict[str, Any]], T], conf: dict[str, Any]) -> T:
    """Construct a librdkafka client, dropping (with a warning, as Kafka does for unknown configs) any
    property librdkafka does not know instead of failing on it, and turning "true"/"false" into the bools
    confluent-kafka's Python-level settings insist on."""
    conf = dict(conf)
    if "debug" in conf:
        # Our tools silence librdkafka's own log lines; someone asking for debug output wants them all.
        conf.pop("log_level", None)
    while True:
        try:
            return factory(conf)
        except KafkaException as exc:
            err = exc.args[0]
            text = err.str() if hasattr(err, "str") else str(err)
            marker = 'No such configuration property: "'
            if marker in text:
                bad = text.split(marker, 1)[1].split('"', 1)[0]
                if bad in conf:
                    warn(f"WARN The configuration '{bad}' was supplied but isn't a known config.")
                    del conf[bad]
                    continue
            raise ClientConfigError(text) from None
        except (TypeError, ValueError) as exc:
            m = re.match(r"Expected (\S+) to be bool type", str(exc))
            if m and isinstance(conf.get(m.group(1)), str) and conf[m.group(1)].lower() in ("true", "false"):
                conf[m.group(1)] = conf[m.group(1)].lower() == "true"
                continue
            raise ClientConfigError(str(exc)) from None


def wire_security(command_config: str | None) -> ClientSecurity:
    """--command-config as the settings of kbus's own protocol client (TLS/SASL); a bad key is one line."""
    if not command_config:
        return PLAINTEXT
    try:
        return client_security(load_properties(command_config))
    except ConfigError as exc:
        raise UsageError(f"{command_config}: {exc}") from None
