"""Build the view (what the next model request sees) from log events and a checkpoint. Pure."""

from __future__ import annotations

import json
from bisect import bisect_right
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from compactor.events import (
    _EVENT_CACHES,
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    _shared_fields_set,
    render_artifact_ref,
)
from compactor.records import Checkpoint

SUMMARY_PREFIX = (
    "This session is being continued from an earlier conversation that ran out of context. "
    "The summary below covers the earlier part (events {start}-{end}); the messages after it "
    "are verbatim and newer, so a later user request there supersedes the summary's. The full "
    "log is kept and nothing was deleted.\n\n"
)


def summary_event(ckpt: Checkpoint) -> Event:
    """The synthetic user message that stands for the covered range in the view."""
    role = "user"
    if ckpt.native is not None:
        # The provider's compaction block is replayed verbatim as the first block of an
        # assistant turn at the very start of the conversation, where the API expects it.
        block = CompactionBlock(content=ckpt.summary, raw=ckpt.native)
        role = "assistant"
    else:
        text = SUMMARY_PREFIX.format(start=ckpt.covers.start, end=ckpt.covers.end) + ckpt.summary
        block = CompactionBlock(content=text)
    return Event(
        seq=0,
        id=f"checkpoint:{ckpt.id}",
        kind="compaction",
        role=role,
        blocks=[block],
        tokens=None,  # counted from its block (prefix included), like any event of the view
        meta={"checkpoint": ckpt.id, "covers": [ckpt.covers.start, ckpt.covers.end]},
    )


LATE_RESULTS = "late_results"
"""Event ``meta`` key: tool_use ids whose results this view event shows as text (see
``place_results``); ``invariants.check_tool_pairing`` and ``measure.render_request`` read it."""


def build_view(events: Sequence[Event], ckpt: Checkpoint | None, *,
               at: tuple[Sequence[int], Sequence[int]] | None = None) -> list[Event]:
    """View = pinned events + summary (if any) + events after the checkpoint's range.

    ``events`` are all events of the log in seq order (or at least every pinned event and
    every event after the checkpoint). A tool_result that does not answer the message just
    before it (DESIGN §7.1: a late result, or one whose call the summary covers) is shown as
    text naming its call (``place_results``).

    ``at``: the seqs of ``events`` and the positions of their pinned events, when ``events``
    are sorted by seq (the engine's: ``covered_text.CoveredText.range_facts``): the tail is
    then found by bisection, not by a walk of every event (a summary candidate's view is a
    short tail of a long session, issue 17).
    """
    if ckpt is None or ckpt.covers.empty:
        out = list(events)
        if ckpt is not None and ckpt.replacements:
            out = [_replace(e, ckpt) for e in out]
        return place_results(out, ckpt)
    end = ckpt.covers.end
    if at is not None:
        seqs, pinned_at = at
        pinned = [e for e in map(events.__getitem__, pinned_at) if e.seq <= end]
        tail = [_replace(e, ckpt) for e in events[bisect_right(seqs, end):]]
        return pinned + [summary_event(ckpt)] + place_results(tail, ckpt)
    pinned = [e for e in events if e.kind == "pinned" and e.seq <= end]
    tail = [_replace(e, ckpt) for e in events if e.seq > end]
    return pinned + [summary_event(ckpt)] + place_results(tail, ckpt)


