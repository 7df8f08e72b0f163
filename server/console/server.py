"""The console's HTTP side: routes, login, and the security headers of every answer."""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING

from ..http import HttpRequest, HttpResponse, HttpServer
from . import activity, group, home, topic
from .api import ConsoleSession
from .auth import ConsoleAuth, access_error
from .context import SECURITY_HEADERS, Context
from .html import STYLE, notice, page
from .sampler import ActivitySampler

if TYPE_CHECKING:
    from ..broker import Broker

# A form's body: a record's key, value and headers (the broker's own limits apply after this).
MAX_FORM_BYTES = 4 << 20
REALM = 'Basic realm="kafka-sidecar console", charset="UTF-8"'


class ConsoleError(Exception):
    """The console cannot start (bad address, or a broker it cannot log users in to)."""


class ConsoleServer:
    """The web console on ``host:port`` (0: a free port), on the broker's event loop."""

    def __init__(self, broker: Broker, host: str = "127.0.0.1", port: int = 0, *, allow_writes: bool = False) -> None:
        self.broker = broker
        self.allow_writes = allow_writes
        self.auth = ConsoleAuth(broker)
        self.sampler = ActivitySampler(broker)
        self.secret = secrets.token_bytes(32)
        self.started_at = time.time()
        self.http = HttpServer(self._serve, host, port, name="console", methods=("GET", "HEAD", "POST"), max_body=MAX_FORM_BYTES)

    @property
    def port(self) -> int:
        return self.http.port

    @property
    def url(self) -> str:
        return self.http.url + "/"

    async def start(self) -> None:
        problem = access_error(self.broker)
        if problem:
            raise ConsoleError(problem)
        try:
            await self.http.start()
        except OSError as e:
            raise ConsoleError(f"cannot serve the console on {self.http.host}:{self.http.port}: {e.strerror or e}") from None
        self.started_at = time.time()
        self.sampler.start()

    async def stop(self) -> None:
        await self.sampler.stop()
        await self.http.stop()

    async def _serve(self, req: HttpRequest) -> HttpResponse:
        if req.path == "/console.css":
            return HttpResponse(200, "text/css; charset=utf-8", STYLE, [("Cache-Control", "max-age=3600")])
        if req.path == "/favicon.ico":
            return HttpResponse(404, body=b"")
        principal = await self.auth.principal(req.headers.get("authorization"))
        if principal is None:
            return HttpResponse(401, "text/html; charset=utf-8",
                                page("Login needed", notice("log in with a SASL user of this broker (PLAIN or SCRAM)")),
                                [("WWW-Authenticate", REALM), *SECURITY_HEADERS])
        ctx = Context(self.broker, ConsoleSession(principal, req.peer), req, self.allow_writes, self.secret, self.sampler,
                      self.started_at)
        if not self.broker.ready:
            return ctx.html("Starting", [notice(f"the broker is not ready yet: {self.broker.state}", "ok")], status=503, refresh=2)
        if req.method == "POST":
            if req.path in ("/topic/produce", "/topic/delete-records"):
                return await topic.post(ctx, req.path.rsplit("/", 1)[1].split("-")[0])
            return ctx.html("Not found", [notice(f"nothing to post to at {req.path}")], status=404)
        if req.path == "/":
            return await home.render(ctx)
        if req.path == "/topic":
            return await topic.render(ctx)
        if req.path == "/group":
            return await group.render(ctx)
        if req.path == "/activity":
            return await activity.render(ctx)
        return ctx.html("Not found", [notice(f"no page at {req.path}")], status=404)
