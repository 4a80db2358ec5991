"""Whether what the client sends and reads agrees with openapi.json: JSON schemas compared as a reader and a value.

A reader accepts a value when every form the value may take is one the reader takes: the client reading an answer
must take every form the server documents (a field the server may leave null, every event type); the server must
take every form of what the client sends (a field the client may omit must not be one the server requires, a field
it sends must be one the server has). Reading is also complete: every field of an answer is on the client's model."""

from dataclasses import dataclass
from typing import Any

Schema = dict[str, Any]
FORMATS = {"uuid", "date-time", "date"}


@dataclass(frozen=True)
class Side:
    """One side's schemas: a schema and the definitions its `$ref`s name (by their last path segment)."""

    defs: dict[str, Schema]

    def resolved(self, schema: Schema) -> Schema:
        while "$ref" in schema:
            schema = self.defs[schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    def forms(self, schema: Schema) -> list[Schema]:
        """The alternatives a value of `schema` may take (anyOf and oneOf flattened)."""
        schema = self.resolved(schema)
        for union in ("anyOf", "oneOf"):
            if union in schema:
                return [form for branch in schema[union] for form in self.forms(branch)]
        if isinstance(schema.get("type"), list):
            return [{**schema, "type": kind} for kind in schema["type"]]
        return [schema]


def kind(form: Schema) -> str:
    if "type" in form:
        return str(form["type"])
    if "const" in form or "enum" in form:
        values = [form["const"]] if "const" in form else form["enum"]
        return {str: "string", int: "integer", bool: "boolean"}.get(type(values[0]), "any")
    if "properties" in form or "additionalProperties" in form:
        return "object"
    return "any"


def values(form: Schema) -> set[Any] | None:
    return {form["const"]} if "const" in form else set(form["enum"]) if "enum" in form else None


@dataclass(frozen=True)
class Comparison:
    client: Side
    server: Side
    reading: bool  # True: the client reads what the server sends; False: the server reads what the client sends

    def mismatches(self, client: Schema, server: Schema, where: str) -> list[str]:
        """Where the reader does not take every form of the value, each as `where: what`."""
        client_forms, server_forms = self.client.forms(client), self.server.forms(server)
        if not self.reading:  # a None the client holds is left out of what it sends
            client_forms = [form for form in client_forms if kind(form) != "null"]
        pairs = [(c, s) for s in server_forms for c in client_forms]
        found: list[str] = []
        for value in server_forms if self.reading else client_forms:
            best: list[str] | None = None
            for c, s in pairs:
                if (s if self.reading else c) is value:
                    problems = self._form(c, s, where)
                    if best is None or len(problems) < len(best):
                        best = problems
            found += best if best is not None else [f"{where}: no form that takes {value}"]
        return found

    def _form(self, client: Schema, server: Schema, where: str) -> list[str]:
        reader, value = (client, server) if self.reading else (server, client)
        reader_kind, value_kind = kind(reader), kind(value)
        if reader_kind == "any":
            return []
        if reader_kind != value_kind and not (reader_kind == "number" and value_kind == "integer"):
            return [f"{where}: {value_kind} where {'the client' if self.reading else 'the server'} reads {reader_kind}"]
        problems = []
        wanted, given = values(reader), values(value)
        if wanted is not None and (given is None or not given <= wanted):
            problems.append(f"{where}: values {given or 'any'} beyond {wanted}")
        wanted_format, given_format = reader.get("format"), value.get("format")
        if wanted_format in FORMATS and given_format != wanted_format:
            if not (wanted_format == "date-time" and given_format == "date"):  # a date alone is a date-time to Engram
                problems.append(f"{where}: format {given_format} where {wanted_format} is read")
        if reader_kind == "array":
            problems += self.mismatches(client.get("items", {}), server.get("items", {}), f"{where}[]")
        if reader_kind == "object":
            problems += self._object(client, server, where)
        return problems

    def _object(self, client: Schema, server: Schema, where: str) -> list[str]:
        client_fields, server_fields = client.get("properties"), server.get("properties")
        if client_fields is None and server_fields is None:
            client_items, server_items = client.get("additionalProperties", {}), server.get("additionalProperties", {})
            if isinstance(client_items, dict) and isinstance(server_items, dict):
                return self.mismatches(client_items, server_items, f"{where}{{}}")
            return []
        reader = client if self.reading else server
        if "properties" not in reader:  # the reader takes any object
            return []
        client_fields, server_fields = client_fields or {}, server_fields or {}
        problems = [f"{where}.{name}: not in openapi.json" for name in client_fields if name not in server_fields]
        if self.reading:
            problems += [f"{where}.{name}: not on the client's model" for name in server_fields if name not in client_fields]
        value = server if self.reading else client
        problems += [
            f"{where}.{name}: required by the {'client' if self.reading else 'server'}, optional for the other"
            for name in reader.get("required", [])
            if name not in value.get("required", [])
        ]
        for name in client_fields.keys() & server_fields.keys():
            problems += self.mismatches(client_fields[name], server_fields[name], f"{where}.{name}")
        return problems
