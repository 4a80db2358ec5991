"""No drift between the client and the API: every request the client can make is built by a declared Route
(engram_client/_core.py), and each route is held to openapi.json, the contract the server is tested against: its
method and path, the query and header parameters it may send and their types, its body's fields (none the server
lacks, none it requires left optional, each of a type the server takes), and what it reads (every field of the
answer on the client's model, of a type that takes every value the server documents: nulls, formats, every event).
Checked rather than generated: the check covers the calls themselves (paths, parameters, headers), which generated
models do not, the models keep the names a user reads (Passage, Turn, Recollection) over the server's, and a field
added to the server fails here until the client has it, not in a user's program."""

import json
import re
from datetime import datetime
from typing import Any
from uuid import UUID

import pytest
from engram_client import _core
from engram_client._core import Route
from engram_client.client import Engram
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from tests.clients.python.contract import Comparison, Schema, Side
from tests.support import ROOT

OPENAPI = json.loads((ROOT / "openapi.json").read_text())
SERVER = Side(OPENAPI["components"]["schemas"])
ROUTES = Route.declared


def client_side(kind: Any, mode: JsonSchemaMode) -> tuple[Side, Schema]:
    schema = TypeAdapter(kind).json_schema(mode=mode)
    return Side(schema.pop("$defs", {})), schema


def operation(route: Route[Any]) -> dict[str, Any]:
    assert route.path in OPENAPI["paths"], f"{route.path}: no such path in openapi.json"
    operations = OPENAPI["paths"][route.path]
    assert route.method.lower() in operations, f"{route.method} {route.path}: no such operation in openapi.json"
    return operations[route.method.lower()]


def parameters(op: dict[str, Any], where: str) -> dict[str, Schema]:
    return {p["name"].lower(): p for p in op.get("parameters", []) if p["in"] == where}


def name(route: Route[Any]) -> str:
    kinds = {route.content_type, route.accept} - {"application/json"}
    return f"{route.method} {route.path}" + (f" ({', '.join(sorted(kinds))})" if kinds else "")


def test_every_call_of_the_client_is_a_declared_route() -> None:
    # Every resource module is imported with the client; each route is declared once.
    assert Engram is not None and len(ROUTES) >= 25
    assert len({(r.method, r.path, r.content_type, r.accept) for r in ROUTES}) == len(ROUTES)
    assert _core.Request.__module__ == "engram_client._core"


@pytest.mark.parametrize("route", ROUTES, ids=name)
def test_the_route_is_an_operation_of_openapi_json_with_its_parameters(route: Route[Any]) -> None:
    op = operation(route)
    in_path = set(re.findall(r"{(\w+)}", route.path))
    assert in_path == set(parameters(op, "path")), f"{name(route)}: path parameters"
    query = parameters(op, "query")
    if route.query is not None:
        side, schema = client_side(route.query, "serialization")
        writing = Comparison(side, SERVER, reading=False)
        for field, declared in schema["properties"].items():
            assert field in query, f"{name(route)}: no query parameter {field!r} in openapi.json"
            assert not writing.mismatches(declared, query[field]["schema"], f"?{field}"), f"{name(route)} ?{field}"
    required = {n for n, p in query.items() if p.get("required")}
    assert required <= set((route.query.model_fields if route.query else {}).keys())
    headers = parameters(op, "header")
    for header in route.headers:
        assert header.lower() in headers, f"{name(route)}: no header parameter {header!r} in openapi.json"


@pytest.mark.parametrize("route", ROUTES, ids=name)
def test_what_the_route_sends_is_what_the_server_takes(route: Route[Any]) -> None:
    body = operation(route).get("requestBody")
    if route.body is None and route.content_type == "application/json" and route.method in ("GET", "DELETE"):
        assert body is None, f"{name(route)}: the operation takes a body the client does not send"
        return
    if body is None:
        assert route.body is None, f"{name(route)}: the client sends a body the operation does not take"
        return
    content = body["content"]
    assert route.content_type in content, f"{name(route)}: the operation takes no {route.content_type}"
    if route.body is not None:
        side, schema = client_side(route.body, "serialization")
        problems = Comparison(side, SERVER, reading=False).mismatches(schema, content[route.content_type]["schema"], "body")
        assert not problems, f"{name(route)}: {problems}"


@pytest.mark.parametrize("route", ROUTES, ids=name)
def test_what_the_route_reads_is_what_the_server_answers(route: Route[Any]) -> None:
    successes = {status: answer for status, answer in operation(route)["responses"].items() if status.startswith("2")}
    assert successes, f"{name(route)}: no success in openapi.json"
    if route.reads is type(None):
        assert all(not answer.get("content") for answer in successes.values()), f"{name(route)} reads no body"
        return
    answers = [
        answer["content"][route.accept]["schema"] for answer in successes.values() if route.accept in answer.get("content", {})
    ]
    assert answers, f"{name(route)}: no success answers {route.accept}"
    side, schema = client_side(route.reads, "validation")
    for answer in answers:
        problems = Comparison(side, SERVER, reading=True).mismatches(schema, answer, "answer")
        assert not problems, f"{name(route)}: {problems}"


def test_the_check_finds_a_field_read_that_the_server_never_sends_a_null_read_as_a_value_and_a_wrong_type() -> None:
    class Drifted(BaseModel):
        id: UUID
        content: int  # a string on the server
        valid_until: datetime  # null on the server for a current passage
        summary: str  # no such field

    side, schema = client_side(Drifted, "validation")
    problems = Comparison(side, SERVER, reading=True).mismatches(schema, {"$ref": "#/components/schemas/PassageRead"}, "answer")
    assert "answer.content: string where the client reads integer" in problems
    assert "answer.valid_until: null where the client reads string" in problems
    assert "answer.summary: not in openapi.json" in problems
    assert "answer.tags: not on the client's model" in problems


def test_the_check_finds_a_body_field_the_server_lacks_and_one_it_requires_sent_optionally() -> None:
    class Drifted(BaseModel):
        name: str | None = None  # required by the server
        weight: float | None = None  # no such field: the server refuses unknown fields

    side, schema = client_side(Drifted, "serialization")
    problems = Comparison(side, SERVER, reading=False).mismatches(schema, {"$ref": "#/components/schemas/AgentCreate"}, "body")
    assert problems == ["body.weight: not in openapi.json", "body.name: required by the server, optional for the other"]
