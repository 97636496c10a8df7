"""The validator: every invariant of DESIGN §7 as a typed check on a candidate view. Pure.

``validate`` returns a list of ``Violation`` (empty = valid). Codes are stable (tests and the
workflow assert them); messages are for people.

| § | code | check |
|---|---|---|
| 1 | ``tool_pairing`` | the rendered request pairs every tool_use with a tool_result in the next user message and vice versa (a call with no result anywhere in the log is closed by ``measure.render_request`` as unknown) |
| 2 | ``batch_split`` | the cut does not fall inside a parallel tool batch |
| 2 | ``first_not_user`` | the first non-pinned message of the view is a user message |
| 3 | ``pinned_missing`` | every pinned event is in the view, verbatim |
| 4 | ``latest_request_missing`` | the latest genuine user request is in the view, verbatim |
| 5 | ``constraint_dropped`` | every constraint (lifted, or a rule sentence of a covered request) is in the summary |
| 6 | ``unknown_reported_done`` | actions of unknown outcome stay unknown unless a result arrived; none is listed as done (a model's text included: no line reports as done an action with no recorded result) |
| 7 | ``artifact_unresolved`` | every artifact ref the compaction introduced resolves and its sha256 matches |
| 8 | ``summary_not_smaller`` / ``over_budget`` | the summary is smaller than what it replaces; the view fits the target |
| 9 | ``unknown_identifier`` | paths, URLs and tool ids the summary states occur in the session (covered range or tail) |
| - | ``summary_incomplete`` | a model's answer carries a measurable part of the lifted state by itself (else it is empty or a placeholder, and refused) |
| - | ``summary_language`` | a model's answer is written in a language the user or the agent used in the session |
| 10 | ``range_not_contiguous`` / ``event_duplicated`` / ``event_missing`` / ``event_unexpected`` | the checkpoint covers a contiguous prefix ending at or before the snapshot, and every later event is in the view exactly once |
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from typing import Any, Container, Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from compactor.engine.boundary import body, latest_request
from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    ImageBlock,
    ToolResultBlock,
    ToolUseBlock,
    to_anthropic,
)
from compactor.engine.layers import ARTIFACT_URI, apply_replacements
from compactor.engine.measure import view_tokens
from compactor.records import Checkpoint
from compactor.tokens import count_event
from compactor.engine.view import LATE_RESULTS, summary_event
from compactor.engine.identifiers import identifiers, summary_identifiers, unknown_identifiers  # noqa: F401 - identifiers re-exported

CODES = [
    "tool_pairing",
    "batch_split",
    "first_not_user",
    "pinned_missing",
    "latest_request_missing",
    "constraint_dropped",
    "unknown_reported_done",
    "artifact_unresolved",
    "summary_not_smaller",
    "over_budget",
    "unknown_identifier",
    "summary_incomplete",
    "summary_language",
    "range_not_contiguous",
    "event_duplicated",
    "event_missing",
    "event_unexpected",
]


class Violation(BaseModel):
    """One broken invariant. ``code`` is stable; ``message`` says what and where."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    seq: int | None = None
    detail: str | None = Field(
        default=None, exclude=True, repr=False,
        description="The offending text (an identifier, a constraint), for in-process repair "
        "only: never serialized and never in ``str()``, so no conversation text reaches a "
        "payload, a record or Temporal history.",
    )

    def __str__(self) -> str:
        where = f" (seq {self.seq})" if self.seq is not None else ""
        return f"{self.code}: {self.message}{where}"


