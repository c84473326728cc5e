"""kafka-console-consumer's DefaultMessageFormatter: which fields of a record to print, in Kafka's fixed order
(timestamp, partition, offset, headers, key, value), with its separators and null literal."""

from __future__ import annotations

from dataclasses import dataclass

# confluent-kafka's timestamp types (TIMESTAMP_NOT_AVAILABLE, CREATE_TIME, LOG_APPEND_TIME) -> Kafka's names.
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2
_TIMESTAMP_NAMES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


@dataclass(frozen=True)
class ConsumedRecord:
    partition: int
    offset: int
    timestamp_type: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None = None


def _bool(value: str) -> bool:
    return value.strip().lower() == "true"


@dataclass
class DefaultMessageFormatter:
    print_timestamp: bool = False
    print_key: bool = False
    print_value: bool = True
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> DefaultMessageFormatter:
        f = cls()
        for flag in ("timestamp", "key", "value", "partition", "offset", "headers"):
            if f"print.{flag}" in props:
                setattr(f, f"print_{flag}", _bool(props[f"print.{flag}"]))
        for name in ("key.separator", "line.separator", "headers.separator", "null.literal"):
            if name in props:
                setattr(f, name.replace(".", "_"), props[name].encode("utf-8"))
        return f

    @property
    def value_only(self) -> bool:
        """The default: just the value, so callers can skip gathering the other fields."""
        return self.print_value and not (
            self.print_timestamp or self.print_partition or self.print_offset or self.print_headers or self.print_key
        )

    def format(self, r: ConsumedRecord) -> bytes:
        """One record as the bytes Kafka's formatter writes (line separator included when the value is)."""
        return self.format_fields(r.partition, r.offset, r.timestamp_type, r.timestamp, r.key, r.value, r.headers)

    def format_fields(
        self,
        partition: int,
        offset: int,
        timestamp_type: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            name = _TIMESTAMP_NAMES.get(timestamp_type)
            fields.append(f"{name}:{timestamp}".encode() if name else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(b"Partition:%d" % partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % offset)
        if self.print_headers:
            if headers:
                fields.append(
                    self.headers_separator.join(
                        k.encode("utf-8") + b":" + (self.null_literal if v is None else v) for k, v in headers
                    )
                )
            else:
                fields.append(b"NO_HEADERS")
        if self.print_key:
            fields.append(self.null_literal if key is None else key)
        if self.print_value:
            fields.append(self.null_literal if value is None else value)
        if not fields:
            return b""
        # Fields are joined by key.separator; the last one ends the record with line.separator.
        return self.key_separator.join(fields) + self.line_separator
