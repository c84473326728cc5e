"""`kbus console-consumer`: kafka-console-consumer.sh — print a topic's records with DefaultMessageFormatter."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import sys
import time
from typing import Annotated, Any

import typer
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, Message, TopicPartition

from kbus.admin.discovery import bootstrap_from_zookeeper
from kbus.admin.errors import AdminError
from kbus.cli.app import app
from kbus.cli.client_config import ClientConfigError, build_client, translate
from kbus.cli.common import (
    KafkaStyleCommand,
    UsageError,
    check_reachable,
    fail,
    load_properties,
    merged_properties,
    parse_key_values,
    validate_bootstrap,
    warn,
)
from kbus.cli.consumer_watch import ConsumerWatch
from kbus.cli.formatter import DefaultMessageFormatter
from kbus.cli.topic_names import include_list
from kbus.common.topics import is_internal

POLL_S = 0.5  # short polls keep Ctrl-C, SIGTERM and --timeout-ms responsive
BATCH = 500
METADATA_TIMEOUT_S = 10.0
FORMATTERS = {
    "kafka.tools.DefaultMessageFormatter",
    "org.apache.kafka.tools.consumer.DefaultMessageFormatter",
    "DefaultMessageFormatter",
}
NOOP_FORMATTERS = {
    "kafka.tools.NoOpMessageFormatter",
    "org.apache.kafka.tools.consumer.NoOpMessageFormatter",
    "NoOpMessageFormatter",
}



def record_headers(msg: Message) -> list[tuple[str, bytes | None]] | None:
    """A record's headers as the formatter prints them (librdkafka gives a list of (name, bytes) pairs)."""
    raw = msg.headers()
    if not raw:
        return None
    pairs = raw.items() if isinstance(raw, dict) else raw
    return [(k, v.encode() if isinstance(v, str) else v) for k, v in pairs]

def parse_offset(text: str) -> int:
    """--offset: 'earliest', 'latest' or a non-negative number -> a librdkafka start offset."""
    lowered = text.strip().lower()
    if lowered == "earliest":
        return OFFSET_BEGINNING
    if lowered == "latest":
        return OFFSET_END
    try:
        value = int(lowered)
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(
            f"The provided offset value '{text}' is incorrect. Valid values are 'earliest', 'latest', "
            "or a non-negative long."
        )
    return value


def build_consumer_config(
    bootstrap: str,
    file_props: dict[str, str],
    cli_props: dict[str, str],
    group: str | None,
    from_beginning: bool,
    isolation_level: str | None,
) -> tuple[dict[str, Any], bool]:
    """ConsoleConsumer's rules: --consumer.config < --consumer-property < flags; without a group the tool
    invents `console-consumer-<n>` and turns auto-commit off. Returns (config, group_was_given)."""
    props: dict[str, Any] = {**file_props, **cli_props}
    if group is not None:
        if "group.id" in props and props["group.id"] != group:
            raise UsageError(
                f"Option [group] is specified in two places: --group {group} and group.id={props['group.id']}"
            )
        props["group.id"] = group
    user_group = "group.id" in props
    if not user_group:
        props["group.id"] = f"console-consumer-{random.randint(0, 99999)}"
        props.setdefault("enable.auto.commit", "false")
    reset = props.get("auto.offset.reset")
    if from_beginning:
        if reset is not None and reset != "earliest":
            raise UsageError(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}'")
        props["auto.offset.reset"] = "earliest"
    else:
        props.setdefault("auto.offset.reset", "latest")
    if isolation_level is not None:
        props["isolation.level"] = isolation_level
    # Like the Java consumer (allow.auto.create.topics=true), asking for a missing topic may create it.
    props.setdefault("allow.auto.create.topics", "true")
    # Offsets are stored only for records actually printed, so --max-messages commits what was shown.
    props["enable.auto.offset.store"] = "false"
    props["bootstrap.servers"] = bootstrap
    props.setdefault("client.id", "console-consumer")
    props.setdefault("log_level", "0")
    return translate({k: str(v) for k, v in props.items()}), user_group


class _Stop:
    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True


