"""Response frames whose record bytes stay in segment files (zero copy), sans I/O.

A Fetch handler does not copy record sets into the response: it puts a placeholder in each partition's `records`
(`RecordSplicer.placeholder`), the response is encoded as usual, then `splice()` cuts the encoded frame at the
placeholders and fixes the length prefixes, giving a `SplicedFrame`: encoded bytes and `FileRegion`s in wire order.
The I/O layer sends the regions with sendfile(2) (Kafka's FileRecords.writeTo / TransferableRecords) or reads them
when it cannot (TLS). The frame's size prefix already counts the regions' bytes.

A placeholder is 16 bytes: an 8-byte nonce drawn once per process plus the region's index. Topic names cannot
contain its bytes and its length prefix is checked too, so finding it in the encoded frame is unambiguous.
"""

from __future__ import annotations

import os
import struct
from typing import Final

_NONCE: Final = b"\xffKB" + os.urandom(5)
_INDEX: Final = struct.Struct(">Q")
_I32: Final = struct.Struct(">i")
PLACEHOLDER_SIZE: Final = 16


class FileRegion:
    """`size` bytes at `position` of the open file `fd` (a log segment). A plain class, not a dataclass: one is
    made per partition of a spliced Fetch, and mypyc compiles a plain class's __init__ (a dataclass's is generated
    Python). Treated as immutable: a partial send makes a new one."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FileRegion)
            and self.fd == other.fd
            and self.position == other.position
            and self.size == other.size
        )

    def __hash__(self) -> int:
        return hash((self.fd, self.position, self.size))

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, position={self.position}, size={self.size})"


class SplicedFrame:
    """One response frame: encoded bytes and file regions, in the order they go on the wire."""

    __slots__ = ("parts",)

    def __init__(self, parts: tuple[bytes | FileRegion, ...]) -> None:
        self.parts = parts

    def __len__(self) -> int:
        return sum(p.size if isinstance(p, FileRegion) else len(p) for p in self.parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SplicedFrame) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"SplicedFrame(parts={self.parts!r})"


OutFrame = bytes | SplicedFrame


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class RecordSplicer:
    """Placeholders for one response; `flexible` is whether its version encodes records as compact bytes."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.regions: list[FileRegion] = []

    def placeholder(self, region: FileRegion) -> bytes:
        self.regions.append(region)
        return _NONCE + _INDEX.pack(len(self.regions) - 1)

    def splice(self, frame: bytes) -> OutFrame:
        """Cut the encoded, size-prefixed `frame` at each placeholder. ValueError if one is missing."""
        if not self.regions:
            return frame
        parts: list[bytes | FileRegion] = []
        start = 4  # the size prefix is rewritten below
        extra = 0
        for i, region in enumerate(self.regions):
            at = frame.find(_NONCE + _INDEX.pack(i), start)
            if self.flexible:  # compact bytes: unsigned varint of length + 1 (17 fits one byte)
                if at < 1 or frame[at - 1] != PLACEHOLDER_SIZE + 1:
                    raise ValueError(f"records placeholder {i} not found in the encoded response")
                head, prefix = frame[start : at - 1], _uvarint(region.size + 1)
            else:
                if at < 4 or _I32.unpack_from(frame, at - 4)[0] != PLACEHOLDER_SIZE:
                    raise ValueError(f"records placeholder {i} not found in the encoded response")
                head, prefix = frame[start : at - 4], _I32.pack(region.size)
            extra += len(prefix) - (1 if self.flexible else 4) + region.size - PLACEHOLDER_SIZE
            parts.append(head + prefix)
            if region.size:
                parts.append(region)
            start = at + PLACEHOLDER_SIZE
        parts.append(frame[start:])
        size = _I32.unpack_from(frame, 0)[0] + extra
        first = parts[0]
        assert isinstance(first, bytes)  # the encoded bytes before the first placeholder
        parts[0] = _I32.pack(size) + first
        return SplicedFrame(tuple(p for p in parts if not (isinstance(p, bytes) and not p)))
