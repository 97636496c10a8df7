"""Defaults importable without pydantic or the contracts' models (the CLI's help states them:
issue 17). ``activities.contracts`` re-exports them."""

from __future__ import annotations

DEFAULT_MODEL = "claude-sonnet-5-5"
"""Model of the LLM summarizers unless configured (claude-sonnet-4-5 reaches end-of-life on
2026-11-30 per the anthropic SDK). The one place it is written; settings and the client use it."""
