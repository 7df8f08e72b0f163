"""One console request's context: the broker, who asks (the session), the console's settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..http import HttpRequest, HttpResponse
from .api import ConsoleSession
from .auth import form_token
from .html import Html, esc, page

if TYPE_CHECKING:
    from ..broker import Broker
    from .sampler import ActivitySampler

HTML = "text/html; charset=utf-8"
# No script, nothing from elsewhere, forms only to the console, not framed.
SECURITY_HEADERS = [
    ("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]


@dataclass
class Context:
    broker: Broker
    session: ConsoleSession
    request: HttpRequest
    allow_writes: bool
    secret: bytes
    sampler: ActivitySampler
    started_at: float  # when the console started (time.time()), if the broker does not say

    @property
    def token(self) -> str:
        return form_token(self.secret, self.session.principal)

    def token_field(self) -> Html:
        return Html(f'<input type="hidden" name="token" value="{esc(self.token)}">')

    def html(self, title: str, body: object, *, status: int = 200, active: str = "", refresh: int | None = None) -> HttpResponse:
        principal = self.session.principal if self.session.principal != "User:ANONYMOUS" else None
        return HttpResponse(status, HTML, page(title, body, active=active, principal=principal, refresh=refresh), list(SECURITY_HEADERS))
