"""The `kbus` entry point. Each command family lives in its own module and registers itself on `app`;
importing the module is all it takes (one import line per module below)."""

from kbus.cli.app import app

# Command modules (import for their registration side effect).
# ruff: noqa: F401, E402
import kbus.cli.zookeeper


def main() -> None:
    app()
