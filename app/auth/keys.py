"""API keys: random, shown once, stored only as a SHA-256 hash (a key has 256 bits of entropy, so a fast hash is
safe here; slow password hashes exist for low-entropy secrets)."""

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from app.auth.models import ApiKey
from app.quotas.service import Limits

KEY_PREFIX = "engk_"


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def same_secret(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def key_limits(record: ApiKey) -> Limits:
    return Limits(record.requests_per_minute, record.turns_per_minute, record.llm_tokens_per_day)


def set_limits(record: ApiKey, limits: Limits) -> None:
    record.requests_per_minute = limits.requests_per_minute
    record.turns_per_minute = limits.turns_per_minute
    record.llm_tokens_per_day = limits.llm_tokens_per_day


@dataclass
class IssuedKey:
    record: ApiKey
    key: str  # the only time the key itself exists outside the caller
