"""`kbus leader-election`: kafka-leader-election.sh — preferred or unclean leader election on request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kbus.admin.elect_leaders import elect_leaders
from kbus.admin.errors import AdminError
from kbus.admin.java_order import hashmap_order, topic_partition_hash
from kbus.admin.wire import WireAdmin
from kbus.cli.app import app
from kbus.cli.client_config import wire_security
from kbus.cli.common import KafkaStyleCommand, UsageError, check_reachable, fail

# Kafka's exception class for each error name, as the tool prints the Throwable
_EXCEPTIONS = {
    "PREFERRED_LEADER_NOT_AVAILABLE": "PreferredLeaderNotAvailableException",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": "EligibleLeadersNotAvailableException",
    "UNKNOWN_TOPIC_OR_PARTITION": "UnknownTopicOrPartitionException",
    "LEADER_NOT_AVAILABLE": "LeaderNotAvailableException",
    "REQUEST_TIMED_OUT": "TimeoutException",
    "INVALID_TOPIC_EXCEPTION": "InvalidTopicException",
}


def parse_election_json(text: str) -> set[tuple[str, int]]:
    """{"partitions": [{"topic": "foo", "partition": 1}, ...]}; duplicates are refused, as Kafka does."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"Invalid JSON in --path-to-json-file: {exc}") from None
    if not isinstance(doc, dict) or "partitions" not in doc:
        raise UsageError('Replica election data is missing "partitions" field')
    seen: list[tuple[str, int]] = []
    for item in doc["partitions"]:
        try:
            seen.append((str(item["topic"]), int(item["partition"])))
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"Invalid partition entry in --path-to-json-file: {item!r}") from None
    dups = sorted({tp for tp in seen if seen.count(tp) > 1})
    if dups:
        listed = ",".join(f"{t}-{p}" for t, p in dups)
        raise UsageError(f"Replica election data contains duplicate partitions: {listed}")
    return set(seen)


def _names(partitions: list[tuple[str, int]]) -> str:
    ordered = hashmap_order(partitions, lambda tp: topic_partition_hash(*tp))
    return ", ".join(f"{t}-{p}" for t, p in ordered)


@app.command("leader-election", cls=KafkaStyleCommand)
def leader_election(
    bootstrap_server: Annotated[str | None, typer.Option("--bootstrap-server", help="host:port,... REQUIRED")] = None,
    election_type: Annotated[
        str | None, typer.Option("--election-type", help="preferred or unclean. REQUIRED")
    ] = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Topic to elect a leader for (with --partition)")] = None,
    partition: Annotated[int | None, typer.Option("--partition", help="Partition id, REQUIRED with --topic")] = None,
    all_topic_partitions: Annotated[
        bool, typer.Option("--all-topic-partitions", help="Every eligible partition")
    ] = False,
    path_to_json_file: Annotated[
        str | None, typer.Option("--path-to-json-file", help='{"partitions":[{"topic":"foo","partition":1}]}')
    ] = None,
    command_config: Annotated[
        str | None, typer.Option("--command-config", "--admin.config", help="Admin client .properties (TLS/SASL)")
    ] = None,
) -> None:
    """Elect the preferred (or, for leaderless partitions, any live) replica as leader (kafka-leader-election.sh)."""
    try:
        missing = [o for o, v in (("bootstrap-server", bootstrap_server), ("election-type", election_type)) if not v]
        if missing:
            raise UsageError("Missing required option(s): " + ", ".join(missing))
        assert bootstrap_server is not None and election_type is not None
        kind = election_type.strip().lower()
        if kind not in ("preferred", "unclean"):
            raise UsageError(f"Invalid --election-type '{election_type}': expected preferred or unclean")
        security = wire_security(command_config)
        chosen = sum((topic is not None, all_topic_partitions, path_to_json_file is not None))
        if chosen != 1:
            raise UsageError("One and only one of the following options is required: "
                             "topic, all-topic-partitions, path-to-json-file")  # fmt: skip
        if topic is not None and partition is None:
            raise UsageError("Missing required option(s): partition")
        if topic is None and partition is not None:
            raise UsageError("Option partition is only allowed if topic is used")
        partitions: set[tuple[str, int]] | None = None
        if path_to_json_file is not None:
            try:
                partitions = parse_election_json(Path(path_to_json_file).read_text())
            except OSError as exc:
                raise UsageError(f"Cannot read {path_to_json_file}: {exc.strerror}") from None
        elif topic is not None and partition is not None:
            partitions = {(topic, partition)}
        check_reachable(bootstrap_server)
        results = elect_leaders(WireAdmin(bootstrap_server, security=security), kind, partitions)
    except UsageError as exc:
        fail(str(exc))
    except (AdminError, ConnectionError) as exc:
        fail(f"Error while making request: {exc}")
    label = kind.upper()
    succeeded = [tp for tp, r in results.items() if r is None]
    noop = [tp for tp, r in results.items() if r is not None and r[0] == "ELECTION_NOT_NEEDED"]
    failed = {tp: r for tp, r in results.items() if r is not None and r[0] != "ELECTION_NOT_NEEDED"}
    if succeeded:
        print(f"Successfully completed leader election ({label}) for partitions {_names(succeeded)}")
    if noop:
        print(f"Valid replica already elected for partitions {_names(noop)}")
    if failed:
        for t, p in hashmap_order(list(failed), lambda tp: topic_partition_hash(*tp)):
            name, message = failed[(t, p)]
            cls = _EXCEPTIONS.get(name, "KafkaException")
            print(f"Error completing leader election ({label}) for partition: {t}-{p}: "
                  f"org.apache.kafka.common.errors.{cls}: {message}")  # fmt: skip
        fail(f"{len(failed)} replica(s) could not be elected")
