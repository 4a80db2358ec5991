"""The bases of request bodies. Every one refuses text holding a NUL character, which PostgreSQL cannot store (422
naming the field, before anything is stored); Engram's own also refuse a field the API does not know (422 naming it)
rather than dropping it."""

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

NUL = "\x00"


def nul_at(value: Any) -> str | None:
    """Where within a value (a string, or JSON-like lists and objects) a NUL character is, as a dotted path ("" for
    the value itself), or None. A nested StorableBody has checked its own fields (and named them). Walked with a stack
    of its own: a document nested a thousand deep is refused by its NUL, not by Python's recursion limit."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return ".".join(path)
            continue
        entries: Iterable[tuple[Any, Any]] = ()
        if isinstance(item, Mapping):
            entries = item.items()
        elif isinstance(item, list | tuple):
            entries = enumerate(item)
        elif isinstance(item, BaseModel) and not isinstance(item, StorableBody):
            entries = item  # (field, value) pairs
        children = []
        for key, child in entries:
            if isinstance(key, str) and NUL in key:
                return ".".join((*path, repr(key)))
            children.append(((*path, str(key)), child))
        stack.extend(reversed(children))
    return None


NUL_REFUSED = "must not contain a NUL character (\\u0000)"


class StorableBody(BaseModel):
    """A body whose text can be stored: a NUL character in any field is refused."""

    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: Any, info: ValidationInfo) -> Any:
        if (where := nul_at(value)) is not None:
            within = f"; {info.field_name}.{where} does" if where else ""
            raise PydanticCustomError("nul_character", NUL_REFUSED + "{within}", {"within": within})
        return value


class RequestBody(StorableBody):
    model_config = ConfigDict(extra="forbid")
