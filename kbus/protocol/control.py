"""Control records (Kafka's ``EndTransactionMarker``): the COMMIT/ABORT markers a transaction coordinator writes.

A control batch has the control and transactional attribute bits, one record, no compression. Its key is
version (int16, 0) + type (int16: 0 ABORT, 1 COMMIT); its value is version (int16, 0) + coordinator epoch (int32).
Pure functions on bytes: the log and the WriteTxnMarkers handler both use them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kbus.protocol import record_batch as rb

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_TYPE_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT"}


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    control_type: int  # ABORT or COMMIT
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ABORT


def build_marker_batch(
    producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int, *, timestamp_ms: int | None = None
) -> bytes:
    key = _KEY.pack(0, COMMIT if committed else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    return rb.build_batch(
        [(key, value)], producer_id=producer_id, producer_epoch=producer_epoch, timestamp_ms=timestamp_ms,
        is_transactional=True, is_control=True,
    )


def parse_marker(batch: bytes | bytearray | memoryview) -> EndTxnMarker | None:
    """The marker of a control batch (``batch`` starts at the batch's base offset); None when its record is not
    a transaction marker Kafka knows (a newer control type is skipped, as Kafka's consumers do)."""
    header = rb.read_header(batch)
    records = rb.decode_records(batch, header)
    if not records or records[0].key is None or len(records[0].key) < _KEY.size:
        return None
    _version, control_type = _KEY.unpack_from(records[0].key)
    if control_type not in (ABORT, COMMIT):
        return None
    epoch = -1
    value = records[0].value
    if value is not None and len(value) >= _VALUE.size:
        epoch = _VALUE.unpack_from(value)[1]
    return EndTxnMarker(control_type, epoch)
