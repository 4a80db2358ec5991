# The checks one at a time, in the virtualenv you are in (the README's install makes one); .ci/run runs them all.
# `make lint` and `make types` take seconds; `make test` is the README's test command.
CODE := app tests testkit bench alembic clients/python

.PHONY: check lint types test

check: lint types test

# ruff (rules in pyproject.toml), the layout, and the import contracts (import-linter, pyproject.toml).
lint:
	ruff check $(CODE)
	ruff format --check $(CODE)
	lint-imports

# mypy --strict over app/, testkit/, bench/ and the Python client, and over tests/ but for what a test needs
# (pyproject.toml's [tool.mypy]).
types:
	mypy

test:
	python -m pytest -q
