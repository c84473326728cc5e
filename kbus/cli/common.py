"""Helpers every command shares: one-line errors, key=value lists, .properties files. The bootstrap checks and
UsageError live in kbus.common (kbus.ops uses them too) and are imported from here by the commands."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from typer.core import TyperCommand

from kbus.common.bootstrap import check_reachable, validate_bootstrap
from kbus.common.errors import UsageError
from kbus.common.properties import PropertiesError
from kbus.common.properties import load_properties as read_properties

__all__ = [
    "KafkaStyleCommand",
    "UsageError",
    "check_reachable",
    "fail",
    "load_properties",
    "merged_properties",
    "parse_key_values",
    "validate_bootstrap",
    "warn",
]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one line on stderr and leave with a non-zero exit code."""
    print(message, file=sys.stderr, flush=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_key_values(items: list[str] | None, option: str) -> dict[str, str]:
    """`--property k=v` style lists -> dict; the value may itself contain '=' (split on the first one)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"Invalid {option} '{item}': expected key=value")
        out[key.strip()] = value
    return out


def load_properties(path: str) -> dict[str, str]:
    """A client/admin/formatter .properties file, read as Kafka's Utils.loadProps reads it (values untrimmed: a
    formatter's key.separator may be a space)."""
    try:
        return read_properties(path)
    except OSError as exc:
        raise UsageError(f"Cannot read properties file {path}: {exc.strerror or exc}") from None
    except PropertiesError as exc:
        raise UsageError(f"Cannot read properties file {path}: {exc}") from None


class KafkaStyleCommand(TyperCommand):
    """Options listed in `optional_values` may stand alone and then take the given value, as in Kafka's
    scripts (`--compression-codec` alone means gzip, `consumer-groups --list --state` means every state);
    click options otherwise always need a value. (Typographic dashes pasted from articles are fixed for every
    command in kbus.cli.commands.)"""

    optional_values: dict[str, str] = {}

    # typer hands its own Context (a subclass of its vendored click's); the base class names the click one
    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        out: list[str] = []
        for i, arg in enumerate(args):
            out.append(arg)
            if arg in self.optional_values and (i + 1 == len(args) or args[i + 1].startswith("--")):
                out.append(self.optional_values[arg])
        return super().parse_args(ctx, out)


def merged_properties(path: str | None, items: list[str] | None, option: str) -> dict[str, str]:
    """A tool's .properties file (if given) overridden by its `option` key=value pairs: Kafka's precedence for
    --consumer.config/--consumer-property, --producer.config/--producer-property and the formatter's."""
    return {**(load_properties(path) if path else {}), **parse_key_values(items, option)}
