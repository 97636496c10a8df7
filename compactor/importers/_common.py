"""Shared machinery of the importers: the import's limits and result, the source being read,
lenient JSONL and JSON reading, the parts every format makes the same way (times, images,
tool results, usage).

The drafts an importer builds and their finishing into events are in ``_drafts``; the
bounding of big tool outputs in ``_bounds``.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from compactor.importers import _build as build
from compactor.importers._lines import line_format
from compactor.errors import InputTooLarge, ParseError
from compactor.events import (
    ArtifactRefBlock,
    Event,
    ImageBlock,
    TextBlock,
    ToolResultBlock,
    Usage,
)


#: Base64 images above this many decoded bytes are not kept inline (the store externalizes).
INLINE_IMAGE_LIMIT = 64 * 1024


class SkippedLine(BaseModel):
    """A source line the importer could not use."""

    line: int = Field(description="1-based line number in the source file.")
    reason: str = Field(description="What was wrong with it.")


class Truncation(BaseModel):
    """A tool output over the inline limit: moved to the artifact store, or cut."""

    tool_use_id: str = Field(description="The call whose result it is.")
    bytes: int = Field(description="Size of the whole output (UTF-8).")
    kept_bytes: int = Field(description="Bytes kept inline (0 when moved to an artifact).")
    artifact: str | None = Field(default=None, description="artifact:// URI when stored, else None.")


class ImportResult(BaseModel):
    """Canonical events of one transcript plus what was skipped and summary counts."""

    format: str = Field(description="Format name, one of FORMATS.")
    events: list[Event] = Field(
        description="seq 1..n assigned, tokens None (counted with ``import_file(count=True)``), ids deterministic."
    )
    skipped: list[SkippedLine] = Field(default_factory=list)
    stats: dict[str, int] = Field(default_factory=dict)
    truncated: list[Truncation] = Field(
        default_factory=list, description="Tool outputs over the inline limit and what became of them."
    )


MiB = 1 << 20


class ImportLimits(BaseModel):
    """Bounds on what an import reads, so a hostile or careless file cannot exhaust memory.

    The CLI fills them from ``Settings`` (``COMPACTOR_MAX_*``); the defaults hold every real
    transcript seen so far with a wide margin.
    """

    model_config = ConfigDict(frozen=True)

    max_line_bytes: int = Field(
        default=16 * MiB, gt=0, description="Longest JSONL / Markdown line read; longer is an error."
    )
    max_json_depth: int = Field(
        default=200, gt=0, description="Deepest JSON nesting accepted (per line or document)."
    )
    max_inline_tool_output: int = Field(
        default=1 * MiB,
        gt=0,
        description="Tool outputs above this many bytes go to the artifact store (or, with no "
        "store, are cut to head + tail with a marker).",
    )
    max_document_bytes: int = Field(
        default=256 * MiB,
        gt=0,
        description="Largest whole-document transcript (.traj, Gemini chat JSON, OpenCode "
        "export, message lists), which cannot be read line by line.",
    )


def _mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n:,} bytes"


#: Stores the bytes of one tool output and returns a reference with previews (the session
#: log's ``put_artifact``); given by callers that import into a store.
Spill = Callable[[bytes], ArtifactRefBlock]


class Finishing:
    """What a streamed import does to each event before its sink (``importers._import``):
    tool outputs over ``limit`` bounded (``bound_event``, ``spill``, listed in ``truncs``),
    the count set when ``count_blocks`` is given, then ``ready`` takes the events. The
    finisher does both as it makes each event, instead of a second walk of every event
    after it (issue 17). An exception raised there is the sink's (``SinkFailed``), as it
    was when the sink did it."""

    __slots__ = ("limit", "spill", "truncs", "count_blocks", "ready")

    def __init__(
        self,
        limit: int,
        spill: Spill | None,
        truncs: list[Truncation],
        count_blocks: Callable[[list[Any]], int] | None,
        ready: Callable[[list[Event]], None],
    ) -> None:
        self.limit = limit
        self.spill = spill
        self.truncs = truncs
        self.count_blocks = count_blocks
        self.ready = ready


class Source:
    """A transcript being imported: read line by line (JSONL, Markdown) or as one bounded
    document (single-document JSON formats), from a file or from bytes in memory.

    Line-by-line reading never holds more than one line (bounded by ``max_line_bytes``); a
    whole document is bounded by ``max_document_bytes`` and parsed once (detection hands the
    parsed document to the importer).
    """

    def __init__(
        self,
        name: str,
        limits: ImportLimits | None = None,
        *,
        path: Path | None = None,
        data: bytes | None = None,
    ) -> None:
        self.name = name
        self.limits = limits or ImportLimits()
        self.path = path
        self.data = data
        self.doc: Any = _UNSET  # parsed whole document, once parsed
        #: Streamed import: where an importer that can stream hands finished events (Builder).
        self.sink: Callable[[list[Event]], None] | None = None
        #: What ``sink`` does to each event, for an importer that does it itself (Builder).
        self.finishing: Finishing | None = None

    def _open(self) -> IO[bytes]:
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.path is not None
        return open(self.path, "rb")

    @property
    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.path is not None
        return self.path.stat().st_size

    def head(self, n_bytes: int = 4096) -> str:
        """The first ``n_bytes`` decoded (BOM dropped)."""
        with self._open() as f:
            return _decode(f.read(n_bytes))

    def lines(self, *, keep_empty: bool = False) -> Iterator[tuple[int, str]]:
        """(1-based line number, line without its newline); InputTooLarge past the line limit."""
        limit = self.limits.max_line_bytes
        with self._open() as f:
            no = 0
            while True:
                raw = f.readline(limit + 1)
                if not raw:
                    return
                no += 1
                if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
                    raise InputTooLarge(
                        f"{self.name}:{no}: line longer than {_mib(limit)} (the max line "
                        "size); nothing was imported. Raise COMPACTOR_MAX_LINE_BYTES if the "
                        "file is genuine.",
                        name=self.name,
                        line=no,
                        limit="max_line_bytes",
                    )
                # (positional: keywords cost a fifth of the call; one ``rstrip`` of both: the
                # line holds one newline at most, its last character, issue 17)
                line = _decode(raw) if no == 1 else raw.decode("utf-8", "replace")
                del raw
                line = line.rstrip("\r\n")
                # (``line.strip()`` without the copy: a non-whitespace character in it)
                if keep_empty or (line and not line.isspace()):
                    yield no, line

    def text(self) -> str:
        """The whole source decoded; InputTooLarge past ``max_document_bytes``."""
        limit = self.limits.max_document_bytes
        if self.size > limit:
            raise InputTooLarge(
                f"{self.name}: {_mib(self.size)} is over the {_mib(limit)} limit for a "
                "whole-document transcript (read at once, not line by line); nothing was "
                "imported. Raise COMPACTOR_MAX_DOCUMENT_BYTES if the file is genuine.",
                name=self.name,
                limit="max_document_bytes",
            )
        with self._open() as f:
            return _decode(f.read())

    def document(self, fmt: str) -> Any:
        """The parsed whole document (parsed once; a broken one is a ParseError)."""
        if self.doc is _UNSET:
            self.doc = load_json(self.text(), self.name, fmt, self.limits.max_json_depth)
        return self.doc


_UNSET: Any = object()


def _decode(data: bytes) -> str:
    return data.decode("utf-8-sig", errors="replace")


# --- reading ----------------------------------------------------------------------------------

_BAD_ESCAPE = re.compile(r"\\(?![\"\\/bfnrtu])")


def source_key(data: str | Source) -> str:
    """Short stable key of a source with no id of its own: hash of its first KiB.

    The head of an append-only transcript does not change as it grows, so re-importing a
    longer copy of the same file yields the same ids for the events it already had.
    """
    # 4 KiB of UTF-8 always hold the first 1,024 characters whole
    text = data.head(4096) if isinstance(data, Source) else data
    return hashlib.sha256(text[:1024].encode("utf-8", "replace")).hexdigest()[:10]


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class TooDeep(ValueError):
    """JSON nested deeper than the limit (raised by :func:`_loads`)."""


def _loads(text: str, max_depth: int = ImportLimits().max_json_depth, **kw: Any) -> Any:
    """``json.loads``, with lone surrogate escapes (a JavaScript agent cut a string between the
    halves of a pair) replaced by U+FFFD: such strings cannot be encoded as UTF-8, so the log
    could not store them nor the Messages API accept them. Valid pairs are joined by json.

    Nesting deeper than ``max_depth`` raises TooDeep: json's C parser recurses (10,000 levels
    is a RecursionError) and so do pydantic and the renderers further on.
    """
    try:
        obj = _json_object(text) if not kw else json.loads(text, **kw)
        # cheap bound first (C speed): fewer opening brackets than the limit cannot nest deeper
        if text.count("[") + text.count("{") > max_depth and _deeper_than(obj, max_depth):
            raise TooDeep(max_depth)
        return _fix_surrogates(obj) if _SURROGATE_ESCAPE.search(text) else obj
    except RecursionError:
        raise TooDeep(max_depth) from None


_SCAN = json.decoder.JSONDecoder().scan_once  # the scanner ``json.loads`` ends in (C)


def _json_object(text: str) -> Any:
    """``json.loads(text)``; a line that is one JSON object (``{`` first, ``}`` last: no
    whitespace or BOM around it) goes straight to json's scanner, as ``json.loads`` would
    after its checks (issue 17: three Python calls and two regex matches fewer per line).
    Anything else, and any failure, is ``json.loads``'s, with its error."""
    if text[:1] == "{" and text[-1:] == "}":
        try:
            obj, end = _SCAN(text, 0)
        except Exception:
            return json.loads(text)
        if end == len(text):
            return obj
    return json.loads(text)


