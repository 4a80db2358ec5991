"""A chat turn from admission to aftermath, the one way every surface runs one: admitted against the caller's
quotas (a refusal raises before anything is stored), run by the runner, its LLM tokens spent against the quotas once
it has ended, then a sleep-time memory pass when one is due. Delivery (app/delivery/stream.py) only starts it and
fans its events out."""

import asyncio
import logging
import uuid

from app.chat.events import TurnCompleted
from app.chat.memory_pass import MemoryPasses
from app.chat.runner import TurnRunner
from app.chat.service import tokens_used
from app.chat.turn_state import TurnResult
from app.quotas.service import Meter

log = logging.getLogger("engram.quotas")


class ChatTurns:
    def __init__(self, runner: TurnRunner, passes: MemoryPasses):
        self.runner = runner
        self.passes = passes

    async def run(
        self, agent_id: uuid.UUID, message: str, idempotency_key: str | None, turn_id: uuid.UUID, meter: Meter | None
    ) -> TurnResult:
        if meter is not None:
            await meter.admit_turn()
        result = None
        try:
            result = await self.runner.run(agent_id, message, idempotency_key=idempotency_key, turn_id=turn_id)
        finally:
            if meter is not None:
                await asyncio.shield(self._spend(meter, agent_id, turn_id, result))
        await self.passes.after_turn(agent_id, meter)
        return result

    async def _spend(self, meter: Meter, agent_id: uuid.UUID, turn_id: uuid.UUID, result: TurnResult | None) -> None:
        """The turn's tokens, from its closing event when it ran to the end here, else as stored (a turn that
        failed midway); an idempotent replay (another turn's result) spent nothing."""
        try:
            closing = result.events[-1] if result is not None and result.events else None
            if isinstance(closing, TurnCompleted) and closing.turn_id == turn_id:
                tokens = closing.usage.prompt_tokens + closing.usage.completion_tokens
            elif result is not None and result.turn_id != turn_id:
                tokens = 0
            else:
                async with self.runner.sessions() as session:
                    tokens = await tokens_used(session, agent_id, turn_id)
            await meter.spend_tokens(tokens)
        except Exception:  # the turn has run and is stored: a failed count must not turn its answer into an error
            log.warning("could not count the LLM tokens of turn %s against its quotas", turn_id, exc_info=True)
