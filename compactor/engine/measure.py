"""The request a view renders to, and its token size. Pure.

``render_request`` is ``to_anthropic`` plus one repair the Messages API requires: a tool_use
with no tool_result in the next message (a call still running when the log was read, or one
the agent abandoned) gets an explicit placeholder result saying the outcome is unknown, the way
agents close dangling calls on resume. The log and the view are untouched.

Budgets (``target_tokens``) are checked on this request. Its size is one measure used
everywhere (import report, plan, record, ``view``, the head's running count, the sweep,
``ensure_budget``): the sum of ``tokens.count_event`` over the view's events (each event
counted as the blocks the request carries for it: no thinking, no whitespace-only text, plus
a per-message overhead), plus the blocks ``render_request`` adds (placeholder results for
dangling calls, a leading ``(continued)`` turn). Additive per event, so the session head can
keep it up to date on every append without reading the log.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

from compactor.events import CompactionBlock, Event, TextBlock, ToolResultBlock, ToolUseBlock, to_anthropic
from compactor.tokens import MESSAGE_OVERHEAD, count_event, count_text
from compactor.engine.view import LATE_RESULTS, _renders, message_role


NO_RESULT_TEXT = (
    "[no result in the log: the call was interrupted or is still running; its outcome is unknown]"
)
LATE_RESULT_TEXT = "[no result at this point: it arrived later, after the conversation moved on (shown below)]"


def render_request(view: Sequence[Event]) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages) for the Anthropic Messages API, every tool_use answered."""
    system, messages = to_anthropic(view)
    return system, _answer_dangling(messages, _late(view), count=False)[0]


def _late(view: Sequence[Event]) -> set[str]:
    return {uid for e in view for uid in e.meta.get(LATE_RESULTS, ())}


def _answer_dangling(messages: list[dict[str, Any]], late: set[str] | frozenset[str] = frozenset(),
                     *, count: bool = True) -> tuple[list[dict[str, Any]], int]:
    """Messages with a placeholder result for every unanswered tool_use (one answered later
    says so); and the tokens the placeholders add (0 with ``count=False``: rendering a request
    needs no tokenizer)."""
    out: list[dict[str, Any]] = []
    added = 0
    for i, m in enumerate(messages):
        out.append(m)
        if m["role"] != "assistant":
            continue
        uses = [b["id"] for b in m["content"] if b.get("type") == "tool_use"]
        if not uses:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        got = set()
        if nxt is not None and nxt["role"] == "user":
            got = {b["tool_use_id"] for b in nxt["content"] if b.get("type") == "tool_result"}
        missing = [
            {"type": "tool_result", "tool_use_id": u, "is_error": True,
             "content": [{"type": "text", "text": LATE_RESULT_TEXT if u in late else NO_RESULT_TEXT}]}
            for u in uses if u not in got
        ]
        if not missing:
            continue
        if count:
            added += sum(count_text(b["content"][0]["text"]) + 4 for b in missing)
        if nxt is not None and nxt["role"] == "user":
            results = [b for b in nxt["content"] if b.get("type") == "tool_result"]
            rest = [b for b in nxt["content"] if b.get("type") != "tool_result"]
            messages[i + 1] = {"role": "user", "content": [*results, *missing, *rest]}
        else:
            out.append({"role": "user", "content": missing})
    return out, added


@lru_cache(maxsize=1)
def _continued_tokens() -> int:
    # on first use, not at import: counting loads the tokenizer (issue 17, cold start)
    return MESSAGE_OVERHEAD + count_text("(continued)")


def repair_tokens(view: Sequence[Event]) -> int:
    """Tokens of what ``render_request`` adds to the view's own events (0 for a view whose
    every call is answered and whose first message is the user's).

    Worked out from the events' message roles, calls and results, without rendering the
    request (rendering every candidate's view was 15% of a compaction of small events, issue
    17); a view holding a provider compaction block is rendered (``_repair_tokens_rendered``).
    """
    count = RepairCount()
    for e in view:  # one walk of the view (it is walked once per candidate of the ladder)
        if not count.add(e):
            return _repair_tokens_rendered(view)
    return count.total()


_ASK = object()  # RepairCount.add: work the role out


