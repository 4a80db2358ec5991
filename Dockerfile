FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/engram

# The runtime dependencies exactly as locked, every file checked against its hash (refresh: see the README's
# Development section); then Engram itself, which adds none. Editable: migrations read alembic/ next to app/.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY alembic ./alembic
RUN pip install --no-deps -e . && useradd --create-home engram
USER engram

EXPOSE 8000
# Migrations run at start-up (ENGRAM_MIGRATE_ON_START=true), under an advisory lock shared by all replicas.
CMD ["engram", "serve", "--host", "0.0.0.0", "--port", "8000"]
