"""A tiny HTTP/1.1 server on the broker's event loop, shared by ``/metrics`` (server/metrics.py)
and the web console (server/console/).

One request per connection (``Connection: close``): the head is read with a size limit and a
timeout, a body only when ``Content-Length`` says so and it fits ``max_body`` (else 413 without
reading it), then the handler's answer is written and the socket closed. No threads, no
framework: both users serve a person or a scraper, not a load.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from .listeners import bind_sockets, bracket

log = logging.getLogger(__name__)

REASONS = {200: "OK", 303: "See Other", 304: "Not Modified", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large",
           500: "Internal Server Error", 503: "Service Unavailable"}
HEAD_LIMIT = 16384  # request line and headers
HEAD_TIMEOUT_S = 10.0
TEXT = "text/plain; charset=utf-8"
DRAIN_LIMIT = 64 << 20  # a body over the limit but under this is read and dropped before the 413


async def _drain(reader: asyncio.StreamReader, length: int) -> None:
    while length > 0:
        chunk = await reader.read(min(length, 1 << 16))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", length)
        length -= len(chunk)


@dataclass
class HttpRequest:
    method: str
    target: str
    path: str  # percent-decoded
    query: dict[str, str]  # the last value of each name
    headers: dict[str, str]  # lower-case names
    body: bytes = b""
    peer: str = ""  # the client's address, no port

    def form(self) -> dict[str, str]:
        """An ``application/x-www-form-urlencoded`` body (UTF-8; undecodable bytes replaced)."""
        return dict(parse_qsl(self.body.decode("utf-8", "replace"), keep_blank_values=True))

    def form_strict(self) -> dict[str, str]:
        """The form, refusing what is not UTF-8 (UnicodeDecodeError) rather than replacing it."""
        return dict(parse_qsl(self.body.decode("ascii"), keep_blank_values=True, encoding="utf-8", errors="strict"))


@dataclass
class HttpResponse:
    status: int
    content_type: str = TEXT
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]] | None:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            return None
        headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], headers


class HttpServer:
    """Serves ``handler`` on ``host:port`` (port 0 picks a free one; ``port`` is the bound one after start)."""

    def __init__(self, handler: Handler, host: str, port: int, *, name: str = "http", methods: tuple[str, ...] = ("GET", "HEAD"),
                 max_body: int = 0) -> None:
        self.handler = handler
        self.host = host
        self.port = port
        self.name = name
        self.methods = methods
        self.max_body = max_body
        self._servers: list[asyncio.base_events.Server] = []

    @property
    def url(self) -> str:
        return f"http://{bracket(self.host or '0.0.0.0')}:{self.port}"

    async def start(self) -> None:
        socks = bind_sockets(self.host, self.port)
        try:
            for s in socks:
                self._servers.append(await asyncio.start_server(self._handle, sock=s, limit=HEAD_LIMIT))
        except BaseException:
            for s in socks:
                s.close()
            raise
        self.port = socks[0].getsockname()[1]

    async def stop(self) -> None:
        for s in self._servers:
            s.close()
        for s in self._servers:
            try:
                await asyncio.wait_for(s.wait_closed(), 1)
            except (TimeoutError, Exception):
                pass
        self._servers.clear()

    async def _read_request(self, reader: asyncio.StreamReader, peer: str) -> HttpRequest | HttpResponse | None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT_S):  # no task per request, as wait_for makes
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return HttpResponse(400, body=b"request head too large\n")
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return None
        parsed = _parse_head(head)
        if parsed is None:
            return HttpResponse(400, body=b"bad request\n")
        method, target, headers = parsed
        if method not in self.methods:
            return HttpResponse(405, body=b"method not allowed\n", headers=[("Allow", ", ".join(self.methods))])
        body = b""
        length_text = headers.get("content-length", "0") or "0"
        if not length_text.isdigit() or "transfer-encoding" in headers:
            return HttpResponse(400, body=b"a body needs a Content-Length\n")
        length = int(length_text)
        if length > self.max_body:
            if self.max_body and length <= DRAIN_LIMIT:  # read and drop it, so the client gets to read the answer
                try:
                    async with asyncio.timeout(HEAD_TIMEOUT_S):
                        await _drain(reader, length)
                except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                    return None
            return HttpResponse(413, body=f"request body of {length} bytes is over this endpoint's limit of {self.max_body} bytes; nothing was done\n".encode())
        if length:
            try:
                async with asyncio.timeout(HEAD_TIMEOUT_S):
                    body = await reader.readexactly(length)
            except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                return None
        split = urlsplit(target)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        return HttpRequest(method, target, unquote(split.path), query, headers, body, peer)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            peername = writer.get_extra_info("peername")
            peer = str(peername[0]) if peername else ""
            req = await self._read_request(reader, peer)
            if req is None:
                return
            if isinstance(req, HttpResponse):
                resp, method = req, "GET"
            else:
                method = req.method
                try:
                    resp = await self.handler(req)
                except Exception:
                    log.exception("%s: %s %s failed", self.name, req.method, req.target)
                    resp = HttpResponse(500, body=b"internal error (logged)\n")
            extra = "".join(f"{k}: {v}\r\n" for k, v in resp.headers)
            head_out = (
                f"HTTP/1.1 {resp.status} {REASONS.get(resp.status, '')}\r\nContent-Type: {resp.content_type}\r\n"
                f"Content-Length: {len(resp.body)}\r\n{extra}Connection: close\r\n\r\n"
            ).encode("latin-1")
            writer.write(head_out if method == "HEAD" else head_out + resp.body)
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        except Exception:
            log.exception("%s endpoint failed", self.name)
        finally:
            writer.close()