def _topic_partitions(consumer: Consumer, topic: str) -> list[int]:
    """The topic's partitions, letting the broker auto-create it if it may; UsageError if it is missing."""
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while True:
        try:
            md = consumer.list_topics(topic=topic, timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise ConnectionError(f"Could not fetch metadata: {exc.args[0].str()}") from None
        tmd = md.topics.get(topic)
        err = tmd.error if tmd is not None else None
        if tmd is not None and (err is None or err.code() == KafkaError.NO_ERROR) and tmd.partitions:
            return sorted(tmd.partitions)
        if time.monotonic() >= deadline or (err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise UsageError(f"Topic {topic} does not exist")
        time.sleep(0.2)  # just auto-created: leaders are being elected


@app.command("console-consumer", cls=KafkaStyleCommand)
def console_consumer(
    topic: Annotated[str | None, typer.Option("--topic", help="The topic to consume from")] = None,
    include: Annotated[
        str | None, typer.Option("--include", "--whitelist", help="Regular expression of topics to consume")
    ] = None,
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", help="The broker(s) to connect to, host:port,...")
    ] = None,
    zookeeper: Annotated[
        str | None,
        typer.Option("--zookeeper", help="Old-style: find the brokers through ZooKeeper (host:port/chroot)"),
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", help="Consume only this partition (no group)")
    ] = None,
    offset: Annotated[
        str | None, typer.Option("--offset", help="With --partition: earliest, latest (default) or an offset")
    ] = None,
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the earliest record when there is no committed offset")
    ] = False,
    group: Annotated[str | None, typer.Option("--group", help="Consumer group id")] = None,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", help="Exit after this many records")
    ] = None,
    timeout_ms: Annotated[
        int | None, typer.Option("--timeout-ms", help="Exit when no record arrives for this long")
    ] = None,
    prop: Annotated[
        list[str] | None,
        typer.Option(
            "--property",
            help="Formatter property: print.timestamp, print.key, print.offset, print.partition, print.headers, "
            "print.value, key.separator, line.separator, headers.separator, null.literal",
        ),
    ] = None,
    formatter: Annotated[
        str | None, typer.Option("--formatter", help="Only Kafka's DefaultMessageFormatter/NoOpMessageFormatter")
    ] = None,
    formatter_config: Annotated[
        str | None, typer.Option("--formatter-config", help="Formatter properties file (--property wins)")
    ] = None,
    consumer_property: Annotated[
        list[str] | None, typer.Option("--consumer-property", help="Consumer config key=value (repeatable)")
    ] = None,
    consumer_config: Annotated[
        str | None, typer.Option("--consumer.config", help="Consumer config .properties file")
    ] = None,
    isolation_level: Annotated[
        str | None, typer.Option("--isolation-level", help="read_uncommitted (default) or read_committed")
    ] = None,
    skip_message_on_error: Annotated[
        bool, typer.Option("--skip-message-on-error", help="Accepted for compatibility")
    ] = False,
) -> None:
    """Read records from a topic and print them to standard output (kafka-console-consumer.sh)."""
    del skip_message_on_error  # records are printed as raw bytes, so there is nothing to fail on
    try:
        if bool(topic) == bool(include):
            raise UsageError("Exactly one of --include/--topic is required.")
        if include:
            try:
                include_list(include)
            except re.error as exc:
                raise UsageError(f"Invalid --include regular expression '{include}': {exc}") from None
        if zookeeper and not bootstrap_server:
            bootstrap_server = bootstrap_from_zookeeper(zookeeper)
        validate_bootstrap(bootstrap_server)
        assert bootstrap_server is not None
        if partition is not None:
            if not topic:
                raise UsageError("The topic is required when partition is specified.")
            if from_beginning and offset is not None:
                raise UsageError("Options from-beginning and offset cannot be specified together.")
        elif offset is not None:
            raise UsageError("The partition is required when offset is specified.")
        start = parse_offset(offset) if offset is not None else (OFFSET_BEGINNING if from_beginning else OFFSET_END)
        if partition is not None and partition < 0:
            raise UsageError(f"Invalid --partition {partition}: must be >= 0")
        if max_messages is not None and max_messages < 0:
            raise UsageError("--max-messages must be >= 0")
        if isolation_level not in (None, "read_uncommitted", "read_committed"):
            raise UsageError(f"Invalid --isolation-level '{isolation_level}'")
        noop = formatter in NOOP_FORMATTERS
        if formatter is not None and formatter not in FORMATTERS and not noop:
            raise UsageError(f"Formatter {formatter} is not supported; use DefaultMessageFormatter")
        fmt = DefaultMessageFormatter.from_properties(merged_properties(formatter_config, prop, "--property"))
        file_props = load_properties(consumer_config) if consumer_config else {}
        cli_props = parse_key_values(consumer_property, "--consumer-property")
        conf, user_group = build_consumer_config(
            bootstrap_server, file_props, cli_props, group, from_beginning, isolation_level
        )
    except UsageError as exc:
        fail(str(exc))
    except AdminError as exc:
        fail(f"ERROR {exc}")

    watch = ConsumerWatch(bootstrap_server)
    conf["error_cb"] = watch.on_error
    try:
        check_reachable(bootstrap_server)
        consumer = build_client(Consumer, conf)
    except ConnectionError as exc:
        fail(f"ERROR {exc}")
    except ClientConfigError as exc:
        fail(f"ERROR Invalid consumer configuration: {exc}")

    try:
        if topic:
            _note_auto_creation(consumer, topic, watch)
        if partition is not None:
            assert topic is not None
            parts = _topic_partitions(consumer, topic)
            if partition not in parts:
                raise UsageError(f"Partition {partition} of topic {topic} does not exist (it has {len(parts)})")
            consumer.assign([TopicPartition(topic, partition, start)])
        elif user_group:
            if topic:
                _topic_partitions(consumer, topic)
                consumer.subscribe([topic])
            else:
                assert include is not None
                consumer.subscribe(["^" + include.strip().replace(",", "|")])
        else:
            # A throw-away group with auto-commit off owns every partition anyway; assigning them directly
            # gives the same records without waiting for a group rebalance.
            names = [topic] if topic else _matching_topics(consumer, include or "")
            consumer.assign(
                [TopicPartition(n, p, start) for n in names for p in _topic_partitions(consumer, n)]
            )
    except (UsageError, ConnectionError) as exc:
        consumer.close()
        fail(f"ERROR {exc}")

    count = _run(consumer, fmt, noop, max_messages, timeout_ms, store_offsets=user_group, watch=watch)
    warn(f"Processed a total of {count} messages")


