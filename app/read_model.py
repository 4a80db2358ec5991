"""The base of every model the API returns for a table row: `Model.of(row, **computed)` is the one way from a row to
it. Fields are read from the row's attributes of the same name (a `validation_alias` names a column called
otherwise); `computed` gives the values that are not columns (a search score, a document's history), validated
like the rest."""

from typing import Any, Self

from pydantic import BaseModel, ConfigDict


class ReadModel(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    @classmethod
    def of(cls, row: object, **computed: Any) -> Self:
        return cls.model_validate(_Overlay(row, computed) if computed else row)


class _Overlay:
    """A row seen with some attributes given or replaced."""

    def __init__(self, row: object, values: dict[str, Any]):
        self._row, self._values = row, values

    def __getattr__(self, name: str) -> Any:
        return self._values[name] if name in self._values else getattr(self._row, name)
