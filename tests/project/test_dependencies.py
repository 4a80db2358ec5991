"""The tests (and testkit/) import only what pyproject.toml declares (the dependencies or the dev extra), or the Python
client's pyproject.toml (its dependencies and its extras, which the README's test command installs), and only public
modules: a fresh install runs them without relying on what happens to be installed alongside."""

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import packages_distributions

from tests.support import ROOT, matched

FIRST_PARTY = {"app", "tests", "testkit", "bench", "engram_client"}  # engram_client: clients/python, installed with -e
TEST_CODE = ("tests", "testkit")


def imported_modules() -> Iterator[str]:
    for path in sorted(p for folder in TEST_CODE for p in (ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                yield from (alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield node.module


def third_party(modules: Iterator[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] not in sys.stdlib_module_names | FIRST_PARTY}


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_package_the_tests_import_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    client = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())["project"]
    client_extras = [r for extra in client.get("optional-dependencies", {}).values() for r in extra]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["dev"], *client["dependencies"], *client_extras]
    declared = {normalised(matched(re.match(r"[\w.-]+", r)).group()) for r in requirements}
    installed_by = packages_distributions()
    undeclared = {
        top: installed_by.get(top)
        for top in {m.split(".")[0] for m in third_party(imported_modules())}
        if not declared & {normalised(d) for d in installed_by.get(top, [top])}
    }
    assert not undeclared, f"imported by the tests but not declared in pyproject.toml: {undeclared}"


def test_the_tests_use_no_private_module_of_a_package() -> None:
    private = sorted(m for m in third_party(imported_modules()) if re.search(r"(^|\.)_(?!_)", m))
    assert not private, f"private modules imported by the tests: {private}"


def unlocked(lock: str, *extras: str) -> set[str]:
    """What pyproject.toml asks for (its dependencies and `extras`) that `lock` pins no version of."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *(r for extra in extras for r in project["optional-dependencies"][extra])]
    wanted = {normalised(matched(re.match(r"[\w.-]+", r)).group()) for r in requirements}
    locked = re.findall(r"^([\w.-]+)==", (ROOT / lock).read_text(), re.MULTILINE)
    return wanted - {normalised(name) for name in locked}


def test_the_locks_pin_every_dependency() -> None:
    """The Dockerfile installs requirements.lock only, and the README's install takes the dev and demo extras'
    versions from requirements-dev.lock: a dependency added to pyproject.toml without refreshing the locks
    (docs/development.md) would be missing from the image, or unpinned in CI."""
    assert unlocked("requirements.lock") == set()
    assert unlocked("requirements-dev.lock", "dev", "demo") == set()
