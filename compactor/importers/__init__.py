"""Transcripts of real agents -> canonical events.

Formats (``FORMATS``): Claude Code JSONL, Codex rollout JSONL, Aider chat history Markdown,
SWE-agent ``.traj``, pi session JSONL, Gemini CLI chat JSON and stream-json, OpenCode export
JSON, and plain Anthropic / OpenAI message lists. ``format="auto"`` detects the format from
the content.

Every importer keeps tool-call ids and pairing (a tool_use in an assistant event, its
tool_result in a later user event; a call without a recorded result stays unresolved), marks
context the harness injected (``injected=True``), turns system prompts into ``pinned`` events
and the source agent's own compactions into ``compaction`` events with their summary, puts
provider usage on assistant events, and assigns ids that are the same on every re-import.
Lines that cannot be parsed are skipped and reported with their line numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from compactor.errors import EmptyInput, ParseError, UnknownFormat
from compactor.importers import (
    _aider,
    _anthropic_messages,
    _claude_code,
    _codex,
    _gemini_chat,
    _gemini_stream,
    _openai_messages,
    _opencode,
    _pi,
    _swe_agent,
)
from compactor.importers._common import ImportResult, SkippedLine
from compactor.importers._detect import FORMATS, detect_text, known

_PARSERS: dict[str, Callable[[str, str], ImportResult]] = {
    "claude-code": _claude_code.parse,
    "codex": _codex.parse,
    "aider": _aider.parse,
    "swe-agent": _swe_agent.parse,
    "pi": _pi.parse,
    "gemini-chat": _gemini_chat.parse,
    "gemini-stream": _gemini_stream.parse,
    "opencode": _opencode.parse,
    "anthropic-messages": _anthropic_messages.parse,
    "openai-messages": _openai_messages.parse,
}
assert list(_PARSERS) == FORMATS


def _decode(data: bytes) -> str:
    return data.decode("utf-8-sig", errors="replace")


def detect_format(path: Path) -> str:
    """Format name of the transcript at ``path``.

    Raises:
        EmptyInput: the file is empty or whitespace.
        UnknownFormat: the content matches no known format (the message lists them).
        ParseError: the file starts like a JSON document but does not parse.
    """
    p = Path(path)
    return detect_text(_decode(p.read_bytes()), str(p))


def import_bytes(data: bytes, format: str = "auto", name: str = "<bytes>") -> ImportResult:
    """Import a transcript held in memory; ``name`` is used in error messages."""
    text = _decode(data)
    if not text.strip():
        raise EmptyInput(f"{name}: the file is empty; nothing to import.", name=name)
    if format == "auto":
        format = detect_text(text, name)
    parser = _PARSERS.get(format)
    if parser is None:
        raise UnknownFormat(
            f"unknown format {format!r}; known formats: {known()} (or 'auto').",
            name=name,
            known=list(FORMATS),
        )
    from compactor.importers._common import CURRENT_LINE

    CURRENT_LINE.set(None)
    try:
        return parser(text, name)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        # Valid JSON of the wrong shape (a corrupted or hand-edited file): say where, store nothing.
        line = CURRENT_LINE.get()
        where = f" at line {line}" if line else ""
        raise ParseError(
            f"{name}: a {format} entry{where} has an unexpected shape "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); the file may be corrupted "
            "or edited by hand. Nothing was imported.",
            name=name,
            line=line,
        ) from exc


def import_file(path: str | Path, format: str = "auto") -> ImportResult:
    """Import the transcript at ``path`` (format detected when ``format="auto"``)."""
    p = Path(path)
    return import_bytes(p.read_bytes(), format=format, name=str(p))


__all__ = [
    "FORMATS",
    "ImportResult",
    "SkippedLine",
    "detect_format",
    "import_bytes",
    "import_file",
]
