"""Imports every table model, so that SQLAlchemy can resolve foreign keys when only part of the app is loaded
(command-line tools)."""

from app.agents.models import Agent
from app.auth.models import ApiKey, Tenant
from app.chat.models import Turn, TurnEvent
from app.memory.models import ArchivalPassage, MemoryBlock, MemoryBlockRevision, Message

__all__ = ["Agent", "ApiKey", "ArchivalPassage", "MemoryBlock", "MemoryBlockRevision", "Message", "Tenant", "Turn", "TurnEvent"]
