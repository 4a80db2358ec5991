"""Quotas that protect LLM spend: requests and chat turns per minute, LLM tokens per UTC day (app/quotas/service.py)."""