def stream_view(read: Callable[[], Iterable[Event]], ckpt: Checkpoint | None, *,
                first: Callable[[Event], None] | None = None) -> tuple[int, Iterator[Event]]:
    """``build_view`` over a log read twice instead of held in memory: the number of view
    events and an iterator over them (the same events, in the same order).

    ``read()`` yields the events ``build_view`` would be given, in seq order; the first pass
    keeps only the calls' names and the pinned events the summary precedes, so the view of a
    huge session streams with memory bounded by a segment of the log.

    ``first``: called during the first pass with each event of the view, in order, as the
    second pass gives it - except that a late result's text (``_as_text``) names only the
    calls read so far; its role, ``meta`` (the late results' ids) and every other event are
    the second pass's. A request needs its system prompt and late results before its first
    message (``engine.request_stream``): this gets them without a third read.
    """
    end = 0 if ckpt is None or ckpt.covers.empty else ckpt.covers.end
    names: dict[str, str] = {}
    pinned: list[Event] = []
    n = 0

    def tail() -> Iterator[Event]:
        nonlocal n
        for e in read():
            if end and e.seq <= end:
                if e.kind == "pinned":
                    pinned.append(e)
                    if first is not None:
                        first(e)
                continue
            n += 1
            for u in _tool_uses(e, ckpt):
                names[u.id] = u.name
            yield e

    if first is None:
        for _ in tail():
            pass
    else:
        _first_pass(tail(), ckpt, names, first, summary=end > 0)

    def events() -> Iterator[Event]:
        if end:
            yield from pinned
            yield summary_event(ckpt)  # type: ignore[arg-type]
        tail = (e for e in read() if not end or e.seq > end)
        if ckpt is not None and ckpt.replacements:
            tail = (_replace(e, ckpt) for e in tail)
        yield from _place(tail, ckpt, names)

    return n + len(pinned) + (1 if end else 0), events()


def _first_pass(tail: Iterator[Event], ckpt: Checkpoint | None, names: Mapping[str, str],
                first: Callable[[Event], None], *, summary: bool) -> None:
    """``stream_view``'s first pass handing each view event after the pinned ones to ``first``
    (the summary before the first event of the tail: every pinned event is read before it)."""
    if ckpt is not None and ckpt.replacements:
        tail = (_replace(e, ckpt) for e in tail)
    for e in _place(tail, ckpt, names):
        if summary:
            first(summary_event(ckpt))  # type: ignore[arg-type]
            summary = False
        first(e)
    if summary:
        first(summary_event(ckpt))  # type: ignore[arg-type]


def iter_view(events: Sequence[Event], ckpt: Checkpoint | None) -> Iterator[Event]:
    """``build_view`` one event at a time (the same events, in the same order): counting a
    view this way holds one made event at a time, not a copy of every replaced one (the
    cleared view of a whole big session, issue 17)."""
    if ckpt is not None and not ckpt.covers.empty:
        return stream_view(lambda: events, ckpt)[1]
    # no summary: the view is the events (replaced), and the calls' names are read only if a
    # late result needs one (no first walk of every event for them)
    tail: Iterable[Event] = events
    if ckpt is not None and ckpt.replacements:
        tail = (_replace(e, ckpt) for e in events)
    return _place(tail, ckpt, _CallNames(lambda: {u.id: u.name for e in events for u in _tool_uses(e, ckpt)}))


def iter_view_roles(events: Sequence[Event], ckpt: Checkpoint | None, *, late: list[int] | None = None
                    ) -> Iterator[tuple[Event, str | None]]:
    """``iter_view``, each event with its ``message_role``: what placing the results reads
    already, so a count of the view (``measure.streamed_view_tokens(..., roles=True)``) need
    not work it out again for every event (issue 17). ``late``: the seq of each event shown
    with a late result as text is appended to it."""
    end = 0 if ckpt is None or ckpt.covers.empty else ckpt.covers.end
    if end:
        for e in events:
            if e.kind == "pinned" and e.seq <= end:
                yield e, message_role(e)
        head = summary_event(ckpt)  # type: ignore[arg-type]
        yield head, message_role(head)
    tail: Iterable[Event] = (e for e in events if e.seq > end) if end else events
    if ckpt is not None and ckpt.replacements:
        tail = (_replace(e, ckpt) for e in tail)
    yield from _placed(tail, ckpt, _CallNames(
        lambda: {u.id: u.name for e in events if e.seq > end for u in _tool_uses(e, ckpt)}), late)


class _CallNames:
    """id -> name of every call in a view's tail, made when first asked (``_as_text`` asks
    only for a late result: most views have none, and the walk is over every event)."""

    __slots__ = ("_make", "_names")

    def __init__(self, make: Callable[[], dict[str, str]]) -> None:
        self._make = make
        self._names: dict[str, str] | None = None

    def _get(self) -> dict[str, str]:
        if self._names is None:
            self._names = self._make()
        return self._names

    def __contains__(self, uid: object) -> bool:
        return uid in self._get()

    def __getitem__(self, uid: str) -> str:
        return self._get()[uid]