def _deeper_than(obj: Any, limit: int) -> bool:
    """True when containers nest more than ``limit`` levels (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if d > limit:
            return True
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values() if isinstance(v, (dict, list)))
        elif isinstance(o, list):
            stack.extend((v, d + 1) for v in o if isinstance(v, (dict, list)))
    return False


def too_deep(name: str, limit: int, line: int | None = None) -> ParseError:
    """The error for JSON nested deeper than ``limit``."""
    where = f"{name}:{line}" if line else name
    return ParseError(
        f"{where}: JSON nested deeper than {limit} levels; nothing was imported. Raise "
        "COMPACTOR_MAX_JSON_DEPTH if the file is genuine.",
        name=name,
        line=line,
        limit="max_json_depth",
    )


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


class LineReader(Protocol):
    """What ``iter_jsonl`` reports to: an importer's ``_drafts.Builder``."""

    fmt: str
    repaired: int

    def skip(self, line: int, reason: str) -> None: ...


def iter_jsonl(
    src: str | Source, builder: LineReader, where: list[int | None] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) per JSONL line, streaming; report unusable lines.

    A line that fails only because of invalid backslash escapes (seen where a publisher
    masked text after serialization) is repaired and counted in ``builder.repaired``. A line
    that is clearly another known format's (a file that mixes two transcripts) is skipped and
    reported, never silently dropped. A line over the size limit or nested deeper than the
    depth limit stops the import (InputTooLarge / ParseError naming the line).

    ``where``: the line being worked on is written to ``where[0]`` instead of ``CURRENT_LINE``
    (a context variable's ``set`` per line, ~5% of reading it, issue 17); the caller then sets
    ``CURRENT_LINE`` from it when an exception leaves its loop (``publish_line``).
    """
    if isinstance(src, str):
        src = Source("<text>", data=src.encode("utf-8", "surrogatepass"))
    depth = src.limits.max_json_depth
    scan = _SCAN
    depth2 = 2 * depth
    claude = builder.fmt == "claude-code"
    for no, line in src.lines():
        # ``_loads(line, depth)`` without its calls for the usual line (issue 17): one JSON
        # object whose scan ends at its last character, with few enough brackets and no
        # ``\u`` escape, is what ``_loads`` returns unchanged; any other line goes through it
        obj = _UNSET
        if line[0] == "{" and line[-1] == "}":
            try:
                obj, end = scan(line, 0)
            except Exception:
                obj = _UNSET
            else:
                # (nesting ``k`` deep takes ``k`` opening and ``k`` closing brackets: a whole
                # object of at most ``2 * depth`` characters is never deeper than ``depth``, so
                # its brackets need no count, issue 17)
                if end != len(line) or "\\u" in line or (
                    end > depth2 and line.count("[") + line.count("{") > depth
                ):
                    obj = _UNSET
        if obj is _UNSET:
            try:
                obj = _loads(line, depth)
            except TooDeep:
                raise too_deep(src.name, depth, no) from None
            except json.JSONDecodeError as e:
                try:
                    obj = _loads(_BAD_ESCAPE.sub(r"\\\\", line), depth, strict=False)
                    builder.repaired += 1
                except TooDeep:
                    raise too_deep(src.name, depth, no) from None
                except json.JSONDecodeError:
                    builder.skip(no, f"invalid JSON: {e.msg} (column {e.colno})")
                    continue
        del line
        if not isinstance(obj, dict):
            builder.skip(no, "not a JSON object")
            continue
        if where is None:
            CURRENT_LINE.set(no)
        else:
            where[0] = no
        if claude and "uuid" in obj and ((t := obj.get("type")) == "user" or t == "assistant"):
            yield no, obj  # (``line_format``'s answer for it: a Claude Code line, issue 17)
            continue
        other = line_format(obj)
        if other is not None and other != builder.fmt:
            builder.skip(no, f"a {other} line in a {builder.fmt} file (mixed formats)")
            continue
        yield no, obj
    if where is None:
        CURRENT_LINE.set(None)
    else:
        where[0] = None


def publish_line(where: list[int | None]) -> None:
    """``CURRENT_LINE`` set to the line ``iter_jsonl(..., where)`` last wrote: what it holds when
    ``iter_jsonl`` sets it itself (for an exception leaving the caller's loop)."""
    CURRENT_LINE.set(where[0])


def load_json(
    text: str | Source, name: str, fmt: str, max_depth: int = ImportLimits().max_json_depth
) -> Any:
    """Parse a single-document JSON source; a broken one is a ParseError naming the file."""
    if isinstance(text, Source):
        return text.document(fmt)
    try:
        return _loads(text, max_depth)
    except TooDeep:
        raise too_deep(name, max_depth) from None
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
    if type(value) is str and len(value) == 24 and value[23] == "Z" and value[19] == ".":
        # the usual stamp, ``2026-01-01T00:00:01.000Z``: ``fromisoformat`` takes its ``Z`` as
        # it takes ``+00:00`` (the same datetime), without the copies below (issue 17)
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass  # (the general reading below decides)
    if isinstance(value, str):  # (the usual case, first)
        if value == "":
            return None
        s = value.strip()
        if s.endswith("Z"):
            s = s[:-1] + "+00:00"
        try:
            return datetime.fromisoformat(s)
        except ValueError:
            return None
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        secs = value / 1000.0 if value > 1e11 else float(value)
        try:
            return datetime.fromtimestamp(secs, tz=UTC)
        except (OverflowError, OSError, ValueError):
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
            val = _loads(raw)
        except (json.JSONDecodeError, TooDeep):
            return {"input": raw}
        return val if isinstance(val, dict) else {"input": val}
    return {"input": raw}


def result_block(tool_use_id: str, content: Any, is_error: bool, notes: dict[str, Any]) -> ToolResultBlock:
    """A ToolResultBlock from a string or a list of Anthropic-like text/image parts."""
    if type(content) is str:  # (the usual output: ``as_text`` of it is itself)
        return build.tool_result_block(tool_use_id, [build.text_block(content)] if content else [], bool(is_error))
    blocks: list[Any] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                blocks.append(TextBlock(text=as_text(part)))
            elif part.get("type") == "text":
                blocks.append(build.text_block(str(part.get("text", ""))))
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
            blocks.append(build.text_block(text))
    return build.tool_result_block(tool_use_id, blocks, bool(is_error))


def usage_of(
    input_tokens: Any = 0,
    output_tokens: Any = 0,
    cache_read: Any = 0,
    cache_creation: Any = 0,
) -> Usage | None:
    if input_tokens is None and output_tokens is None and cache_read is None and cache_creation is None:
        return None  # (each would be 0)
    vals = [_int(input_tokens), _int(output_tokens), _int(cache_read), _int(cache_creation)]
    if not any(vals):
        return None
    return build.usage(vals[0], vals[1], vals[2], vals[3])


def _int(v: Any) -> int:
    try:
        return max(0, int(v or 0))
    except (TypeError, ValueError):
        return 0
