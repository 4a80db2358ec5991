"""The reply while the model writes it: the text of each `send_message` call, read out of its arguments as they
stream in (pydantic-core's partial JSON: an unfinished string counts as far as it goes, an unfinished escape not at
all), handed to the watchers as `message_delta` events."""

from pydantic_core import from_json

from app.chat.events import MessageDelta
from app.chat.tools import REPLY_TOOL
from app.chat.turn_state import TurnState
from app.llm.types import ToolCall

READ_AGAIN_SHARE = 32


class ReplyDeltas:
    """An LLM call's `on_progress` for one step of a turn."""

    def __init__(self, state: TurnState, step: int):
        self.state = state
        self.step = step
        self._shown: dict[str, str] = {}  # call id -> the text its deltas have carried
        self._read: dict[str, int] = {}  # call id -> how much of its arguments had been read

    def __call__(self, call: ToolCall) -> None:
        if call.name != REPLY_TOOL:
            return
        # The arguments are read again whole each time: only once they have grown by a share of what was read, so
        # that a long message costs linear time (a delta per token while short, longer pieces as it grows).
        read = self._read.get(call.id, 0)
        if len(call.arguments) - read < read // READ_AGAIN_SHARE:
            return
        self._read[call.id] = len(call.arguments)
        try:
            arguments = from_json(call.arguments, allow_partial="trailing-strings")
        except ValueError:
            return  # not JSON: the whole call's validation tells the model so
        text = arguments.get("text") if isinstance(arguments, dict) else None
        shown = self._shown.get(call.id, "")
        if isinstance(text, str) and len(text) > len(shown) and text.startswith(shown):
            self._shown[call.id] = text
            self.state.emit_live(MessageDelta, step=self.step, call_id=call.id, text=text[len(shown) :])
