"""`kbus topics`: kafka-topics.sh — create, list, describe, alter and delete topics, over the wire
(--bootstrap-server) or straight to ZooKeeper (--zookeeper, the Kafka 2.x way)."""

from __future__ import annotations

from typing import Annotated

import typer

from kbus.admin.base import TopicAdmin
from kbus.admin.errors import AdminError
from kbus.admin.kafka import KafkaAdmin
from kbus.admin.models import PartitionDescription, TopicDescription
from kbus.cli.app import app
from kbus.cli.client_config import translate
from kbus.cli.common import KafkaStyleCommand, UsageError, check_reachable, fail, load_properties, parse_key_values
from kbus.cli.topic_names import match_topics
from kbus.common.topics import INTERNAL_TOPICS, has_collision_chars, topic_name_error

ERROR_PREFIX = "Error while executing topic command : "
MAX_REPLICATION_FACTOR = 32767  # a Java short


def format_topic_line(t: TopicDescription) -> str:
    configs = ",".join(f"{k}={v}" for k, v in t.configs.items())
    line = f"Topic: {t.name}"
    if t.topic_id:
        line += f"\tTopicId: {t.topic_id}"
    line += f"\tPartitionCount: {len(t.partitions)}\tReplicationFactor: {t.replication_factor}\tConfigs: {configs}"
    if t.marked_for_deletion:
        line += "\tMarkedForDeletion: true"
    return line


def format_partition_line(topic: str, p: PartitionDescription, marked_for_deletion: bool = False) -> str:
    leader = "none" if p.leader is None else str(p.leader)
    line = (
        f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}"
        f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
    )
    if marked_for_deletion:
        line += "\tMarkedForDeletion: true"
    return line


