"""The `kbus` entry point. Each command family lives in its own module and registers itself on `app`;
importing the module is all it takes (one import line per module below)."""

# Command modules (import for their registration side effect).
# ruff: noqa: F401
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


def main() -> None:
    app()