def validate(
    *,
    events: Sequence[Event],
    checkpoint: Checkpoint | None,
    view: Sequence[Event],
    target_tokens: int | None,
    artifacts: Mapping[str, bytes] | None = None,
    prev_checkpoint: Checkpoint | None = None,
    tokens: int | None = None,
    index: Any = None,
) -> list[Violation]:
    """Check ``view`` (built from ``events`` and ``checkpoint``) against every invariant.

    ``tokens``: ``measure.view_tokens(view)`` when the caller counted it already. ``index``:
    a ``covered_text.CoveredText`` of ``events``, shared by a compaction's candidates.

    ``events``: every event after ``prev_checkpoint.covers.end`` plus all pinned events (the
    whole log when there is no previous checkpoint). ``artifacts``: sha256 -> bytes of the
    artifacts the compaction produced (refs it introduced must resolve against them).
    """
    prev_end = _end(prev_checkpoint)
    end = max(_end(checkpoint), prev_end)
    out: list[Violation] = []
    out += check_tool_pairing(events, view, index)
    if index is not None and getattr(index, "events", None) is not events:
        index = None  # an index of other events (the per-cut facts below read its events)
    if index is not None and _same_calls(index, checkpoint, end):
        out += _batch_violations(index.batch_splits(end, prev_end), end) if end > prev_end else []
    else:
        shown = events
        if checkpoint is not None and checkpoint.replacements:
            shown = [e.with_(blocks=list(checkpoint.replacements[e.seq])) if e.seq in checkpoint.replacements
                     and e.seq > end else e for e in events]
        out += check_batches(shown, end, prev_end)
    out += check_first_user(view)
    out += check_pinned(events, view, index)
    out += check_latest_request(events, view, index)
    out += check_range(events, checkpoint, view, prev_checkpoint, index)
    if checkpoint is not None:
        out += check_constraints(events, checkpoint, prev_end, index)
        out += check_unknown(events, checkpoint, view, prev_checkpoint, index)
        out += check_artifacts(events, checkpoint, view, artifacts, index)
        out += check_summary_size(events, checkpoint, prev_checkpoint, index)
        out += check_identifiers(events, checkpoint, prev_checkpoint, index)
        out += check_model_summary(checkpoint)
    if target_tokens is not None:
        n = view_tokens(view) if tokens is None else tokens
        if n > target_tokens:
            out.append(Violation(code="over_budget", message=f"view is {n:,} tokens, target {target_tokens:,}"))
    return out


def merge_context(tail: Sequence[Event]) -> int | None:
    """Where the last assistant message of ``tail`` starts (an index), or None when ``tail``
    does not show it (no assistant message, or it may begin before ``tail``): the caller then
    reads further back, or takes the whole tail.

    A merge re-checks pairing from there on: the events before it are answered or not by
    themselves, whatever is appended later.
    """
    from compactor.engine.view import message_role

    i = len(tail) - 1
    while i >= 0 and message_role(tail[i]) != "assistant":
        i -= 1
    if i < 0:
        return None
    while i > 0 and message_role(tail[i - 1]) in ("assistant", None):
        i -= 1
    return i if i > 0 else None


def validate_merge(
    *, context: Sequence[Event], new_events: Sequence[Event], checkpoint: Checkpoint, snapshot_version: int
) -> list[Violation]:
    """What events appended after the snapshot can break in a validated candidate (DESIGN §5
    step 7), in O(new events): their order, the pairing of the request from the last message
    of the snapshot's view on (``context``, see ``merge_context``), pinned events and the
    latest request among them. Checks of the summary itself (constraints, identifiers, size,
    unknown outcomes) are unchanged unless the merge reconciled the state; the caller
    re-validates fully then.
    """
    from compactor.engine.view import place_results

    out: list[Violation] = []
    seqs = [e.seq for e in new_events]
    if seqs != list(range(snapshot_version + 1, snapshot_version + 1 + len(seqs))):
        out.append(Violation(code="range_not_contiguous",
                             message=f"events appended after {snapshot_version} have gaps or repeats"))
    window = [*context, *new_events]
    view = place_results(apply_replacements(window, checkpoint.replacements), checkpoint)
    out += check_tool_pairing(window, view)
    out += check_pinned(new_events, view)
    if any(e.is_user_request for e in new_events):
        out += check_latest_request(window, view)
    return out


def _end(ckpt: Checkpoint | None) -> int:
    return 0 if ckpt is None or ckpt.covers.empty else ckpt.covers.end


