"""Forgetting one message of an agent's conversation (DELETE …/messages/{id}): the message, the results of its tool
calls and the passages drawn from them alone (app/memory/archival/erasure.py), and the copies the conversation keeps of it.

- Its turn's record (GET …/turns/{id}, replayed to clients): the user's message, or an assistant's monologue, the
  texts it sent (and the turn's reply made of them), its calls' arguments and results, become ERASED.
- Later tool results that quoted it (conversation_search's answers, which stay in the context and the record)
  have the quoted line's text replaced by ERASED.
- The running summary, which may quote it once it had left the context, is withdrawn: a pointer to recall memory
  takes its place (what remains is found there by conversation_search); no LLM rewrites it.
- The agent's `updated_at` moves on, so that no process goes on with a context it kept from before.

It runs under the agent's turn lock and its memory pass's, committed before they are let go: no turn runs meanwhile,
summarising the message or reading its context half-erased, and no pass, storing a fact drawn from it."""

import uuid
from dataclasses import dataclass

from sqlmodel.ext.asyncio.session import AsyncSession

from app.agents.service import erasing_from_context
from app.chat.context import UNSUMMARISED, unsummarised
from app.chat.repository import Copies, TurnRepository
from app.chat.turns import ChatTurns
from app.db import transaction
from app.memory.archival.erasure import ErasedMessage, erase_message
from app.memory.kinds import RECALL
from app.memory.models import Message
from app.memory.recall.service import RecallMemory

ERASED = "[erased]"


@dataclass(frozen=True)
class Forgotten:
    erased: ErasedMessage
    summary_withdrawn: bool  # the running summary was replaced by a pointer to recall memory


async def forget_message(turns: ChatTurns, agent_id: uuid.UUID, message_id: uuid.UUID) -> Forgotten:
    """Erase one message of the agent's and all that keeps it (404: not one of its messages; 409: a turn or memory
    pass of the agent is still running after ENGRAM_TURN_LOCK_TIMEOUT_SECONDS)."""
    runner, timeout = turns.runner, turns.runner.settings.turn_lock_timeout_seconds
    async with runner.locks.hold(agent_id, timeout), turns.passes.locks.hold(agent_id, timeout):
        async with transaction(runner.sessions) as session:
            return await _forget(session, agent_id, message_id)


async def _forget(session: AsyncSession, agent_id: uuid.UUID, message_id: uuid.UUID) -> Forgotten:
    agent = await erasing_from_context(session, agent_id)
    erased = await erase_message(session, agent_id, message_id)
    message = erased.message
    turns = TurnRepository(session)
    if message.turn_id is not None:
        await turns.erase_from_record(agent_id, message.turn_id, copies(message), ERASED)
    if message.role in ("user", "assistant") and (said := message.recall_text()):  # what a search quotes
        quote = RECALL.quoted(message)
        erased_quote = quote.removesuffix(said) + ERASED
        await RecallMemory(session).erase_quotes(agent_id, message.seq or 0, quote, erased_quote)
        await turns.erase_quotes(agent_id, message.created_at, quote, erased_quote)
    # Only messages that left the agent's context were summarised (handed-in ones never enter it); a summary that is
    # only a pointer to recall memory quotes nothing.
    summarised = not message.handed_in and (message.seq or 0) < agent.context_start_seq
    withdrawn = summarised and bool(agent.summary) and not UNSUMMARISED.match(agent.summary or "")
    if withdrawn:
        agent.summary = unsummarised(await RecallMemory(session).count_before(agent_id, agent.context_start_seq))
    return Forgotten(erased, withdrawn)


def copies(message: Message) -> Copies:
    """What the turn's record holds of the message."""
    if message.role == "user":
        return Copies(said=message.content)
    if message.role != "assistant":  # a system notice of the turn's: the record has no copy
        return Copies()
    return Copies(monologue=message.content or None, sent=message.sent(), calls=[str(c["id"]) for c in message.tool_calls or []])
