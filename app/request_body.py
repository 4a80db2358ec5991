"""The base of every request body: a field the API does not know is refused (422 naming it), never dropped."""

from pydantic import BaseModel, ConfigDict


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