class RepairCount:
    """``repair_tokens`` fed one view event at a time, holding only the last two messages'
    calls and results and the calls left unanswered (issue 17, memory: a view counted as it
    is made need not be held whole).

    The last two messages are kept in plain attributes (role, calls, results of the message
    before the last and of the last), their lists and sets made only when a call or result
    comes (issue 17: two tuples, a list and a set per message of every view counted)."""

    __slots__ = ("_late", "_first", "_missing", "_extra", "_prole", "_pcalls", "_role", "_calls", "_results")

    def __init__(self) -> None:
        self._late: set[str] = set()
        self._first: str | None = None  # role of the view's first message
        self._missing: list[str] = []  # calls no result answers, in order
        self._extra = 0  # user messages of placeholders added
        self._prole: str | None = None  # the message before the last: its role and calls
        self._pcalls: list[str] | None = None
        self._role: str | None = None  # the last message: role, calls, results
        self._calls: list[str] | None = None
        self._results: set[str] | None = None

    def add(self, e: Event, role: str | None | object = _ASK) -> bool:
        """Count ``e`` in; False when the view holds a provider compaction block (the caller
        renders the request instead: ``_repair_tokens_rendered``). ``role``: its
        ``message_role``, when the caller has it."""
        for b in e.blocks:
            if isinstance(b, CompactionBlock) and b.raw is not None:
                return False
        meta = e.meta
        if meta:
            late = meta.get(LATE_RESULTS)
            if late:
                self._late.update(late)
        if role is _ASK:
            role = message_role(e)
        if role is None:
            return True
        if role != self._role:  # a new message: the one before the last is complete, and so is its next
            if self._first is None:
                self._first = role
            elif self._pcalls and self._prole == "assistant":
                self._close(self._pcalls, self._role, self._results)
            self._prole, self._pcalls = self._role, self._calls
            self._role, self._calls, self._results = role, None, None  # type: ignore[assignment]
        uses = e.tool_uses
        if uses:
            calls = self._calls
            if calls is None:
                calls = self._calls = []
            if len(uses) == 1:
                calls.append(uses[0].id)
            else:
                calls.extend(u.id for u in uses)
        results = e.tool_results
        if results:
            got = self._results
            if got is None:
                got = self._results = set()
            if len(results) == 1:
                got.add(results[0].tool_use_id)
            else:
                got.update(r.tool_use_id for r in results)
        return True

    def _close(self, calls: list[str], nxt_role: str | None, nxt_results: set[str] | None) -> None:
        """An assistant message's ``calls`` followed by a message of ``nxt_role``: those it
        does not answer are missing (``_unanswered``)."""
        got = nxt_results if nxt_role == "user" and nxt_results else ()
        missing = [u for u in calls if u not in got]
        if missing:
            self._missing += missing
            if nxt_role != "user":
                self._extra += MESSAGE_OVERHEAD

    def total(self) -> int:
        """The repair tokens of the events added so far (``repair_tokens`` of that view)."""
        missing, extra = list(self._missing), self._extra
        # the open messages, as if the view ended here
        groups = [(r, c or [], s or set()) for r, c, s in ((self._prole, self._pcalls, None),
                                                           (self._role, self._calls, self._results))
                  if r is not None]
        for i, g in enumerate(groups):
            m, x = _unanswered(g, groups[i + 1] if i + 1 < len(groups) else None)
            missing += m
            extra += x
        late = self._late
        total = _continued_tokens() if self._first == "assistant" else 0  # a "(continued)" user turn opens
        total += sum(count_text(LATE_RESULT_TEXT if u in late else NO_RESULT_TEXT) + 4 for u in missing)
        return total + extra


def _unanswered(group: tuple[str, list[str], set[str]], nxt: tuple[str, list[str], set[str]] | None
                ) -> tuple[list[str], int]:
    """The calls of an assistant message the next message does not answer, and the tokens of
    the user message of placeholders added when no user message follows."""
    role, calls, _ = group
    if role != "assistant" or not calls:
        return [], 0
    got = nxt[2] if nxt is not None and nxt[0] == "user" else set()
    missing = [u for u in calls if u not in got]
    if not missing:
        return [], 0
    return missing, (MESSAGE_OVERHEAD if nxt is None or nxt[0] != "user" else 0)


def _repair_tokens_rendered(view: Sequence[Event]) -> int:
    """``repair_tokens`` on the rendered request."""
    _, messages = to_anthropic(view)
    total = 0
    first = next((e for e in view if message_role(e)), None)  # the first event that is a message
    if first is not None and message_role(first) == "assistant" and messages \
            and messages[0].get("content") == [{"type": "text", "text": "(continued)"}]:
        total += _continued_tokens()
    before = len(messages)
    out, added = _answer_dangling(messages, _late(view))
    total += added + (len(out) - before) * MESSAGE_OVERHEAD
    return total


