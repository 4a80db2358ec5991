"""Quotas that protect LLM spend: requests and chat turns per minute, LLM tokens per UTC day, for each tenant
(ENGRAM_QUOTA_*, off while unset) and for each API key that carries limits of its own (on top of its tenant's).

The counters live in PostgreSQL as fixed windows (`quota_counters`: one row per subject, metric and window,
upserted atomically), so every replica counts against the same budget and a restart forgets nothing. Token use is
counted there too rather than summed from the stored turns: deleting an agent deletes its turns, which would hand
the day's budget back, and a turn does not record the key that ran it. A turn's tokens are added when it ends, from
the usage the LLM reported (the turn's stored `usage`); a turn is refused before its first LLM call once the day's
tokens are spent, so the last turn of a day may overshoot the budget by what it used itself.

Limited callers' responses carry OpenAI's rate-limit headers, one set per limited metric (OpenAI clients read them
already): `X-RateLimit-Limit-<M>`, `X-RateLimit-Remaining-<M>`, `X-RateLimit-Reset-<M>` (seconds, e.g. `42s`), M in
Requests, Turns, Tokens; where a key and its tenant both limit a metric, the tighter standing. A refusal is a 429
`quota_exceeded` with `Retry-After`."""

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import transaction
from app.errors import EngramError
from app.metrics import QUOTA_REFUSALS
from app.models_base import utcnow
from app.quotas.repository import CounterRepository
from app.quotas.schemas import TenantUsageRead, UsageRead
from app.quotas.tally import UsageTally
from app.settings import Settings

Metric = Literal["requests", "turns", "llm_tokens"]
METRICS: tuple[Metric, ...] = ("requests", "turns", "llm_tokens")
HEADER_NAMES: dict[Metric, str] = {"requests": "Requests", "turns": "Turns", "llm_tokens": "Tokens"}
UNITS: dict[Metric, str] = {
    "requests": "requests per minute",
    "turns": "chat turns per minute",
    "llm_tokens": "LLM tokens per day (UTC)",
}


class QuotaExceeded(EngramError):
    status_code = 429
    code = "quota_exceeded"


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int | None = None
    turns_per_minute: int | None = None
    llm_tokens_per_day: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> "Limits":
        return cls(settings.quota_requests_per_minute, settings.quota_turns_per_minute, settings.quota_llm_tokens_per_day)

    def of(self, metric: Metric) -> int | None:
        return {"requests": self.requests_per_minute, "turns": self.turns_per_minute, "llm_tokens": self.llm_tokens_per_day}[
            metric
        ]

    def __bool__(self) -> bool:
        return any(self.of(metric) is not None for metric in METRICS)


def window_of(metric: Metric, now: datetime) -> tuple[datetime, datetime]:
    """The fixed window `now` falls in: its minute, or (tokens) its UTC day."""
    if metric == "llm_tokens":
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    start = now.replace(second=0, microsecond=0)
    return start, start + timedelta(minutes=1)


def seconds_until(moment: datetime, now: datetime) -> int:
    return max(0, math.ceil((moment - now).total_seconds()))


@dataclass(frozen=True)
class Subject:
    """Who a count goes to: a tenant, or one of its keys."""

    scope: Literal["tenant", "key"]
    id: uuid.UUID
    limits: Limits

    def counts(self, metric: Metric) -> bool:
        # A tenant's use of every metric is counted (GET /v1/admin/usage); a key's only where the key is limited.
        return self.scope == "tenant" or self.limits.of(metric) is not None

    def refusal(self, metric: Metric, limit: int, resets_at: datetime, now: datetime) -> QuotaExceeded:
        QUOTA_REFUSALS.labels(metric, self.scope).inc()
        wait = max(1, seconds_until(resets_at, now))
        whose = "this tenant's" if self.scope == "tenant" else "this API key's"
        return QuotaExceeded(
            f"{whose} quota of {limit} {UNITS[metric]} is used up; retry in {wait} s", headers={"Retry-After": str(wait)}
        )


@dataclass(frozen=True)
class Standing:
    limit: int
    remaining: int
    resets_at: datetime


