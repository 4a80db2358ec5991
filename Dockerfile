FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/engram

COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY alembic ./alembic
RUN pip install -e . && useradd --create-home engram
USER engram

EXPOSE 8000
# Migrations run at start-up (ENGRAM_MIGRATE_ON_START=true), under an advisory lock shared by all replicas.
CMD ["engram", "serve", "--host", "0.0.0.0", "--port", "8000"]
