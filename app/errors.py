"""One error base with its HTTP status, one JSON shape: {"error": code, "detail": text}."""

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("engram.errors")
DATABASE_RETRY_AFTER_SECONDS = 5


class ErrorBody(BaseModel):
    error: str
    detail: str


class TurnErrorBody(ErrorBody):
    turn_id: uuid.UUID = Field(description="the turn that failed; the user's message is stored with it")


class EngramError(Exception):
    status_code = 400
    code = "bad_request"
    headers: dict[str, str] | None = None

    def __init__(self, detail: str, *, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.detail = detail
        if headers:
            self.headers = headers

    def body(self) -> dict[str, str]:
        return _body(self.code, self.detail)


class NotFound(EngramError):
    status_code = 404
    code = "not_found"


class Conflict(EngramError):
    status_code = 409
    code = "conflict"


class PreconditionFailed(EngramError):
    status_code = 412
    code = "precondition_failed"


class Unprocessable(EngramError):
    status_code = 422
    code = "invalid_request"


class ServiceUnavailable(EngramError):
    status_code = 503
    code = "service_unavailable"


class DatabaseUnreachable(ServiceUnavailable):
    code = "database_unavailable"
    headers = {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)}


class LLMError(EngramError):
    """The LLM endpoint failed (after the SDK's retries) or answered with nothing usable. Inside a turn it ends the
    turn with `llm_error`; `turn_id` is set once the turn it ended is known."""

    status_code = 502
    code = "llm_error"

    def __init__(self, detail: str, *, turn_id: uuid.UUID | None = None):
        super().__init__(detail)
        self.turn_id = turn_id

    def body(self) -> dict[str, str]:
        return super().body() | ({"turn_id": str(self.turn_id)} if self.turn_id else {})


def _body(code: str, detail: str) -> dict[str, str]:
    return {"error": code, "detail": detail}


def _format_validation(errors: list[Any]) -> str:
    parts = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return "; ".join(parts) or "invalid request"


# SQLSTATE class 08 (connection exception), and a server shutting down or starting up.
_UNAVAILABLE_STATES = ("08", "57P01", "57P02", "57P03")


def database_unreachable(exc: DBAPIError) -> bool:
    state = str(getattr(exc.orig, "sqlstate", "") or "")
    return (
        exc.connection_invalidated
        or isinstance(exc, (OperationalError, InterfaceError))
        or any(state.startswith(prefix) for prefix in _UNAVAILABLE_STATES)
    )


def rejected_as_data(exc: DBAPIError) -> bool:
    """SQLSTATE class 22 (data exception): text with NUL characters, out-of-range numbers… — bad input, not a fault."""
    return str(getattr(exc.orig, "sqlstate", "") or "").startswith("22")


def _database_unavailable(exc: BaseException) -> JSONResponse:
    log.warning("database unavailable: %s", type(exc).__name__)
    return JSONResponse(
        _body("database_unavailable", "the database is unreachable; retry shortly"),
        status_code=503,
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(EngramError)
    async def _engram(_: Request, exc: EngramError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(_body("invalid_request", _format_validation(list(exc.errors()))), status_code=422)

    @app.exception_handler(DBAPIError)
    async def _database(_: Request, exc: DBAPIError) -> JSONResponse:
        if rejected_as_data(exc):
            return JSONResponse(_body("invalid_request", f"the input cannot be stored: {exc.orig}"), status_code=422)
        if isinstance(exc, IntegrityError):
            return JSONResponse(_body("conflict", "a concurrent request changed the same thing; retry"), status_code=409)
        if database_unreachable(exc):
            return _database_unavailable(exc)
        log.error("database error", exc_info=exc)
        return JSONResponse(_body("internal_error", "the request failed on a database error"), status_code=500)

    @app.exception_handler(PoolTimeout)
    async def _pool(_: Request, exc: PoolTimeout) -> JSONResponse:
        return _database_unavailable(exc)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc)
        return JSONResponse(_body("internal_error", "an unexpected error occurred; it has been logged"), status_code=500)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(exc.status_code, "http_error")
        return JSONResponse(_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The body is not decodable (e.g. invalid UTF-8)"},
    401: {"model": ErrorBody, "description": "Missing, invalid or revoked API key"},
    403: {
        "model": ErrorBody,
        "description": "The key may not do this (or: no keys configured and the client is not on loopback)",
    },
    404: {"model": ErrorBody, "description": "Unknown id (or another tenant's)"},
    409: {"model": ErrorBody, "description": "A concurrent request changed the same thing (or the agent is busy)"},
    413: {"model": ErrorBody, "description": "Request body over ENGRAM_MAX_REQUEST_BYTES"},
    422: {"model": ErrorBody, "description": "Invalid input"},
    503: {"model": ErrorBody, "description": "The database is unreachable (see Retry-After)"},
}
