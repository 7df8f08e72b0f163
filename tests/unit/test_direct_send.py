"""server/direct_send.py over a real socket pair: order, partial sends, closes mid-answer."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from pathlib import Path

import pytest
from kafka_sidecar.server.direct_send import has_slice, send_parts
from kafka_sidecar.storage.log_segment import FileSlice


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _reader(sock: socket.socket, out: bytearray, delay_every: int = 0) -> threading.Thread:
    """Reads until EOF in a thread, slowly at first when ``delay_every`` is set."""

    def run() -> None:
        n = 0
        while chunk := sock.recv(8192):
            out.extend(chunk)
            n += 1
            if delay_every and n % delay_every == 0 and n < 40:
                threading.Event().wait(0.005)

    t = threading.Thread(target=run)
    t.start()
    return t


async def _writer(sock: socket.socket) -> asyncio.StreamWriter:
    _, writer = await asyncio.open_connection(sock=sock)
    return writer


def test_parts_go_out_in_order_after_the_transport_buffer(tmp_path: Path) -> None:
    data = os.urandom(3 << 20)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 10)  # many partial sends
    received = bytearray()
    before = _open_fds()

    async def main() -> None:
        writer = await _writer(a)
        early = b"E" * (1 << 20)
        writer.write(early)  # more than the socket takes: part of it waits in the transport
        parts = [b"head", FileSlice(fd, path, 100, 2 << 20), b"", FileSlice(fd, path, 5, 0), b"mid",
                 FileSlice(fd, path, (2 << 20) + 100, 1000), b"tail"]
        assert has_slice(parts)
        t = _reader(b, received, delay_every=3)
        await send_parts(writer.transport, writer.drain, parts)
        writer.close()
        await writer.wait_closed()
        await asyncio.to_thread(t.join, 10)
        assert bytes(received) == early + b"head" + data[100:100 + (2 << 20)] + b"mid" + data[(2 << 20) + 100:(2 << 20) + 1100] + b"tail"

    asyncio.run(main())
    os.close(fd)
    b.close()
    assert _open_fds() == before - 3  # fd, a and b closed: every duplicated descriptor was closed too


def test_a_slice_past_the_end_of_the_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "short.log"
    path.write_bytes(b"x" * 1000)
    fd = os.open(path, os.O_RDONLY)
    a, b = socket.socketpair()

    async def main() -> None:
        writer = await _writer(a)
        with pytest.raises(ConnectionError, match="file shorter"):
            await send_parts(writer.transport, writer.drain, [FileSlice(fd, path, 500, 1000)])
        writer.close()

    asyncio.run(main())
    assert b.recv(2000) == b"x" * 500
    os.close(fd)
    b.close()


def test_connection_closed_mid_answer_ends_the_send(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"y" * (8 << 20))
    fd = os.open(path, os.O_RDONLY)
    a, b = socket.socketpair()  # b never reads: the send waits for writability
    before = _open_fds()

    async def main() -> None:
        writer = await _writer(a)
        asyncio.get_running_loop().call_later(0.2, writer.transport.abort)  # as the idle timer does
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(send_parts(writer.transport, writer.drain, [FileSlice(fd, path, 0, 8 << 20)]), 5)

    asyncio.run(main())
    assert _open_fds() == before - 1  # the socket (closed by abort); the duplicates too
    b.settimeout(5)
    got = 0
    while chunk := b.recv(1 << 16):  # what was in flight, then the end of the stream
        got += len(chunk)
    assert 0 < got < 8 << 20
    os.close(fd)
    b.close()


def test_peer_reset_mid_answer_raises_a_connection_error(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"z" * (8 << 20))
    fd = os.open(path, os.O_RDONLY)
    a, b = socket.socketpair()

    async def main() -> None:
        writer = await _writer(a)
        asyncio.get_running_loop().call_later(0.1, b.close)
        with pytest.raises(OSError):
            await asyncio.wait_for(send_parts(writer.transport, writer.drain, [FileSlice(fd, path, 0, 8 << 20)]), 5)
        writer.close()

    asyncio.run(main())
    os.close(fd)
