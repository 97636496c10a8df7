"""What ``lift.Lifter`` reads of its events once, for every pass over them (issue 17, memory).

The lifter holds, through the whole summary ladder, the seqs of its events, where each call's
result is and which call ids it must remember having folded. Per call these were a
``(result, seq)`` tuple (~56 bytes) and a set slot for its id (~27 bytes): ~12 MB at 300k small
events. Here a call's result is found from the event that holds it (a reference, no object of
its own), and the pass remembers only the ids it may be asked about again: those of calls that
occur more than once in the events (their repeats are skipped) and those a result may resolve
(``Lifter._fold``).

Most calls are answered in the very next event. Their results are not indexed at all: a call the
map does not name is answered first in the event after it (``result_event``); the map holds only
the calls answered anywhere else - later, earlier, in the call's own event - or never, and those
made more than once (issue 17, memory: a dict slot per call, ~3.7 MB at 300k small events, held
through the ladder).
"""

from __future__ import annotations

from typing import Sequence

from compactor.events import Event, ToolResultBlock


def index_events(evs: Sequence[Event]) -> tuple[int | None, bool, dict[str, Event | None], set[str]]:
    """(the least seq of ``evs``, None if none; whether the seqs ascend (equal ones allowed); call id
    -> the event of its first result, or None for a call no event answers; the ids of calls made more
    than once), in one walk of ``evs``.

    A call id made once whose first result is in the event right after the call's is left out of
    the map: a call the map does not name is answered first next door (``result_event``). (No list
    of the seqs: the lifter finds a cut by bisecting the events by seq, issue 17, memory.)"""
    least: int | None = None
    last = None
    ordered = True
    results: dict[str, Event | None] = {}
    calls: set[str] = set()  # (let go at the end: only the repeated ids are kept)
    seen: dict[str, None] = {}  # (the ids answered so far, let go at the end)
    repeated: set[str] = set()
    one = many = None  # the one call id of the event before ``e``, or its calls when it made several
    for e in evs:
        seq = e.seq
        if last is None:
            least = seq
        elif seq < last:
            ordered = False
            least = min(least, seq)  # type: ignore[type-var]
        last = seq
        uses = e.tool_uses
        for u in uses:
            uid = u.id
            if uid in calls:
                repeated.add(uid)
            else:
                calls.add(uid)
        for r in e.tool_results:
            rid = r.tool_use_id
            if rid in seen:
                continue
            seen[rid] = None
            if rid != one and (many is None or all(u.id != rid for u in many)):
                results[rid] = e  # (not answered next to its call)
        n = len(uses)
        one = uid if n == 1 else None
        many = uses if n > 1 else None
    for uid in calls.difference(seen):
        results[uid] = None  # (never answered)
    # an id left out next to its call but made again elsewhere: its first result indexed after all
    lost = {uid for uid in repeated if uid not in results}
    for e in evs if lost else ():
        for r in e.tool_results:
            rid = r.tool_use_id
            if rid in lost and rid not in results:
                results[rid] = e
    return least, ordered, results, repeated


def result_event(evs: Sequence[Event], i: int, results: dict[str, Event | None], uid: str) -> Event | None:
    """The event of the first result of call ``uid`` made in ``evs[i]`` (``results``: the map of
    ``index_events(evs)``), None if no event answers it. (``Lifter._fold`` makes this look-up inline.)"""
    at = results.get(uid, False)
    return evs[i + 1] if at is False else at


def first_result(e: Event, uid: str) -> tuple[ToolResultBlock, int]:
    """(the first result for call ``uid`` in ``e``, ``e.seq``), ``e`` being ``result_event``'s:
    what the lifter held per call."""
    here = e.tool_results
    if len(here) == 1:  # (most results' events: one result, then the call's)
        return here[0], e.seq
    return next(r for r in here if r.tool_use_id == uid), e.seq
