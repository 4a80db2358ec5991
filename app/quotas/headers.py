"""The caller's quota standing as response headers (see service.py): added as the response starts, so after the
route has counted, whatever it answers (its 429 included)."""

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Where the request's Meter waits in the ASGI scope's state (set by app/api/deps.count_request).
METER_STATE_KEY = "quota_meter"


class QuotaHeadersMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})  # the dict that request.state reads and writes

        async def send_with_quota(message: Message) -> None:
            if message["type"] == "http.response.start" and (meter := state.get(METER_STATE_KEY)) is not None:
                extra = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in meter.headers().items()]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_quota)
