"""The cursor the hand-written request decoders read with (Fetch, OffsetCommit, Heartbeat), sans I/O.

One place for Kafka's encoding rules those decoders share: int16-length strings and int32 array counts in the
classic versions, compact (unsigned varint + 1) ones in the flexible versions, tagged fields skipped. Every read is
checked against the bytes left, and an array's count against the least its items take, before anything is
allocated; malformed input raises ProtocolError naming the request.
"""

from __future__ import annotations

import struct
from typing import Final

from kbus.protocol.codec import ProtocolError, read_uvarint, skip_tagged_fields

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")


class RequestReader:
    __slots__ = ("buf", "end", "flexible", "name", "pos")

    def __init__(self, buf: bytes, pos: int, flexible: bool, name: str) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.flexible = flexible
        self.name = name

    def error(self, what: str) -> ProtocolError:
        return ProtocolError(f"malformed {self.name}: {what}")

    def i8(self) -> int:
        if self.pos + 1 > self.end:
            raise self.error("truncated")
        (value,) = _I8.unpack_from(self.buf, self.pos)
        self.pos += 1
        return int(value)

    def i32(self) -> int:
        if self.pos + 4 > self.end:
            raise self.error("truncated")
        (value,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def i64(self) -> int:
        if self.pos + 8 > self.end:
            raise self.error("truncated")
        (value,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(value)

    def _length(self) -> int:
        """A string's length; -1 for null."""
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            return n - 1
        if self.pos + 2 > self.end:
            raise self.error("truncated")
        (n,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(n)

    def nullable_string(self) -> str | None:
        n = self._length()
        if n < 0:
            return None
        if self.pos + n > self.end:
            raise self.error("a string runs past the frame")
        try:
            value = self.buf[self.pos : self.pos + n].decode()
        except UnicodeDecodeError as exc:
            raise self.error(str(exc)) from None
        self.pos += n
        return value

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise self.error("a null string where one is required")
        return value

    def count(self, min_item_size: int) -> int:
        """An array's length (a compact one in flexible versions); never more items than bytes left allow."""
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            n -= 1
        else:
            n = self.i32()
        if n < 0:
            raise self.error("a null array where one is required")
        if n * min_item_size > self.end - self.pos:
            raise self.error(f"{n} items claimed, {self.end - self.pos} bytes left")
        return n

    def skip_tagged(self) -> None:
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos, self.name)
