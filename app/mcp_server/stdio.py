"""The MCP server over stdio: `engram mcp`."""

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from mcp.server.mcpserver import Context, MCPServer

from app.auth.models import DEFAULT_TENANT_ID
from app.auth.principal import Principal, Unauthorized, require_tenant
from app.mcp_server.server import build_server
from app.mcp_server.tools import Caller
from app.runtime import Runtime

log = logging.getLogger("engram.mcp")


def stdio_mcp_server(started: Callable[[], AbstractAsyncContextManager[Runtime]], key: str | None) -> MCPServer:
    """The server for one local process: `started` brings Engram's runtime up (after the SDK has taken stdout for
    the protocol, so nothing else can write to it) and down. Without a key it acts for the default tenant: whoever
    runs it holds the database already."""

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Caller]:
        async with started() as state:
            principal = await _stdio_principal(state, key)
            log.info("MCP over stdio, acting for tenant %s", principal.tenant_id)
            yield Caller(state, principal)

    return build_server(_caller_of_lifespan, lifespan=lifespan)


def _caller_of_lifespan(ctx: Context) -> Caller:
    caller = ctx.request_context.lifespan_context
    if not isinstance(caller, Caller):  # cannot happen: stdio_mcp_server's lifespan yields the caller
        raise RuntimeError("the MCP server's lifespan gave no caller")
    return caller


async def _stdio_principal(state: Runtime, key: str | None) -> Principal:
    if key is None:
        return Principal(DEFAULT_TENANT_ID)
    if not await state.authenticator.keys_configured():
        raise Unauthorized(
            "no API keys exist in this database, so the key names no tenant: leave it out to act for the default tenant"
        )
    return require_tenant(await state.authenticator.authenticate(key, None))
