"""`kbus console-share-consumer`: kafka-console-share-consumer.sh — read a topic as a member of a share group
(KIP-932, librdkafka's share consumer) and print the records as Kafka's DefaultMessageFormatter does. Records are
accepted as they are printed; `--release` releases them (they are delivered again) and `--reject` rejects them."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from typing import Annotated

import typer
from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

from kbus.cli.app import app
from kbus.cli.client_config import ClientConfigError, build_client
from kbus.cli.common import UsageError, check_reachable, fail, merged_properties, validate_bootstrap, warn
from kbus.cli.console_consumer import record_headers
from kbus.cli.formatter import DefaultMessageFormatter

POLL_S = 0.5
DEFAULT_GROUP = "console-share-consumer"  # Kafka's ConsoleShareConsumerOptions default


@app.command("console-share-consumer")
def console_share_consumer(
    topic: Annotated[str | None, typer.Option("--topic", help="The topic to consume from")] = None,
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", help="The broker(s) to connect to, host:port,...")
    ] = None,
    group: Annotated[str, typer.Option("--group", help="The share group id of the consumer")] = DEFAULT_GROUP,
    max_messages: Annotated[int | None, typer.Option("--max-messages", help="Exit after this many records")] = None,
    timeout_ms: Annotated[
        int | None, typer.Option("--timeout-ms", help="Exit when no record arrives for this long")
    ] = None,
    reject: Annotated[bool, typer.Option("--reject", help="Reject the records as they are consumed")] = False,
    release: Annotated[bool, typer.Option("--release", help="Release the records as they are consumed")] = False,
    formatter_property: Annotated[
        list[str] | None, typer.Option("--formatter-property", "--property", help="Formatter key=value")
    ] = None,
    formatter_config: Annotated[
        str | None, typer.Option("--formatter-config", help="Formatter properties file")
    ] = None,
    command_property: Annotated[
        list[str] | None, typer.Option("--command-property", "--consumer-property", help="Consumer key=value")
    ] = None,
    command_config: Annotated[
        str | None, typer.Option("--command-config", "--consumer-config", help="Consumer .properties file")
    ] = None,
) -> None:
    """Read records as a share group member and print them (kafka-console-share-consumer.sh)."""
    try:
        if not topic:
            raise UsageError("The topic is required.")
        if reject and release:
            raise UsageError("Option reject and release cannot be set together.")
        if max_messages is not None and max_messages < 0:
            raise UsageError("--max-messages must be >= 0")
        validate_bootstrap(bootstrap_server)
        assert bootstrap_server is not None
        fmt = DefaultMessageFormatter.from_properties(
            merged_properties(formatter_config, formatter_property, "--formatter-property"))
        conf: dict[str, object] = {
            **merged_properties(command_config, command_property, "--command-property"),
            "bootstrap.servers": bootstrap_server,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
        check_reachable(bootstrap_server)
        consumer = build_client(ShareConsumer, conf)
    except UsageError as exc:
        fail(str(exc))
    except ConnectionError as exc:
        fail(f"ERROR {exc}")
    except ClientConfigError as exc:
        fail(f"ERROR Invalid consumer configuration: {exc}")
    ack = AcknowledgeType.REJECT if reject else AcknowledgeType.RELEASE if release else AcknowledgeType.ACCEPT
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    count = 0
    out = sys.stdout.buffer
    last = time.monotonic()
    try:
        consumer.subscribe([topic])
        while not stopping and (max_messages is None or count < max_messages):
            got = False
            for msg in consumer.poll(POLL_S):
                if msg.error() is not None:
                    warn(f"ERROR {msg.error()}")
                    continue
                if max_messages is not None and count >= max_messages:
                    consumer.acknowledge(msg, AcknowledgeType.RELEASE)  # not printed: another member gets it
                    continue
                got = True
                ts_type, ts = msg.timestamp()
                out.write(fmt.format_fields(msg.partition() or 0, msg.offset() or 0, ts_type, ts, msg.key(),
                                            msg.value(), record_headers(msg)))
                consumer.acknowledge(msg, ack)
                count += 1
            out.flush()
            consumer.commit_async()
            if got:
                last = time.monotonic()
            elif timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
                break
    except KafkaException as exc:
        warn(f"ERROR {exc}")
    finally:
        with contextlib.suppress(KafkaException, RuntimeError):
            consumer.close()  # commits what is acknowledged and leaves the group
    warn(f"Processed a total of {count} messages")

