"""Errors as HTTP answers: one JSON shape, {"error": code, "detail": text} (with `turn_id` where an error ended a
turn) — except on the OpenAI-compatible routes, where clients expect OpenAI's {"error": {"message", "type", "param",
"code"}}; the handlers that give every failure that shape, and the shapes as the OpenAPI document shows them."""

import logging
import re
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.db import DATABASE_FAILURES, failure_as_error
from app.errors import DatabaseUnreachable, EngramError, error_body, format_validation

log = logging.getLogger("engram.errors")
# Routes that answer errors in OpenAI's shape (app/api/openai_compat.py).
OPENAI_SHAPED_PATHS = ("/v1/chat/completions", "/v1/models")


class ErrorBody(BaseModel):
    error: str
    detail: str


class TurnErrorBody(ErrorBody):
    turn_id: uuid.UUID = Field(description="the turn that failed; the user's message is stored with it")


JSON_MEDIA_TYPE = re.compile(r"application/([\w.-]+\+)?json\s*(;|$)", re.IGNORECASE)
SEND_JSON = "send a JSON object with the header Content-Type: application/json"


def _invalid_request(request: Request, errors: list[Any]) -> JSONResponse:
    """A 422 naming each invalid field; a body that is not JSON, or not sent as JSON, says what to send instead."""
    if any(err.get("loc", ())[:1] == ("body",) for err in errors):
        if not JSON_MEDIA_TYPE.match(request.headers.get("content-type", "")):
            return _respond(request, 415, error_body("unsupported_media_type", f"the body was not sent as JSON: {SEND_JSON}"))
        for err in errors:
            if err.get("type") == "json_invalid":
                where = f"at character {err['loc'][-1]}: " if len(err["loc"]) > 1 else ""
                reason = err.get("ctx", {}).get("error", "JSON decode error")
                return _respond(
                    request, 422, error_body("invalid_request", f"the body is not valid JSON ({where}{reason}); {SEND_JSON}")
                )
    return _respond(request, 422, error_body("invalid_request", format_validation(errors)))


def _not_utf8(failure: UnicodeDecodeError) -> str:
    """A body that is not UTF-8 is not JSON (RFC 8259): a 422 as for any body that is not JSON, naming the byte."""
    byte = failure.object[failure.start : failure.start + 1].hex()
    return f"the body is not valid UTF-8 (byte 0x{byte} at offset {failure.start}: {failure.reason}); JSON is sent in UTF-8"


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


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(EngramError)
    async def _engram(request: Request, exc: EngramError) -> JSONResponse:
        return _respond(request, exc.status_code, exc.body(), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _invalid_request(request, list(exc.errors()))

    async def _database(request: Request, exc: Exception) -> JSONResponse:
        error = failure_as_error(exc)
        if error is None:
            log.error("database error", exc_info=exc)
            return _respond(request, 500, error_body("internal_error", "the request failed on a database error"))
        if isinstance(error, DatabaseUnreachable):
            log.warning("database unavailable: %s", type(exc).__name__)
        return _respond(request, error.status_code, error.body(), error.headers)

    for failure in DATABASE_FAILURES:
        app.add_exception_handler(failure, _database)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc)
        return _respond(request, 500, error_body("internal_error", "an unexpected error occurred; it has been logged"))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.__cause__, UnicodeDecodeError):  # FastAPI's 400 "There was an error parsing the body"
            return _respond(request, 422, error_body("invalid_request", _not_utf8(exc.__cause__)))
        codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
        code = codes.get(exc.status_code, "http_error")
        return _respond(request, exc.status_code, error_body(code, str(exc.detail)), exc.headers)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "A body that could not be read (e.g. JSON nested too deeply)"},
    401: {"model": ErrorBody, "description": "Missing, invalid or revoked API key"},
    403: {
        "model": ErrorBody,
        "description": "The key may not do this (or: no keys configured and the client is not on loopback)",
    },
    404: {"model": ErrorBody, "description": "Unknown id (or another tenant's)"},
    409: {"model": ErrorBody, "description": "A concurrent request changed the same thing (or the agent is busy)"},
    413: {"model": ErrorBody, "description": "Request body over ENGRAM_MAX_REQUEST_BYTES"},
    415: {"model": ErrorBody, "description": "A body not sent as JSON (Content-Type: application/json)"},
    422: {"model": ErrorBody, "description": "Invalid input, or a body that is not valid JSON (or not UTF-8)"},
    429: {"model": ErrorBody, "description": "A quota is used up (see Retry-After and the X-RateLimit-* headers)"},
    503: {"model": ErrorBody, "description": "The database is unreachable, or this replica is shutting down (see Retry-After)"},
}

# What a chat turn's route answers beyond ERROR_RESPONSES, whichever protocol it speaks (Engram's, Letta's).
TURN_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "Another turn of this agent is running (see Retry-After)"},
    502: {"model": TurnErrorBody, "description": "The LLM failed; the user's message is kept with the turn `turn_id`"},
    503: {"model": ErrorBody, "description": "No LLM configured, or the database is unavailable"},
}
