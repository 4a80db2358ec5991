"""docker-compose.yml, checked without a Docker daemon: .env reaches the engram container whole, the database
password comes from .env for both services, and the README's recipe waits for health before issuing a key."""

import re
from typing import Any

import yaml

from tests.support import ROOT

VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def interpolated(value: str, env: dict[str, str]) -> str:
    """Compose's `${NAME}` / `${NAME:-default}` substitution (from .env or the shell)."""
    return VARIABLE.sub(lambda m: env.get(m.group(1)) or m.group(2) or "", value)


def services() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def test_engram_reads_dot_env_whole_and_starts_without_one() -> None:
    assert services()["engram"]["env_file"] == [{"path": ".env", "required": False}]


def test_the_database_password_comes_from_dot_env_for_both_services() -> None:
    db, engram = services()["db"], services()["engram"]
    for env, password in (({"POSTGRES_PASSWORD": "s3cret0"}, "s3cret0"), ({}, "engram")):  # set, and the first-run default
        assert interpolated(db["environment"]["POSTGRES_PASSWORD"], env) == password
        url = interpolated(engram["environment"]["DATABASE_URL"], env)
        assert url == f"postgresql://engram:{password}@db:5432/engram"


def test_the_readme_recipe_waits_for_health_before_creating_a_key() -> None:
    assert all("healthcheck" in service for service in services().values())  # what `--wait` waits for
    readme = (ROOT / "docs" / "operations.md").read_text()
    up, create = readme.find("docker compose up -d --wait"), readme.find("docker compose exec engram engram keys create")
    assert 0 <= up < create
    assert "POSTGRES_PASSWORD=" in readme[:create]
