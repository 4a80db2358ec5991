"""engram-client is its own distribution: its core imports only the standard library, httpx, httpx-sse and pydantic
(never the server, `app`, nor the server's dependencies) and declares exactly those; each framework integration (a
subpackage) imports only what its extra declares besides; every request is made through a declared Route (which the
contract test holds to openapi.json)."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from typing import Any

from tests.support import ROOT, matched

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


def integrations() -> list[str]:
    """The client's framework integrations: its subpackages (engram_client/openai_agents/…), each an extra."""
    return sorted(path.parent.name for path in (CLIENT / "engram_client").glob("*/__init__.py"))


def project() -> dict[str, Any]:
    return tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]


def distribution(requirement: str) -> str:
    return matched(re.match(r"[\w.-]+", requirement)).group().lower().replace("_", "-")


def test_the_client_imports_only_the_standard_library_httpx_and_pydantic() -> None:
    core = {path: tree for path, tree in sources().items() if path.count("/") == 1}
    outside = {path: imported(tree) - sys.stdlib_module_names - ALLOWED for path, tree in core.items()}
    assert {path: names for path, names in outside.items() if names} == {}
    integration_modules = {f"engram_client.{name}" for name in integrations()}
    for path, tree in core.items():  # the core never needs an extra
        modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not {m for m in modules if m.rsplit(".", 1)[0] in integration_modules or m in integration_modules}, path


def test_each_integration_imports_only_what_its_extra_declares() -> None:
    modules_of: dict[str, set[str]] = {}
    for module, names in packages_distributions().items():
        for name in names:
            modules_of.setdefault(distribution(name), set()).add(module)
    extras = project().get("optional-dependencies", {})
    for integration in integrations():
        extra = integration.replace("_", "-")
        assert extra in extras, f"engram_client.{integration} has no extra engram-client[{extra}]"
        allowed = ALLOWED.union(*(modules_of.get(distribution(r), set()) for r in extras[extra]))
        for path, tree in sources().items():
            if path.startswith(f"engram_client/{integration}/"):
                assert imported(tree) - sys.stdlib_module_names - allowed == set(), path


def test_the_distribution_declares_exactly_what_it_imports() -> None:
    assert project()["name"] == "engram-client"
    declared = {distribution(requirement).replace("-", "_") for requirement in project()["dependencies"]}
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
    """The README's install takes them (and its extras') from requirements-dev.lock, compiled with the client's
    pyproject.toml and its extras."""
    extras = [r for requirements in project().get("optional-dependencies", {}).values() for r in requirements]
    wanted = {distribution(requirement) for requirement in [*project()["dependencies"], *extras]}
    locked = set(re.findall(r"^([\w.-]+)==", (ROOT / "requirements-dev.lock").read_text(), re.MULTILINE))
    assert wanted <= {distribution(name) for name in locked}
