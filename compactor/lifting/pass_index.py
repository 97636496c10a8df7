"""What ``lift.Lifter`` reads of its events once, for every pass over them (issue 17, memory).

The lifter holds, through the whole summary ladder, the seqs of its events, where each call's
result is and which call ids it must remember having folded. Per call these were a
``(result, seq)`` tuple (~56 bytes) and a set slot for its id (~27 bytes): ~12 MB at 300k small
events. Here a call's result is found from the event that holds it (a reference, no object of
its own), and the pass remembers only the ids it may be asked about again: those of calls that
occur more than once in the events (their repeats are skipped) and those a result may resolve
(``Lifter._fold``).
"""

from __future__ import annotations

from typing import Sequence

from compactor.events import Event, ToolResultBlock


def index_events(evs: Sequence[Event]) -> tuple[int | None, bool, dict[str, Event], set[str]]:
    """(the least seq of ``evs``, None if none; whether the seqs ascend (equal ones allowed); call id
    -> the event of its first result; the ids of calls made more than once), in one walk of ``evs``.
    (No list of the seqs: the lifter finds a cut by bisecting the events by seq, issue 17, memory.)"""
    least: int | None = None
    last = None
    ordered = True
    results: dict[str, Event] = {}
    calls: set[str] = set()  # (let go at the end: only the repeated ids are kept)
    repeated: set[str] = set()
    for e in evs:
        seq = e.seq
        if last is None:
            least = seq
        elif seq < last:
            ordered = False
            least = min(least, seq)  # type: ignore[type-var]
        last = seq
        for u in e.tool_uses:
            uid = u.id
            if uid in calls:
                repeated.add(uid)
            else:
                calls.add(uid)
        for r in e.tool_results:
            if r.tool_use_id not in results:
                results[r.tool_use_id] = e
    return least, ordered, results, repeated


def first_result(e: Event, uid: str) -> tuple[ToolResultBlock, int]:
    """(the first result for call ``uid`` in ``e``, ``e.seq``), ``e`` being ``results[uid]`` of
    ``index_events``: what the lifter held per call."""
    here = e.tool_results
    if len(here) == 1:  # (most results' events: one result, then the call's)
        return here[0], e.seq
    return next(r for r in here if r.tool_use_id == uid), e.seq
