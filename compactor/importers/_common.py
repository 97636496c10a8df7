"""Shared machinery of the importers: mutable drafts, lenient JSONL reading, finalization.

Importers build a list of mutable :class:`Draft` s (merging lines of one API response,
attaching tool results to the user turn that follows a call) and :meth:`Builder.finish`
turns them into frozen canonical events in one pass. Finishing is where the cross-format
guarantees live, so every importer gets them the same way: seq 1..n, ids unique within the
file, every tool_result refers to an earlier tool_use, tool_use ids unique.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from compactor.importers import _build as build
from compactor.importers._lines import line_format
from compactor.errors import InputTooLarge, ParseError
from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
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
                line = _decode(raw) if no == 1 else raw.decode("utf-8", errors="replace")
                del raw
                line = line.rstrip("\n").rstrip("\r")
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


@dataclass(slots=True)
class Draft:
    """A mutable event under construction (slots: one is made per imported line)."""

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
        if self.role != "user" or self.kind != "message" or not self.blocks:
            return False
        for b in self.blocks:  # (a loop: asked on every line, a generator each time cost more)
            if not isinstance(b, ToolResultBlock):
                return False
        return True

    @property
    def has_tool_use(self) -> bool:
        return any(isinstance(b, ToolUseBlock) for b in self.blocks)


class Builder:
    """Collects drafts for one source and finishes them into an :class:`ImportResult`.

    With ``sink`` (a streamed import), :meth:`release` finishes the first drafts once the
    importer will not change them again and hands their events to ``sink``, so a huge
    transcript is never held whole; :meth:`finish` then hands over the rest and returns a
    result without events. The events, seqs and ids are the same either way. With
    ``finishing`` too (the sink's ``Source.finishing``), the events are bounded and counted
    as they are made and go to its ``ready`` instead of ``sink``.
    """

    def __init__(
        self,
        fmt: str,
        key: str,
        sink: Callable[[list[Event]], None] | None = None,
        finishing: Finishing | None = None,
    ) -> None:
        self.fmt = fmt
        self.key = key
        self.drafts: list[Draft] = []
        self.skipped: list[SkippedLine] = []
        self.repaired = 0
        self.sink = sink
        if sink is not None and finishing is not None:  # bounded and counted as they are made
            self.sink = finishing.ready
            self._done = _Finisher(fmt, finishing)
        else:
            self._done = _Finisher(fmt)

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
        # (positional: a fifth of the call's cost is binding keywords, once per imported event)
        d = Draft(role, id, at, kind, injected, list(blocks) if blocks else [], usage, dict(meta) if meta else {})
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
    def release(self, n: int) -> None:
        """Finish the first ``n`` drafts (the importer will not touch them again) into the sink."""
        if self.sink is None or n <= 0:
            return
        drafts = self.drafts[:n]
        del self.drafts[:n]
        events = self._done.events(drafts)
        if events:
            self.sink(events)

    def finish(self) -> ImportResult:
        events = self._done.events(self.drafts)
        self.drafts = []
        if self.sink is not None:
            if events:
                self.sink(events)
            events = []
        stats = self._done.stats.result()
        stats["repaired_lines"] = self.repaired
        stats["orphan_results"] = self._done.orphans
        return ImportResult(format=self.fmt, events=events, skipped=self.skipped, stats=stats)


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


class SinkFailed(Exception):
    """Carries an exception raised by an import's sink past the parse-error handling."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc


class _Finisher:
    """Drafts -> events, in order, a batch at a time: seqs 1..n, ids unique within the file,
    tool pairing fixed (``_fix_tool_pairing``) and the stats counted as they pass; with
    ``out`` (a streamed import's ``Finishing``) each event is also bounded and counted."""

    def __init__(self, fmt: str, out: Finishing | None = None) -> None:
        self.fmt = fmt
        self.seq = 0
        self.seen_ids: dict[str, int] = {}
        self.current: dict[str, str] = {}
        self.uses: dict[str, int] = {}
        self.orphans = 0
        self.stats = _Stats()
        self.out = out

    def events(self, drafts: list[Draft]) -> list[Event]:
        # One pass per draft (issue 17): the pairing, the stats, the over-limit check and the
        # count walk its blocks once; a block the usual case does not cover (a repeated call
        # id, a result without its call) goes to ``_pair_blocks`` from there on, and the
        # event's stats then to ``_Stats.add``.
        seen_ids = self.seen_ids
        current = self.current
        uses = self.uses
        fmt = self.fmt
        make = build.event
        stats = self.stats
        tally = stats.tally
        use_ids = stats.use_ids
        result_ids = stats.result_ids
        out = self.out
        limit = out.limit if out is not None else 0
        counter = out.count_blocks if out is not None else None
        seq = self.seq
        events: list[Event] = []
        for d in drafts:
            blocks = d.blocks
            if not blocks:
                continue
            results = 0
            over = False
            slow = None
            for b in blocks:
                t = type(b)
                if t is TextBlock:  # (the most frequent block: neither a call nor a result)
                    continue
                if t is ToolUseBlock:
                    bid = b.id
                    if bid not in uses:  # a call's first use: its own id
                        uses[bid] = 1
                        current[bid] = bid
                        use_ids.add(bid)
                        continue
                elif t is ToolResultBlock:
                    tid = b.tool_use_id
                    target = current.get(tid)
                    if target is not None and target == tid:  # its call's id as it is
                        if target is not tid:
                            # an equal string read from another line: hold the call's one (a
                            # copy of the id less per result); equal, so nothing observable changes.
                            # Set as an attribute: reading ``__dict__`` would make one for a block
                            # that keeps its fields in its class's shared-key values (``events.trusted``)
                            object.__setattr__(b, "tool_use_id", target)
                        results += 1
                        result_ids.add(target)
                        if out is not None and not over:
                            for c in b.content:  # (``_any_over``'s first test; it decides)
                                if type(c) is not TextBlock or len(c.text) * 4 > limit:
                                    over = True
                        continue
                elif t in _PLAIN_BLOCKS:
                    continue
                slow = b
                break
            if slow is not None:
                start = next(i for i, x in enumerate(blocks) if x is slow)
                self.orphans += _pair_blocks(d, start, current, uses)
                blocks = d.blocks
                if out is not None:
                    over = True  # (``bound_event`` checks each result)
            seq += 1
            eid = d.id[:240]
            if eid in seen_ids:
                seen_ids[eid] += 1
                eid = f"{eid}~{seen_ids[eid]}"
                seen_ids.setdefault(eid, 1)
            else:
                seen_ids[eid] = 1
            # the draft's meta is its own (``Builder.new`` copied it): kept
            if counter is not None and not over:
                try:
                    tokens = counter(blocks)
                except Exception as exc:
                    raise SinkFailed(exc) from exc
                e = make(seq, eid, d.at, d.kind, d.role, blocks, d.usage, d.injected, fmt, d.meta, tokens)
            else:
                e = make(seq, eid, d.at, d.kind, d.role, blocks, d.usage, d.injected, fmt, d.meta)
            if slow is None and type(d.injected) is bool:
                # ``_Stats.add(e)`` from the walk above: every block of an exact block type
                # (kept as it is by validation), the draft's values the event's
                tally(results, d.kind, d.role, d.injected, blocks)
            else:
                stats.add(e)
            if out is not None and (over or (counter is not None and e.tokens is None)):
                try:  # what the sink did to each event (``importers._import``)
                    if over:
                        e = bound_event(e, limit, out.spill, out.truncs)
                    if counter is not None:
                        e = _count_into(e)
                except Exception as exc:
                    raise SinkFailed(exc) from exc
            events.append(e)
        self.seq = seq
        return events


#: Blocks that are neither a call nor a result (nothing to pair or count in the stats).
_PLAIN_BLOCKS = frozenset({ThinkingBlock, ImageBlock, ArtifactRefBlock, CompactionBlock})


def _count_into(e: Event) -> Event:
    from compactor.tokens import count_into  # (the tokenizer only for a counted import)

    return count_into(e)


def _fix_tool_pairing(
    drafts: list[Draft], current: dict[str, str] | None = None, uses: dict[str, int] | None = None
) -> int:
    """Make tool_use ids unique and every tool_result point at an earlier tool_use.

    Some sources reuse a call id (a SWE-agent demonstration repeats ids); the repeat is
    renamed ``<id>~<n>`` and the next result carrying the original id follows it. A result
    whose call is not in the file (a transcript that starts mid-turn) becomes plain text so
    that pairing invariants hold; returns how many such orphans were converted.
    ``current``/``uses`` carry the calls seen so far from one batch of drafts to the next.
    """
    current = {} if current is None else current
    uses = {} if uses is None else uses
    orphans = 0
    for d in drafts:
        orphans += _pair_blocks(d, 0, current, uses)
    return orphans


def _pair_blocks(d: Draft, start: int, current: dict[str, str], uses: dict[str, int]) -> int:
    """``_fix_tool_pairing`` of one draft's blocks from ``start`` on (those before it are
    paired already); returns the orphans converted."""
    orphans = 0
    blocks = d.blocks
    for i in range(start, len(blocks)):
        b = blocks[i]
        if type(b) is TextBlock:  # (the most frequent block: neither a call nor a result)
            continue
        old = b
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
            elif target is not b.tool_use_id:
                # an equal string read from another line: hold the call's one (a copy of
                # the id less per result, issue 17); equal, so nothing observable changes.
                # Set as an attribute: reading ``__dict__`` would make one for a block that
                # keeps its fields in its class's shared-key values (``events.trusted``)
                object.__setattr__(b, "tool_use_id", target)
        if b is not old:
            if blocks is d.blocks:  # the draft's list changed on a copy, as before
                blocks = list(blocks)
            blocks[i] = b
    d.blocks = blocks
    return orphans


def compute_stats(events: list[Event]) -> dict[str, int]:
    """Counts every importer reports (see docs/CONTRACTS.md)."""
    st = _Stats()
    for e in events:
        st.add(e)
    return st.result()


class _Stats:
    """``compute_stats`` counted one event at a time (a streamed import never holds them all)."""

    def __init__(self) -> None:
        self.use_ids: set[str] = set()
        self.result_ids: set[str] = set()
        self.n = dict.fromkeys(
            ("events", "messages", "user_messages", "tool_results", "compactions", "injected", "pinned"), 0
        )

    def add(self, e: Event) -> None:
        results = 0
        for b in e.blocks:
            t = type(b)
            if t is TextBlock:  # (the most frequent block)
                continue
            if t is ToolUseBlock or isinstance(b, ToolUseBlock):
                self.use_ids.add(b.id)
            elif isinstance(b, ToolResultBlock):
                results += 1
                self.result_ids.add(b.tool_use_id)
        self.tally(results, e.kind, e.role, e.injected, e.blocks)

    def tally(self, results: int, kind: str, role: str, injected: bool, blocks: list[Any]) -> None:
        """The counts of an event of ``kind``, ``role``, ``injected`` and ``blocks``, with
        ``results`` tool results (its call and result ids added already)."""
        n = self.n
        if results:
            n["tool_results"] += results
        n["events"] += 1
        if kind == "message":  # one of the three (the event is validated)
            n["messages"] += 1
            # ``e.is_user_request``, without filling the event's cached ``text`` and
            # ``tool_results`` (a list and a string more per imported event, issue 17)
            if not results and role == "user" and not injected and _has_text(blocks):
                n["user_messages"] += 1
        elif kind == "compaction":
            n["compactions"] += 1
        elif kind == "pinned":
            n["pinned"] += 1
        if injected:
            n["injected"] += 1

    def result(self) -> dict[str, int]:
        n = self.n
        return {
            "events": n["events"],
            "messages": n["messages"],
            "user_messages": n["user_messages"],
            "tool_calls": len(self.use_ids),
            "tool_results": n["tool_results"],
            "unresolved_tool_calls": len(self.use_ids - self.result_ids),
            "compactions": n["compactions"],
            "injected": n["injected"],
            "pinned": n["pinned"],
        }


def _has_text(blocks: list[Any]) -> bool:
    """``bool(e.text.strip())`` for an event holding ``blocks``: the joined text has a
    non-whitespace character exactly when one of its parts has."""
    for b in blocks:
        if isinstance(b, TextBlock):
            if b.text.strip():
                return True
        elif isinstance(b, CompactionBlock) and b.content.strip():
            return True
    return False


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


def iter_jsonl(src: str | Source, builder: Builder) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) per JSONL line, streaming; report unusable lines.

    A line that fails only because of invalid backslash escapes (seen where a publisher
    masked text after serialization) is repaired and counted in ``builder.repaired``. A line
    that is clearly another known format's (a file that mixes two transcripts) is skipped and
    reported, never silently dropped. A line over the size limit or nested deeper than the
    depth limit stops the import (InputTooLarge / ParseError naming the line).
    """
    if isinstance(src, str):
        src = Source("<text>", data=src.encode("utf-8", "surrogatepass"))
    depth = src.limits.max_json_depth
    scan = _SCAN
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
                if end != len(line) or "\\u" in line or line.count("[") + line.count("{") > depth:
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
        CURRENT_LINE.set(no)
        other = line_format(obj)
        if other is not None and other != builder.fmt:
            builder.skip(no, f"a {other} line in a {builder.fmt} file (mixed formats)")
            continue
        yield no, obj
    CURRENT_LINE.set(None)


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


# --- tool outputs over the inline limit -------------------------------------------------------

#: Stores the bytes of one tool output and returns a reference with previews (the session
#: log's ``put_artifact``); given by callers that import into a store.
Spill = Callable[[bytes], ArtifactRefBlock]


def bound_tool_outputs(result: ImportResult, limit: int, spill: Spill | None) -> ImportResult:
    """Tool-output text over ``limit`` bytes: to the artifact store through ``spill`` (the event
    keeps an artifact_ref block with previews), or without a store cut to head + tail with a
    marker. Each case is listed in ``result.truncated`` and counted in the stats."""
    truncs: list[Truncation] = []
    events = [bound_event(e, limit, spill, truncs) for e in result.events]
    if not truncs:
        return result
    return with_truncations(result.model_copy(update={"events": events}), truncs)


def bound_event(e: Event, limit: int, spill: Spill | None, truncs: list[Truncation]) -> Event:
    """``bound_tool_outputs`` of one event (the same event when nothing is over the limit)."""
    for b in e.blocks:
        if type(b) is not TextBlock and isinstance(b, ToolResultBlock) and _any_over(b, limit):
            break
    else:
        return e  # no tool output over the limit in it: nothing to change
    blocks = [_bound_result(b, limit, spill, truncs) if isinstance(b, ToolResultBlock) else b for b in e.blocks]
    changed = any(n is not o for n, o in zip(blocks, e.blocks))
    return e.with_(blocks=blocks) if changed else e


def with_truncations(result: ImportResult, truncs: list[Truncation]) -> ImportResult:
    """``result`` listing ``truncs`` and counting them in its stats."""
    if not truncs:
        return result
    stats = dict(result.stats)
    stats["tool_outputs_to_artifacts"] = sum(1 for t in truncs if t.artifact)
    stats["tool_outputs_truncated"] = sum(1 for t in truncs if not t.artifact)
    return result.model_copy(update={"truncated": truncs, "stats": stats})


def _any_over(b: ToolResultBlock, limit: int) -> bool:
    """A text of ``b`` that ``_bound_result`` moves or cuts."""
    for c in b.content:
        if isinstance(c, TextBlock) and len(c.text) * 4 > limit and _over(c.text, limit):
            return True
    return False


def _over(text: str, limit: int) -> bool:
    if len(text) > limit:
        return True  # at least one byte per character
    if len(text) * 4 <= limit:
        return False  # at most four
    return len(text.encode("utf-8", "replace")) > limit


def _bound_result(b: ToolResultBlock, limit: int, spill: Spill | None, truncs: list[Truncation]) -> ToolResultBlock:
    content: list[Any] = []
    for c in b.content:
        if isinstance(c, TextBlock) and _over(c.text, limit):
            data = c.text.encode("utf-8", "replace")
            if spill is not None:
                ref = spill(data)
                truncs.append(Truncation(tool_use_id=b.tool_use_id, bytes=len(data), kept_bytes=0, artifact=ref.uri))
                content.append(ref)
            else:
                text, kept = cut_text(data, limit)
                truncs.append(Truncation(tool_use_id=b.tool_use_id, bytes=len(data), kept_bytes=kept))
                content.append(TextBlock(text=text))
            del data
        else:
            content.append(c)
    if all(n is o for n, o in zip(content, b.content)):
        return b
    return b.model_copy(update={"content": content})


def cut_text(data: bytes, limit: int) -> tuple[str, int]:
    """Head + marker + tail of ``data`` within about ``limit`` bytes; (text, bytes kept)."""
    half = max(limit // 2, 1)
    # "ignore" drops a character split by the cut, so both halves stay valid UTF-8
    head = data[:half].decode("utf-8", "ignore")
    tail = data[-half:].decode("utf-8", "ignore")
    kept = len(head.encode()) + len(tail.encode())
    return f"{head}\n[... {len(data) - kept:,} bytes truncated at import ...]\n{tail}", kept
