"""Zero copy for plaintext connections: record bytes go from the segment file to the socket with sendfile(2).

The asyncio transport (uvloop) has no sendfile, and it owns the polling of its socket. So when a `SplicedFrame`
is written, this writer takes over: it waits until the transport's own buffer is empty, then sends the frame's
bytes (os.writev) and regions (os.sendfile) itself on a dup of the socket, polled with add_writer when the socket
is full, and keeps every later frame behind them so responses stay in order. Once its queue is empty it hands
writing back to the transport. Kafka does the same with FileRecords.writeTo on a non-blocking channel.

Bytes with a region right behind them (a response's head, a partition's header) go with MSG_MORE: the socket has
TCP_NODELAY, so a plain write of them is a packet of its own, which the consumer wakes up for to read a few dozen
bytes; with MSG_MORE the kernel holds them for the region's first packet (sendfile pushes at the end of each call).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections import deque
from collections.abc import Callable

from kbus.protocol.splice import FileRegion, OutFrame, SplicedFrame
from kbus.server.util.metrics import METRICS

_IOV_MAX = 64


def _all_bytes(frames: list[OutFrame]) -> bool:
    for frame in frames:  # noqa: SIM110 - a loop, not all() over a generator: this runs for every response
        if type(frame) is not bytes:
            return False
    return True


class SendfileWriter:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.Transport,
        on_drained: Callable[[], None],
        on_error: Callable[[OSError], None],
    ) -> None:
        self._loop = loop
        self._transport = transport
        self._on_drained = on_drained
        self._on_error = on_error
        self._sock: socket.socket | None = None  # a dup of the connection's socket, made at the first spliced frame
        self._fd = -1  # its descriptor
        self._unreported = 0  # bytes sent by sendfile, added to kbus_sendfile_bytes_total once the queue drains
        self._queue: deque[memoryview | FileRegion] = deque()
        self._polling = False
        self._closed = False

    @property
    def stalled(self) -> bool:
        """Frames are waiting for the socket: the connection should not produce more until `on_drained`."""
        return bool(self._queue)

    def write(self, frames: list[OutFrame]) -> None:
        if self._closed or not frames:
            return
        if not self._queue and _all_bytes(frames):
            self._transport.writelines(frames)  # type: ignore[arg-type]  # all bytes, checked above
            return
        for frame in frames:
            if isinstance(frame, SplicedFrame):
                self._queue.extend(memoryview(p) if isinstance(p, bytes) else p for p in frame.parts)
            else:
                self._queue.append(memoryview(frame))
        if self._sock is None:
            sock = socket.socket(fileno=os.dup(self._transport.get_extra_info("socket").fileno()))
            sock.setblocking(False)  # timeout 0: the object never waits on it (a default timeout would make it)
            self._sock = sock
            self._fd = sock.fileno()
        self._send()

    def _send(self) -> None:
        if self._closed:
            return
        if self._transport.get_write_buffer_size() > 0:
            self._poll()  # what the transport still holds goes first
            return
        queue = self._queue
        sock = self._sock
        assert sock is not None  # made by write() before the first call
        try:
            while queue:
                part = queue[0]
                if isinstance(part, FileRegion):
                    sent = os.sendfile(self._fd, part.fd, part.position, part.size)
                    if sent == 0:
                        raise OSError(f"segment file ended {part.size} bytes early")
                    self._unreported += sent
                    if sent < part.size:
                        queue[0] = FileRegion(part.fd, part.position + sent, part.size - sent)
                        self._poll()
                        return
                    queue.popleft()
                else:
                    iov: list[memoryview] = []
                    for p in queue:
                        if isinstance(p, FileRegion) or len(iov) == _IOV_MAX:
                            break
                        iov.append(p)
                    # a region (or more bytes) follows at once: MSG_MORE, these bytes go in its first packet
                    more = len(iov) < len(queue)
                    sent = sock.sendmsg(iov, (), socket.MSG_MORE) if more else os.writev(self._fd, iov)
                    while sent and queue:
                        head = queue[0]
                        assert isinstance(head, memoryview)
                        if sent >= len(head):
                            sent -= len(head)
                            queue.popleft()
                        else:
                            queue[0] = head[sent:]
                            sent = 0
                            self._poll()
                            return
        except BlockingIOError:
            self._poll()
            return
        except OSError as exc:
            self.close()
            self._on_error(exc)
            return
        self._report()
        if self._polling:  # called back by the loop: the connection was stalled on us
            self._polling = False
            self._loop.remove_writer(self._fd)
            self._on_drained()

    def _poll(self) -> None:
        if not self._polling:
            self._polling = True
            self._loop.add_writer(self._fd, self._send)

    def _report(self) -> None:
        if self._unreported:
            METRICS.inc("kbus_sendfile_bytes_total", self._unreported)
            self._unreported = 0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.clear()
        self._report()
        if self._sock is not None:
            if self._polling:
                self._loop.remove_writer(self._fd)
            self._sock.close()
            self._sock = None
            self._fd = -1
