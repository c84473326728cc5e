"""`kbus console-producer`: kafka-console-producer.sh — read lines from stdin and produce each as a record."""

from __future__ import annotations

import io
import signal
import sys
import time
from typing import Annotated, Any

import typer
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from kbus.cli.app import app
from kbus.cli.client_config import ClientConfigError, build_client, translate
from kbus.cli.common import (
    KafkaStyleCommand,
    UsageError,
    check_reachable,
    fail,
    load_properties,
    parse_key_values,
    validate_bootstrap,
    warn,
)
from kbus.cli.line_reader import LineMessageReader, LineReaderError
from kbus.common.topics import topic_name_error

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
FLUSH_POLL_S = 0.5
POLL_EVERY = 1000
METADATA_TIMEOUT_S = 10.0


def build_producer_config(
    bootstrap: str,
    file_props: dict[str, str],
    cli_props: dict[str, str],
    explicit: dict[str, Any],
    defaults: dict[str, Any],
) -> dict[str, Any]:
    """Kafka's precedence: --producer.config < --producer-property < options given on the command line;
    an option left at its default only fills a key nobody set (CommandLineUtils.maybeMergeOptions)."""
    conf: dict[str, Any] = {**file_props, **cli_props}
    for key, value in defaults.items():
        conf.setdefault(key, value)
    conf.update(explicit)
    conf["bootstrap.servers"] = bootstrap
    conf.setdefault("client.id", "console-producer")
    return translate({k: str(v) for k, v in conf.items()})