def _tool_uses(e: Event, ckpt: Checkpoint | None) -> list[ToolUseBlock]:
    """The calls of ``e`` as the view shows it (its replacement's, if any), without the copy."""
    blocks = ckpt.replacements.get(e.seq) if ckpt is not None and ckpt.replacements else None
    if blocks is None:
        return e.tool_uses
    return [b for b in blocks if isinstance(b, ToolUseBlock)]


def message_role(e: Event) -> str | None:
    """The Messages API role ``events.to_anthropic`` gives this event, or None when it adds no
    message (system prompt parts, events with nothing to render)."""
    if e.role == "system" and (e.kind == "pinned" or e.injected):
        return None
    for b in e.blocks:  # a loop, not any(genexpr): called for every event of every view
        if _renders(b):
            return "user" if e.role == "system" else e.role
    return None


def _renders(b: object) -> bool:
    if isinstance(b, TextBlock):
        return bool(b.text.strip())
    if isinstance(b, ThinkingBlock):
        return False
    if isinstance(b, CompactionBlock):
        return b.raw is not None or bool(b.content.strip())
    return True


def place_results(tail: Sequence[Event], ckpt: Checkpoint | None) -> list[Event]:
    """Keep the request valid for the Messages API without reordering the log.

    A tool_result must answer a tool_use of the assistant message right before it. One that
    does not - its call is covered by the summary, or the agent moved on and the result came
    later (DESIGN §7.1), or it repeats an answer - is shown where it arrived as text naming
    the call; its call is then closed as unanswered by ``measure.render_request``. Consecutive
    same-role events are one message, as in ``to_anthropic``. The log is untouched; the ids
    are listed in the event's ``meta[LATE_RESULTS]``.
    """
    return list(_place(tail, ckpt, _CallNames(lambda: {u.id: u.name for e in tail for u in e.tool_uses})))


def _place(tail: Iterable[Event], ckpt: Checkpoint | None, in_tail: Mapping[str, str] | _CallNames
           ) -> Iterator[Event]:
    """``place_results`` one event at a time; ``in_tail``: id -> name of every call in the tail."""
    for e, _ in _placed(tail, ckpt, in_tail):
        yield e


def _placed(tail: Iterable[Event], ckpt: Checkpoint | None, in_tail: Mapping[str, str] | _CallNames,
            late_seqs: list[int] | None = None) -> Iterator[tuple[Event, str | None]]:
    """``_place``, each event with its ``message_role`` (a late result's event shown as text
    keeps its role: a user message with text); ``late_seqs``: gets the seq of each such event."""
    covered: dict[str, str] = {}
    if ckpt is not None and not ckpt.covers.empty:
        for u in (ckpt.state or {}).get("unknown_actions", []) or []:
            covered[u.get("tool_use_id")] = u.get("name")
    asked: set[str] = set()
    answered: set[str] = set()
    role: str | None = None
    for e in tail:
        r = message_role(e)
        if r == "assistant":
            if role != "assistant":
                asked = set()
            asked.update(u.id for u in e.tool_uses)
        elif r == "user":
            if role != "user":
                answered = set()
            late = {b.tool_use_id for b in e.tool_results if b.tool_use_id not in asked or b.tool_use_id in answered}
            answered.update(b.tool_use_id for b in e.tool_results)
            if late:
                e = _as_text(e, late, in_tail, covered, ckpt)
                if late_seqs is not None:
                    late_seqs.append(e.seq)
        if r is not None:
            role = r
        yield e, r


def _as_text(
    e: Event, late: set[str], in_tail: Mapping[str, str] | _CallNames, covered: dict[str, str], ckpt: Checkpoint | None,
) -> Event:
    blocks: list = []
    for b in e.blocks:
        if not (isinstance(b, ToolResultBlock) and b.tool_use_id in late):
            blocks.append(b)
            continue
        uid = b.tool_use_id
        err = " (error)" if b.is_error else ""
        if uid in in_tail:
            name = in_tail[uid]
            head = f"[result{err} of the earlier call {uid} ({name}), which arrived after the conversation had moved on]\n"
        elif ckpt is not None and not ckpt.covers.empty:
            name = f" ({covered[uid]})" if covered.get(uid) else ""
            head = f"[result{err} of the earlier call {uid}{name}, which the summary covers]\n"
        else:
            head = f"[result{err} of call {uid}, whose call is not in this conversation]\n"
        blocks.append(TextBlock(text=head + b.text))
        blocks.extend(c for c in b.content if not isinstance(c, TextBlock))  # images, refs
    meta = {**e.meta, LATE_RESULTS: sorted(late | set(e.meta.get(LATE_RESULTS, [])))}
    return e.with_(blocks=blocks, tokens=None, meta=meta)


