"""The policy presets' names, importable without pydantic (the CLI's help lists them: issue 17).
``engine.policy`` builds the policies and re-exports ``PRESETS``."""

from __future__ import annotations

PRESETS: list[str] = ["default", "claude-code", "codex", "opencode", "deepseek"]