# --- 1, 2: tool pairing, batches, first message ----------------------------------------------


def _answered(events: Sequence[Event], index: Any = None) -> Container[str]:
    """Ids of every call a result in ``events`` answers (the index's, when given: the same
    for every candidate of a compaction)."""
    if index is not None:
        return index.answered()
    return {r.tool_use_id for e in events for r in e.tool_results}


def check_tool_pairing(events: Sequence[Event], view: Sequence[Event], index: Any = None) -> list[Violation]:
    """The rendered request is valid for the Messages API: each assistant tool_use is answered
    in the very next user message, and each tool_result answers the message just before."""
    out: list[Violation] = []
    # A result the view shows as text where it arrived (view.place_results) is not an answer:
    # its call is closed as unanswered by render_request.
    shown_late = {uid for e in view for uid in e.meta.get(LATE_RESULTS, ())}
    answered = _answered(events, index)  # (the index's set, shared: tested, not copied less shown_late)
    seq_of_use = {u.id: e.seq for e in view for u in e.tool_uses}
    _, messages = to_anthropic(view)
    seen_uses: set[str] = set()
    for i, m in enumerate(messages):
        blocks = m["content"]
        if m["role"] == "assistant":
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            for uid in uses:
                if uid in seen_uses:
                    out.append(Violation(code="tool_pairing", message=f"tool_use {uid} appears twice",
                                         seq=seq_of_use.get(uid)))
                seen_uses.add(uid)
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            got = set()
            if nxt is not None and nxt["role"] == "user":
                got = {b["tool_use_id"] for b in nxt["content"] if b.get("type") == "tool_result"}
            for uid in uses:
                if uid in got:
                    continue
                if uid not in answered or uid in shown_late:
                    continue  # no result anywhere: the request closes it as unknown (render_request)
                out.append(Violation(code="tool_pairing",
                                     message=f"tool_use {uid} is not answered in the next message "
                                     "(its result is elsewhere or was dropped)",
                                     seq=seq_of_use.get(uid)))
        else:
            prev = messages[i - 1] if i > 0 else None
            asked = set()
            if prev is not None and prev["role"] == "assistant":
                asked = {b["id"] for b in prev["content"] if b.get("type") == "tool_use"}
            for b in blocks:
                if b.get("type") == "tool_result" and b["tool_use_id"] not in asked:
                    out.append(Violation(code="tool_pairing",
                                         message=f"tool_result {b['tool_use_id']} does not follow its tool_use",
                                         seq=_seq_of_result(view, b["tool_use_id"])))
    return out


def _seq_of_result(view: Sequence[Event], uid: str) -> int | None:
    for e in view:
        if any(r.tool_use_id == uid for r in e.tool_results):
            return e.seq or None
    return None


def _call_ids(blocks: Iterable[Any]) -> tuple[list[str], list[str]]:
    return ([b.id for b in blocks if isinstance(b, ToolUseBlock)],
            [b.tool_use_id for b in blocks if isinstance(b, ToolResultBlock)])


def _same_calls(index: Any, ckpt: Checkpoint | None, end: int) -> bool:
    """The checkpoint's replacements shown after ``end`` keep every call and result of the
    events they replace (the clearing and externalizing layers do; a late result shown as
    text does not): the batches can then be checked on the events as logged."""
    if ckpt is None or not ckpt.replacements:
        return True
    facts = index.range_facts()
    if facts is None:
        return False
    by_seq = facts[0]
    if len(by_seq) != len(facts[1]):
        return False  # two events share a seq: walk them as the view shows them
    for seq, blocks in ckpt.replacements.items():
        if seq > end and (seq not in by_seq or _call_ids(blocks) != _call_ids(by_seq[seq].blocks)):
            return False
    return True


