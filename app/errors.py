"""One error base with its HTTP status, one JSON shape: {"error": code, "detail": text} — except on the
OpenAI-compatible routes, where clients expect OpenAI's {"error": {"message", "type", "param", "code"}}."""

import logging
import re
import uuid
from collections.abc import Mapping, Sequence
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
# Routes that answer errors in OpenAI's shape (app/api/openai_compat.py).
OPENAI_SHAPED_PATHS = ("/v1/chat/completions", "/v1/models")


class ErrorBody(BaseModel):
    error: str
    detail: str


class TurnErrorBody(ErrorBody):
    turn_id: uuid.UUID = Field(description="the turn that failed; the user's message is stored with it")


class EngramError(Exception):
    status_code = 400
    code = "bad_request"
    headers: dict[str, str] | None = None
    turn_id: uuid.UUID | None = None  # an error that ended a turn names it (TurnErrorBody): the message is stored

    def __init__(self, detail: str, *, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.detail = detail
        if headers:
            self.headers = headers

    def body(self) -> dict[str, str]:
        return _body(self.code, self.detail) | ({"turn_id": str(self.turn_id)} if self.turn_id else {})


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


class PayloadTooLarge(EngramError):
    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaType(EngramError):
    status_code = 415
    code = "unsupported_media_type"


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


class TurnStopped(ServiceUnavailable):
    """A turn stopped by the server shutting down past its grace: the user's message is stored with `turn_id`."""

    code = "turn_stopped"

    def __init__(self, turn_id: uuid.UUID):
        super().__init__(
            "the server stopped this turn while shutting down; your message is saved with the turn: send it again "
            "(or read GET …/turns/{turn_id}) once the service is back",
            headers={"Retry-After": "5"},
        )
        self.turn_id = turn_id


def _body(code: str, detail: str) -> dict[str, str]:
    return {"error": code, "detail": detail}


def format_validation(errors: Sequence[Mapping[str, Any]], *, within: str = "", limit: int | None = None) -> str:
    """The one wording of pydantic's errors: `where: what` each (`turns.3.events.0.type: Field required`), a
    repeated complaint once (a union's branches can repeat one), past `limit` of them how many more. `within`:
    where the validated value sits in a larger document; a request's "body" is not named."""
    parts = []
    for err in errors:
        where = ".".join([*([within] if within else []), *(str(p) for p in err.get("loc", ()) if p != "body")])
        parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    distinct = list(dict.fromkeys(parts))
    shown = distinct[:limit] if limit is not None else distinct
    more = f" (and {len(distinct) - len(shown)} more)" if len(shown) < len(distinct) else ""
    return "; ".join(shown) + more if shown else "invalid request"


JSON_MEDIA_TYPE = re.compile(r"application/([\w.-]+\+)?json\s*(;|$)", re.IGNORECASE)
SEND_JSON = "send a JSON object with the header Content-Type: application/json"


def _invalid_request(request: Request, errors: list[Any]) -> JSONResponse:
    """A 422 naming each invalid field; a body that is not JSON, or not sent as JSON, says what to send instead."""
    if any(err.get("loc", ())[:1] == ("body",) for err in errors):
        if not JSON_MEDIA_TYPE.match(request.headers.get("content-type", "")):
            return _respond(request, 415, _body("unsupported_media_type", f"the body was not sent as JSON: {SEND_JSON}"))
        for err in errors:
            if err.get("type") == "json_invalid":
                where = f"at character {err['loc'][-1]}: " if len(err["loc"]) > 1 else ""
                reason = err.get("ctx", {}).get("error", "JSON decode error")
                return _respond(
                    request, 422, _body("invalid_request", f"the body is not valid JSON ({where}{reason}); {SEND_JSON}")
                )
    return _respond(request, 422, _body("invalid_request", format_validation(errors)))


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


def openai_error(status_code: int, code: str, detail: str) -> dict[str, Any]:
    """OpenAI's error object (what its SDKs parse into `APIError.code` / `.type` / `.message`)."""
    kind = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}.get(status_code)
    kind = kind or ("server_error" if status_code >= 500 else "invalid_request_error")
    return {"error": {"message": detail, "type": kind, "param": None, "code": code}}


def _respond(request: Request, status_code: int, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> JSONResponse:
    return shaped_response(request.url.path, status_code, body, headers)


def shaped_response(path: str, status_code: int, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> JSONResponse:
    """An error body as the route's clients parse it: Engram's `{"error", "detail"}`, or OpenAI's on its routes."""
    if path.startswith(OPENAI_SHAPED_PATHS):
        # OpenAI answers invalid input with 400 (its SDKs raise BadRequestError), not 422.
        status_code = 400 if status_code == 422 else status_code
        body = openai_error(status_code, body["error"], body["detail"])
    return JSONResponse(body, status_code=status_code, headers=headers)


def _database_unavailable(request: Request, exc: BaseException) -> JSONResponse:
    log.warning("database unavailable: %s", type(exc).__name__)
    body = _body("database_unavailable", "the database is unreachable; retry shortly")
    return _respond(request, 503, body, {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)})


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(EngramError)
    async def _engram(request: Request, exc: EngramError) -> JSONResponse:
        return _respond(request, exc.status_code, exc.body(), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _invalid_request(request, list(exc.errors()))

    @app.exception_handler(DBAPIError)
    async def _database(request: Request, exc: DBAPIError) -> JSONResponse:
        if rejected_as_data(exc):
            return _respond(request, 422, _body("invalid_request", f"the input cannot be stored: {exc.orig}"))
        if isinstance(exc, IntegrityError):
            return _respond(request, 409, _body("conflict", "a concurrent request changed the same thing; retry"))
        if database_unreachable(exc):
            return _database_unavailable(request, exc)
        log.error("database error", exc_info=exc)
        return _respond(request, 500, _body("internal_error", "the request failed on a database error"))

    @app.exception_handler(PoolTimeout)
    async def _pool(request: Request, exc: PoolTimeout) -> JSONResponse:
        return _database_unavailable(request, exc)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc)
        return _respond(request, 500, _body("internal_error", "an unexpected error occurred; it has been logged"))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(exc.status_code, "http_error")
        return _respond(request, exc.status_code, _body(code, str(exc.detail)), exc.headers)


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
    415: {"model": ErrorBody, "description": "A body not sent as JSON (Content-Type: application/json)"},
    422: {"model": ErrorBody, "description": "Invalid input, or a body that is not valid JSON"},
    429: {"model": ErrorBody, "description": "A quota is used up (see Retry-After and the X-RateLimit-* headers)"},
    503: {"model": ErrorBody, "description": "The database is unreachable, or this replica is shutting down (see Retry-After)"},
}
