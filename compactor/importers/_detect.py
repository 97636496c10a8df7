"""Format detection from content (the file name is only a tie-breaker).

JSONL formats are recognized by the shape of their first valid lines, single-document
formats by their top-level keys, Aider by its Markdown markers. A document that starts like
JSON but does not parse, and is not JSONL either, is a truncated single-document file: the
format is guessed from its head so that the importer can raise a ParseError naming it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from compactor.errors import EmptyInput, InputTooLarge, ParseError, UnknownFormat
from compactor.importers._common import ImportLimits, Source, TooDeep, _loads, too_deep
from compactor.importers._lines import line_format

FORMATS = [
    "claude-code",
    "codex",
    "aider",
    "swe-agent",
    "pi",
    "gemini-chat",
    "gemini-stream",
    "opencode",
    "anthropic-messages",
    "openai-messages",
]

_AIDER_STARTED = re.compile(r"^# aider chat started at \d{4}-\d{2}-\d{2}", re.M)
_AIDER_USER = re.compile(r"^####( |$)", re.M)
_AIDER_CONSOLE = re.compile(r"^> (Aider v|Tokens: |Applied edit to |Running |Model: )", re.M)
_SCAN_LINES = 200
_SAMPLE_BYTES = 4 << 20


def known() -> str:
    return ", ".join(FORMATS)


def detect_text(text: str, name: str, limits: ImportLimits | None = None) -> str:
    """Name of the format of ``text``; raises EmptyInput, UnknownFormat or ParseError."""
    return detect_source(Source(name, limits, data=text.encode("utf-8", "replace")))


def detect_source(src: Source) -> str:
    """Name of the format of ``src``, read from its head only unless it is one JSON document.

    A single-document candidate (starts with ``[``, or with ``{`` but is not JSONL) is parsed
    once, within the document limits, and the parsed document is kept on ``src`` for the
    importer. Raises EmptyInput, UnknownFormat, ParseError or InputTooLarge.
    """
    name = src.name
    sample, first_too_long = _sample(src)
    if not sample and not first_too_long:
        raise EmptyInput(f"{name}: the file is empty; nothing to import.", name=name)
    first = (sample[0] if sample else src.head(64)).lstrip()[:1]
    objs = _jsonl_objects(sample, src.limits.max_json_depth, name)
    doc_error: json.JSONDecodeError | None = None
    if first == "[" or (first == "{" and (first_too_long or len(objs) < 2 or not _parses(sample[0]))):
        try:
            src.doc = _loads(src.text(), src.limits.max_json_depth)
        except TooDeep:
            raise too_deep(name, src.limits.max_json_depth) from None
        except json.JSONDecodeError as e:
            if first_too_long:
                next(src.lines())  # not one document either: report the over-long line
            doc_error = e
        else:
            fmt = _single_document(src.doc)
            if fmt:
                return fmt
    fmt = _jsonl_format(objs)
    if fmt:
        return fmt
    if first not in ("[", "{") and _looks_like_aider(src.head(200_000)):
        return "aider"
    if doc_error is not None and _not_jsonl(sample, len(objs)):
        guess = _guess_truncated(src.head(20_000).strip(), name)  # read only on this error path
        if guess:
            return guess
        raise ParseError(
            f"{name}: looks like JSON but does not parse ({doc_error.msg} at line "
            f"{doc_error.lineno}, column {doc_error.colno}); the file may be truncated.",
            name=name,
        )
    raise UnknownFormat(
        f"{name}: not a transcript format this tool knows. Known formats: {known()}. "
        "Pass --format NAME if the file is one of them.",
        name=name,
        known=list(FORMATS),
    )


def _sample(src: Source) -> tuple[list[str], bool]:
    """The first non-empty lines (at most _SCAN_LINES, about _SAMPLE_BYTES), and whether the
    very first line is over the line limit (a one-line JSON document, or an error later)."""
    out: list[str] = []
    size = 0
    try:
        for _, line in src.lines():
            out.append(line)
            size += len(line)
            if len(out) >= _SCAN_LINES or size >= _SAMPLE_BYTES:
                break
    except InputTooLarge:
        return out, not out  # a long line later on is the importer's to report
    return out, False


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


def _looks_like_aider(text: str) -> bool:
    if _AIDER_STARTED.search(text):
        return True
    # a history whose header was cut off: user input and aider's console output both present
    return bool(_AIDER_USER.search(text)) and bool(_AIDER_CONSOLE.search(text))


def _not_jsonl(sample: list[str], parsed: int) -> bool:
    """A JSON-looking text most of whose lines are not JSON objects: a broken document."""
    nonempty = len(sample)
    return nonempty <= 1 or parsed * 2 < nonempty


def _single_document(doc: Any) -> str | None:
    if isinstance(doc, dict):
        if isinstance(doc.get("history"), list) and ("trajectory" in doc or "info" in doc):
            return "swe-agent"
        msgs = doc.get("messages")
        if isinstance(msgs, list):
            first = next((m for m in msgs if isinstance(m, dict)), None)
            if first is not None and "parts" in first and isinstance(first.get("info"), dict):
                return "opencode"
            if isinstance(doc.get("info"), dict) and not msgs:
                return "opencode"
            if (
                first is not None
                and first.get("type") in ("user", "gemini", "info", "error")
                and "role" not in first
            ):
                return "gemini-chat"
            if "sessionId" in doc and "projectHash" in doc:
                return "gemini-chat"
            if "system" in doc:
                return "anthropic-messages"
            return _message_list(msgs)
        return None
    if isinstance(doc, list) and doc and all(isinstance(m, dict) and "role" in m for m in doc):
        return _message_list(doc)
    return None


def _message_list(msgs: list[Any]) -> str | None:
    if not msgs or not all(isinstance(m, dict) and "role" in m for m in msgs):
        return None
    for m in msgs:
        if (
            m.get("role") in ("system", "developer", "tool", "function")
            or "tool_calls" in m
            or "tool_call_id" in m
        ):
            return "openai-messages"
        content = m.get("content")
        if isinstance(content, list):
            for p in content:
                if isinstance(p, dict):
                    t = p.get("type")
                    if t in ("tool_use", "tool_result", "thinking", "redacted_thinking", "compaction"):
                        return "anthropic-messages"
                    if t == "image" and "source" in p:
                        return "anthropic-messages"
                    if t in ("image_url", "input_text", "input_audio"):
                        return "openai-messages"
    # plain text only: both shapes agree; Anthropic is the canonical one
    return "anthropic-messages"


def _jsonl_objects(sample: list[str], max_depth: int, name: str) -> list[dict[str, Any]]:
    out = []
    for line in sample:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = _loads(line, max_depth)
        except TooDeep:
            continue  # the importer reports it with its line number
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _jsonl_format(objs: list[dict[str, Any]]) -> str | None:
    votes: dict[str, int] = {}
    for o in objs:
        fmt = line_format(o)
        if fmt:
            votes[fmt] = votes.get(fmt, 0) + 1
    if not votes:
        return None
    return max(votes.items(), key=lambda kv: kv[1])[0]


def _guess_truncated(text: str, name: str) -> str | None:
    head = text[:20_000]
    if name.endswith(".traj") or ('"history"' in head and '"trajectory"' in head):
        return "swe-agent"
    if '"parts"' in head and '"info"' in head:
        return "opencode"
    if '"projectHash"' in head or ('"sessionId"' in head and '"gemini"' in head):
        return "gemini-chat"
    if '"tool_calls"' in head or '"tool_call_id"' in head:
        return "openai-messages"
    if '"role"' in head:
        return "anthropic-messages"
    return None