def check_batches(events: Sequence[Event], end: int, prev_end: int) -> list[Violation]:
    """The cut at ``end`` does not separate a tool_use from its result (batch_split when the
    call belongs to a parallel batch, tool_pairing otherwise). ``events`` as the view shows
    them: a late result the view renders as text (``reconcile_checkpoint``) is not a result."""
    if end <= prev_end:
        return []
    evs = body(events, prev_end)
    last_result: dict[str, int] = {}
    for e in evs:
        for r in e.tool_results:
            last_result[r.tool_use_id] = max(last_result.get(r.tool_use_id, 0), e.seq)
    splits = []
    for e in evs:
        uses = e.tool_uses
        split = [u.id for u in uses if u.id in last_result and e.seq <= end < last_result[u.id]]
        if split:
            splits.append((e, uses, split[0]))
    return _batch_violations(splits, end)


def _batch_violations(splits: Iterable[tuple[Event, list[ToolUseBlock], str]], end: int) -> list[Violation]:
    out: list[Violation] = []
    for e, uses, first in splits:
        if len(uses) > 1:
            out.append(Violation(code="batch_split",
                                 message=f"cut at {end} splits the parallel batch of {len(uses)} calls",
                                 seq=e.seq))
        else:
            out.append(Violation(code="tool_pairing",
                                 message=f"cut at {end} separates tool_use {first} from its result",
                                 seq=e.seq))
    return out


def _is_native(e: Event) -> bool:
    return bool(e.blocks) and isinstance(e.blocks[0], CompactionBlock) and e.blocks[0].raw is not None


def check_first_user(view: Sequence[Event]) -> list[Violation]:
    for e in view:
        if e.kind == "pinned" or (e.role == "system" and e.injected):
            continue
        if e.kind == "compaction" and e.role == "assistant" and _is_native(e):
            return []  # a provider compaction block opens the conversation by design
        if e.role != "user":
            return [Violation(code="first_not_user",
                              message=f"first message of the view is {e.role}", seq=e.seq or None)]
        return []
    return []


# --- 3, 4: verbatim -----------------------------------------------------------------------------


def _by_seq(view: Sequence[Event]) -> dict[int, list[Event]]:
    out: dict[int, list[Event]] = {}
    for e in view:
        if e.seq:
            out.setdefault(e.seq, []).append(e)
    return out


def check_pinned(events: Sequence[Event], view: Sequence[Event], index: Any = None) -> list[Violation]:
    """``index``: a ``covered_text.CoveredText`` of ``events`` (its pinned events' positions:
    no walk of every event per candidate)."""
    shown = _by_seq(view)
    out = []
    facts = index.range_facts() if index is not None else None
    for e in (events if facts is None else [events[i] for i in facts[3]]):
        if e.kind != "pinned":
            continue
        if not any(v.id == e.id and v.blocks == e.blocks for v in shown.get(e.seq, [])):
            out.append(Violation(code="pinned_missing", message=f"pinned event {e.id} is not verbatim in the view",
                                 seq=e.seq))
    return out


def check_latest_request(events: Sequence[Event], view: Sequence[Event], index: Any = None) -> list[Violation]:
    """The latest request is in the view verbatim: as its own event (the normal case: the cut
    is before it) or, when a checkpoint covers it, quoted in full by the summary message."""
    req = latest_request(events) if index is None else index.latest_request()
    if req is None:
        return []
    if any(v.id == req.id and v.blocks == req.blocks for v in _by_seq(view).get(req.seq, [])):
        return []
    text = req.text.strip()
    if text and any(v.kind == "compaction" and v.seq == 0 and text in v.text for v in view):
        if not any(v.seq == req.seq for v in view):
            return []
    return [Violation(code="latest_request_missing",
                      message="the latest user request is not verbatim in the view", seq=req.seq)]


# --- 10: ranges ---------------------------------------------------------------------------------


def _gaps(events: Sequence[Event], prev_end: int) -> list[Violation]:
    seqs = sorted({e.seq for e in events if e.seq > prev_end})
    if seqs and seqs != list(range(prev_end + 1, seqs[-1] + 1)):
        missing = sorted(set(range(prev_end + 1, seqs[-1] + 1)) - set(seqs))[:5]
        return [Violation(code="range_not_contiguous",
                          message=f"events after {prev_end} have gaps (missing {missing})")]
    return []


