"""Fetch answers with record slices, sent with ``os.sendfile`` straight on the socket.

asyncio's ``loop.sendfile`` costs, per slice, a wait for an empty buffer, a file object,
pausing and resuming reading, and several futures; for many large Fetch answers that Python
overhead was a fifth of the broker's CPU (8 consumers: ~20% -> ~13% of a core in user time).
Here an answer's parts are written in order with non-blocking ``os.sendfile``/``os.write``
calls on the event loop, waiting for writability between them.

The order and framing of a connection's bytes are unchanged: the transport's own buffer is
emptied first, then the answer's parts go out in order, and nothing else writes to the
connection meanwhile (one answer at a time; the next request is not read before it is handed
over). The socket and the files are used through duplicated descriptors, so a connection closed
mid-answer (by the client, the idle timer or a shutdown) ends the send with an error and never
writes to a reused descriptor. Sending the slices from worker threads (so the kernel's copy runs
beside the loop) was measured too and did not pay on two cores shared with the clients (the
client needs one core, the loop and the kernel's copy share the other); TLS transports keep
the write fallback (Connection.send).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from typing import Any

from kafka_sidecar.storage.log_segment import FileSlice

# os.sendfile's errors when the file (system) cannot be sent from (asyncio's fallback cases).
_NO_SENDFILE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})
# How often a send waiting for a writable socket looks whether its connection was closed.
CLOSED_POLL_S = 0.25


def has_slice(parts: list[Any]) -> bool:
    """Whether an answer carries record bytes from a segment file."""
    return any(isinstance(p, FileSlice) for p in parts)


class _Cursor:
    """Where an answer's send has got to; ``push`` sends what the socket takes without waiting."""

    def __init__(self, sock_fd: int, parts: list[Any]) -> None:
        self.sock_fd = sock_fd
        self.fds: list[int] = []  # duplicated descriptors, closed by ``close``
        self.items: list[tuple[int, int, int] | memoryview] = []  # (fd, position, size) or bytes
        try:
            for p in parts:
                if isinstance(p, FileSlice):
                    if p.size:
                        fd = os.dup(p.fd)  # the segment file may be closed by its pool meanwhile
                        self.fds.append(fd)
                        self.items.append((fd, p.position, p.size))
                elif len(p):
                    self.items.append(memoryview(p))
        except BaseException:
            self.close()
            raise
        self.index = 0
        self.offset = 0  # bytes of items[index] already sent

    @property
    def done(self) -> bool:
        return self.index >= len(self.items)

    def push(self) -> None:
        """Send until the socket is full or the answer is out (never waits)."""
        while self.index < len(self.items):
            item = self.items[self.index]
            try:
                if isinstance(item, tuple):
                    fd, position, size = item
                    try:
                        n = os.sendfile(self.sock_fd, fd, position + self.offset, size - self.offset)
                    except OSError as e:
                        if e.errno not in _NO_SENDFILE:
                            raise
                        # A file system without sendfile: the rest of the slice is read and written.
                        self.items[self.index] = memoryview(os.pread(fd, size - self.offset, position + self.offset))
                        self.offset = 0
                        continue
                    if n == 0:
                        raise ConnectionError(f"sendfile sent {self.offset} of {size} bytes (file shorter)")
                else:
                    size = len(item)
                    n = os.write(self.sock_fd, item[self.offset:])
            except (BlockingIOError, InterruptedError):
                return
            self.offset += n
            if self.offset >= size:
                self.index += 1
                self.offset = 0

    def close(self) -> None:
        for fd in (self.sock_fd, *self.fds):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


async def _buffer_empty(transport: asyncio.WriteTransport, drain: Any) -> None:
    """Until the transport has written everything it holds (its bytes come before ours)."""
    if not transport.get_write_buffer_size():
        return
    high = transport.get_write_buffer_limits()[1]
    transport.set_write_buffer_limits(high=0, low=0)  # pauses the writer until the buffer is empty
    try:
        await drain()
    finally:
        transport.set_write_buffer_limits(high=high)


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _writable(loop: asyncio.AbstractEventLoop, fd: int, transport: asyncio.BaseTransport) -> None:
    """Until the socket takes more bytes; ConnectionError once the connection is closed."""
    while True:
        if transport.is_closing():
            raise ConnectionResetError("connection closed while an answer was being sent")
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_writer(fd, _set_once, ready)
        try:
            await asyncio.wait((ready,), timeout=CLOSED_POLL_S)
        finally:
            loop.remove_writer(fd)
        if ready.done():
            return


async def send_parts(transport: asyncio.WriteTransport, drain: Any, parts: list[Any]) -> None:
    """Send an answer's parts (bytes and file slices) in order on a plain socket transport.

    ``drain`` is the writer's drain (awaited until the transport's buffer is empty first).
    Raises ConnectionError/OSError if the connection breaks or is closed meanwhile.
    """
    await _buffer_empty(transport, drain)
    if transport.is_closing():
        raise ConnectionResetError("connection closed before an answer was sent")
    sock: socket.socket = transport.get_extra_info("socket")
    cursor = _Cursor(os.dup(sock.fileno()), parts)
    loop = asyncio.get_running_loop()
    try:
        while True:
            cursor.push()
            if cursor.done:
                return
            await _writable(loop, cursor.sock_fd, transport)
    finally:
        cursor.close()
