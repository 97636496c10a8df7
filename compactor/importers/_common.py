"""Shared machinery of the importers: mutable drafts, lenient JSONL reading, finalization.

Importers build a list of mutable :class:`Draft` s (merging lines of one API response,
attaching tool results to the user turn that follows a call) and :meth:`Builder.finish`
turns them into frozen canonical events in one pass. Finishing is where the cross-format
guarantees live, so every importer gets them the same way: seq 1..n, ids unique within the
file, every tool_result refers to an earlier tool_use, tool_use ids unique.
"""

from __future__ import annotations

import base64
import hashlib
import contextvars
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from compactor.errors import ParseError
from compactor.events import (
    Event,
    ImageBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

#: Base64 images above this many decoded bytes are not kept inline (the store externalizes).
INLINE_IMAGE_LIMIT = 64 * 1024


class SkippedLine(BaseModel):
    """A source line the importer could not use."""

    line: int = Field(description="1-based line number in the source file.")
    reason: str = Field(description="What was wrong with it.")


class ImportResult(BaseModel):
    """Canonical events of one transcript plus what was skipped and summary counts."""

    format: str = Field(description="Format name, one of FORMATS.")
    events: list[Event] = Field(description="seq 1..n assigned, tokens None, ids deterministic.")
    skipped: list[SkippedLine] = Field(default_factory=list)
    stats: dict[str, int] = Field(default_factory=dict)


@dataclass
class Draft:
    """A mutable event under construction."""

    role: str
    id: str
    at: datetime | None = None
    kind: str = "message"
    injected: bool = False
    blocks: list[Any] = field(default_factory=list)
    usage: Usage | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def results_only(self) -> bool:
        """A user draft carrying only tool results (the place for further results)."""
        return (
            self.role == "user"
            and self.kind == "message"
            and bool(self.blocks)
            and all(isinstance(b, ToolResultBlock) for b in self.blocks)
        )

    @property
    def has_tool_use(self) -> bool:
        return any(isinstance(b, ToolUseBlock) for b in self.blocks)


class Builder:
    """Collects drafts for one source and finishes them into an :class:`ImportResult`."""

    def __init__(self, fmt: str, key: str) -> None:
        self.fmt = fmt
        self.key = key
        self.drafts: list[Draft] = []
        self.skipped: list[SkippedLine] = []
        self.repaired = 0

    # construction ------------------------------------------------------------------------
    def new(
        self,
        role: str,
        id: str,
        *,
        at: datetime | None = None,
        kind: str = "message",
        injected: bool = False,
        blocks: list[Any] | None = None,
        usage: Usage | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Draft:
        d = Draft(
            role=role,
            id=id,
            at=at,
            kind=kind,
            injected=injected,
            blocks=list(blocks or []),
            usage=usage,
            meta=dict(meta or {}),
        )
        self.drafts.append(d)
        return d

    def last(self) -> Draft | None:
        return self.drafts[-1] if self.drafts else None

    def add_result(self, block: ToolResultBlock, id: str, at: datetime | None = None) -> Draft:
        """Append a tool result to the trailing results-only user draft, or start one."""
        last = self.last()
        if last is not None and last.results_only:
            last.blocks.append(block)
            return last
        return self.new("user", id, at=at, blocks=[block])

    def skip(self, line: int, reason: str) -> None:
        self.skipped.append(SkippedLine(line=line, reason=reason))

    # finishing ---------------------------------------------------------------------------
    def finish(self) -> ImportResult:
        drafts = [d for d in self.drafts if d.blocks]
        orphans = _fix_tool_pairing(drafts)
        seen_ids: dict[str, int] = {}
        events: list[Event] = []
        for seq, d in enumerate(drafts, start=1):
            eid = d.id[:240]
            if eid in seen_ids:
                seen_ids[eid] += 1
                eid = f"{eid}~{seen_ids[eid]}"
            seen_ids.setdefault(eid, 1)
            events.append(
                Event(
                    seq=seq,
                    id=eid,
                    at=d.at,
                    kind=d.kind,  # type: ignore[arg-type]
                    role=d.role,  # type: ignore[arg-type]
                    blocks=d.blocks,
                    usage=d.usage,
                    injected=d.injected,
                    source=self.fmt,
                    meta=d.meta,
                )
            )
        stats = compute_stats(events)
        stats["repaired_lines"] = self.repaired
        stats["orphan_results"] = orphans
        return ImportResult(format=self.fmt, events=events, skipped=self.skipped, stats=stats)


def _fix_tool_pairing(drafts: list[Draft]) -> int:
    """Make tool_use ids unique and every tool_result point at an earlier tool_use.

    Some sources reuse a call id (a SWE-agent demonstration repeats ids); the repeat is
    renamed ``<id>~<n>`` and the next result carrying the original id follows it. A result
    whose call is not in the file (a transcript that starts mid-turn) becomes plain text so
    that pairing invariants hold; returns how many such orphans were converted.
    """
    current: dict[str, str] = {}
    uses: dict[str, int] = {}
    orphans = 0
    for d in drafts:
        out: list[Any] = []
        for b in d.blocks:
            if isinstance(b, ToolUseBlock):
                n = uses.get(b.id, 0) + 1
                uses[b.id] = n
                if n > 1:
                    new_id = f"{b.id}~{n}"
                    current[b.id] = new_id
                    b = b.model_copy(update={"id": new_id})
                else:
                    current[b.id] = b.id
            elif isinstance(b, ToolResultBlock):
                target = current.get(b.tool_use_id)
                if target is None:
                    orphans += 1
                    text = b.text
                    b = TextBlock(
                        text=f"[result of tool call {b.tool_use_id}, whose call is not in this "
                        f"transcript]\n{text}"
                    )
                elif target != b.tool_use_id:
                    b = b.model_copy(update={"tool_use_id": target})
            out.append(b)
        d.blocks = out
    return orphans


def compute_stats(events: list[Event]) -> dict[str, int]:
    """Counts every importer reports (see docs/CONTRACTS.md)."""
    use_ids: list[str] = []
    result_ids: set[str] = set()
    n_results = 0
    for e in events:
        for b in e.blocks:
            if isinstance(b, ToolUseBlock):
                use_ids.append(b.id)
            elif isinstance(b, ToolResultBlock):
                n_results += 1
                result_ids.add(b.tool_use_id)
    unique = set(use_ids)
    return {
        "events": len(events),
        "messages": sum(1 for e in events if e.kind == "message"),
        "user_messages": sum(1 for e in events if e.is_user_request),
        "tool_calls": len(unique),
        "tool_results": n_results,
        "unresolved_tool_calls": len(unique - result_ids),
        "compactions": sum(1 for e in events if e.kind == "compaction"),
        "injected": sum(1 for e in events if e.injected),
        "pinned": sum(1 for e in events if e.kind == "pinned"),
    }


# --- reading ----------------------------------------------------------------------------------

_BAD_ESCAPE = re.compile(r"\\(?![\"\\/bfnrtu])")


def source_key(data: str) -> str:
    """Short stable key of a source with no id of its own: hash of its first KiB.

    The head of an append-only transcript does not change as it grows, so re-importing a
    longer copy of the same file yields the same ids for the events it already had.
    """
    return hashlib.sha256(data[:1024].encode("utf-8", "replace")).hexdigest()[:10]


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _loads(text: str, **kw: Any) -> Any:
    """``json.loads``, with lone surrogate escapes (a JavaScript agent cut a string between the
    halves of a pair) replaced by U+FFFD: such strings cannot be encoded as UTF-8, so the log
    could not store them nor the Messages API accept them. Valid pairs are joined by json."""
    obj = json.loads(text, **kw)
    return _fix_surrogates(obj) if _SURROGATE_ESCAPE.search(text) else obj


def _fix_surrogates(obj: Any) -> Any:
    if isinstance(obj, str):
        return _LONE_SURROGATE.sub("\ufffd", obj)
    if isinstance(obj, list):
        return [_fix_surrogates(v) for v in obj]
    if isinstance(obj, dict):
        return {_fix_surrogates(k): _fix_surrogates(v) for k, v in obj.items()}
    return obj


# The JSONL line an importer is working on, so a malformed entry that breaks it (valid JSON
# of the wrong shape) can be reported with its line number.
CURRENT_LINE: contextvars.ContextVar[int | None] = contextvars.ContextVar("CURRENT_LINE", default=None)


def iter_jsonl(text: str, builder: Builder) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) per JSONL line; report unusable lines.

    A line that fails only because of invalid backslash escapes (seen where a publisher
    masked text after serialization) is repaired and counted in ``builder.repaired``.
    """
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = _loads(line)
        except json.JSONDecodeError as e:
            try:
                obj = _loads(_BAD_ESCAPE.sub(r"\\\\", line), strict=False)
                builder.repaired += 1
            except json.JSONDecodeError:
                builder.skip(no, f"invalid JSON: {e.msg} (column {e.colno})")
                continue
        if not isinstance(obj, dict):
            builder.skip(no, "not a JSON object")
            continue
        CURRENT_LINE.set(no)
        yield no, obj
    CURRENT_LINE.set(None)


def load_json(text: str, name: str, fmt: str) -> Any:
    """Parse a single-document JSON source; a broken one is a ParseError naming the file."""
    try:
        return _loads(text)
    except json.JSONDecodeError as e:
        at_end = e.pos >= len(text.rstrip()) - 1
        what = "ends before the JSON document is complete (truncated?)" if at_end else e.msg
        raise ParseError(
            f"{name}: not a valid {fmt} file: {what} at line {e.lineno}, column {e.colno}. "
            "Re-export or re-copy the file, or pass --format if it is another format.",
            name=name,
            format=fmt,
            line=e.lineno,
        ) from None


def parse_time(value: Any) -> datetime | None:
    """ISO-8601 string (``Z`` allowed) or epoch seconds/milliseconds -> datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        secs = value / 1000.0 if value > 1e11 else float(value)
        try:
            return datetime.fromtimestamp(secs, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        s = value.strip()
        if s.endswith("Z"):
            s = s[:-1] + "+00:00"
        try:
            return datetime.fromisoformat(s)
        except ValueError:
            return None
    return None


# --- blocks -----------------------------------------------------------------------------------


def image(media_type: str | None, data: str | None, notes: dict[str, Any]) -> ImageBlock:
    """An ImageBlock; base64 data above INLINE_IMAGE_LIMIT is left out and noted in ``notes``."""
    mt = media_type or "image/png"
    if not data:
        return ImageBlock(media_type=mt)
    if len(data) * 3 // 4 > INLINE_IMAGE_LIMIT:
        raw = _b64(data)
        if len(raw) > INLINE_IMAGE_LIMIT:
            notes.setdefault("images_not_inline", []).append(
                {"media_type": mt, "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
            )
            return ImageBlock(media_type=mt)
    return ImageBlock(media_type=mt, data=data)


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (ValueError, TypeError):
        return data.encode()


def as_text(value: Any) -> str:
    """Best-effort text of a tool output value (string, list of parts, or object)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for v in value:
            if isinstance(v, dict) and isinstance(v.get("text"), str):
                parts.append(v["text"])
            else:
                parts.append(as_text(v))
        return "\n".join(p for p in parts if p)
    return json.dumps(value, ensure_ascii=False)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments: a JSON object string is parsed; anything else is wrapped."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            val = json.loads(raw)
        except json.JSONDecodeError:
            return {"input": raw}
        return val if isinstance(val, dict) else {"input": val}
    return {"input": raw}


def result_block(tool_use_id: str, content: Any, is_error: bool, notes: dict[str, Any]) -> ToolResultBlock:
    """A ToolResultBlock from a string or a list of Anthropic-like text/image parts."""
    blocks: list[Any] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                blocks.append(TextBlock(text=as_text(part)))
            elif part.get("type") == "text":
                blocks.append(TextBlock(text=str(part.get("text", ""))))
            elif part.get("type") == "image":
                src = part.get("source") or {}
                blocks.append(
                    image(
                        src.get("media_type") or part.get("mimeType") or part.get("mediaType"),
                        src.get("data") or part.get("data"),
                        notes,
                    )
                )
            else:
                blocks.append(TextBlock(text=as_text(part)))
    else:
        text = as_text(content)
        if text:
            blocks.append(TextBlock(text=text))
    return ToolResultBlock(tool_use_id=tool_use_id, content=blocks, is_error=bool(is_error))


def usage_of(
    input_tokens: Any = 0,
    output_tokens: Any = 0,
    cache_read: Any = 0,
    cache_creation: Any = 0,
) -> Usage | None:
    vals = [_int(input_tokens), _int(output_tokens), _int(cache_read), _int(cache_creation)]
    if not any(vals):
        return None
    return Usage(
        input_tokens=vals[0],
        output_tokens=vals[1],
        cache_read_input_tokens=vals[2],
        cache_creation_input_tokens=vals[3],
    )


def _int(v: Any) -> int:
    try:
        return max(0, int(v or 0))
    except (TypeError, ValueError):
        return 0
