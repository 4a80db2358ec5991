"""engram-client is its own distribution: it imports only the standard library, httpx, httpx-sse and pydantic (never
the server, `app`, nor the server's dependencies), declares exactly those, and makes every request through a
declared Route (which the contract test holds to openapi.json)."""

import ast
import re
import sys
import tomllib

from tests.support import ROOT

CLIENT = ROOT / "clients" / "python"
ALLOWED = {"httpx", "httpx_sse", "pydantic", "engram_client"}


def imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def sources() -> dict[str, ast.AST]:
    return {str(path.relative_to(CLIENT)): ast.parse(path.read_text()) for path in (CLIENT / "engram_client").rglob("*.py")}


def test_the_client_imports_only_the_standard_library_httpx_and_pydantic() -> None:
    outside = {path: imported(tree) - sys.stdlib_module_names - ALLOWED for path, tree in sources().items()}
    assert {path: names for path, names in outside.items() if names} == {}


def test_the_distribution_declares_exactly_what_it_imports() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "engram-client"
    declared = {re.match(r"[\w-]+", requirement).group().replace("-", "_") for requirement in project["dependencies"]}  # type: ignore[union-attr]
    assert declared == ALLOWED - {"engram_client"}


def requests_made(tree: ast.AST) -> int:
    return sum(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Request" for node in ast.walk(tree))


def test_every_request_is_made_by_a_route() -> None:
    made = {path: count for path, tree in sources().items() if (count := requests_made(tree))}
    assert made == {"engram_client/_core.py": 1}
    core = sources()["engram_client/_core.py"]
    [route] = [node for node in ast.walk(core) if isinstance(node, ast.ClassDef) and node.name == "Route"]
    [request] = [node for node in route.body if isinstance(node, ast.FunctionDef) and node.name == "request"]
    assert requests_made(request) == 1


def test_the_dev_lock_pins_the_clients_dependencies() -> None:
    """The README's install takes them from requirements-dev.lock, compiled with the client's pyproject.toml."""
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    wanted = {re.match(r"[\w-]+", requirement).group().lower() for requirement in project["dependencies"]}  # type: ignore[union-attr]
    locked = set(re.findall(r"^([\w.-]+)==", (ROOT / "requirements-dev.lock").read_text(), re.MULTILINE))
    assert wanted <= {name.lower() for name in locked}
