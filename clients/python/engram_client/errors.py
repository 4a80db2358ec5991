"""Engram's errors as types: each HTTP status the API answers with its own class, all of them `EngramError`."""

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from uuid import UUID

import httpx


class EngramError(Exception):
    """An answer that is not a success: `status`, Engram's error `code` (`not_found`, `agent_busy`…), its
    `message`, and the `request_id` the server logged it under (X-Request-ID)."""

    def __init__(self, status: int, code: str, message: str, *, request_id: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id


class AuthenticationError(EngramError):
    """401: no API key, or one that is invalid or revoked."""


class PermissionDenied(EngramError):
    """403: the key may not do this (the admin key on an agent, a read-only block)."""


class NotFound(EngramError):
    """404: no such agent, passage, message, turn or job (or another tenant's)."""


class Conflict(EngramError):
    """409: the name is taken, the passage superseded already, the agent busy with another turn…"""


class PreconditionFailed(EngramError):
    """412: `if_match` named a version that is no longer current (or the block exists, creating it)."""


class PayloadTooLarge(EngramError):
    """413: over a size limit (a batch over 500 passages or 50,000 characters: use `archival.import_file`)."""


class InvalidRequest(EngramError):
    """422: invalid input; the message names the field and what is wrong with it."""


class LLMError(EngramError):
    """502: the LLM failed the turn `turn_id`; the user's message is stored with it."""

    def __init__(self, status: int, code: str, message: str, *, request_id: str | None = None, turn_id: UUID | None) -> None:
        super().__init__(status, code, message, request_id=request_id)
        self.turn_id = turn_id


class _Transient(EngramError):
    def __init__(self, status: int, code: str, message: str, *, request_id: str | None = None, retry_after: float | None) -> None:
        super().__init__(status, code, message, request_id=request_id)
        self.retry_after = retry_after  # seconds to wait, as the answer's Retry-After said (None: it said nothing)


class RateLimited(_Transient):
    """429: a quota is used up; `retry_after` says for how long."""


class ServiceUnavailable(_Transient):
    """503: no LLM configured (for chat), the database unreachable, or the replica shutting down."""


class EngramConnectionError(EngramError):
    """Engram could not be reached, or the connection failed before an answer came (status 0)."""

    def __init__(self, cause: httpx.TransportError) -> None:
        super().__init__(0, "connection_error", f"{type(cause).__name__}: {cause}")


BY_STATUS: dict[int, type[EngramError]] = {
    401: AuthenticationError,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    413: PayloadTooLarge,
    422: InvalidRequest,
}


def engram_body(response: httpx.Response) -> dict[str, Any] | None:
    """Engram's error body, `{"error": code, "detail": text}`, or None when the answer is not one (a proxy's)."""
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) and isinstance(body.get("error"), str) and "detail" in body else None


def retry_after(response: httpx.Response) -> float | None:
    """The answer's Retry-After in seconds (it may also be an HTTP date), or None."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def error_from(response: httpx.Response) -> EngramError:
    """The error an answer that is not a success stands for."""
    body = engram_body(response)
    code = body["error"] if body else "http_error"
    message = str(body["detail"]) if body else (response.text[:500] or response.reason_phrase)
    status, request_id = response.status_code, response.headers.get("x-request-id")
    if status in (429, 503):
        kind = RateLimited if status == 429 else ServiceUnavailable
        return kind(status, code, message, request_id=request_id, retry_after=retry_after(response))
    if status == 502:
        turn = body.get("turn_id") if body else None
        return LLMError(status, code, message, request_id=request_id, turn_id=UUID(turn) if turn else None)
    return BY_STATUS.get(status, EngramError)(status, code, message, request_id=request_id)