def parse_replica_assignment(text: str) -> list[list[int]]:
    """Kafka's `--replica-assignment "b1:b2,b1:b2"`: one broker list per partition."""
    try:
        out = [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise UsageError(f"Invalid --replica-assignment '{text}': expected broker ids like 1:2,2:3") from None
    for i, brokers in enumerate(out):
        if len(set(brokers)) != len(brokers):
            raise UsageError(f"Partition replica lists may not contain duplicate entries: partition {i}")
    return out


def _open_admin(bootstrap: str | None, zookeeper: str | None, command_config: str | None) -> TopicAdmin:
    if bool(bootstrap) == bool(zookeeper):
        raise UsageError("Exactly one of --bootstrap-server or --zookeeper must be specified")
    if zookeeper:
        try:
            from kbus.admin.zookeeper import ZkTopicAdmin
        except ImportError:
            raise AdminError(
                "--zookeeper is not available yet in this kbus (kbus.admin.zookeeper is missing); "
                "use --bootstrap-server"
            ) from None
        admin: TopicAdmin = ZkTopicAdmin(zookeeper)
        return admin
    assert bootstrap is not None
    check_reachable(bootstrap)
    conf = translate(load_properties(command_config)) if command_config else {}
    return KafkaAdmin(bootstrap, conf)


def _selected(admin: TopicAdmin, topic: str | None, exclude_internal: bool) -> list[str]:
    names = admin.list_topics()
    if topic is not None:
        names = match_topics(topic, names)
    if exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    return sorted(names)


@app.command("topics", cls=KafkaStyleCommand)
def topics(
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", help="The broker(s) to connect to, host:port,...")
    ] = None,
    zookeeper: Annotated[
        str | None,
        typer.Option("--zookeeper", help="Talk to ZooKeeper directly (Kafka 2.x style), host:port/chroot"),
    ] = None,
    command_config: Annotated[
        str | None, typer.Option("--command-config", help="Admin client .properties file")
    ] = None,
    create: Annotated[bool, typer.Option("--create", help="Create a new topic")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List all available topics")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Describe topics (all when --topic is absent)")] = False,
    alter: Annotated[bool, typer.Option("--alter", help="Change the number of partitions")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="Delete a topic")] = False,
    topic: Annotated[
        str | None, typer.Option("--topic", help="Topic name; a regular expression except with --create")
    ] = None,
    partitions: Annotated[int | None, typer.Option("--partitions", help="Number of partitions")] = None,
    replication_factor: Annotated[
        int | None, typer.Option("--replication-factor", help="Replicas of each partition")
    ] = None,
    config: Annotated[
        list[str] | None, typer.Option("--config", help="Topic config override name=value (repeatable)")
    ] = None,
    replica_assignment: Annotated[
        str | None, typer.Option("--replica-assignment", help="Manual assignment: b1:b2,b1:b2,...")
    ] = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="With --create: do nothing if the topic exists")
    ] = False,
    if_exists: Annotated[
        bool, typer.Option("--if-exists", help="With --alter/--delete/--describe: only if the topic exists")
    ] = False,
    exclude_internal: Annotated[
        bool, typer.Option("--exclude-internal", help="Leave internal topics out of --list/--describe")
    ] = False,
    under_replicated_partitions: Annotated[
        bool, typer.Option("--under-replicated-partitions", help="Describe only under-replicated partitions")
    ] = False,
    unavailable_partitions: Annotated[
        bool, typer.Option("--unavailable-partitions", help="Describe only partitions without a leader")
    ] = False,
    topics_with_overrides: Annotated[
        bool, typer.Option("--topics-with-overrides", help="Describe only topics with config overrides")
    ] = False,
) -> None:
    """Create, delete, describe, or change a topic (kafka-topics.sh)."""
    actions = [create, list_, describe, alter, delete]
    if sum(actions) != 1:
        fail("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    try:
        _check_option_combinations(
            create, alter, delete, describe, topic, partitions, replication_factor, config, if_exists,
            if_not_exists, replica_assignment,
        )
        configs = parse_key_values(config, "--config")
        assignment = parse_replica_assignment(replica_assignment) if replica_assignment else None
        admin = _open_admin(bootstrap_server, zookeeper, command_config)
    except UsageError as exc:
        fail(str(exc))
    except (AdminError, ConnectionError) as exc:
        fail(ERROR_PREFIX + str(exc))
    try:
        if create:
            assert topic is not None
            _create(admin, topic, partitions, replication_factor, configs, assignment, if_not_exists)
        elif list_:
            for name in _selected(admin, topic, exclude_internal):
                print(name)
        elif describe:
            _describe(
                admin, topic, exclude_internal, if_exists, under_replicated_partitions, unavailable_partitions,
                topics_with_overrides,
            )
        elif alter:
            assert topic is not None and partitions is not None
            for name in _existing(admin, topic, if_exists, exclude_internal):
                admin.create_partitions(name, partitions)
                if zookeeper:
                    print(
                        "WARNING: If partitions are increased for a topic that has a key, the partition logic "
                        "or ordering of the messages will be affected"
                    )
                    print("Adding partitions succeeded!")
        elif delete:
            assert topic is not None
            for name in _existing(admin, topic, if_exists, exclude_internal):
                if name in INTERNAL_TOPICS:
                    raise AdminError(
                        f"Topic {name} is a kafka internal topic and is not allowed to be marked for deletion."
                    )
                admin.delete_topic(name)
                if zookeeper:
                    print(f"Topic {name} is marked for deletion.")
                    print("Note: This will have no impact if delete.topic.enable is not set to true.")
    except (AdminError, UsageError) as exc:
        fail(ERROR_PREFIX + str(exc))
    finally:
        admin.close()


def _check_option_combinations(
    create: bool,
    alter: bool,
    delete: bool,
    describe: bool,
    topic: str | None,
    partitions: int | None,
    replication_factor: int | None,
    config: list[str] | None,
    if_exists: bool,
    if_not_exists: bool,
    replica_assignment: str | None,
) -> None:
    if (create or alter or delete) and not topic:
        raise UsageError('Missing required argument "[topic]"')
    if partitions is not None and not (create or alter):
        raise UsageError('Option "[partitions]" can only be used with "[create]" or "[alter]"')
    if alter and partitions is None:
        raise UsageError('Missing required argument "[partitions]" (--alter can only add partitions)')
    if replication_factor is not None and not create:
        raise UsageError('Option "[replication-factor]" can only be used with "[create]"')
    if config and not create:
        raise UsageError('Option "[config]" can only be used with "[create]"; use kbus configs to change configs')
    if if_not_exists and not create:
        raise UsageError('Option "[if-not-exists]" can only be used with "[create]"')
    if if_exists and not (alter or delete or describe):
        raise UsageError('Option "[if-exists]" can only be used with "[alter]", "[delete]" or "[describe]"')
    if replica_assignment and (partitions is not None or replication_factor is not None) and create:
        raise UsageError('Option "[replica-assignment]" can\'t be used with "[partitions]" or "[replication-factor]"')
    # Value errors: Kafka raises these while executing, so they carry the "Error while executing" prefix.
    if partitions is not None and partitions < 1:
        raise AdminError("The partitions must be greater than 0", "INVALID_PARTITIONS")
    if replication_factor is not None and not 1 <= replication_factor <= MAX_REPLICATION_FACTOR:
        raise AdminError(
            f"The replication factor must be between 1 and {MAX_REPLICATION_FACTOR} inclusive",
            "INVALID_REPLICATION_FACTOR",
        )
    if create and topic:
        problem = topic_name_error(topic)
        if problem:
            raise AdminError(problem, "INVALID_TOPIC_EXCEPTION")


def _create(
    admin: TopicAdmin,
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: dict[str, str],
    assignment: list[list[int]] | None,
    if_not_exists: bool,
) -> None:
    if has_collision_chars(topic):
        print(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
            "could collide. To avoid issues it is best to use either, but not both."
        )
    try:
        admin.create_topic(topic, partitions, replication_factor, configs, assignment)
    except AdminError as err:
        if if_not_exists and err.name == "TOPIC_ALREADY_EXISTS":
            return
        raise
    print(f"Created topic {topic}.")


def _existing(admin: TopicAdmin, topic: str, if_exists: bool, exclude_internal: bool) -> list[str]:
    names = _selected(admin, topic, exclude_internal)
    if not names and not if_exists:
        raise AdminError(f"Topic '{topic}' does not exist as expected", "UNKNOWN_TOPIC_OR_PARTITION")
    return names


def _describe(
    admin: TopicAdmin,
    topic: str | None,
    exclude_internal: bool,
    if_exists: bool,
    under_replicated: bool,
    unavailable: bool,
    with_overrides: bool,
) -> None:
    names = _existing(admin, topic, if_exists, exclude_internal) if topic else _selected(admin, None, exclude_internal)
    for t in admin.describe_topics(names):
        if with_overrides and not t.configs:
            continue
        partition_filter = under_replicated or unavailable
        if not partition_filter:
            print(format_topic_line(t))
        if with_overrides:
            continue
        for p in t.partitions:
            if under_replicated and not len(p.isr) < len(p.replicas):
                continue
            if unavailable and p.leader is not None:
                continue
            print(format_partition_line(t.name, p, t.marked_for_deletion))
