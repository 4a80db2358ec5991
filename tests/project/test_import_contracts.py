"""Each import contract of pyproject.toml can fail: a copy of app/ with one planted import that breaks one rule is
checked by import-linter, which must name that contract as broken, and no other (but for the acyclic contract where
an upward import inside a package closes a cycle as well). A contract that cannot fail would guard nothing (a
misspelt module in it is ignored, for one)."""

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.support import ROOT

ACYCLIC = "No import cycle between the modules of any package"

# contract name (as pyproject.toml has it) -> (module that gets the import, the import planted in it)
PLANTS = {
    "Packages are layered: entry points, MCP and HTTP, runtime, event delivery, domains, infrastructure": (
        "app/quotas/tally.py",
        "import app.memory.search.lexical",
    ),
    "Inside a domain: services over repositories over table models": (
        "app/memory/core/repository.py",
        "import app.memory.core.service",
    ),
    "Routers, the MCP server and the Letta API call services, never repositories or SQL": (
        "app/api/recollection.py",
        "import sqlalchemy",
    ),
    "Only agents reaches its repository; other packages go through its services": (
        "app/chat/runner.py",
        "import app.agents.repository",
    ),
    "Only memory reaches its repositories; other packages go through its services": (
        "app/chat/runner.py",
        "import app.memory.recall.repository",
    ),
    "Only chat reaches its repository; other packages go through its services": (
        "app/delivery/stream.py",
        "import app.chat.repository",
    ),
    "Only auth reaches its repository; other packages go through its services": (
        "app/chat/runner.py",
        "import app.auth.repository",
    ),
    "Only portability reaches its repository; other packages go through its services": (
        "app/main.py",
        "import app.portability.repository",
    ),
    "Only quotas reaches its repository; other packages go through its services": (
        "app/main.py",
        "import app.quotas.repository",
    ),
    "No import cycle between the modules of any package": (
        "app/memory/search/lexical.py",
        "import app.memory.search.hybrid",
    ),
}


def contract_names() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [contract["name"] for contract in config["tool"]["importlinter"]["contracts"]]


def lint_imports(tree: Path) -> str:
    done = subprocess.run(
        [shutil.which("lint-imports") or "lint-imports", "--no-cache"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


def test_every_contract_has_a_plant() -> None:
    assert sorted(PLANTS) == sorted(contract_names())


@pytest.mark.parametrize("contract", sorted(PLANTS))
def test_a_planted_import_breaks_its_contract_alone(contract: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    module, planted = PLANTS[contract]
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{planted}  # planted by {Path(__file__).name}\n")
    report = lint_imports(tmp_path)
    broken = {name for name in contract_names() if re.search(rf"{re.escape(name)} BROKEN", " ".join(report.split()))}
    # A service imported by its own repository closes a cycle too: the acyclic contract may fall with it, no other.
    collateral = {ACYCLIC} if contract == "Inside a domain: services over repositories over table models" else set()
    assert contract in broken and broken - {contract} <= collateral, report[-3000:]


def test_the_tree_as_it_is_keeps_every_contract() -> None:
    assert f"Contracts: {len(contract_names())} kept, 0 broken." in lint_imports(ROOT)