def _replace(e: Event, ckpt: Checkpoint) -> Event:
    blocks = ckpt.replacements.get(e.seq)
    if blocks is None:
        return e
    return with_blocks(e, list(blocks))


def with_blocks(e: Event, blocks: list) -> Event:
    """``e.with_(blocks=blocks, tokens=None)`` without pydantic's generic copy (``light_copy``;
    the cached properties read from the blocks dropped): one copy per replaced event of every
    view counted or built - the clearing layer replaces nearly every event of a big session,
    issue 17."""
    return light_copy(e, {"blocks": blocks, "tokens": None}, drop=_EVENT_CACHES)


def light_copy(m: Any, update: dict[str, Any], drop: tuple[str, ...] = ()) -> Any:
    """``m.model_copy(update=update)`` of a frozen model sharing its fields-set
    (``events.SharedFieldsSet``), without pydantic's generic copy: the same field values, the
    same shared fields-set, and ``drop`` (cached properties) left out of the copy."""
    if m.__pydantic_extra__ is not None or m.__pydantic_private__ is not None:
        return m.model_copy(update=update)
    fields = m.__dict__.copy()
    for name in drop:
        fields.pop(name, None)
    fields.update(update)
    out = object.__new__(type(m))
    object.__setattr__(out, "__dict__", fields)
    object.__setattr__(out, "__pydantic_extra__", None)
    object.__setattr__(out, "__pydantic_private__", None)
    object.__setattr__(out, "__pydantic_fields_set__", _updated_set(m.__pydantic_fields_set__, frozenset(update)))
    return out


_UPDATED_SETS: dict[tuple[int, frozenset[str]], tuple[set[str], set[str]]] = {}
"""(a shared fields-set's identity, the names updated) -> what ``SharedFieldsSet.model_copy``
makes of it."""


def _updated_set(names: set[str], keys: frozenset[str]) -> set[str]:
    if keys <= names:
        return names  # nothing new: the original's, as model_copy shares it
    got = _UPDATED_SETS.get((id(names), keys))
    if got is None or got[0] is not names:  # (the key holds the shared set's identity)
        if len(_UPDATED_SETS) > 256:
            _UPDATED_SETS.clear()
        got = _UPDATED_SETS[(id(names), keys)] = (names, _shared_fields_set(names | keys))
    return got[1]


def view_text(events: Iterable[Event]) -> str:
    """Readable plain-text rendering of a view, for the CLI."""
    return "\n".join(view_text_parts(events))


def view_text_parts(events: Iterable[Event]) -> Iterator[str]:
    """``view_text`` one event at a time (joined with newlines they are ``view_text``)."""
    for e in events:
        lines: list[str] = []
        tag = f"#{e.seq}" if e.seq else "#-"
        label = e.role if e.kind == "message" else f"{e.role}/{e.kind}"
        if e.injected:
            label += "/injected"
        lines.append(f"--- {tag} {label}")
        for b in e.blocks:
            if isinstance(b, TextBlock):
                lines.append(b.text)
            elif isinstance(b, CompactionBlock):
                lines.append(b.content)
            elif isinstance(b, ThinkingBlock):
                lines.append(f"(thinking) {b.thinking[:200]}")
            elif isinstance(b, ToolUseBlock):
                lines.append(f"[tool_use {b.id}] {b.name} {json.dumps(b.input)[:300]}")
            elif isinstance(b, ToolResultBlock):
                err = " ERROR" if b.is_error else ""
                lines.append(f"[tool_result {b.tool_use_id}{err}]")
                for c in b.content:
                    if isinstance(c, TextBlock):
                        lines.append(c.text)
                    elif isinstance(c, ArtifactRefBlock):
                        lines.append(render_artifact_ref(c))
            elif isinstance(b, ArtifactRefBlock):
                lines.append(render_artifact_ref(b))
        yield "\n".join(lines)
