"""Which chat model serves the agents: the configured OpenAI-compatible endpoint, else the packaged offline model
when the `demo` extra is installed (app/llm/local.py), else none (chat answers 503 and says how to configure one)."""

import logging

from app.llm.chat import ChatLLM, ChatModel
from app.llm.local import LocalLLM, installed_model, llama_available
from app.settings import Settings, available_cpus

log = logging.getLogger("engram.llm")


def choose_chat_model(settings: Settings) -> tuple[ChatModel | None, Settings]:
    """The model, and the settings as it sees them (the offline model's name and context window)."""
    if settings.llm_configured:
        log.info("LLM: %s at %s", settings.default_llm_model, settings.llm_base_url)
        return ChatLLM(settings), settings
    usable = settings.local_llm and llama_available()
    model = installed_model(settings.local_llm_model, settings.data_dir / "models") if usable else None
    if model is None:
        log.warning(
            "no LLM configured: chat answers 503 until OPENAI_API_KEY or OPENAI_BASE_URL + ENGRAM_LLM_MODEL are set, "
            "or the demo model is installed (pip install -e '.[demo]' in the source tree)"
        )
        return None, settings
    if model.demo:
        log.warning(
            "LLM: %s, the DEMO model, offline through llama.cpp: too small to remember reliably (bench/ARCHIVE.md); "
            "for real conversations set OPENAI_API_KEY, or OPENAI_BASE_URL + ENGRAM_LLM_MODEL (README: Connect an LLM)",
            model.name,
        )
    else:
        log.info("LLM: %s, offline through llama.cpp (%s)", model.name, model.path)
    windows = {model.name: model.context_tokens, **settings.model_context_windows}
    effective = settings.model_copy(update={"llm_model": model.name, "model_context_windows": windows})
    llm = LocalLLM(model, threads=available_cpus(), temperature=settings.llm_temperature, mode=settings.local_llm_mode)
    return llm, effective
