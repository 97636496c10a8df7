"""The plan of a compaction: what it will try, decided from token counts only (``plan``), and
the events it works on (``prepare``: pinned + those after the previous checkpoint, in seq
order, tokens cached). ``compact.compact`` and the durable workflow's steps both start here.
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from compactor.engine.boundary import choose_cut, safe_cut_points_both
from compactor.engine.layers import LAYER_CLEAR, LAYER_EXTERNALIZE, LAYER_SUMMARY
from compactor.engine.measure import quick_view_tokens, streamed_view_tokens, view_tokens
from compactor.engine.policy import CompactionNeed, Policy, should_compact
from compactor.engine.view import SUMMARY_PREFIX, build_view, iter_view_roles
from compactor.events import Event
from compactor.records import Checkpoint
from compactor.tokens import count_text, with_tokens

TAIL_SHARE = 0.5
"""Share of the room left after pinned events that the verbatim tail may take."""
TAIL_MAX_SHARE = 0.6


class Plan(BaseModel):
    """What a compaction will try, decided from token counts only (no bodies needed)."""

    model_config = ConfigDict(frozen=True)

    policy: str
    need: CompactionNeed = Field(description="should_compact on the current view.")
    tokens_before: int
    target_tokens: int
    prev_checkpoint: str | None = None
    prev_end: int = 0
    snapshot_version: int = 0
    pinned_tokens: int = 0
    available_tokens: int = Field(description="Target minus pinned events and the summary frame.")
    tail_budget: int
    tail_min: int
    tail_max: int
    min_text_messages: int
    cut: int = Field(description="Cut at the full tail budget (0 = nothing to cover).")
    layers: list[str] = Field(default_factory=list, description="Layers that may apply, in order.")
    noop: bool = Field(default=False, description="The view already fits the target.")


def prev_end(prev: Checkpoint | None) -> int:
    return 0 if prev is None or prev.covers.empty else prev.covers.end


def prepare(events: Sequence[Event], prev: Checkpoint | None) -> list[Event]:
    """Events the engine works on: pinned + those after ``prev``, in seq order, tokens cached."""
    end = prev_end(prev)
    evs = [e for e in events if e.kind == "pinned" or e.seq > end]
    last = -1
    for e in evs:  # in seq order already, as a log reads (a compaction prepares its events 3 times)
        if e.seq < last:
            evs.sort(key=lambda e: e.seq)  # stable, as sorted() was
            break
        last = e.seq
    return with_tokens(evs)


def frame_tokens(end: int) -> int:
    return count_text(SUMMARY_PREFIX.format(start=1, end=end)) + 8


# --- plan -------------------------------------------------------------------------------------


def plan(
    events: Sequence[Event],
    policy: Policy,
    target_tokens: int | None,
    prev: Checkpoint | None,
    *,
    provider_usage: int | None = None,
    _safe: dict[bool, list[int]] | None = None,
    _view: dict[str, int] | None = None,
    _counted: int | None = None,
    _prepared: bool = False,
    _body: list[list[Event]] | None = None,
    _calls: dict[str, Any] | None = None,
) -> Plan:
    """Decide the target, the tail budgets and the layers for ``events`` (see ``compact``).

    ``_safe``: filled with the safe cut points computed here (keep_latest_request -> seqs),
    for ``apply_layers`` on the same events (``compact`` passes it on: one walk each).
    ``_view``: gets ``tokens``, the count of the view, when a replacement layer's view can be
    counted from it (``apply_layers``: ``_derived_count``). ``_counted``: with no previous
    checkpoint, ``quick_view_tokens(events, placed=True)`` of these very events, in this
    order, when the caller has it (``compact``'s ``tokens_before``): not counted again.
    ``_prepared``: ``events`` are ``prepare(events, prev)``'s already (``compact``: a copy of
    the session's list fewer). ``_body``: gets the events' ``body``, for ``apply_layers``.
    ``_calls``: gets what the safe cuts' walk learnt of the body's calls
    (``boundary.safe_cut_points_both``), for ``apply_layers``'s validator index."""
    evs = list(events) if _prepared else prepare(events, prev)
    safe = {} if _safe is None else _safe

    def safe_points(keep: bool) -> list[int]:
        if keep not in safe:  # both lists in one walk: the ladder may ask for the other
            safe.update(safe_cut_points_both(evs, prev_end(prev), body_events=covered, calls=_calls))
        return safe[keep]

    late: list[int] = []
    before = None
    if prev is None and _counted is not None:
        before = _counted
    elif prev is None or (prev.covers.empty and not prev.replacements):  # the view is the events
        before = quick_view_tokens(evs, placed=True)
    if before is None:
        before = streamed_view_tokens(iter_view_roles(evs, prev, late=late), roles=True)  # (the view is not kept)
    if before is None:  # a provider compaction block: the request is rendered to count it
        before = view_tokens(build_view(evs, prev))
    elif _view is not None and not late and (prev is None or prev.covers.empty or prev.covers.start == 1):
        _view["tokens"] = before
    target = target_tokens if target_tokens is not None else policy.post_compact_tokens
    pinned = [e for e in evs if e.kind == "pinned"]
    pinned_tokens = view_tokens(pinned) if pinned else 0
    end = prev_end(prev)
    snapshot = evs[-1].seq if evs else end  # (the largest: prepare sorts by seq)
    available = max(0, target - pinned_tokens - frame_tokens(snapshot))
    tail_budget = min(policy.tail_budget_tokens, int(available * TAIL_SHARE))
    tail_max = min(policy.tail_max_tokens, int(available * TAIL_MAX_SHARE))
    tail_min = min(policy.tail_min_tokens, tail_budget)
    # what both cuts below walk back over: body(evs, end), whose check of the order is not
    # needed on prepare's events (in seq order: a walk of the session fewer, issue 17)
    covered = [e for e in evs if e.kind != "pinned" and e.seq > end]
    if _body is not None:
        _body.append(covered)
    cut = choose_cut(
        evs, policy, tail_budget, tail_min=tail_min, tail_max=tail_max, prev_end=end,
        safe_fn=lambda: safe_points(True), body_events=covered,
    )
    layers: list[str] = []
    if any(e.tool_results for e in evs if e.kind != "pinned"):
        layers += [LAYER_EXTERNALIZE, LAYER_CLEAR]
    if cut > end or choose_cut(evs, policy, 0, tail_min=0, tail_max=0, min_text_messages=0,
                               prev_end=end, keep_latest_request=False,
                               safe_fn=lambda: safe_points(False), body_events=covered) > end:
        layers.append(LAYER_SUMMARY)
    return Plan(
        policy=policy.name,
        need=should_compact(policy, before, provider_usage),
        tokens_before=before,
        target_tokens=target,
        prev_checkpoint=prev.id if prev is not None else None,
        prev_end=end,
        snapshot_version=snapshot,
        pinned_tokens=pinned_tokens,
        available_tokens=available,
        tail_budget=tail_budget,
        tail_min=tail_min,
        tail_max=tail_max,
        min_text_messages=policy.min_tail_text_messages,
        cut=cut,
        layers=layers,
        noop=before <= target,
    )
