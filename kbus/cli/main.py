"""The `kbus` entry point. Each command family lives in its own module and registers itself on `app`;
importing the module is all it takes (one import line per module below)."""

# Command modules (import for their registration side effect).
# ruff: noqa: F401
import sys

import kbus.cli.configs
import kbus.cli.console_consumer
import kbus.cli.console_producer
import kbus.cli.consumer_groups
import kbus.cli.dump_log
import kbus.cli.offsets
import kbus.cli.server
import kbus.cli.service
import kbus.cli.spark
import kbus.cli.topics
import kbus.cli.zookeeper
from kbus.cli.app import app


def _fix_dashes(args: list[str]) -> list[str]:
    """Blog posts (the seed articles among them) print `--from-beginning` with an en or em dash (U+2013, U+2014)
    after typographic substitution; accept what users paste, and say so on stderr."""
    out = []
    for a in args:
        if a[:1] in ("\u2013", "\u2014") and len(a) > 1:
            fixed = "--" + a[1:]
            print(f"WARN '{a}' read as '{fixed}'", file=sys.stderr)
            a = fixed
        out.append(a)
    return out


def main() -> None:
    sys.argv[1:] = _fix_dashes(sys.argv[1:])
    app()
