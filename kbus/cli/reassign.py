"""`kbus reassign-partitions`: kafka-reassign-partitions.sh — generate a plan, execute it, verify it, cancel it,
list what is under way. --throttle writes Kafka's throttle configs (the brokers' leader/follower
.replication.throttled.rate and the topics' *.replication.throttled.replicas) and --verify clears them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from kbus.admin.broker_configs import alter_broker_configs
from kbus.admin.errors import AdminError
from kbus.admin.java_order import hashmap_order, string_hash
from kbus.admin.kafka import KafkaAdmin
from kbus.admin.log_dirs import TopicPartitionReplica, alter_replica_log_dirs, describe_replica_log_dirs
from kbus.admin.reassign import (
    alter_reassignments,
    broker_racks,
    brokers_for_generate,
    calculate_assignment,
    current_assignment,
    list_reassignments,
    live_brokers,
)
from kbus.admin.wire import WireAdmin
from kbus.cli.app import app
from kbus.cli.client_config import wire_security
from kbus.cli.common import KafkaStyleCommand, UsageError, check_reachable, fail

TopicPartition = tuple[str, int]
ANY_LOG_DIR = "any"
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
ALTER_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def _read_json(path: str, option: str) -> object:
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"Cannot read {option} {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"Invalid JSON in {option} {path}: {exc}") from None


def parse_reassignment(doc: object) -> tuple[dict[TopicPartition, list[int]], dict[TopicPartitionReplica, str]]:
    """{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..],"log_dirs":[..]}]}: the target replicas
    per partition, and the log dir each replica should end up in where one is named ("any": wherever)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise UsageError('The reassignment JSON needs a "partitions" list')
    out: dict[TopicPartition, list[int]] = {}
    dirs: dict[TopicPartitionReplica, str] = {}
    for e in doc["partitions"]:
        try:
            tp = (str(e["topic"]), int(e["partition"]))
            replicas = [int(b) for b in e["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"Invalid partition entry in the reassignment JSON: {e!r}") from None
        if tp in out:
            raise UsageError(f"Cannot reassign partition {tp[0]}-{tp[1]} more than once in one request")
        if len(set(replicas)) != len(replicas):
            raise UsageError(f"Partition replica lists may not contain duplicate entries: {tp[0]}-{tp[1]}")
        log_dirs = e.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise UsageError(f"Invalid partition entry in the reassignment JSON: {e!r}")
        if len(log_dirs) != len(replicas):
            raise UsageError(f"Size of replicas list {_java_list(replicas)} is different from size of log dirs list "
                             f"{_java_list(log_dirs)} for partition {tp[0]}-{tp[1]}")  # fmt: skip
        for broker, d in zip(replicas, log_dirs, strict=True):
            if d != ANY_LOG_DIR:
                dirs[(tp[0], tp[1], broker)] = d
        out[tp] = replicas
    if not out:
        raise UsageError("Partition reassignment list cannot be empty")
    return out, dirs


def _java_list(items: list[int] | list[str]) -> str:
    return "[" + ", ".join(map(str, items)) + "]"


def _replicas(replicas: list[TopicPartitionReplica]) -> str:
    """Kafka's TopicPartitionReplica.toString, comma-joined: topic-partition-broker."""
    return ",".join(f"{t}-{p}-{b}" for t, p, b in sorted(replicas))


def _execute_moves(admin: WireAdmin, moves: dict[TopicPartitionReplica, str], timeout_ms: int) -> None:
    """Kafka's executeMoves: ask each broker to move its replicas; a replica that has not reached its new broker
    yet (REPLICA_NOT_AVAILABLE) is asked again every 100 ms until --timeout."""
    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        results = alter_replica_log_dirs(admin, pending)
        for replica, error in sorted(results.items()):
            if error is None:
                t, p, b = replica
                print(f"Successfully started moving log directory to {pending.pop(replica)} for replica {t}-{p} "
                      f"with broker {b} ")  # fmt: skip
            elif error != "REPLICA_NOT_AVAILABLE":
                raise AdminError(f"Failed to alter dir for {_replicas([replica])}: {error}", error)
        if not pending:
            return
        if time.monotonic() >= deadline:
            plural = "" if len(pending) == 1 else "s"
            raise AdminError(f"Timed out before log directory move{plural} could be started for: "
                             f"{_replicas(list(pending))}", "REQUEST_TIMED_OUT")  # fmt: skip
        time.sleep(0.1)


def _verify_moves(admin: WireAdmin, moves: dict[TopicPartitionReplica, str]) -> bool:
    """Kafka's verifyReplicaMoves: one line per replica; True while any move is under way."""
    found = describe_replica_log_dirs(admin, set(moves))
    lines, ongoing = [], False
    for replica, target in sorted(moves.items()):
        t, p, b = replica
        current, future = found[replica]
        if current is None:
            lines.append(f"Partition {t}-{p} is not found in any live log dir on broker {b}. There is likely an "
                         f"offline log directory on the broker.")  # fmt: skip
        elif future is not None:
            ongoing = True
            if future == target:
                lines.append(f"Reassignment of replica {t}-{p}-{b} is still in progress.")
            else:
                lines.append(f"Partition {t}-{p} on broker {b} is being moved to log dir {future} instead of "
                             f"{target}.")  # fmt: skip
        elif current == target:
            lines.append(f"Reassignment of replica {t}-{p}-{b} completed successfully.")
        else:
            lines.append(f"Partition {t}-{p} on broker {b} is not being moved from log dir {current} to {target}.")
    print("\n".join(lines))
    return ongoing


def format_assignment(assignment: dict[TopicPartition, list[int]]) -> str:
    """Kafka's reassignment JSON (what --execute reads back)."""
    parts = [{"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
             for (t, p), r in sorted(assignment.items())]  # fmt: skip
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def _names(tps: list[TopicPartition]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(tps))


def _generate(admin: WireAdmin, topics_file: str, broker_list: str | None, rack_aware: bool) -> None:
    doc = _read_json(topics_file, "--topics-to-move-json-file")
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
        raise UsageError('The topics-to-move JSON needs a "topics" list like {"topics":[{"topic":"foo"}],"version":1}')
    topics = [str(t["topic"]) for t in doc["topics"]]
    if not broker_list:
        raise UsageError("--broker-list is required with --generate")
    try:
        brokers = sorted({int(b) for b in broker_list.split(",") if b.strip()})
    except ValueError:
        raise UsageError(f"Invalid --broker-list '{broker_list}': expected broker ids like 1,2,3") from None
    current = current_assignment(admin, topics)
    proposed = calculate_assignment(current, brokers_for_generate(broker_racks(admin), brokers, rack_aware))
    print("Current partition replica assignment")
    print(format_assignment(current))
    print()
    print("Proposed partition reassignment configuration")
    print(format_assignment(proposed))


def _set_throttles(bootstrap: str, admin: WireAdmin, targets: dict[TopicPartition, list[int]],
                   current: dict[TopicPartition, list[int]], rate: int) -> None:  # fmt: skip
    brokers = sorted({b for r in (*targets.values(), *current.values()) for b in r})
    for b in brokers:
        alter_broker_configs(admin, str(b), dict.fromkeys(THROTTLE_RATES, str(rate)), [])
    kadmin = KafkaAdmin(bootstrap, {})
    try:
        for topic in sorted({t for t, _ in targets}):
            leaders = [f"{p}:{b}" for (t, p), r in sorted(current.items()) if t == topic for b in r]
            followers = [f"{p}:{b}" for (t, p), r in sorted(targets.items()) if t == topic
                         for b in r if b not in current[(t, p)]]  # fmt: skip
            kadmin.alter_configs("topic", topic, {THROTTLED_REPLICAS[0]: ",".join(leaders),
                                                  THROTTLED_REPLICAS[1]: ",".join(followers)}, [])  # fmt: skip
    finally:
        kadmin.close()


def _clear_throttles(bootstrap: str, admin: WireAdmin, targets: dict[TopicPartition, list[int]]) -> None:
    """Kafka's clearAllThrottles: the rates on every live broker and every target replica (a source broker the
    move left keeps no throttle either), the replica lists on the moved topics."""
    brokers = sorted({*live_brokers(admin), *(b for r in targets.values() for b in r)})
    plural = "" if len(brokers) == 1 else "s"
    print(f"Clearing broker-level throttles on broker{plural} {','.join(map(str, brokers))}")
    for b in brokers:
        alter_broker_configs(admin, str(b), {}, [*THROTTLE_RATES, ALTER_DIRS_RATE])
    topics = hashmap_order(dict.fromkeys(t for t, _ in targets), string_hash)  # Java's HashSet order
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    kadmin = KafkaAdmin(bootstrap, {})
    try:
        for topic in topics:
            kadmin.alter_configs("topic", topic, {}, list(THROTTLED_REPLICAS))
    finally:
        kadmin.close()


@app.command("reassign-partitions", cls=KafkaStyleCommand)
def reassign_partitions(
    bootstrap_server: Annotated[str | None, typer.Option("--bootstrap-server", help="host:port,... REQUIRED")] = None,
    generate: Annotated[bool, typer.Option("--generate", help="Propose an assignment for --broker-list")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Start the reassignment in the JSON file")] = False,
    verify: Annotated[bool, typer.Option("--verify", help="Check progress; clears throttles when done")] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="Cancel the reassignments in the JSON file")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the reassignments under way")] = False,
    topics_to_move_json_file: Annotated[
        str | None, typer.Option("--topics-to-move-json-file", help='{"topics":[{"topic":"foo"}],"version":1}')
    ] = None,
    reassignment_json_file: Annotated[
        str | None, typer.Option("--reassignment-json-file", help="The plan (from --generate, or your own)")
    ] = None,
    broker_list: Annotated[str | None, typer.Option("--broker-list", help='Brokers to move to, "1,2,3"')] = None,
    disable_rack_aware: Annotated[
        bool, typer.Option("--disable-rack-aware", help="--generate: ignore the brokers' broker.rack")
    ] = False,
    additional: Annotated[
        bool, typer.Option("--additional", help="--execute although reassignments are under way")
    ] = False,
    throttle: Annotated[int, typer.Option("--throttle", help="Inter-broker replication limit, B/s")] = -1,
    replica_alter_log_dirs_throttle: Annotated[
        int, typer.Option("--replica-alter-log-dirs-throttle", help="Limit on moves between log dirs, B/s")
    ] = -1,
    preserve_throttles: Annotated[
        bool, typer.Option("--preserve-throttles", help="--verify / --cancel: leave the throttles")
    ] = False,
    command_config: Annotated[
        str | None, typer.Option("--command-config", help="Admin client .properties (TLS/SASL)")
    ] = None,
    timeout: Annotated[
        int, typer.Option("--timeout", help="ms --execute waits for log directory moves to start")
    ] = 10000,
) -> None:
    """Move partitions between brokers (kafka-reassign-partitions.sh)."""
    try:
        if not bootstrap_server:
            raise UsageError('Missing required argument "[bootstrap-server]"')
        if sum((generate, execute, verify, cancel, list_)) != 1:
            raise UsageError("Command must include exactly one action: --generate, --execute, --verify, --cancel, "
                             "or --list")  # fmt: skip
        security = wire_security(command_config)
        if generate and not topics_to_move_json_file:
            raise UsageError("Missing required argument \"[topics-to-move-json-file]\"")
        if (execute or verify or cancel) and not reassignment_json_file:
            raise UsageError("Missing required argument \"[reassignment-json-file]\"")
        check_reachable(bootstrap_server)
        admin = WireAdmin(bootstrap_server, security=security)
        if generate:
            assert topics_to_move_json_file is not None
            _generate(admin, topics_to_move_json_file, broker_list, not disable_rack_aware)
            return
        if list_:
            ongoing = list_reassignments(admin)
            if not ongoing:
                print("No partition reassignments found.")
                return
            print("Current partition reassignments:")
            for (t, p), o in sorted(ongoing.items()):
                print(f"{t}-{p}: replicas: {','.join(map(str, o.replicas))}. adding: {','.join(map(str, o.adding))}. "
                      f"removing: {','.join(map(str, o.removing))}.")  # fmt: skip
            return
        assert reassignment_json_file is not None
        targets, log_dir_moves = parse_reassignment(_read_json(reassignment_json_file, "--reassignment-json-file"))
        topics = sorted({t for t, _ in targets})
        current = current_assignment(admin, topics)
        missing = sorted(tp for tp in targets if tp not in current)
        if missing:
            raise AdminError(f"Topic partitions not found: {_names(missing)}", "UNKNOWN_TOPIC_OR_PARTITION")
        if execute:
            # Kafka refuses while any reassignment is under way, not only one of these partitions
            if not additional and list_reassignments(admin):
                raise AdminError("Cannot execute because there is an existing partition assignment. Use --additional "
                                 "to override this and create a new partition assignment in addition to the existing "
                                 "one. The --additional flag can also be used to change the throttle by resubmitting "
                                 "the current reassignment.", "INVALID_REQUEST")  # fmt: skip
            print("Current partition replica assignment")
            print()
            print(format_assignment({tp: current[tp] for tp in targets}))
            print()
            print("Save this to use as the --reassignment-json-file option during rollback")
            if throttle >= 0 or (replica_alter_log_dirs_throttle >= 0 and log_dir_moves):
                print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                      "throttle is removed.")  # fmt: skip
            if throttle >= 0:
                _set_throttles(bootstrap_server, admin, targets, current, throttle)
                print(f"The inter-broker throttle limit was set to {throttle} B/s")
            if replica_alter_log_dirs_throttle >= 0 and log_dir_moves:
                for b in sorted({b for _, _, b in log_dir_moves}):
                    alter_broker_configs(admin, str(b), {ALTER_DIRS_RATE: str(replica_alter_log_dirs_throttle)}, [])
                print(f"The replica-alter-dir throttle limit was set to {replica_alter_log_dirs_throttle} B/s")
            results = alter_reassignments(admin, dict(targets))
            failed = {tp: r for tp, r in results.items() if r is not None}
            if failed:
                lines = [f"{t}-{p}: {name}" for (t, p), (name, _) in sorted(failed.items())]
                raise AdminError("Error reassigning partition(s):\n" + "\n".join(lines), "INVALID_REQUEST")
            plural = "s" if len(targets) > 1 else ""
            print(f"Successfully started partition reassignment{plural} for {_names(list(targets))}")
            if log_dir_moves:
                _execute_moves(admin, log_dir_moves, timeout)
            return
        if cancel:
            results = alter_reassignments(admin, dict.fromkeys(targets))
            cancelled = [tp for tp, r in results.items() if r is None]
            if cancelled:
                plural = "s" if len(cancelled) > 1 else ""
                print(f"Successfully cancelled partition reassignment{plural} for: {_names(cancelled)}")
            else:
                print("None of the specified partition reassignments are active.")
            if not preserve_throttles:
                _clear_throttles(bootstrap_server, admin, targets)
            return
        # --verify
        ongoing = list_reassignments(admin)
        print("Status of partition reassignment:")
        done = True
        for tp, target in sorted(targets.items()):
            if tp in ongoing:
                done = False
                print(f"Reassignment of partition {tp[0]}-{tp[1]} is still in progress.")
            elif current[tp] == target:
                print(f"Reassignment of partition {tp[0]}-{tp[1]} is completed.")
            else:
                print(f"There is no active reassignment of partition {tp[0]}-{tp[1]}, but replica set is "
                      f"{','.join(map(str, current[tp]))} rather than {','.join(map(str, target))}.")  # fmt: skip
        if log_dir_moves:
            done = not _verify_moves(admin, log_dir_moves) and done
        else:
            print()  # (Kafka prints the replica moves here: none)
        if done and not preserve_throttles:
            _clear_throttles(bootstrap_server, admin, targets)
    except UsageError as exc:
        fail(str(exc))
    except (AdminError, ConnectionError) as exc:
        fail(f"Error: {exc}")
