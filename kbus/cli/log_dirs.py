"""`kbus log-dirs --describe`: kafka-log-dirs.sh — which log dir holds each replica, and how big it is."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from kbus.admin.errors import AdminError
from kbus.admin.java_order import hashmap_order, string_hash, topic_partition_hash
from kbus.admin.log_dirs import LogDirDescription, describe_log_dirs
from kbus.admin.wire import WireAdmin
from kbus.cli.app import app
from kbus.cli.client_config import wire_security
from kbus.cli.common import KafkaStyleCommand, UsageError, check_reachable, fail


def _ids(text: str, option: str) -> set[int]:
    try:
        return {int(x) for x in text.split(",") if x}
    except ValueError:
        raise UsageError(f"Invalid {option} '{text}': expected broker ids like 0,1,2") from None


def format_json(by_broker: dict[int, list[LogDirDescription]], topics: set[str]) -> str:
    """Kafka's JSON line, keys and entries in the order its HashMaps iterate (so the bytes match)."""

    def replicas(d: LogDirDescription) -> list[dict[str, object]]:
        chosen = [r for r in d.replicas if not topics or r.topic in topics]
        ordered = hashmap_order(chosen, lambda r: topic_partition_hash(r.topic, r.partition))
        return [{"partition": f"{r.topic}-{r.partition}", "size": r.size, "offsetLag": r.offset_lag,
                 "isFuture": r.is_future} for r in ordered]  # fmt: skip

    def log_dirs(dirs: list[LogDirDescription]) -> list[dict[str, object]]:
        # KafkaAdminClient sizes this map to the number of dirs (new HashMap<>(results.size()))
        ordered = hashmap_order(dirs, lambda d: string_hash(d.log_dir), initial_capacity=len(dirs))
        return [{"partitions": replicas(d), "error": d.error, "logDir": d.log_dir} for d in ordered]

    brokers = [{"broker": b, "logDirs": log_dirs(by_broker[b])} for b in hashmap_order(list(by_broker), int)]
    return json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":"))


@app.command("log-dirs", cls=KafkaStyleCommand)
def log_dirs(
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", help="REQUIRED: the server(s) to use for bootstrapping")
    ] = None,
    describe: Annotated[
        bool, typer.Option("--describe", help="Describe the specified log directories on the specified brokers.")
    ] = False,
    topic_list: Annotated[
        str, typer.Option("--topic-list", help='Topics to query, "topic1,topic2" (default: all)')
    ] = "",
    broker_list: Annotated[
        str, typer.Option("--broker-list", help='Brokers to query, "0,1,2" (default: all)')
    ] = "",
    command_config: Annotated[
        str | None, typer.Option("--command-config", help="Admin client .properties (TLS/SASL)")
    ] = None,
) -> None:
    """Query the log directories of brokers: replicas, sizes, offset lag (kafka-log-dirs.sh)."""
    try:
        if not bootstrap_server:
            raise UsageError('Missing required argument "[bootstrap-server]"')
        if not describe:
            raise UsageError('Missing required argument "[describe]"')
        security = wire_security(command_config)
        brokers = _ids(broker_list, "--broker-list")
        topics = {t for t in topic_list.split(",") if t}
        check_reachable(bootstrap_server)
        cluster, by_broker = describe_log_dirs(WireAdmin(bootstrap_server, security=security), brokers or None)
    except UsageError as exc:
        fail(str(exc))
    except AdminError as exc:
        fail(str(exc))
    except ConnectionError as exc:
        fail(f"ERROR {exc}")
    queried = sorted(brokers) if brokers else cluster
    print("Querying brokers for log directories information")
    print(f"Received log directory information from brokers {','.join(map(str, queried))}")
    print(format_json(by_broker, topics))