class Meter:
    """The quotas of one caller, counted for one request (or one WebSocket's turns); `headers()` tells the standing.
    A subject's use of a metric it has no limit on goes to the tally (no database write on the request's path)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], subjects: Sequence[Subject], tally: UsageTally):
        self._sessions = sessions
        self._subjects = subjects
        self._tally = tally
        self.standings: dict[Metric, Standing] = {}

    async def count_request(self) -> None:
        if self._limited("requests"):
            async with transaction(self._sessions) as session:
                await self._take(CounterRepository(session), "requests", 1)
        self._count_unlimited("requests", 1)

    async def admit_turn(self) -> None:
        """Count a turn about to start; refused while the turns of this minute or the LLM tokens of today are spent."""
        if self._limited("turns") or self._limited("llm_tokens"):
            async with transaction(self._sessions) as session:
                counters = CounterRepository(session)
                await self._check_tokens(counters)
                await self._take(counters, "turns", 1)
        self._count_unlimited("turns", 1)

    async def spend_tokens(self, tokens: int) -> None:
        """Add what an ended turn used (never refused: the turn has run)."""
        if tokens <= 0:
            return
        if self._limited("llm_tokens"):
            async with transaction(self._sessions) as session:
                await self._take(CounterRepository(session), "llm_tokens", tokens, enforce=False)
        self._count_unlimited("llm_tokens", tokens)

    def _limited(self, metric: Metric) -> bool:
        return any(subject.limits.of(metric) is not None for subject in self._subjects)

    def _count_unlimited(self, metric: Metric, amount: int) -> None:
        start, _ = window_of(metric, utcnow())
        for subject in self._subjects:
            if subject.counts(metric) and subject.limits.of(metric) is None:
                self._tally.add((subject.scope, subject.id, metric, start), amount)

    def headers(self) -> dict[str, str]:
        now = utcnow()
        headers = {}
        for metric, standing in self.standings.items():
            name = HEADER_NAMES[metric]
            headers[f"X-RateLimit-Limit-{name}"] = str(standing.limit)
            headers[f"X-RateLimit-Remaining-{name}"] = str(standing.remaining)
            headers[f"X-RateLimit-Reset-{name}"] = f"{seconds_until(standing.resets_at, now)}s"
        return headers

    async def _take(self, counters: CounterRepository, metric: Metric, amount: int, *, enforce: bool = True) -> None:
        """Count for every subject, in one transaction: a refusal by any (the key, say) rolls back the others' counts."""
        now = utcnow()
        start, end = window_of(metric, now)
        standings = []
        try:
            for subject in self._subjects:
                limit = subject.limits.of(metric)
                if limit is None:  # the tally's (_count_unlimited)
                    continue
                used = await counters.take(subject.scope, subject.id, metric, start, amount, limit if enforce else None)
                standings.append(Standing(limit, max(0, limit - (used if used is not None else limit)), end))
                if used is None:
                    raise subject.refusal(metric, limit, end, now)
        finally:
            self._note(metric, standings)

    async def _check_tokens(self, counters: CounterRepository) -> None:
        now = utcnow()
        start, end = window_of("llm_tokens", now)
        standings = []
        try:
            for subject in self._subjects:
                if (limit := subject.limits.llm_tokens_per_day) is None:
                    continue
                used = await counters.used(subject.scope, subject.id, "llm_tokens", start)
                standings.append(Standing(limit, max(0, limit - used), end))
                if used >= limit:
                    raise subject.refusal("llm_tokens", limit, end, now)
        finally:
            self._note("llm_tokens", standings)

    def _note(self, metric: Metric, standings: list[Standing]) -> None:
        if standings:
            self.standings[metric] = min(standings, key=lambda s: s.remaining)


class Quotas:
    """The quota settings of this service; hands out a Meter per caller, which counts its tenant's use always and
    enforces the limits that apply to it."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], tenant_limits: Limits):
        self._sessions = sessions
        self.tenant_limits = tenant_limits
        self.tally = UsageTally(sessions)

    def meter(self, tenant_id: uuid.UUID, key_id: uuid.UUID | None, key_limits: Limits) -> Meter:
        subjects = [Subject("tenant", tenant_id, self.tenant_limits)]
        if key_id is not None and key_limits:
            subjects.append(Subject("key", key_id, key_limits))
        return Meter(self._sessions, subjects, self.tally)

    async def tenant_usage(self, session: AsyncSession, tenants: Sequence[tuple[uuid.UUID, str]]) -> list[TenantUsageRead]:
        """Each tenant's requests and turns of the current minute and LLM tokens of the current UTC day (this
        process's counts exact, other replicas' up to a second behind)."""
        await self.tally.flush()
        now = utcnow()
        windows = {metric: window_of(metric, now) for metric in METRICS}
        used = await CounterRepository(session).tenants_in({metric: start for metric, (start, _) in windows.items()})

        def read(tenant_id: uuid.UUID, metric: Metric) -> UsageRead:
            start, end = windows[metric]
            limit = self.tenant_limits.of(metric)
            return UsageRead(used=used.get((tenant_id, metric), 0), limit=limit, window_start=start, resets_at=end)

        return [
            TenantUsageRead(
                tenant_id=tenant_id,
                name=name,
                requests=read(tenant_id, "requests"),
                turns=read(tenant_id, "turns"),
                llm_tokens=read(tenant_id, "llm_tokens"),
            )
            for tenant_id, name in tenants
        ]
