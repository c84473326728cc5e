"""The broker's log config file (config/logging.yaml), kbus's counterpart of Kafka's log4j.properties.

A `logging.config.dictConfig` document in YAML. `${VAR}` and `${VAR:-default}` are expanded from the environment
first, the way log4j expands `${kafka.logs.dir}`, so one file serves a checkout (logs/) and a service
(/var/log/kbus) alike. Selected with KBUS_LOG_CONFIG=path (Kafka: KAFKA_LOG4J_OPTS).
"""

from __future__ import annotations

import logging.config
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ENV_VAR = "KBUS_LOG_CONFIG"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class LoggingConfigError(ValueError):
    """The log config file is missing or invalid; the message names the file."""


def expand(text: str, env: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        value = env.get(m.group(1))
        if value:
            return value
        if m.group(2) is not None:
            return m.group(2)
        raise LoggingConfigError(f"${{{m.group(1)}}} is not set (use ${{{m.group(1)}:-default}} for a default)")

    # comment lines may mention ${...} freely (the shipped file documents the syntax in one)
    return "".join(
        line if line.lstrip().startswith("#") else _VAR.sub(sub, line) for line in text.splitlines(keepends=True)
    )


def load(path: str | Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise LoggingConfigError(f"cannot read log config {p}: {exc.strerror}") from None
    try:
        doc = yaml.safe_load(expand(text, os.environ if env is None else env))
    except LoggingConfigError as exc:
        raise LoggingConfigError(f"log config {p}: {exc}") from None
    except yaml.YAMLError as exc:
        raise LoggingConfigError(f"log config {p} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise LoggingConfigError(f"log config {p} must be a logging dictConfig mapping with `version: 1`")
    return doc


def apply(path: str | Path, env: Mapping[str, str] | None = None) -> None:
    doc = load(path, env)
    # file handlers would fail on a fresh host: create their directories (logs/ or /var/log/kbus) first
    for handler in (doc.get("handlers") or {}).values():
        if isinstance(handler, dict) and handler.get("filename"):
            Path(handler["filename"]).parent.mkdir(parents=True, exist_ok=True)
    try:
        logging.config.dictConfig(doc)
    except (ValueError, TypeError, AttributeError, ImportError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LoggingConfigError(f"log config {path} is invalid: {reason}") from None
