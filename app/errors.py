"""The errors every layer raises: one base, each kind with the HTTP status and code it answers with (the API turns
them into JSON bodies: app/api/errors.py), and the one wording of pydantic's validation errors."""

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

DATABASE_RETRY_AFTER_SECONDS = 5


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
        return error_body(self.code, self.detail) | ({"turn_id": str(self.turn_id)} if self.turn_id else {})


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


def error_body(code: str, detail: str) -> dict[str, str]:
    """Engram's error shape."""
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
