"""`kbus dump-log`: kafka-dump-log.sh — print the batches (and records) of .log segments and the entries of
.index / .timeindex / .txnindex files, in Kafka's DumpLogSegments format."""

from __future__ import annotations

import mmap
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TextIO

import typer

from kbus.cli.app import app
from kbus.cli.common import KafkaStyleCommand, fail
from kbus.protocol.control import CONTROL_TYPE_NAMES, parse_marker
from kbus.protocol.record_batch import (
    COMPRESSION_NAMES,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    decode_records,
    iter_complete_batches,
)
from kbus.server.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
RECORD_INDENT = "|"


def _base_offset(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError:
        return 0


@contextmanager
def _mapped(path: Path) -> Iterator[bytes | mmap.mmap]:
    with path.open("rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            yield m


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def dump_segment(path: Path, out: TextIO, print_data: bool, deep: bool) -> None:
    out.write(f"Log starting offset: {_base_offset(path)}\n")
    with _mapped(path) as buf:
        valid_bytes = 0
        for h in iter_complete_batches(buf):
            ts_type = "LogAppendTime" if h.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND else "CreateTime"
            horizon = f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"
            out.write(
                f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
                f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
                f"deleteHorizonMs: {horizon} position: {valid_bytes} {ts_type}: {h.max_timestamp} "
                f"size: {h.batch_length + LOG_OVERHEAD} magic: {h.magic} "
                f"compresscodec: {COMPRESSION_NAMES.get(h.compression, str(h.compression))} crc: {h.crc} "
                f"isvalid: {str(h.is_valid(buf)).lower()}\n"
            )
            if deep or print_data:
                try:
                    records = decode_records(buf, h)
                except (CorruptRecordError, ValueError):
                    records = []
                for r in records:
                    line = (
                        f"{RECORD_INDENT} offset: {r.offset} {ts_type}: {r.timestamp} "
                        f"keySize: {-1 if r.key is None else len(r.key)} "
                        f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {r.sequence} "
                        f"headerKeys: [{','.join(k for k, _ in r.headers)}]"
                    )
                    if h.is_control:
                        line += _control_text(buf, h)
                    elif print_data and r.value is not None:
                        if r.key is not None:
                            line += f" key: {_text(r.key)}"
                        line += f" payload: {_text(r.value)}"
                    out.write(line + "\n")
            valid_bytes = h.end_position
        trailing = len(buf) - valid_bytes
        if trailing > 0:
            magic = buf[valid_bytes + MAGIC_OFFSET] if trailing > MAGIC_OFFSET else None
            if magic is not None and magic != MAGIC_V2 and valid_bytes == 0:
                out.write(f"Unsupported message format version (magic {magic}); kbus reads magic 2 only\n")
            out.write(f"Found {trailing} invalid bytes at the end of {path.name}\n")


def _control_text(buf: Buffer, h: BatchHeader) -> str:
    """What Kafka prints for a control record: the transaction marker's type and coordinator epoch."""
    try:
        marker = parse_marker(memoryview(buf)[h.position : h.position + h.size])
    except ValueError:
        marker = None
    if marker is None:
        return " controlType: UNKNOWN"
    return f" endTxnMarker: {CONTROL_TYPE_NAMES[marker.control_type]} coordinatorEpoch: {marker.coordinator_epoch}"


def dump_txn_index(path: Path, out: TextIO) -> None:
    for e in TransactionIndex(path).entries:
        out.write(f"version: 0 producerId: {e.producer_id} firstOffset: {e.first_offset} lastOffset: "
                  f"{e.last_offset} lastStableOffset: {e.last_stable_offset}\n")


def dump_offset_index(path: Path, out: TextIO) -> None:
    base = _base_offset(path)
    with _mapped(path) as buf:
        for i in range(len(buf) // _INDEX_ENTRY.size):
            rel, position = _INDEX_ENTRY.unpack_from(buf, i * _INDEX_ENTRY.size)
            # Indexes are preallocated and zero filled: a zero entry after the first ends the data.
            if rel == 0 and i > 0:
                break
            out.write(f"offset: {base + rel} position: {position}\n")


def dump_time_index(path: Path, out: TextIO) -> None:
    base = _base_offset(path)
    with _mapped(path) as buf:
        for i in range(len(buf) // _TIME_INDEX_ENTRY.size):
            ts, rel = _TIME_INDEX_ENTRY.unpack_from(buf, i * _TIME_INDEX_ENTRY.size)
            if ts == 0 and rel == 0 and i > 0:
                break
            out.write(f"timestamp: {ts} offset: {base + rel}\n")


@app.command("dump-log", cls=KafkaStyleCommand)
def dump_log(
    files: Annotated[
        str | None, typer.Option("--files", help="Comma-separated .log, .index, .timeindex and .txnindex files")
    ] = None,
    print_data_log: Annotated[
        bool, typer.Option("--print-data-log", help="Print each record's key and payload")
    ] = False,
    deep_iteration: Annotated[
        bool, typer.Option("--deep-iteration", help="Print each record's metadata (implied by --print-data-log)")
    ] = False,
) -> None:
    """Dump log segments and their indexes (kafka-dump-log.sh)."""
    if not files:
        fail('Missing required argument "[files]"')
    paths = [Path(f.strip()) for f in files.split(",") if f.strip()]
    status = 0
    for path in paths:
        print(f"Dumping {path}", flush=True)
        if not path.is_file():
            print(f"ERROR {path}: no such file", file=sys.stderr, flush=True)
            status = 1
            continue
        try:
            if path.suffix == ".log":
                dump_segment(path, sys.stdout, print_data_log, deep_iteration)
            elif path.suffix == ".index":
                dump_offset_index(path, sys.stdout)
            elif path.suffix == TXN_INDEX_SUFFIX:
                dump_txn_index(path, sys.stdout)
            elif path.suffix == ".timeindex":
                dump_time_index(path, sys.stdout)
            else:
                print(f"Ignoring unknown file {path}", file=sys.stderr, flush=True)
        except OSError as exc:
            print(f"ERROR {path}: {exc.strerror or exc}", file=sys.stderr, flush=True)
            status = 1
        except BrokenPipeError:
            raise typer.Exit(0) from None
    raise typer.Exit(status)
