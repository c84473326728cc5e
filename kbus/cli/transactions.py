"""`kbus transactions` (kafka-transactions.sh): list, describe, describe-producers, abort, find-hanging.

Same flags and the same output as Kafka's TransactionsCommand: global options before the subcommand, tables
whose cells are padded to the column's width and each followed by a tab, "None" where Kafka prints it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Annotated

import typer

from kbus.admin.errors import AdminError
from kbus.admin.transactions import TransactionsAdmin, hanging_transactions
from kbus.cli.app import HELP_MARKUP, app
from kbus.cli.client_config import translate, wire_security
from kbus.cli.common import UsageError, check_reachable, fail, load_properties

transactions_app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                               rich_markup_mode=HELP_MARKUP,
                               help="List, describe, abort and find hanging transactions (kafka-transactions.sh).")
app.add_typer(transactions_app, name="transactions")

DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15  # find-hanging: Kafka's transaction.max.timeout.ms default


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Kafka's ToolsUtils.prettyPrintTable: every cell left-justified to its column's width, then a tab."""
    cells = [list(header)] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "".join("".join(c.ljust(w) + "\t" for c, w in zip(r, widths, strict=True)) + "\n" for r in cells)


def _none(value: int) -> str:
    return "None" if value < 0 else str(value)


_options: dict[str, str | None] = {}
_state: dict[str, TransactionsAdmin] = {}


def _admin() -> TransactionsAdmin:
    """The admin client, made when a sub-command first needs it (not in the group callback, which click runs before
    the sub-command's own --help)."""
    if "admin" not in _state:
        bootstrap_server, command_config = _options.get("bootstrap_server"), _options.get("command_config")
        try:
            if not bootstrap_server:
                raise UsageError("argument --bootstrap-server is required")
            check_reachable(bootstrap_server)
            props = load_properties(command_config) if command_config else {}
            _state["admin"] = TransactionsAdmin(bootstrap_server, translate(props),
                                                security=wire_security(command_config))
        except UsageError as exc:
            fail(str(exc))
        except (ConnectionError, AdminError) as exc:
            fail(f"Error occurred: {exc}")
    return _state["admin"]


@transactions_app.callback()
def _connect(
    bootstrap_server: Annotated[str | None, typer.Option("--bootstrap-server", help="The broker(s), host:port,...")]
    = None,
    command_config: Annotated[str | None, typer.Option("--command-config", help="Admin client .properties file")]
    = None,
) -> None:
    _options.update(bootstrap_server=bootstrap_server, command_config=command_config)
    _state.clear()


@transactions_app.command("list")
def list_(
    duration_filter: Annotated[int, typer.Option("--duration-filter", help="Only transactions running longer than "
                                                 "this many ms (< 0: all)")] = -1,
) -> None:
    """List the transactions every broker coordinates."""
    try:
        listings = _admin().list_transactions(duration_ms=duration_filter)
    except AdminError as exc:
        fail(f"Failed to list transactions: {exc}")
    print(format_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                       [(t.transactional_id, t.coordinator, t.producer_id, t.state) for t in listings]), end="")


@transactions_app.command("describe")
def describe(
    transactional_id: Annotated[str | None, typer.Option("--transactional-id", help="The transactional id")] = None,
) -> None:
    """Describe one transactional id's current transaction."""
    if not transactional_id:
        fail("argument --transactional-id is required")
    try:
        d = _admin().describe(transactional_id)
    except AdminError as exc:
        fail(f"Failed to describe transaction state of transactional-id `{transactional_id}`: {exc}")
    now = int(time.time() * 1000)
    print(format_table(
        ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
        [(d.coordinator, d.transactional_id, d.producer_id, d.producer_epoch, d.state, d.timeout_ms,
          _none(d.start_time_ms), "None" if d.start_time_ms < 0 else now - d.start_time_ms,
          ",".join(f"{t}-{p}" for t, p in d.partitions))],
    ), end="")


