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
Lines that cannot be parsed, and lines of another format in a file that mixes two, are
skipped and reported with their line numbers.

Reading is bounded (``ImportLimits``): JSONL and Markdown stream line by line with a maximum
line size, single-document formats have a maximum file size, JSON nesting has a maximum depth,
and tool outputs over the inline limit go to the artifact store (``spill``) or are cut with a
marker; every case is an error naming the file and line, or a recorded truncation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from compactor.events import Event
from compactor.errors import EmptyInput, InvalidInput, ParseError, UnknownFormat
from compactor.engine.gc_pause import collector_paused
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
from compactor.importers._common import (
    CURRENT_LINE,
    Finishing,
    ImportLimits,
    ImportResult,
    SkippedLine,
    Source,
    Spill,
    Truncation,
)
from compactor.importers._bounds import bound_event, bound_tool_outputs, with_truncations
from compactor.importers._drafts import SinkFailed
from compactor.importers._detect import FORMATS, detect_source, known

T = TypeVar("T")

_PARSERS: dict[str, Callable[[Source, str], ImportResult]] = {
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


def detect_format(path: str | Path, limits: ImportLimits | None = None) -> str:
    """Format name of the transcript at ``path``.

    Raises:
        InvalidInput: ``path`` is not a readable file.
        EmptyInput: the file is empty or whitespace.
        UnknownFormat: the content matches no known format (the message lists them).
        ParseError: the file starts like a JSON document but does not parse.
    """
    p = _readable(Path(path))
    return _guarded(lambda: detect_source(Source(str(p), limits, path=p)), str(p))


def import_bytes(
    data: bytes,
    format: str = "auto",
    name: str = "<bytes>",
    *,
    limits: ImportLimits | None = None,
    spill: Spill | None = None,
) -> ImportResult:
    """Import a transcript held in memory; ``name`` is used in error messages."""
    return _import(Source(name, limits, data=data), format, spill)


def import_file(
    path: str | Path,
    format: str = "auto",
    *,
    limits: ImportLimits | None = None,
    spill: Spill | None = None,
    sink: Callable[[list[Event]], None] | None = None,
    count: bool = False,
) -> ImportResult:
    """Import the transcript at ``path``, streaming (format detected when ``format="auto"``).

    Args:
        limits: bounds on lines, documents, nesting and inline tool outputs (defaults if None).
        spill: stores a tool output over ``limits.max_inline_tool_output`` and returns its
            reference (importing into a session log); without it such outputs are cut to head
            + tail with a marker. Either way they are listed in ``ImportResult.truncated``.
        sink: receives the finished events in order, a batch at a time, instead of the
            result's ``events`` (which is then empty; its stats still count them). The Claude
            Code importer hands over each message once the transcript is past it, so the
            transcript is never held whole; the other formats hand over all events at the end.
            An exception raised by ``sink`` propagates unchanged and stops the import.
        count: the events (handed to ``sink`` or returned) carry their token count, the
            events ``tokens.with_tokens`` would give, counted as they are finished instead of
            copied afterwards (issue 17: a copy per imported event).
    """
    p = _readable(Path(path))
    return _import(Source(str(p), limits, path=p), format, spill, sink, count)


def _readable(p: Path) -> Path:
    """``p`` if it is a file, else InvalidInput saying what it is instead."""
    if p.is_dir():
        raise InvalidInput(f"{p}: is a directory; give the path of a transcript file", name=str(p))
    if not p.is_file():
        raise InvalidInput(f"{p}: no such file; give the path of a transcript file", name=str(p))
    return p


def _guarded(fn: Callable[[], T], name: str) -> T:
    """Run a read of ``name``; an OS error or runaway recursion becomes a typed error."""
    try:
        return fn()
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot read the file ({exc.strerror or exc})", name=name) from None
    except RecursionError:
        raise ParseError(f"{name}: nested too deeply to import; nothing was imported.", name=name) from None


def _blank(src: Source) -> bool:
    """Only whitespace (read in bounded chunks, never the whole file at once)."""
    with src._open() as f:
        while chunk := f.read(1 << 16):
            if chunk.strip(b" \t\r\n\f\v\xef\xbb\xbf"):
                return False
    return True


def _import(
    src: Source,
    format: str,
    spill: Spill | None,
    sink: Callable[[list[Event]], None] | None = None,
    count: bool = False,
) -> ImportResult:
    name = src.name
    if _guarded(lambda: _blank(src), name):
        raise EmptyInput(f"{name}: the file is empty; nothing to import.", name=name)
    if format == "auto":
        format = _guarded(lambda: detect_source(src), name)
    parser = _PARSERS.get(format)
    if parser is None:
        raise UnknownFormat(
            f"unknown format {format!r}; known formats: {known()} (or 'auto').",
            name=name,
            known=list(FORMATS),
        )
    CURRENT_LINE.set(None)
    limit = src.limits.max_inline_tool_output
    truncs: list[Truncation] = []
    counted = _counter() if count else None
    if sink is not None:
        def bounded(events: list[Event]) -> None:
            try:
                if counted is not None:  # the events are this import's own: counted in place
                    sink([counted(bound_event(e, limit, spill, truncs)) for e in events])
                else:
                    sink([bound_event(e, limit, spill, truncs) for e in events])
            except Exception as exc:  # not a parse problem of the file: re-raised as it is
                raise SinkFailed(exc) from exc

        def ready(events: list[Event]) -> None:
            try:
                sink(events)
            except Exception as exc:
                raise SinkFailed(exc) from exc

        src.sink = bounded
        # an importer that makes the events one by one bounds and counts each as it makes it
        # (``Builder``), then hands them to ``ready``: the same events, one walk less (issue 17)
        src.finishing = Finishing(limit, spill, truncs, _count_blocks() if count else None, ready)
    try:
        # The collector paused as in a compaction (``engine.gc_pause``): a big import makes
        # millions of objects (events, blocks, parsed lines) and no cycles; its full passes
        # re-scanned them all for nothing (0 objects collected in 10 passes over 100k events,
        # a quarter of the import's CPU, issue 17).
        with collector_paused():
            result = _guarded(lambda: parser(src, name), name)
        if src.sink is not None and result.events:  # an importer that does not stream
            src.sink(result.events)
            result = result.model_copy(update={"events": []})
    except SinkFailed as failed:
        raise failed.exc from None
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
    if sink is not None:
        return with_truncations(result, truncs)
    result = bound_tool_outputs(result, limit, spill)
    if counted is not None:
        result = result.model_copy(update={"events": [counted(e) for e in result.events]})
    return result


def _counter() -> Callable[[Event], Event]:
    from compactor.tokens import count_into, import_counter  # (the tokenizer only for a counted import)

    return functools.partial(count_into, count=import_counter())  # (the import's own memos)


def _count_blocks() -> Callable[[list[Any]], int]:
    from compactor.tokens import import_counter  # (the tokenizer only for a counted import)

    return import_counter()  # ``count_blocks``, through the import's own memos


__all__ = [
    "FORMATS",
    "ImportLimits",
    "ImportResult",
    "SkippedLine",
    "Spill",
    "Truncation",
    "detect_format",
    "import_bytes",
    "import_file",
]
