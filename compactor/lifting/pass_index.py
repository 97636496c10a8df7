"""What ``lift.Lifter`` reads of its events once, for every pass over them (issue 17, memory).

The lifter holds, through the whole summary ladder, the seqs of its events, where each call's
result is and which call ids it must remember having folded. Per call these were a
``(result, seq)`` tuple (~56 bytes) and a set slot for its id (~27 bytes): ~12 MB at 300k small
events. Here a call's result is found from the event that holds it (a reference, no object of
its own), and the pass remembers only the ids it may be asked about again: those of calls that
occur more than once in the events (their repeats are skipped) and those a result may resolve
(``Lifter._fold``).

Most calls are answered in the very next event. Their results are not indexed at all: the fold
looks at the event after the call first (``result_event``), and the index holds only the calls
answered anywhere else - later, earlier, in the call's own event - or called more than once
(issue 17, memory: a dict slot per call, ~3.7 MB at 300k small events, held through the ladder).
"""

from __future__ import annotations

from typing import Sequence

from compactor.events import Event, ToolResultBlock


def index_events(evs: Sequence[Event]) -> tuple[int | None, bool, dict[str, Event], set[str]]:
    """(the least seq of ``evs``, None if none; whether the seqs ascend (equal ones allowed); call id
    -> the event of its first result, for the calls ``result_event`` does not find next to them; the
    ids of calls made more than once), in one walk of ``evs``.

    A call id made once whose first result is in the event right after the call's is left out of
    the map (``result_event`` finds it there); every other answered id is in it. (No list of the
    seqs: the lifter finds a cut by bisecting the events by seq, issue 17, memory.)"""
    least: int | None = None
    last = None
    ordered = True
    results: dict[str, Event] = {}
    calls: set[str] = set()  # (let go at the end: only the repeated ids are kept)
    seen: set[str] = set()  # (the ids answered so far, let go at the end)
    repeated: set[str] = set()
    before: Sequence = ()  # the calls of the event before ``e``
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
            seen.add(rid)
            if before and _calls(before, rid):
                continue  # (answered next to its call: found there)
            results[rid] = e
        before = uses
    # an id left out next to its call but made again elsewhere: its first result indexed after all
    lost = {uid for uid in repeated if uid in seen and uid not in results}
    for e in evs if lost else ():
        for r in e.tool_results:
            rid = r.tool_use_id
            if rid in lost and rid not in results:
                results[rid] = e
    return least, ordered, results, repeated


def _calls(uses: Sequence, uid: str) -> bool:
    for u in uses:
        if u.id == uid:
            return True
    return False


def result_event(evs: Sequence[Event], i: int, results: dict[str, Event], uid: str) -> Event | None:
    """The event of the first result of call ``uid`` made in ``evs[i]`` (``results``: the map of
    ``index_events(evs)``), None if no event answers it."""
    at = results.get(uid)
    if at is None and i + 1 < len(evs):
        nxt = evs[i + 1]
        for r in nxt.tool_results:
            if r.tool_use_id == uid:
                return nxt
    return at


def first_result(e: Event, uid: str) -> tuple[ToolResultBlock, int]:
    """(the first result for call ``uid`` in ``e``, ``e.seq``), ``e`` being ``result_event``'s:
    what the lifter held per call."""
    here = e.tool_results
    if len(here) == 1:  # (most results' events: one result, then the call's)
        return here[0], e.seq
    return next(r for r in here if r.tool_use_id == uid), e.seq