def _note_auto_creation(consumer: Consumer, topic: str, watch: ConsumerWatch) -> None:
    """A metadata request for every topic creates none; if `topic` is not among them, asking for it by name
    next is what creates it (auto.create.topics.enable), and the watch says so if it stays empty."""
    try:
        md = consumer.list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        raise ConnectionError(f"Could not fetch metadata: {exc.args[0].str()}") from None
    if topic not in md.topics:
        watch.topic_auto_created(topic, sorted(n for n in md.topics if not is_internal(n)))


def _matching_topics(consumer: Consumer, pattern: str) -> list[str]:
    try:
        md = consumer.list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        raise ConnectionError(f"Could not fetch metadata: {exc.args[0].str()}") from None
    regex = include_list(pattern)
    names = sorted(n for n in md.topics if regex.fullmatch(n) and not is_internal(n))  # exclude.internal.topics
    if not names:
        raise UsageError(f"No topic matches --include '{pattern}'")
    return names


def _run(
    consumer: Consumer,
    fmt: DefaultMessageFormatter,
    noop: bool,
    max_messages: int | None,
    timeout_ms: int | None,
    store_offsets: bool,
    watch: ConsumerWatch,
) -> int:
    # Ctrl-C and SIGTERM only raise a flag, checked between records, so the count printed at the end is
    # exactly the number of records written (a KeyboardInterrupt could land between a write and its count).
    stop = _Stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if sys.stdout is None:  # started with stdout closed (`1>&-`): nowhere to write, as after a closed pipe
        warn("Unable to write to standard out, closing consumer.")
        with contextlib.suppress(KafkaException, RuntimeError):
            consumer.close()
        return 0
    out = sys.stdout.buffer
    value_only = fmt.value_only and not noop
    null, line_end = fmt.null_literal, fmt.line_separator
    count = 0
    seen_errors: set[str] = set()
    last_record = time.monotonic()
    try:
        while not stop.requested and (max_messages is None or count < max_messages):
            if timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                break
            wait = POLL_S
            if timeout_ms is not None:
                wait = max(0.0, min(wait, timeout_ms / 1000 - (time.monotonic() - last_record)))
            want = BATCH if max_messages is None else min(BATCH, max_messages - count)
            msgs = consumer.consume(num_messages=want, timeout=wait)
            watch.tick()
            chunks: list[bytes] = []
            last_of_partition: dict[tuple[str, int], Message] = {}
            taken = 0
            for msg in msgs:
                if stop.requested:
                    break
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF and err.str() not in seen_errors:
                        seen_errors.add(err.str())
                        warn(f"WARN {err.str()}")
                    if err.fatal():
                        raise KafkaException(err)
                    continue
                topic_name, partition, offset = msg.topic(), msg.partition(), msg.offset()
                if topic_name is None or partition is None or offset is None:
                    continue  # librdkafka sets all three on every record; only events lack them
                if value_only:
                    value = msg.value()
                    chunks.append((null if value is None else value) + line_end)
                elif not noop:
                    ts_type, ts = msg.timestamp()
                    chunks.append(
                        fmt.format_fields(partition, offset, ts_type, ts, msg.key(), msg.value(), record_headers(msg))
                    )
                last_of_partition[(topic_name, partition)] = msg
                taken += 1
            if taken:
                # One write per batch: stdout may be unbuffered (PYTHONUNBUFFERED), and the count and the
                # committed offsets must only cover records that reached the output.
                if chunks:
                    out.write(b"".join(chunks))
                    out.flush()
                count += taken
                watch.received()
                if store_offsets:
                    for msg in last_of_partition.values():
                        consumer.store_offsets(message=msg)
                last_record = time.monotonic()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        warn("Unable to write to standard out, closing consumer.")
    except KafkaException as exc:
        warn(f"ERROR Error processing message, terminating consumer process: {exc.args[0].str()}")
    finally:
        with contextlib.suppress(KafkaException, RuntimeError):
            consumer.close()
    return count
