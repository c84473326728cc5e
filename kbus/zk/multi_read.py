"""ZooKeeper's multiRead (opcode 22, ZooKeeper 3.6+): many getData in one request and one reply, for kazoo, which
does not have it. A broker's reconciliation re-reads every partition state (zk_view); one getData each through
kazoo cost ~70-140 µs of CPU per partition (a request object, an AsyncResult, a wait and a wake-up, the selects and
reads of kazoo's connection thread), a multiRead of 1,000 costs one of each. ZooKeeper sets no watch for a read
inside a multiRead (its MultiOperationRecord keeps only the path), so it is for finding what changed: what did is
read again the ordinary way, with a watch.

Wire format (ZooKeeper's MultiOperationRecord / MultiResponse): per operation a MultiHeader (type, done=false,
err=-1) and a GetDataRequest (path, watch); a closing MultiHeader (-1, true, -1). The reply: per operation a
MultiHeader (type, false, err) and a GetDataResponse (data, stat) for type 4, an ErrorResponse (err) for type -1;
the same closing header.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.serialization import stat_struct, write_string

MULTI_READ = 22
GET_DATA = 4
ERROR = -1
_HEADER = struct.Struct("!i?i")
_INT = struct.Struct("!i")
_MZXID = struct.Struct("!q")  # a Stat's second field (czxid, mzxid, ctime, mtime, version, ...)


def _serialize(paths: tuple[str, ...]) -> bytes:
    """getData of every path (already chroot-prefixed) in one multiRead request."""
    b = bytearray()
    for path in paths:
        b += _HEADER.pack(GET_DATA, False, -1)
        b += write_string(path)
        b.append(0)  # watch: ignored by ZooKeeper inside a multiRead
    b += _HEADER.pack(-1, True, -1)
    return bytes(b)


class MultiReadZxids(NamedTuple):
    """A kazoo request (kazoo calls `serialize`, and `deserialize` on its connection thread): a multiRead whose reply
    is, per path, the zxid of the znode's last write (its mzxid), or the exception ZooKeeper reported for that path
    (NoNodeError for a missing znode; one failed read does not fail the others). The data is skipped and no
    ZnodeStat is built. It is serialized once, when made, so the reconciliation that peeks at the same 10,000 states
    every few seconds reuses it (kazoo's connection thread serialized every path again)."""

    payload: bytes
    size: int  # the paths it names
    type: int = MULTI_READ

    @classmethod
    def of(cls, paths: tuple[str, ...]) -> MultiReadZxids:
        return cls(_serialize(paths), len(paths))

    def serialize(self) -> bytes:
        return self.payload

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[int | Exception]:
        out: list[int | Exception] = []
        while True:
            kind, done, _err = _HEADER.unpack_from(buf, offset)
            offset += _HEADER.size
            if done:
                return out
            if kind == GET_DATA:
                length = _INT.unpack_from(buf, offset)[0]  # -1: no data
                offset += _INT.size + max(length, 0)
                out.append(_MZXID.unpack_from(buf, offset + 8)[0])
                offset += stat_struct.size
            elif kind == ERROR:
                code = _INT.unpack_from(buf, offset)[0]
                offset += _INT.size
                out.append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"multiRead reply: unexpected operation type {kind}")
