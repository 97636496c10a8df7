"""Safe cut points: where a checkpoint may end so the view stays a valid conversation. Pure.

A cut ``k`` means: the checkpoint covers every non-pinned event with ``seq <= k`` and the
view keeps every event after ``k`` verbatim (the *tail*). A cut is safe when

- no tool_use is separated from its tool_result (so no parallel tool batch is split either:
  a batch is an assistant event with several tool_uses whose results may arrive in several
  events; the cut may not fall anywhere between the assistant event and its last result);
- no *pending* tool_use is covered, nor anything after it. Pending = no result has arrived
  and the agent has not moved on (no later assistant event). A call the agent moved on from
  without a result (interrupted, exported mid-run) is *abandoned*: it may be covered, and the
  lifted state records its outcome as unknown;
- the latest genuine user request (``Event.is_user_request``) stays in the tail: the cut is
  before it;
- the first event after the cut can follow the summary message (a user message): an assistant
  turn or a user turn, never a tool_result whose tool_use was covered (implied by the first
  rule).

Pinned events are never covered content (``build_view`` re-injects them), so they neither
constrain the cut nor count towards the tail.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from typing import Any, Callable, Sequence

from compactor.events import Event
from compactor.engine.policy import Policy
from compactor.tokens import count_event


def body(events: Sequence[Event], prev_end: int = 0) -> list[Event]:
    """Non-pinned events after ``prev_end``, in seq order: what a checkpoint may cover."""
    out = [e for e in events if e.kind != "pinned" and e.seq > prev_end]
    last = -1
    for e in out:  # the engine's events are in seq order already: no sort (50 per compaction)
        if e.seq < last:
            return sorted(out, key=lambda e: e.seq)
        last = e.seq
    return out


def is_text_message(e: Event) -> bool:
    """A user or assistant message that carries text (claude-code's "text message")."""
    return e.kind != "pinned" and e.role in ("user", "assistant") and bool(e.text.strip())


def pending_tool_uses(events: Sequence[Event], prev_end: int = 0) -> dict[str, int]:
    """tool_use id -> seq, for calls whose result has not arrived and the agent still awaits."""
    evs = body(events, prev_end)
    answered = {r.tool_use_id for e in evs for r in e.tool_results}
    last_assistant = max((e.seq for e in evs if e.role == "assistant"), default=0)
    out: dict[str, int] = {}
    for e in evs:
        for u in e.tool_uses:
            if u.id not in answered and e.seq >= last_assistant:
                out[u.id] = e.seq
    return out


def abandoned_tool_uses(events: Sequence[Event], prev_end: int = 0) -> dict[str, int]:
    """tool_use id -> seq, for calls without a result that the agent moved on from."""
    evs = body(events, prev_end)
    answered = {r.tool_use_id for e in evs for r in e.tool_results}
    pending = pending_tool_uses(events, prev_end)
    return {
        u.id: e.seq
        for e in evs
        for u in e.tool_uses
        if u.id not in answered and u.id not in pending
    }


def latest_request(events: Sequence[Event], prev_end: int = 0) -> Event | None:
    """The latest genuine user request after ``prev_end`` (None if there is none)."""
    evs = body(events, prev_end)
    for i in range(len(evs) - 1, -1, -1):  # from the newest: the latest is usually near the end
        if evs[i].is_user_request:
            return evs[i]
    return None


def safe_cut_points(
    events: Sequence[Event], prev_end: int = 0, *, keep_latest_request: bool = True
) -> list[int]:
    """Seqs ``k`` where covering every non-pinned event up to ``k`` is safe (ascending).

    ``events`` are the events after ``prev_end`` plus any pinned events (the whole log when
    there is no previous checkpoint). ``keep_latest_request=False`` lets the cut pass the
    latest user request: only for the engine's last resort, where the summary restates the
    request verbatim (the validator checks that it does).
    """
    return safe_cut_points_both(events, prev_end, not keep_latest_request)[keep_latest_request]


def safe_cut_points_both(events: Sequence[Event], prev_end: int = 0, walk_past_request: bool = True, *,
                         body_events: Sequence[Event] | None = None,
                         calls: dict[str, Any] | None = None) -> dict[bool, list[int]]:
    """``{keep: safe_cut_points(events, prev_end, keep_latest_request=keep)}`` for both values
    of ``keep`` in one walk (the engine's ladder asks for both, issue 17): keeping the latest
    request only lowers the limit, so its list is the other's up to that limit.
    ``walk_past_request=False``: only the ``True`` list is made (the other is not walked).
    ``body_events``: ``body(events, prev_end)`` when the caller has it. ``calls``: filled with
    what the walk learnt of the body's calls, for the validator's index of the same body
    (``covered_text.CoveredText.take_calls``: a walk of the session fewer, issue 17):
    ``body`` (the list walked), ``last_result`` (call id -> the seq of its last result),
    ``with_uses`` (the positions in ``body`` of the events holding calls) and ``blocked`` (the
    merged [start, end) seq ranges a cut inside would separate a call from a result)."""
    evs = body(events, prev_end) if body_events is None else body_events
    if not evs:
        return {True: [], False: []} if walk_past_request else {True: []}
    # One walk for what pending_tool_uses, latest_request and the spans need (each walked the
    # whole session on its own: 3-4 walks per call, issue 17). ``evs`` is in seq order.
    use_seq: dict[str, int] = {}
    last_result: dict[str, int] = {}  # the seq of each call's last result (any call id)
    with_uses = array("q")  # (machine ints: the validator's index holds it through the ladder, issue 17)
    for i, e in enumerate(evs):
        uses = e.tool_uses
        if uses:
            with_uses.append(i)
            for u in uses:
                use_seq.setdefault(u.id, e.seq)
        results = e.tool_results
        if results:
            for r in results:
                last_result[r.tool_use_id] = e.seq
    last_assistant = 0  # the seq of the last assistant event: read back from the end
    for i in range(len(evs) - 1, -1, -1):
        if evs[i].role == "assistant":
            last_assistant = evs[i].seq
            break
    # [start, end) ranges where a cut would separate a tool_use from one of its results.
    spans = [(use_seq[i], end) for i, end in last_result.items() if i in use_seq and end > use_seq[i]]
    blocked = _blocked(spans)
    if calls is not None:
        calls.update(body=evs, last_result=last_result, with_uses=with_uses, blocked=blocked)
    limit = evs[-1].seq  # cover at most everything
    # pending: calls no result answers, at or after the last assistant event (the events from
    # there on are the last ones: read back from the end)
    first_pending = None
    for i in range(len(evs) - 1, -1, -1):
        e = evs[i]
        if e.seq < last_assistant:
            break
        for u in e.tool_uses:
            if u.id not in last_result:
                first_pending = e.seq if first_pending is None else min(first_pending, e.seq)
    if first_pending is not None:
        limit = min(limit, first_pending - 1)
    keep_limit = limit
    for i in range(len(evs) - 1, -1, -1):  # the latest request: usually near the end
        if evs[i].is_user_request:
            keep_limit = min(limit, evs[i].seq - 1)
            break
    if not walk_past_request:
        limit = keep_limit
    out: list[int] = []
    b, nb = 0, len(blocked)
    for e in evs:  # ascending: a pointer into the sorted, disjoint spans instead of a search each
        k = e.seq
        if k > limit:
            break
        while b < nb and blocked[b][1] <= k:
            b += 1
        if b < nb and blocked[b][0] <= k:
            continue  # inside [start, end)
        out.append(k)
    kept = out[:bisect_right(out, keep_limit)] if keep_limit < limit else out
    return {True: kept, False: out} if walk_past_request else {True: kept}


def _blocked(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge [start, end) spans."""
    out: list[tuple[int, int]] = []
    for s, t in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], t))
        else:
            out.append((s, t))
    return out


def tail_start(
    events: Sequence[Event],
    tail_budget: int,
    *,
    tail_min: int = 0,
    tail_max: int | None = None,
    min_text_messages: int = 0,
    prev_end: int = 0,
    body_events: Sequence[Event] | None = None,
) -> int:
    """The budget-ideal cut (before any safety move): seq of the last event left out of the tail.

    Walks back from the newest event, keeping events while they fit ``tail_budget``, and past
    it while the tail is under ``tail_min`` tokens or ``min_text_messages`` text messages, as
    long as it stays within ``tail_max``. 0 when everything fits. ``body_events``:
    ``body(events, prev_end)`` when the caller has it (the walk back reads only the tail).
    """
    evs = body(events, prev_end) if body_events is None else body_events
    cap = tail_budget if tail_max is None else max(tail_max, tail_budget)
    tokens = 0
    texts = 0
    i = len(evs)
    while i > 0:
        e = evs[i - 1]
        n = count_event(e)
        if tokens + n <= tail_budget:
            pass
        elif (tokens < tail_min or texts < min_text_messages) and tokens + n <= cap:
            pass
        else:
            break
        tokens += n
        texts += is_text_message(e)
        i -= 1
    return evs[i - 1].seq if i > 0 else 0


def choose_cut(
    events: Sequence[Event],
    policy: Policy,
    tail_budget: int,
    *,
    tail_min: int | None = None,
    tail_max: int | None = None,
    min_text_messages: int | None = None,
    prev_end: int = 0,
    keep_latest_request: bool = True,
    safe: list[int] | None = None,
    safe_fn: Callable[[], list[int]] | None = None,
    body_events: Sequence[Event] | None = None,
) -> int:
    """The checkpoint's end seq for a tail of about ``tail_budget`` tokens; 0 = no cut.

    ``safe``: ``safe_cut_points(events, prev_end, keep_latest_request=...)`` when the caller
    has it (the shrink ladder asks for several budgets over the same events); ``safe_fn``:
    what returns it, called only when the cut needs it (a caller's memo); ``body_events``:
    ``body(events, prev_end)``, likewise (each call walked the whole session for it).

    The ideal cut from :func:`tail_start` moves to the nearest safe point that keeps the tail
    within budget (a later cut, smaller tail); when there is none (the latest request or a
    pending call forces the tail to start earlier) it moves to the latest safe point before.
    ``tail_min``/``tail_max``/``min_text_messages`` default to the policy's.
    """
    ideal = tail_start(
        events,
        tail_budget,
        tail_min=policy.tail_min_tokens if tail_min is None else tail_min,
        tail_max=policy.tail_max_tokens if tail_max is None else tail_max,
        min_text_messages=(
            policy.min_tail_text_messages if min_text_messages is None else min_text_messages
        ),
        prev_end=prev_end,
        body_events=body_events,
    )
    if ideal == 0:
        return 0
    if safe is None:
        safe = safe_fn() if safe_fn is not None else safe_cut_points(
            events, prev_end, keep_latest_request=keep_latest_request)
    if not safe:
        return 0
    if policy.tail_cut_on_user:
        evs = body(events, prev_end) if body_events is None else list(body_events)
        nxt = {a.seq: b for a, b in zip(evs, evs[1:])}
        on_user = [k for k in safe if k in nxt and nxt[k].role == "user" and not nxt[k].tool_results]
        pick = _nearest(on_user, ideal)
        if pick:
            return pick
    return _nearest(safe, ideal)


def _nearest(points: list[int], ideal: int) -> int:
    """The first of ``points`` at or after ``ideal``, else the last before it, else 0.
    ``points`` ascending (``safe_cut_points`` and lists taken from it): found by bisection,
    not two lists of every safe point per call (issue 17: ~50k points at 100k events, asked
    by the plan and each rung of the ladder)."""
    i = bisect_left(points, ideal)
    if i < len(points):
        return points[i]
    return points[-1] if points else 0
