"""Which format one JSONL line clearly belongs to (used by detection and by every JSONL reader,
to skip the lines of another transcript mixed into a file)."""

from __future__ import annotations

from typing import Any

_CLAUDE_ONLY = {
    "file-history-snapshot",
    "queue-operation",
    "permission-mode",
    "last-prompt",
    "ai-title",
    "progress",
    "attachment",
}
_CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state"}
_PI_TYPES = {
    "session",
    "model_change",
    "thinking_level_change",
    "message",
    "custom",
    "custom_message",
    "compaction",
    "branch_summary",
    "label",
}
_GEMINI_STREAM_TYPES = {"init", "message", "tool_use", "tool_result", "result"}

def line_format(o: dict[str, Any]) -> str | None:
    """The JSONL format one line clearly belongs to, or None when it could be several."""
    t = o.get("type")
    if not isinstance(t, str):
        return None
    if t in _CODEX_TYPES and "payload" in o:
        return "codex"
    if t in _CLAUDE_ONLY:
        return "claude-code"
    if t in ("user", "assistant", "system") and ("uuid" in o or "sessionId" in o or "parentUuid" in o):
        return "claude-code"
    if t in _PI_TYPES and "id" in o and ("parentId" in o or t == "session"):
        if t != "message" or isinstance(o.get("message"), dict):
            return "pi"
    if t in _GEMINI_STREAM_TYPES:
        if t == "message" and "role" in o and not isinstance(o.get("message"), dict):
            return "gemini-stream"
        if t == "init" and ("session_id" in o or "model" in o):
            return "gemini-stream"
        if t == "tool_use" and "tool_name" in o:
            return "gemini-stream"
        if t == "tool_result" and "tool_id" in o:
            return "gemini-stream"
    return None