def check_range(
    events: Sequence[Event], ckpt: Checkpoint | None, view: Sequence[Event], prev: Checkpoint | None,
    index: Any = None,
) -> list[Violation]:
    """``index``: a ``covered_text.CoveredText`` of ``events``; the same violations, reading
    only the events the view shows or should show instead of every event per candidate."""
    out: list[Violation] = []
    prev_end = _end(prev)
    end = max(_end(ckpt), prev_end)
    facts = index.range_facts() if index is not None else None
    if facts is not None:
        gaps = index._memo.get(("gaps", prev_end))
        if gaps is None:
            later = facts[1][bisect_right(facts[1], prev_end):]  # (the events' seqs, ascending)
            # no gap when the distinct seqs after prev_end are as many as prev_end+1..the last
            # (a set of the ints, not one of every event's seq walked and sorted: issue 17)
            gaps = index._memo[("gaps", prev_end)] = (
                [] if not later or len(set(later)) == later[-1] - prev_end else _gaps(events, prev_end))
        out += gaps
        snapshot = facts[2]
    else:
        out += _gaps(events, prev_end)
        snapshot = max((e.seq for e in events), default=0)
    if ckpt is not None:
        if ckpt.covers.end > snapshot or (ckpt.snapshot_version and ckpt.covers.end > ckpt.snapshot_version):
            out.append(Violation(code="range_not_contiguous",
                                 message=f"checkpoint covers up to {ckpt.covers.end}, past the snapshot {snapshot}"))
        if prev is not None:
            if _end(ckpt) < prev_end:
                out.append(Violation(code="range_not_contiguous",
                                     message=f"checkpoint ends at {_end(ckpt)}, before the previous one ({prev_end})"))
            if ckpt.based_on != prev.id:
                out.append(Violation(code="range_not_contiguous",
                                     message=f"checkpoint is based on {ckpt.based_on}, not {prev.id}"))
        for seq in ckpt.replacements:
            if seq <= end:
                out.append(Violation(code="range_not_contiguous",
                                     message="replacement for a covered event", seq=seq))
    shown = _by_seq(view)
    if facts is not None:
        known, seqs, _, pinned = facts
        # the events a violation can name: those after the cut, pinned ones, and those the
        # view shows; every other event is covered and absent, as it should be
        first_after = bisect_right(seqs, end)
        at = set(range(first_after, len(events)))
        at.update(pinned)
        for seq in shown:
            if seq <= end:
                at.update(range(bisect_left(seqs, seq), bisect_right(seqs, seq)))
        walk: Iterable[Event] = [events[i] for i in sorted(at)]
    else:
        known = {e.seq: e for e in events}
        walk = events
    for e in walk:
        n = len(shown.get(e.seq, []))
        expected = e.seq > end or e.kind == "pinned"
        if expected and n == 0 and e.kind != "pinned":  # pinned: reported as pinned_missing
            out.append(Violation(code="event_missing", message=f"event {e.id} is not in the view", seq=e.seq))
        elif n > 1 or (n == 1 and not expected):
            out.append(Violation(code="event_duplicated",
                                 message=f"event {e.id} appears {n}x in the view"
                                 + ("" if expected else " although the checkpoint covers it"),
                                 seq=e.seq))
    for seq in shown:
        if seq not in known:
            out.append(Violation(code="event_unexpected", message="view holds an event not in the log", seq=seq))
    summaries = [v for v in view if v.kind == "compaction" and v.seq == 0]
    if ckpt is not None and not ckpt.covers.empty and len(summaries) != 1:
        out.append(Violation(code="event_missing" if not summaries else "event_duplicated",
                             message=f"view holds {len(summaries)} summary messages, expected 1"))
    return out


