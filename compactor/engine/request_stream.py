"""``measure.render_request`` of a view read from the log segment by segment. Pure.

``compactor view --json`` of a huge session used to decode every event, build the whole view
and the whole request, then dump it (873 MB at 300k small events, issue 17). Here the view is
``view.stream_view``'s (the log read twice, a segment at a time); its first pass also gathers
what the request needs before its first message - the system prompt (pinned and injected
system events may sit anywhere in the view) and the ids of results shown late (a dangling
call's placeholder says so) - and the second yields the messages one at a time, each made by
the same functions as ``render_request``'s: ``events.to_anthropic`` of one message's events
(consecutive events of one role), ``measure._answer_dangling`` of a message and the next.
Memory: a segment, one message and the calls' names; the output is the same, message for
message.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from compactor.engine.measure import _answer_dangling
from compactor.engine.view import LATE_RESULTS, message_role
from compactor.events import Event, to_anthropic


def stream_request(view: Callable[[Callable[[Event], None]], tuple[int, Iterator[Event]]]
                   ) -> tuple[str, Iterator[dict[str, Any]]]:
    """``render_request`` of a streamed view, as (system, an iterator over the messages).

    ``view(first)`` is ``view.stream_view(read, ckpt, first=first)`` or a store's
    ``SessionLog.stream_view(head=..., first=first)``: its first read is done before this
    returns, so a damaged or missing segment raises before any message is made.
    """
    system: list[Event] = []
    late: set[str] = set()

    def see(e: Event) -> None:
        if e.role == "system" and message_role(e) is None:
            system.append(e)  # to_anthropic's system prompt part (or nothing to render)
        got = e.meta.get(LATE_RESULTS)
        if got:
            late.update(got)

    _, events = view(see)
    return to_anthropic(system)[0], _answered(_messages(events), late)


def _messages(view: Iterable[Event]) -> Iterator[dict[str, Any]]:
    """``to_anthropic(view)[1]`` one message at a time: each run of events of one message role
    (``view.message_role``: to_anthropic's role, None for an event it adds no message for) is
    one message, made by ``to_anthropic`` itself (which also puts the ``(continued)`` turn
    before a leading assistant message)."""
    run: list[Event] = []
    role: str | None = None
    opening = True
    for e in view:
        r = message_role(e)
        if r is None:
            continue
        if r != role and run:
            yield from _made(run, opening)
            opening = False
            run = []
        role = r
        run.append(e)
    if run:
        yield from _made(run, opening)


def _made(run: list[Event], opening: bool) -> list[dict[str, Any]]:
    messages = to_anthropic(run)[1]
    return messages if opening else messages[-1:]  # (continued) only before the first message


def _answered(messages: Iterable[dict[str, Any]], late: set[str]) -> Iterator[dict[str, Any]]:
    """``measure._answer_dangling(messages, late)`` holding a message and the next: a call's
    placeholder result goes into the next message when it is the user's, else into a user
    message of its own right after the call's."""
    it = iter(messages)
    m = next(it, None)
    while m is not None:
        nxt = next(it, None)
        if nxt is not None and nxt["role"] == "user":
            m, nxt = _answer_dangling([m, nxt], late, count=False)[0]
            yield m
        else:
            yield from _answer_dangling([m], late, count=False)[0]
        m = nxt
