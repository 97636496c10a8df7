"""Drafts and their finishing: the mutable events an importer builds, and the one pass that
turns them into frozen canonical events.

Importers build a list of mutable :class:`Draft` s (merging lines of one API response,
attaching tool results to the user turn that follows a call) and :meth:`Builder.finish` turns
them into events (``_Finisher``, a batch at a time for a streamed import). Finishing is where
the cross-format guarantees live, so every importer gets them the same way: seq 1..n, ids
unique within the file, every tool_result refers to an earlier tool_use, tool_use ids unique;
the import's stats are counted as the events pass, and a streamed import's events are bounded
and counted there too (``Finishing``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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
    _NONE,
    _of_type,
    trusted_event,
)
from compactor.importers import _build as build
from compactor.importers._bounds import bound_event
from compactor.importers._common import Finishing, ImportResult, SkippedLine


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
    #: What its maker vouches for (issue 17), so that finishing checks and copies less: 0
    #: nothing; ``CHECKED``: the blocks were made by ``_build`` (or validated), the other
    #: fields are of the exact types ``build.event`` tests for, ``id`` aside (a ``str``);
    #: ``SHARED``: that, and ``meta`` is still the dict ``build.keyed`` gave for its keys,
    #: filled in their order (``add_line`` makes it ``CHECKED`` again).
    trusted: int = 0

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

    def add_line(self, no: Any) -> None:
        """Note in ``meta`` that line ``no`` added to this draft (``lines``: every line's)."""
        if self.trusted == SHARED:
            # a key more: a dict of its own first (a key added to a dict of ``build.keyed``
            # would go into the table it shares), copied with its shared table when finished
            self.meta = {k: v for k, v in self.meta.items()}
            self.trusted = CHECKED
        self.meta.setdefault("lines", [self.meta.get("line")]).append(no)


#: ``Draft.trusted``'s levels.
CHECKED = 1
SHARED = 2


_new = object.__new__


def shared_draft(role: str, id: str, at: datetime | None, injected: bool, blocks: list[Any],
                 usage: Usage | None, meta: dict[str, Any]) -> Draft:
    """``Draft(role, id, at, "message", injected, blocks, usage, meta, SHARED)``, its slots set
    here: the class call's ``__init__`` (a Python call made from C) cost a fifth more, once
    per imported line (issue 17)."""
    d = _new(Draft)
    d.role = role
    d.id = id
    d.at = at
    d.kind = "message"
    d.injected = injected
    d.blocks = blocks
    d.usage = usage
    d.meta = meta
    d.trusted = SHARED
    return d


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
        shared_keys_dict = build.shared_keys_dict
        plain, counted = build.EVENT_FIELDS_SET, build.EVENT_FIELDS_SET_TOKENS
        stats = self.stats
        tally = stats.tally
        use_ids = stats.use_ids
        result_ids = stats.result_ids
        out = self.out
        limit = out.limit if out is not None else 0
        counter = out.count_blocks if out is not None else None
        seq = self.seq
        set_slot = object.__setattr__
        events: list[Event] = []
        for d in drafts:
            blocks = d.blocks
            if not blocks:
                continue
            results = 0
            calls = 0
            call = None  # (the first-use call block, for ``tool_uses`` of an event of one call)
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
                        calls += 1
                        call = b
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
            eid = d.id
            if type(eid) is not str or len(eid) > 240:  # (a str's ``[:240]`` of at most 240: itself)
                eid = eid[:240]
            if eid in seen_ids:
                seen_ids[eid] += 1
                eid = f"{eid}~{seen_ids[eid]}"
                seen_ids.setdefault(eid, 1)
            else:
                seen_ids[eid] = 1
            # the draft's meta is its own (``Builder.new`` copied it): kept
            tokens = None
            if counter is not None and not over:
                try:
                    tokens = counter(blocks)
                except Exception as exc:
                    raise SinkFailed(exc) from exc
            if d.trusted and slow is None and eid and eid.isascii():
                # what ``make`` gives for these values, without its tests and copies (issue 17)
                meta = d.meta
                line = meta.get("line")
                if line == seq and type(line) is int:
                    seq = line  # the same number: one int for both (32 bytes an event, issue 17)
                held = blocks[:]
                e = trusted_event(seq, eid, d.at, d.kind, d.role, held, tokens, d.usage, d.injected, fmt,
                                  meta if d.trusted == SHARED else shared_keys_dict(meta),
                                  plain if tokens is None else counted)
            else:
                e = make(seq, eid, d.at, d.kind, d.role, blocks, d.usage, d.injected, fmt, d.meta, tokens)
                held = None
            if slow is None and type(d.injected) is bool:
                # ``_Stats.add(e)`` from the walk above: every block of an exact block type
                # (kept as it is by validation), the draft's values the event's
                tally(results, d.kind, d.role, d.injected, blocks)
            else:
                stats.add(e)
            made = e
            if out is not None and (over or (counter is not None and e.tokens is None)):
                try:  # what the sink did to each event (``importers._import``)
                    if over:
                        e = bound_event(e, limit, out.spill, out.truncs)
                    if counter is not None:
                        e = _count_into(e, counter)
                except Exception as exc:
                    raise SinkFailed(exc) from exc
            if slow is None and e is made:  # (not a bounded copy: its blocks were not walked)
                # ``e.tool_uses`` and ``e.tool_results`` set from what the walk counted
                # (issue 17: every compaction asks both of every event at once - the default
                # target, the plan - and their first reading was half of the target's count):
                # the same lists the properties give (``_of_type``: ``_NONE``, the event's
                # ``blocks`` itself, or a list of exactly their number; of one call, the
                # walk's block), set as ``events._cached`` sets them (an attribute: the event
                # keeps its fields in its class's shared-key values); only for an event this
                # finisher still holds alone
                if held is None:
                    held = e.blocks
                # (every block a call or every block a result: ``held`` itself, as ``_of_type``
                # gives, without its walk: the walk's blocks are of exact types)
                set_slot(e, "tool_uses", _NONE if not calls else [call] if calls == 1 < len(held) else
                         held if calls == len(held) else _of_type(held, ToolUseBlock))
                set_slot(e, "tool_results", _NONE if not results else held if results == len(held) else
                         _of_type(held, ToolResultBlock))
            events.append(e)
        self.seq = seq
        return events


#: Blocks that are neither a call nor a result (nothing to pair or count in the stats).
_PLAIN_BLOCKS = frozenset({ThinkingBlock, ImageBlock, ArtifactRefBlock, CompactionBlock})


def _count_into(e: Event, count: Callable[[list[Any]], int]) -> Event:
    from compactor.tokens import count_into  # (the tokenizer only for a counted import)

    return count_into(e, count)  # (through the import's counter: ``tokens.import_counter``)


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