# --- 5: constraints -----------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def check_constraints(events: Sequence[Event], ckpt: Checkpoint, prev_end: int,
                      index: Any = None) -> list[Violation]:
    from compactor.lifting.lift import constraint_sentences, is_genuine_request

    if ckpt.covers.empty:
        return []
    summary = _norm(ckpt.summary)
    wanted: dict[str, int | None] = {}
    for c in ckpt.state.get("constraints", []) or []:
        wanted.setdefault(c["text"], c.get("seq"))
    if index is not None:
        for seq, sentences in index.request_constraints(prev_end, ckpt.covers.end):
            for s in sentences:
                wanted.setdefault(s, seq)
    else:
        for e in body(events, prev_end):
            if e.seq > ckpt.covers.end:
                break
            if is_genuine_request(e):
                for s in constraint_sentences(e.text):
                    wanted.setdefault(s, e.seq)
    return [
        Violation(code="constraint_dropped", message="a constraint from the covered range is not "
                  "verbatim in the summary", seq=seq, detail=text)
        for text, seq in wanted.items()
        if _norm(text) not in summary
    ]


# --- 6: unknown outcomes ------------------------------------------------------------------------

_DONE_LISTS = ("commands", "tests", "files_changed", "files_read")


def check_unknown(
    events: Sequence[Event], ckpt: Checkpoint, view: Sequence[Event], prev: Checkpoint | None,
    index: Any = None,
) -> list[Violation]:
    out: list[Violation] = []
    state = ckpt.state or {}
    unknown = {u["tool_use_id"]: u for u in state.get("unknown_actions", []) or []}
    # (the index's set is shared: a call is answered in it or in the view, not in a union copied
    # per candidate, issue 17)
    in_source = _answered(events, index)
    in_view = {r.tool_use_id for e in view for r in e.tool_results}
    # previously unknown stays unknown unless a result arrived
    for u in ((prev.state or {}).get("unknown_actions", []) if prev is not None else []) or []:
        uid = u["tool_use_id"]
        if uid not in unknown and uid not in in_source and uid not in in_view:
            out.append(Violation(code="unknown_reported_done",
                                 message=f"action {uid} ({u.get('name', 'tool')}) was unknown and no result "
                                 "arrived, but the state no longer lists it as unknown", seq=u.get("seq")))
    # covered calls without a result anywhere are unknown
    if not ckpt.covers.empty:
        # (with the index: only the calls no event answers can be unanswered here)
        calls = ((e.seq, u) for e in body(events, _end(prev)) for u in e.tool_uses) if index is None \
            else index.unanswered_calls(_end(prev))
        for seq, use in calls:
            if seq > ckpt.covers.end:
                break
            if use.id not in in_source and use.id not in in_view and use.id not in unknown:
                out.append(Violation(code="unknown_reported_done",
                                     message=f"call {use.id} ({use.name}) has no result but is not listed "
                                     "as unknown", seq=seq))
    # nothing unknown is listed as done
    for key in _DONE_LISTS:
        for item in state.get(key, []) or []:
            uid = item.get("tool_use_id")
            if uid and uid in unknown:
                out.append(Violation(code="unknown_reported_done",
                                     message=f"action {uid} is listed as unknown and under {key}",
                                     seq=item.get("seq")))
    return out


# --- 7: artifacts -------------------------------------------------------------------------------


def _refs(blocks: Iterable[Any]) -> Iterable[ArtifactRefBlock]:
    for b in blocks:
        if isinstance(b, ArtifactRefBlock):
            yield b
        elif isinstance(b, ImageBlock) and b.ref is not None:
            yield b.ref
        elif isinstance(b, ToolResultBlock):
            yield from _refs(b.content)