def view_tokens(view: Sequence[Event]) -> int:
    """Tokens of the request the view renders to (see the module docstring)."""
    n = quick_view_tokens(view)
    if n is not None:
        return n
    return sum(count_event(e) for e in view) + repair_tokens(view)


def quick_view_tokens(events: Iterable[Event], *, placed: bool = False) -> int | None:
    """``view_tokens(events)`` in one loop (``count_event`` of each event and ``RepairCount``'s
    walk, with ``message_role`` worked out inline), or None where that loop does not know the
    answer: an event holding a provider compaction block or listing late results
    (``LATE_RESULTS``), and with ``placed`` a result ``view.place_results`` would show as
    text. ``placed``: the count of ``view.build_view(events, None)`` instead (the same events
    when no result is placed as text), as ``streamed_view_tokens(iter_view_roles(events,
    None), roles=True)`` counts it. Both ask every event of a session once or twice per
    compaction (the default target, the plan; issue 17), at ~1/3 of the cost of the general
    walk; ``tests/unit/test_measure_repair.py`` compares them."""
    total = 0
    first: str | None = None  # RepairCount's state, in locals (see RepairCount.add)
    missing: list[str] = []
    extra = 0
    prole: str | None = None
    pcalls: list[str] | None = None
    role: str | None = None
    calls: list[str] | None = None
    results: set[str] | None = None
    for e in events:
        n = e.tokens
        total += count_event(e) if n is None else n
        if e.meta and e.meta.get(LATE_RESULTS):
            return None
        renders = False  # message_role(e), and no provider compaction block (RepairCount.add)
        for b in e.blocks:
            t = type(b)
            if t is TextBlock:
                if not renders and b.text.strip():
                    renders = True
            elif t is ToolUseBlock or t is ToolResultBlock:
                renders = True
            elif isinstance(b, CompactionBlock):
                if b.raw is not None:
                    return None
                if not renders and b.content.strip():
                    renders = True
            elif not renders and _renders(b):
                renders = True
        if not renders:
            continue
        r = e.role
        if r == "system":
            if e.kind == "pinned" or e.injected:
                continue
            r = "user"
        uses = e.tool_uses
        res = e.tool_results
        if placed and res and r == "user":
            # view._placed: a result shown as text, for not answering a call of the assistant
            # message before, or answering one this user message answered already
            if role == "user":
                asked, got = pcalls, results
            else:
                asked, got = (calls if role == "assistant" else None), None
            for x in res:
                uid = x.tool_use_id
                if asked is None or uid not in asked or (got is not None and uid in got):
                    return None  # the general walk
        if r != role:  # a new message: the one before the last is complete, and so is its next
            if first is None:
                first = r
            elif pcalls and prole == "assistant":
                got = results if role == "user" and results else ()
                lost = [u for u in pcalls if u not in got]
                if lost:
                    missing += lost
                    if role != "user":
                        extra += MESSAGE_OVERHEAD
            prole, pcalls = role, calls
            role, calls, results = r, None, None
        if uses:
            if calls is None:
                calls = []
            if len(uses) == 1:
                calls.append(uses[0].id)
            else:
                calls.extend([u.id for u in uses])
        if res:
            if results is None:
                results = set()
            if len(res) == 1:
                results.add(res[0].tool_use_id)
            else:
                results.update([x.tool_use_id for x in res])
    count = RepairCount()  # its total() from the state reached
    count._first, count._missing, count._extra = first, missing, extra
    count._prole, count._pcalls, count._role, count._calls, count._results = prole, pcalls, role, calls, results
    return total + count.total()


def streamed_view_tokens(view: Iterable[Any], count: Callable[[Event], int] = count_event, *,
                         roles: bool = False) -> int | None:
    """``view_tokens`` of a view made as it is read (``view.iter_view``), one event held at a
    time; None for a view holding a provider compaction block (count the built view then).
    ``count``: ``count_event``, or what gives the same answer (the engine's, knowing the
    counts of the events its layers replaced). ``roles``: ``view`` yields (event, its
    ``message_role``) pairs (``view.iter_view_roles``)."""
    total = 0
    repair = RepairCount()
    if roles:
        for e, role in view:
            if not repair.add(e, role):
                return None
            total += count(e)
    else:
        for e in view:
            if not repair.add(e):
                return None
            total += count(e)
    return total + repair.total()
