"""Engram's memory for LangGraph (`pip install 'engram-client[langgraph]'`): `EngramStore`, a LangGraph store over
agents' archival memory, and `recollection_hook`, a pre-model hook that hands the model what memory holds."""

from engram_client.langgraph._hook import recollection_hook
from engram_client.langgraph._store import EngramStore

__all__ = ["EngramStore", "recollection_hook"]