@transactions_app.command("describe-producers")
def describe_producers(
    topic: Annotated[str | None, typer.Option("--topic", help="Topic name")] = None,
    partition: Annotated[int | None, typer.Option("--partition", help="Partition number")] = None,
    broker_id: Annotated[int | None, typer.Option("--broker-id", help="Ask this replica instead of the leader")]
    = None,
) -> None:
    """The active producers of a partition and their open transactions."""
    if topic is None or partition is None:
        fail("arguments --topic and --partition are required")
    try:
        producers = _admin().describe_producers(topic, partition, broker_id)
    except AdminError as exc:
        fail(f"Failed to describe producers for partition {topic}-{partition}: {exc}")
    print(format_table(
        ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
         "CurrentTransactionStartOffset"],
        [(p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence, p.last_timestamp,
          _none(p.current_txn_start_offset)) for p in producers],
    ), end="")


@transactions_app.command("abort")
def abort(
    topic: Annotated[str | None, typer.Option("--topic", help="Topic name")] = None,
    partition: Annotated[int | None, typer.Option("--partition", help="Partition number")] = None,
    start_offset: Annotated[int | None, typer.Option("--start-offset", help="The first offset of the transaction "
                                                     "(from describe-producers or find-hanging)")] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id", help="Producer id (with --start-offset unknown)")]
    = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch", help="Producer epoch")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option("--coordinator-epoch", help="Coordinator epoch")] = None,
) -> None:
    """Abort a hanging transaction by writing an ABORT marker on its partition."""
    if topic is None or partition is None:
        fail("arguments --topic and --partition are required")
    admin = _admin()
    try:
        if start_offset is not None:
            match = [p for p in admin.describe_producers(topic, partition)
                     if p.current_txn_start_offset == start_offset]
            if not match:
                fail(f"Could not find any open transactions starting at offset {start_offset} on partition "
                     f"{topic}-{partition}")
            p = match[0]
            admin.abort(topic, partition, p.producer_id, p.producer_epoch, max(p.coordinator_epoch, 0))
        elif None not in (producer_id, producer_epoch, coordinator_epoch):
            assert producer_id is not None and producer_epoch is not None and coordinator_epoch is not None
            admin.abort(topic, partition, producer_id, producer_epoch, coordinator_epoch)
        else:
            fail("Either --start-offset or all of --producer-id, --producer-epoch and --coordinator-epoch are "
                 "required")
    except AdminError as exc:
        fail(f"Failed to abort transaction on partition {topic}-{partition}: {exc}")


@transactions_app.command("find-hanging")
def find_hanging(
    broker_id: Annotated[int | None, typer.Option("--broker-id", help="Search the partitions this broker hosts")]
    = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Search this topic's partitions")] = None,
    partition: Annotated[int | None, typer.Option("--partition", help="Only this partition of --topic")] = None,
    max_transaction_timeout: Annotated[int, typer.Option("--max-transaction-timeout",
                                                         help="The broker's transaction.max.timeout.ms, in minutes")]
    = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
) -> None:
    """Open transactions older than the maximum timeout that their coordinator no longer knows of."""
    if broker_id is None and topic is None:
        fail("The --broker-id or --topic option is required")
    if partition is not None and topic is None:
        fail("The --partition option requires --topic")
    admin = _admin()
    now = int(time.time() * 1000)
    max_ms = max_transaction_timeout * 60_000
    rows = []
    try:
        if topic is not None:
            partitions = [(topic, partition)] if partition is not None else admin.partitions_of(topic)
        else:
            partitions = admin.partitions_of(broker_id=broker_id)
        for h in hanging_transactions(admin, partitions, max_ms, now, broker_id):
            rows.append((h.topic, h.partition, h.producer_id, h.producer_epoch, h.coordinator_epoch, h.start_offset,
                         h.last_timestamp, (now - h.last_timestamp) // 60_000))
    except AdminError as exc:
        fail(f"Failed to find hanging transactions: {exc}")
    print(format_table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"], rows), end="")