def check_artifacts(
    events: Sequence[Event], ckpt: Checkpoint, view: Sequence[Event], artifacts: Mapping[str, bytes] | None,
    index: Any = None,
) -> list[Violation]:
    out: list[Violation] = []
    if index is not None:
        source_refs = index.source_refs()
    else:
        source_refs = {(r.sha256, r.uri) for e in events for r in _refs(e.blocks)}
    listed = set(ckpt.artifacts)
    for e in view:
        for ref in _refs(e.blocks):
            if (ref.sha256, ref.uri) in source_refs:
                continue  # came with the log; the store resolves it
            problem = None
            if ref.uri != ARTIFACT_URI.format(ref.sha256):
                problem = f"uri {ref.uri} does not name its sha256"
            elif ref.sha256 not in listed:
                problem = f"artifact {ref.sha256[:12]} is not listed in the checkpoint"
            elif artifacts is not None:
                data = artifacts.get(ref.sha256)
                if data is None:
                    problem = f"artifact {ref.sha256[:12]} has no bytes"
                elif hashlib.sha256(data).hexdigest() != ref.sha256:
                    problem = f"artifact {ref.sha256[:12]} bytes do not match their sha256"
                elif len(data) != ref.bytes:
                    problem = f"artifact {ref.sha256[:12]} is {len(data)} bytes, ref says {ref.bytes}"
            if problem:
                out.append(Violation(code="artifact_unresolved", message=problem, seq=e.seq or None))
    return out


# --- 8: sizes -----------------------------------------------------------------------------------


def check_summary_size(
    events: Sequence[Event], ckpt: Checkpoint, prev: Checkpoint | None, index: Any = None
) -> list[Violation]:
    prev_end = _end(prev)
    if ckpt.covers.empty or ckpt.covers.end <= prev_end:
        return []  # no new summary
    if index is not None:
        replaced = index.covered_tokens(prev_end, ckpt.covers.end)
    else:
        replaced = sum(count_event(e) for e in body(events, prev_end) if e.seq <= ckpt.covers.end)
    if prev is not None and not prev.covers.empty:
        replaced += count_event(summary_event(prev).with_(tokens=None))
    mine = count_event(summary_event(ckpt).with_(tokens=None))
    if mine >= replaced:
        return [Violation(code="summary_not_smaller",
                          message=f"summary is {mine:,} tokens, the range it replaces {replaced:,}")]
    return []


# --- 9: identifiers (compactor.engine.identifiers) ---------------------------------------------


def check_identifiers(
    events: Sequence[Event], ckpt: Checkpoint, prev: Checkpoint | None, index: Any = None
) -> list[Violation]:
    """Every identifier the summary states that the session does not have
    (``identifiers.unknown_identifiers``), as an ``unknown_identifier`` violation."""
    return [Violation(code="unknown_identifier",
                      message="the summary states an identifier (path, URL or id) that is not in the session",
                      detail=ident)
            for ident in unknown_identifiers(events, ckpt, prev, index)]


# --- model summaries: refused when empty, rejected when they report the unrecorded as done ---------


def check_model_summary(ckpt: Checkpoint) -> list[Violation]:
    """A model-written summary (its own text, before completion's appendix) must carry a
    measurable part of the lifted state (``acceptance.is_placeholder``: otherwise it is empty
    or a placeholder, ``summary_incomplete``), and must not report as done an action with no
    recorded result (``unknown_reported_done``). Sections it leaves out are completed, never
    a violation. Messages carry counts and line numbers only, never summary text."""
    if ckpt.covers.empty or ckpt.summarizer == "structured" or ckpt.native is not None or not ckpt.state:
        return []
    from compactor.lifting.lift import LiftedState
    from compactor.summarize.acceptance import done_claims, foreign_language, is_placeholder

    state = LiftedState.model_validate(ckpt.state)
    out: list[Violation] = []
    placeholder = is_placeholder(ckpt.summary, state)
    if placeholder is not None:
        out.append(Violation(code="summary_incomplete",
                             message="the model's answer is empty or a placeholder: " + placeholder.describe()))
    foreign = foreign_language(ckpt.summary, state)
    if foreign is not None:
        out.append(Violation(code="summary_language",
                             message=f"the model's summary is written in {foreign[0]}, the session in "
                             f"{' and '.join(sorted(foreign[1]))}"))
    for line, what in done_claims(ckpt.summary, state):
        out.append(Violation(code="unknown_reported_done",
                             message=f"line {line} of the model's summary reports as done an action "
                             "with no recorded result", detail=what))
    return out
