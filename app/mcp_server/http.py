"""The MCP server over streamable HTTP at `/mcp`, on the service, behind the API's keys."""

import logging
from contextlib import AbstractAsyncContextManager

from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from app.api.deps import authenticate_connection, count_request
from app.auth.principal import Forbidden, require_tenant
from app.mcp_server.server import build_server
from app.mcp_server.tools import Caller
from app.runtime import runtime

CALLER_KEY = "engram.mcp.caller"  # where McpEndpoint leaves the authenticated caller in the ASGI scope

# The SDK logs each stateless request ("Terminating session: None") at INFO; Engram's access log has them already.
for _name in ("mcp.server.streamable_http", "mcp.server.streamable_http_manager"):
    logging.getLogger(_name).setLevel(logging.WARNING)

# While no API key exists, Engram serves any loopback client without one, which is what a DNS-rebinding page (a site
# whose name now resolves to 127.0.0.1, run in the user's browser) would exploit. So in that mode only a loopback Host
# (and Origin, when a browser sends one) is accepted. Once keys exist the key is the protection (a browser holds no
# Engram key, and a cross-site page cannot send one), and the service may sit behind any host name or proxy: no check.
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_LOOPBACK_ONLY = TransportSecurityMiddleware(
    TransportSecuritySettings(
        allowed_hosts=[host + port for host in _LOOPBACK for port in ("", ":*")],
        allowed_origins=[f"{scheme}://{host}{port}" for scheme in ("http", "https") for host in _LOOPBACK for port in ("", ":*")],
    )
)


def _caller_of_request(ctx: Context) -> Caller:
    request = ctx.request_context.request
    caller = request.scope.get(CALLER_KEY) if isinstance(request, Request) else None
    if not isinstance(caller, Caller):  # cannot happen: McpEndpoint authenticates every request before the SDK runs
        raise RuntimeError("an MCP request reached a tool without an authenticated caller")
    return caller


class McpEndpoint:
    """The ASGI app at `/mcp`: authenticates the request as every route does (an Engram error response, 401/403,
    before MCP runs), then hands it to the SDK's streamable HTTP session manager. `running()` must be entered in the
    application's lifespan: a mounted app's own lifespan never runs."""

    def __init__(self) -> None:
        self.server = build_server(_caller_of_request)
        # The SDK builds its session manager with its app; only the manager is used. Host checks: see _LOOPBACK_ONLY
        # (the SDK's own would allow only localhost names whenever it runs on 127.0.0.1, whatever the keys).
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.sessions = self.server.session_manager

    def running(self) -> AbstractAsyncContextManager[None]:
        return self.sessions.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        state = runtime(request.app)
        principal = require_tenant(await authenticate_connection(request))
        if not await state.authenticator.keys_configured() and await _LOOPBACK_ONLY.validate_request(request) is not None:
            raise Forbidden("without API keys, /mcp answers only requests addressed to a loopback host (127.0.0.1, localhost)")
        await count_request(request, principal)
        scope[CALLER_KEY] = Caller(state, principal)
        await self.sessions.handle_request(scope, receive, send)
