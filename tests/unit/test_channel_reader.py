"""ChannelReader (server/connection.py): the transport's protocol feeding KafkaChannel, over real TCP."""

from __future__ import annotations

import asyncio
import socket
import struct

from kafka_sidecar.protocol.connection import (
    ConnectionClosed,
    KafkaChannel,
    NeedData,
    ProtocolError,
    RequestReceived,
)
from kafka_sidecar.server.connection import READ_BUFFER_HIGH, ChannelReader


def _frame(correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", 0, 9, correlation_id, -1) + body
    return struct.pack(">i", len(payload)) + payload


async def _served(handler):
    """A loopback server whose connection handler gets (channel, reader protocol, writer)."""
    done: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        channel = KafkaChannel(100 << 20)
        proto = ChannelReader.install(channel, reader, writer.transport)  # type: ignore[arg-type]
        try:
            done.set_result(await handler(channel, proto, writer))
        except Exception as e:  # noqa: BLE001 - handed to the test
            done.set_exception(e)
        finally:
            writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], done


async def _next(channel: KafkaChannel, proto: ChannelReader):
    while True:
        event = channel.next_event()
        if event.__class__ is not NeedData:
            return event
        await proto.wait()


async def test_pipelined_frames_in_odd_pieces_come_out_in_order_and_answers_go_out() -> None:
    async def handler(channel, proto, writer):
        seen = []
        while True:
            event = await _next(channel, proto)
            if isinstance(event, ConnectionClosed):
                return seen
            assert isinstance(event, RequestReceived)
            seen.append((event.correlation_id, event.frame[10:]))
            channel.send_response([struct.pack(">ii", 4, event.correlation_id)])
            writer.write(struct.pack(">ii", 4, event.correlation_id))
            await writer.drain()

    server, port, done = await _served(handler)
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        data = b"".join(_frame(i, bytes([i]) * i * 100) for i in range(1, 6))
        for start in range(0, len(data), 7):  # pieces that cut size prefixes and bodies
            writer.write(data[start:start + 7])
            await writer.drain()
        answers = [struct.unpack(">ii", await reader.readexactly(8))[1] for _ in range(5)]
        writer.write_eof()
        seen = await asyncio.wait_for(done, 10)
        writer.close()
    assert answers == [1, 2, 3, 4, 5]
    assert seen == [(i, bytes([i]) * i * 100) for i in range(1, 6)]


async def test_reading_pauses_while_the_client_sends_without_being_served() -> None:
    async def handler(channel, proto, writer):
        event = await _next(channel, proto)
        assert isinstance(event, RequestReceived)
        # The request is not answered; the client keeps sending: reads stop at the limit. Each
        # arrival resolves the reader's waiter (set here without proto.wait(), which would resume).
        while not proto.paused:
            proto.waiter = asyncio.get_running_loop().create_future()
            await asyncio.wait_for(proto.waiter, 20)
        proto.waiter = None
        paused_at = channel.buffered
        reading = writer.transport.is_reading()
        channel.send_response([struct.pack(">ii", 4, event.correlation_id)])
        return reading, paused_at

    server, port, done = await _served(handler)
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.transport.set_write_buffer_limits(high=64 << 20)
        writer.write(_frame(1))
        writer.write(_frame(2, b"x" * (8 << 20)))
        reading, paused_at = await asyncio.wait_for(done, 20)
        writer.transport.abort()
    assert not reading
    assert READ_BUFFER_HIGH <= paused_at < READ_BUFFER_HIGH + (4 << 20)


async def test_a_stream_ending_mid_frame_is_a_truncated_frame() -> None:
    async def handler(channel, proto, writer):
        return await _next(channel, proto)

    server, port, done = await _served(handler)
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(1, b"abc")[:-2])
        writer.write_eof()
        event = await asyncio.wait_for(done, 10)
        writer.close()
    assert isinstance(event, ProtocolError) and "truncated frame" in event.reason


async def test_a_reset_connection_raises_as_the_stream_reader_did() -> None:
    arrived = asyncio.Event()

    async def handler(channel, proto, writer):
        received = proto.data_received

        def data_received(data: bytes) -> None:  # tells the client its bytes are in
            received(data)
            arrived.set()

        proto.data_received = data_received
        try:
            await _next(channel, proto)
        except ConnectionError as e:
            return type(e).__name__
        return "no error"

    server, port, done = await _served(handler)
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(1, b"abc")[:6])
        await writer.drain()
        await asyncio.wait_for(arrived.wait(), 10)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # RST
        assert await asyncio.wait_for(done, 10) == "ConnectionResetError"