class _Delivery:
    """Reports each failed record the way Kafka's ErrorLoggingCallback does, in one line (the producer is
    configured to report failures only, so successes cost no Python call)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.failed = 0

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.report(msg.key(), msg.value(), err.str())

    def report(self, key: bytes | None, value: bytes | None, error: str) -> None:
        self.failed += 1
        key_desc = "null" if key is None else f"{len(key)} bytes"
        value_desc = "null" if value is None else f"{len(value)} bytes"
        warn(
            f"ERROR Error when sending message to topic {self.topic} with key: {key_desc}, "
            f"value: {value_desc} with error: {error}"
        )


def _check_topic(producer: Producer, topic: str) -> None:
    """Ask for the topic's metadata once (this also lets the broker auto-create it); fail in one line instead
    of letting every record time out when it does not exist."""
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while True:
        try:
            md = producer.list_topics(topic=topic, timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise ConnectionError(f"Could not fetch metadata: {exc.args[0].str()}") from None
        tmd = md.topics.get(topic)
        err = tmd.error if tmd is not None else None
        if err is None or err.code() == KafkaError.NO_ERROR:
            return
        if err.code() == KafkaError.LEADER_NOT_AVAILABLE and time.monotonic() < deadline:
            time.sleep(0.2)  # just auto-created: leaders are being elected
            continue
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise UsageError(
                f"Topic {topic} not present in metadata: it does not exist and the broker did not create it "
                "(auto.create.topics.enable=false?)"
            )
        raise UsageError(f"Topic {topic} is not available: {err.str()}")


def _stdin_lines() -> io.TextIOWrapper:
    # Undecodable bytes survive the round trip (surrogateescape) instead of aborting the producer.
    return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape", newline=None)


class _ProducerCommand(KafkaStyleCommand):
    optional_values = {"--compression-codec": "gzip"}  # Kafka: a bare --compression-codec means gzip


@app.command("console-producer", cls=_ProducerCommand)
def console_producer(
    topic: Annotated[str | None, typer.Option("--topic", help="The topic to produce to")] = None,
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", help="The broker(s) to connect to, host:port,...")
    ] = None,
    broker_list: Annotated[
        str | None, typer.Option("--broker-list", help="Deprecated alias of --bootstrap-server")
    ] = None,
    sync: Annotated[bool, typer.Option("--sync", help="Send each record synchronously")] = False,
    compression_codec: Annotated[
        str | None,
        typer.Option("--compression-codec", help="none, gzip (the value when given alone), snappy, lz4 or zstd"),
    ] = None,
    request_required_acks: Annotated[
        str | None, typer.Option("--request-required-acks", help="acks: -1/all (default), 0 or 1")
    ] = None,
    request_timeout_ms: Annotated[
        int | None, typer.Option("--request-timeout-ms", help="request.timeout.ms (default 1500)")
    ] = None,
    timeout: Annotated[
        int | None, typer.Option("--timeout", help="linger.ms: how long to wait to batch records (default 1000)")
    ] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", help="Records per batch")] = None,
    message_send_max_retries: Annotated[
        int | None, typer.Option("--message-send-max-retries", help="retries (default 3)")
    ] = None,
    retry_backoff_ms: Annotated[int | None, typer.Option("--retry-backoff-ms", help="retry.backoff.ms")] = None,
    metadata_expiry_ms: Annotated[int | None, typer.Option("--metadata-expiry-ms", help="metadata.max.age.ms")] = None,
    max_block_ms: Annotated[
        int | None, typer.Option("--max-block-ms", help="Accepted for compatibility; librdkafka does not block")
    ] = None,
    max_memory_bytes: Annotated[
        int | None, typer.Option("--max-memory-bytes", help="Producer buffer size in bytes")
    ] = None,
    max_partition_memory_bytes: Annotated[
        int | None, typer.Option("--max-partition-memory-bytes", help="batch.size in bytes")
    ] = None,
    socket_buffer_size: Annotated[
        int | None, typer.Option("--socket-buffer-size", help="socket.send.buffer.bytes")
    ] = None,
    prop: Annotated[
        list[str] | None,
        typer.Option(
            "--property",
            help="Line reader property: parse.key, key.separator, parse.headers, headers.delimiter, "
            "headers.separator, headers.key.separator, null.marker, ignore.error",
        ),
    ] = None,
    producer_property: Annotated[
        list[str] | None, typer.Option("--producer-property", help="Producer config key=value (repeatable)")
    ] = None,
    producer_config: Annotated[
        str | None, typer.Option("--producer.config", help="Producer config .properties file")
    ] = None,
) -> None:
    """Read lines from standard input and publish them to a topic (kafka-console-producer.sh)."""
    del max_block_ms  # accepted so Kafka command lines keep working
    bootstrap = bootstrap_server or broker_list
    try:
        if not topic:
            raise UsageError('Missing required argument "[topic]"')
        validate_bootstrap(bootstrap)
        assert bootstrap is not None
        problem = topic_name_error(topic)
        if problem:
            raise UsageError(problem)
        if compression_codec is not None and compression_codec not in CODECS:
            raise UsageError(f"Invalid --compression-codec '{compression_codec}': expected one of {', '.join(CODECS)}")
        acks = request_required_acks
        if acks is not None and acks not in ("-1", "0", "1", "all"):
            raise UsageError(f"Invalid --request-required-acks '{acks}': expected -1, all, 0 or 1")
        reader = LineMessageReader.from_properties(parse_key_values(prop, "--property"))
        file_props = load_properties(producer_config) if producer_config else {}
        cli_props = parse_key_values(producer_property, "--producer-property")
    except (UsageError, LineReaderError) as exc:
        fail(str(exc))

    given = {
        "acks": request_required_acks,
        "request.timeout.ms": request_timeout_ms,
        "linger.ms": timeout,
        "batch.num.messages": batch_size,
        "retries": message_send_max_retries,
        "retry.backoff.ms": retry_backoff_ms,
        "metadata.max.age.ms": metadata_expiry_ms,
        "queue.buffering.max.kbytes": max(1, max_memory_bytes // 1024) if max_memory_bytes else None,
        "batch.size": max_partition_memory_bytes,
        "socket.send.buffer.bytes": socket_buffer_size,
        "compression.type": compression_codec,
    }
    explicit = {k: v for k, v in given.items() if v is not None}
    defaults: dict[str, Any] = {
        "acks": "-1",
        "request.timeout.ms": 1500,
        "linger.ms": 1000,
        "retries": 3,
        "retry.backoff.ms": 100,
        "compression.type": "none",
        # Kafka's tool waits up to delivery.timeout.ms (2 min); a CLI should give up sooner on a dead broker.
        "message.timeout.ms": 30000,
        "log_level": 0,
    }
    explicit["delivery.report.only.error"] = True
    conf = build_producer_config(bootstrap, file_props, cli_props, explicit, defaults)
    try:
        check_reachable(bootstrap)
        producer = build_client(Producer, conf)
        _check_topic(producer, topic)
    except (ConnectionError, UsageError) as exc:
        fail(f"ERROR {exc}")
    except ClientConfigError as exc:
        fail(f"ERROR Invalid producer configuration: {exc}")

    raise typer.Exit(_run(producer, topic, reader, sync))


def _run(producer: Producer, topic: str, reader: LineMessageReader, sync: bool) -> int:
    delivery = _Delivery(topic)
    prompt = sys.stdin.isatty()
    interrupted = False

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    exit_code = 0
    try:
        lines = _stdin_lines()
        while True:
            if prompt:
                sys.stdout.write(">")
                sys.stdout.flush()
            line = lines.readline()
            if not line:
                break
            try:
                rec = reader.read(line.rstrip("\n"))
            except LineReaderError as exc:
                warn(f"ERROR {exc}")
                exit_code = 1
                break
            while True:
                try:
                    headers: list[tuple[str, str | bytes | None]] | None = list(rec.headers) if rec.headers else None
                    producer.produce(topic, value=rec.value, key=rec.key, headers=headers, on_delivery=delivery)
                    break
                except BufferError:
                    producer.poll(0.1)  # local queue full: let deliveries drain
                except KafkaException as exc:
                    # Refused before sending (e.g. larger than message.max.bytes): reported like a failed send.
                    delivery.report(rec.key, rec.value, exc.args[0].str())
                    break
            if sync:
                producer.flush()
            elif reader.line_number % POLL_EVERY == 0:
                producer.poll(0)  # serve delivery reports now and then, not once per line
    except KeyboardInterrupt:
        interrupted = True
    # Like the Java tool's shutdown hook: whatever was read is delivered (or reported) before exiting.
    try:
        while len(producer) > 0:
            if producer.flush(FLUSH_POLL_S) == 0:
                break
    except KeyboardInterrupt:
        warn(f"ERROR {len(producer)} records were not delivered (interrupted)")
        return 130
    if delivery.failed:
        return 1
    if interrupted:
        return 130
    return exit_code
