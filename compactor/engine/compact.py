"""The compaction engine: plan -> layers (cheapest first) -> validate. Pure and deterministic.

``compact`` is the one entry point; the durable workflow calls the same step functions
(``planning.plan``, ``apply_layers``, ``invariants.validate``, ``reconcile.reconcile_checkpoint``) from its
activities, so the inline and durable paths produce the same view.

Determinism: ids and timestamps come from the arguments. The default checkpoint id is the
sha256 of the input events' content hash (seq, id, kind, role, blocks: no session or tenant)
plus the parameters (policy, target, previous checkpoint). Only ``record.durations_ms``
varies between runs.

Successive compactions: ``compact(events after prev.covers.end + pinned, prev=checkpoint)``
lifts only the newly covered events on top of ``prev.state``; the log before
``prev.covers.end`` is never read again.

Budget: the view's size is counted on the rendered Anthropic request (``measure.view_tokens``,
cl100k). When the target cannot be met without breaking an invariant, the engine keeps the
invariant and says so: ``record.violations`` holds ``over_budget`` and ``record.error`` why.
"""

from __future__ import annotations

import hashlib
import json
import time
import weakref
from bisect import bisect_right
from itertools import accumulate, islice
from operator import is_
from datetime import datetime
from typing import Any, Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from compactor.engine.boundary import body, choose_cut, latest_request, safe_cut_points_both
from compactor.engine.candidates import Candidate, Picker
from compactor.errors import InvalidInput
from compactor.events import Block, Event, content_hash
from compactor.engine.covered_text import CoveredText
from compactor.engine.source_hash import HashLines, PrefixHash
from compactor.engine.gc_pause import collector_paused
from compactor.engine.invariants import Violation, _refs, validate
from compactor.engine.layers import (
    LAYER_CLEAR,
    LAYER_EXTERNALIZE,
    LAYER_SUMMARY,
    ClearedText,
    apply_replacements,
    clear_old_tool_results,
    externalize_tool_results,
    realize_cleared,
    summarize_range,
)
from compactor.engine.planning import Plan, frame_tokens, plan, prepare
from compactor.engine.measure import streamed_view_tokens, view_tokens
from compactor.engine.policy import Policy
from compactor.records import Checkpoint, CompactionRecord, SeqRange
from compactor.summarize.repair import drop_identifier_items, drop_identifier_lines
from compactor.tokens import count_event, count_text
from compactor.engine.view import SUMMARY_PREFIX, build_view, iter_view_roles

MIN_SUMMARY_TOKENS = 200
"""Below this a summary cannot carry the goal, constraints and latest request: shrink the tail."""
INFEASIBLE_SUMMARY_SHARE = 0.25
"""When the pinned instructions alone exceed the target, no view can meet it (the record says
so, with the irreducible tokens); the summary then gets this share of the target instead of
the bare minimum, so the view that goes over by the pinned part still carries the work (a
200-token summary of a Codex session whose developer instructions fill the target told the
next turn almost nothing)."""


class LayerResult(BaseModel):
    """The chosen candidate after the layers ran."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    view: list[Event]
    checkpoint: Checkpoint | None
    artifacts: dict[str, bytes] = Field(default_factory=dict)
    layers: list[str] = Field(default_factory=list)
    freed_by_layer: dict[str, int] = Field(default_factory=dict)
    tokens_after: int = 0
    summary_tokens: int = 0
    retained_tail_tokens: int = 0
    violations: list[Violation] = Field(default_factory=list)
    candidates: int = Field(default=0, description="Summary candidates tried.")
    fallback_reason: str | None = Field(default=None, description="Why a last-resort mode was used.")
    mid_turn: bool = Field(default=False, description="The cut passes the latest request.")
    left_out: dict[str, int] = Field(default_factory=dict, description="Section -> items left out for space.")
    repaired: int = Field(default=0, description="Summary items dropped by the identifier repair.")
    durations_ms: dict[str, float] = Field(default_factory=dict)


class CompactResult(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    view: list[Event]
    checkpoint: Checkpoint | None
    record: CompactionRecord
    artifacts: dict[str, bytes] = Field(default_factory=dict, description="sha256 -> bytes to store.")


# --- helpers ----------------------------------------------------------------------------------


def default_checkpoint_id(events: Sequence[Event], policy: Policy, target: int, prev: Checkpoint | None,
                          *, lines: HashLines | None = None) -> str:
    params = json.dumps(
        {
            "policy": policy.model_dump(mode="json"),
            "target": target,
            "prev": prev.id if prev is not None else None,
        },
        sort_keys=True,
    )
    h = hashlib.sha256()
    h.update((content_hash(events) if lines is None else lines.digest(events)).encode())
    h.update(params.encode())
    return "ck-" + h.hexdigest()[:32]


# --- layers -----------------------------------------------------------------------------------


_RELEASE_COVERED = True
"""Let go of the covered prefix's replacements while the summary ladder runs (off: every
candidate's replacements held throughout; the same outcome, ``tests/unit/test_engine_release.py``)."""

_DERIVE_VIEW_COUNT = True
"""A replacement layer's view counted from the plan's count of the view before it: that count
less the tokens the layer freed (``LayerOutcome.freed_tokens``: per replaced event, its count as
the view showed it less its replacement's). Exact when the plan's view placed no late result
as text (``view._as_text``: such an event's count is not its replacement's) and shows the same
summary event (no previous checkpoint, or one covering from seq 1, as ``checkpoint`` makes it):
the replacements keep every block's kind, call and result ids, so every event's message role,
the late results and the repair tokens (``measure.RepairCount``) are the view's before. Off:
every such view is counted in a walk of the session (``tests/unit/test_engine_counts.py``
compares; issue 17: the walk was a third of the validation phase at 100k events)."""

_CHECKED_STATE = frozenset({"constraints", "unknown_actions", "artifacts"})
"""The fields of a summary candidate's lifted state that validation and the view read
(``invariants``, ``view``): a ladder candidate's checkpoint holds only these until it is
picked, when ``candidates.Candidate.complete_state`` dumps the whole state (one JSON dump of an
O(session) state per compaction instead of one per candidate, issue 17)."""


def apply_layers(
    events: Sequence[Event],
    plan: Plan,
    policy: Policy,
    *,
    prev: Checkpoint | None = None,
    checkpoint_id: str | None = None,
    now: datetime | None = None,
    tenant: str | None = None,
    session: str | None = None,
    _safe: dict[bool, list[int]] | None = None,
    _view: dict[str, int] | None = None,
    _prepared: bool = False,
    _body: list[Event] | None = None,
    _calls: dict[str, Any] | None = None,
    full_state: bool = True,
) -> LayerResult:
    """Run the layers cheapest first, stopping as soon as the view fits ``plan.target_tokens``.

    ``_safe``: the safe cut points ``plan`` computed on the same events (``compact``);
    ``_view``: what ``plan`` filled in on them (its count of the view); ``_prepared``,
    ``_body``, ``_calls``: as ``plan``'s (the events prepared already, their body, and what
    the safe cuts' walk learnt of its calls). ``full_state``: as ``compact``'s."""
    if (prev.id if prev is not None else None) != plan.prev_checkpoint:
        raise ValueError("plan was made for a different previous checkpoint")
    # (the caller's prepared list itself, read only: not a copy of it held through the layers,
    # a pointer per event, issue 17, memory)
    evs = (events if type(events) is list else list(events)) if _prepared else prepare(events, prev)
    end0 = plan.prev_end
    target = plan.target_tokens
    covered_all = body(evs, end0) if _body is None else _body  # what a summary may cover, in order
    # The layers' input, the events they may replace: every event of evs that is not pinned
    # (evs holds only pinned events and those after end0, in seq order: that is the body).
    covered_text = CoveredText(evs, body=(end0, covered_all))  # whole-session facts the checks share
    if covered_text is not None:  # (None: tests/unit/test_lift_once.py's path without shared checks)
        covered_text.take_calls(end0, _calls)  # (kept only when made on covered_all itself)
    covered_hash = PrefixHash(covered_all)  # the source hash of each candidate's covered prefix
    hash_lines = HashLines(covered_hash)  # each event's content-hash line, made once for both hashes
    ckpt_id = checkpoint_id or default_checkpoint_id(evs, policy, target, prev, lines=hash_lines)
    tenant = tenant or (prev.tenant if prev is not None else "inline")
    session = session or (prev.session if prev is not None else "inline")
    repl: dict[int, list[Block]] = {
        s: list(b) for s, b in (prev.replacements.items() if prev is not None else []) if s > end0
    }
    artifacts: dict[str, bytes] = {}
    layers: list[str] = []
    freed: dict[str, int] = {}
    durations: dict[str, float] = {}
    counted: dict[int, tuple[list[Block], int]] = {}  # seq -> (a layer's replacement, its tokens)
    released = [end0]  # repl holds no replacement at or before this seq (see release_covered)
    layer_fns = {LAYER_EXTERNALIZE: externalize_tool_results, LAYER_CLEAR: _clear_lazily}

    def release_covered(cut: int) -> None:
        """Let go of the replacements a summary covering up to ``cut`` does not show (the
        cleared copy of nearly every event of a big session, issue 17): the ladder's
        checkpoints hold those after their cut only; one before (or the replacement layers'
        candidate) makes them again (``checkpoint``). Likewise the artifacts only those
        showed (a cleared result's bytes and sha256 each: the ladder's views resolve the refs
        they show only, ``invariants.check_artifacts``), and the dicts' tables sized for
        every event (a ``del`` shrinks none: ~100 bytes an event, issue 17, memory)."""
        if cut > released[0]:
            _keep_after(repl, cut)
            _keep_after(counted, cut)
            shown = _shown_digests(repl)
            kept = {k: v for k, v in artifacts.items() if k in shown}
            artifacts.clear()
            artifacts.update(kept)
            released[0] = cut

    def checkpoint(end: int, **fields: object) -> Checkpoint:
        if end < released[0]:  # replacements let go of: the layers again (pure: the same ones)
            repl.clear()
            repl.update({s: list(b) for s, b in (prev.replacements.items() if prev is not None else [])
                         if s > end0})
            artifacts.clear()  # (in the order the layers wrote them, as before the release)
            for name in layers:
                again = layer_fns[name](apply_replacements(covered_all, repl), policy)
                repl.update(again.replacements)
                counted.update((s, (b, again.counts.get(s))) for s, b in again.replacements.items())
                artifacts.update(again.artifacts)
            released[0] = end0
        base: dict[str, object] = {}
        if prev is not None:
            base = {
                "summary": prev.summary, "sections": prev.sections, "native": prev.native,
                "state": prev.state, "summary_tokens": prev.summary_tokens,
                "summarizer": prev.summarizer, "source_hash": prev.source_hash,
            }
        base.update(fields)
        covers = SeqRange(start=1, end=end) if end > 0 else SeqRange(start=1, end=0)
        kept = realize_cleared(repl, end, counted)  # (the cleared blocks made for these only)
        return Checkpoint(
            id=ckpt_id, tenant=tenant, session=session, covers=covers,
            replacements=kept,
            # Only the artifacts the view can reference: those of replacements after the cut.
            # A tool result the summary covers is never shown again (its bytes stay in the
            # log), so storing its cleared/externalized copy would be work nobody reads -
            # 222 fsync'ed files on a 100k-token session (compactor bench perf).
            artifacts=sorted({r.sha256 for b in kept.values() for r in _refs(b)}),
            based_on=prev.id if prev is not None else None,
            snapshot_version=plan.snapshot_version, created_at=now, **base,  # type: ignore[arg-type]
        )

    def candidate(ckpt: Checkpoint | None, *, lazy: bool = False,
                  remake: Callable[[], Checkpoint] | None = None, tokens: int | None = None) -> Candidate:
        """``ckpt`` None: a replacement layers' candidate (no summary) counted already
        (``tokens``), its checkpoint made by ``remake`` when asked for."""
        t = time.perf_counter()
        if lazy and (ckpt is None or not ckpt.summary) and target is not None:
            # No summary: no identifier to repair, so the view and count are final and the
            # checks can wait until someone asks (see Candidate), against the artifacts
            # written so far (a later layer adds more): the first ``n_arts`` of ``artifacts``
            # (written in order; not a copy of them held through the ladder, issue 17, memory)
            n_arts = len(artifacts)
            # The view is counted as it is made, one event at a time, and built only when
            # needed (validation, or chosen): build_view is pure, so the built one is the
            # same (memory: the cleared view of a big session is a copy of every cleared event).
            n = tokens if tokens is not None else \
                streamed_view_tokens(iter_view_roles(evs, ckpt), _known_counts(counted), roles=True)
            if n is None:  # a provider compaction block: the request is rendered to count it
                n = view_tokens(build_view(evs, ckpt))
            assert ckpt is not None or remake is not None

            def check() -> list[Violation]:
                cand = me()  # (alive: it is the candidate calling)
                made, view = cand.checkpoint, cand.view  # (first: they restore what the ladder let go)
                arts = dict(islice(artifacts.items(), n_arts))
                return validate(events=evs, checkpoint=made, view=view,
                                target_tokens=target, artifacts=arts, prev_checkpoint=prev, tokens=n,
                                index=covered_text)
            durations["validate"] = durations.get("validate", 0.0) + (time.perf_counter() - t) * 1000
            lazy_cand = Candidate(ckpt, None, n, check=check, target=target,
                                  rebuild=lambda: build_view(evs, me().checkpoint), remake=remake)
            # Its callbacks reach it by a weak reference: a strong one is a reference cycle
            # (candidate -> callback -> candidate) that holds ``evs``, every event of the
            # session, until the cyclic collector runs (paused: at the end; issue 17).
            me = weakref.ref(lazy_cand)
            return lazy_cand
        view = _indexed_view(evs, ckpt, covered_text)
        n = view_tokens(view)
        vio = validate(events=evs, checkpoint=ckpt, view=view, target_tokens=target,
                       artifacts=artifacts, prev_checkpoint=prev, tokens=n, index=covered_text)
        ckpt, view, n, vio, repaired = repair_candidate(evs, ckpt, view, n, vio, target, artifacts, prev,
                                                        index=covered_text)
        durations["validate"] = durations.get("validate", 0.0) + (time.perf_counter() - t) * 1000
        return Candidate(ckpt, view, n, vio, repaired)

    current = plan.tokens_before
    best: Candidate | None = None
    shown_tokens = _view.get("tokens") if _view is not None and _DERIVE_VIEW_COUNT else None

    # (a), (b): replacement layers over the events after the previous checkpoint
    for name, fn in layer_fns.items():
        if name not in plan.layers:
            continue
        t = time.perf_counter()
        shown = apply_replacements(covered_all, repl)
        out = fn(shown, policy)
        durations[name] = (time.perf_counter() - t) * 1000
        if not out.items:
            continue
        repl.update(out.replacements)
        # (a lazily cleared event's count is made with its blocks: realize_cleared)
        counted.update((s, (b, out.counts.get(s))) for s, b in out.replacements.items())
        artifacts.update(out.artifacts)
        if shown_tokens is not None:
            shown_tokens -= out.freed_tokens  # (_DERIVE_VIEW_COUNT)
        # (counted already: its checkpoint, a replacement of every cleared event, made when asked for)
        cand = candidate(None if shown_tokens is not None else checkpoint(end0), lazy=True,
                         remake=lambda: checkpoint(end0), tokens=shown_tokens)
        layers.append(name)
        freed[name] = current - cand.tokens
        current = cand.tokens
        best = cand
        if cand.fits:
            return _result(cand, artifacts, layers, freed, durations, evs, 0, full_state)
        # The layer's outcome holds its own reference to every replacement it made (a cleared
        # copy of nearly every result of a big session): let go, or release_covered frees
        # nothing until the first rung's summary rebinds the name (issue 17, memory).
        shown = out = None  # type: ignore[assignment]

    # (c): summary checkpoint, shrinking the tail along the policy's ladder
    tried: set[int] = set()
    candidates = Picker()
    state0 = prev.state if prev is not None else None
    prev_summary_tokens = 0
    if prev is not None and not prev.covers.empty:
        prev_summary_tokens = count_text(SUMMARY_PREFIX) + prev.summary_tokens
    if LAYER_SUMMARY in plan.layers:
        t_sum = time.perf_counter()
        # One lifting pass for every candidate: the ladder's cuts grow, so each candidate's
        # state extends the previous one (compactor.lifting.lift.Lifter; same states).
        from compactor.lifting.lift import LiftedState, Lifter

        # (the lists the checks read too: covered_text's body is covered_all)
        if covered_text is not None:
            covered_seqs = covered_text.body_seqs(end0)
            covered_sums = covered_text.prefix_sums(end0)  # tokens of each prefix
        else:
            covered_seqs = [e.seq for e in covered_all]
            covered_sums = [0, *accumulate(map(count_event, covered_all))]
        safe_points: dict[bool, list[int]] = dict(_safe or {})  # keep_request -> safe cuts, every rung
        lifter = Lifter(covered_all, LiftedState.model_validate(state0) if state0 else None)
        from compactor.summarize.structured import begin_ladder_memo, end_ladder_memo
        line_memo = begin_ladder_memo()  # the rungs' states share their items: their lines are built once
        # Normal mode keeps the latest request as an event (the cut is before it). Only when no
        # such cut meets the target may the cut pass it: the summary then quotes it in full,
        # which the validator checks (a truncated quote makes the candidate invalid).
        # The split between the summary and the verbatim tail follows what keeps the most: down
        # the ladder (longest tail first) the first candidate that fits and leaves no essential
        # state item out wins; otherwise the fitting candidate that leaves out the least (ties:
        # the longer tail). A long tail never starves the summary into a list of counts.
        for keep_request in (True, False):
            fitting = False
            for factor in [*policy.shrink_ladder, 0.0]:
                budget = int(plan.tail_budget * factor)
                if keep_request not in safe_points:
                    safe_points.update(safe_cut_points_both(evs, end0))  # (both in one walk)
                cut = choose_cut(
                    evs, policy, budget,
                    tail_min=int(plan.tail_min * factor),
                    tail_max=max(budget, int(plan.tail_max * factor)),
                    min_text_messages=plan.min_text_messages if factor else 0, prev_end=end0,
                    keep_latest_request=keep_request, safe=safe_points[keep_request],
                    body_events=covered_all,
                )
                if cut <= end0 or cut in tried:
                    continue
                n_covered = bisect_right(covered_seqs, cut)  # (covered_all[:n_covered]: no slice made)
                # (the tail found by bisection, as the candidate's own view: not two walks of the session a rung)
                frame = _indexed_view(evs, checkpoint(cut, summary="", sections={}, state={}, summary_tokens=0),
                                      covered_text)
                room = target - view_tokens(frame) - 4
                if not plan.available_tokens:  # the pinned instructions alone exceed the target
                    room = max(room, int(target * INFEASIBLE_SUMMARY_SHARE))
                replaced = covered_sums[n_covered] + prev_summary_tokens
                limit = min(room, policy.summary_max_tokens)
                if policy.summary_must_shrink:
                    limit = min(limit, replaced - frame_tokens(cut) - 8)
                if limit < MIN_SUMMARY_TOKENS and factor:
                    continue  # the tail leaves no room for a summary: try a smaller tail
                tried.add(cut)
                limit = max(limit, MIN_SUMMARY_TOKENS)
                # once: a later cut before this one makes the replacements again (checkpoint)
                if _RELEASE_COVERED and released[0] == end0:
                    if best is not None:
                        best.release()  # made again if validated or chosen (checkpoint, build_view: pure)
                    release_covered(cut)
                lifted = lifter.state_at(cut)
                out = summarize_range(None, state0, limit, latest_full=not keep_request,
                                      state=lifted, state_fields=_CHECKED_STATE,
                                      covered_tokens=covered_sums[n_covered])
                src_hash = covered_hash.at(n_covered)
                if prev is not None and prev.source_hash:
                    src_hash = hashlib.sha256((prev.source_hash + src_hash).encode()).hexdigest()
                ckpt = checkpoint(
                    cut, summary=out.text, sections=out.sections, state=out.state, native=None,
                    summary_tokens=out.tokens, summarizer="structured", source_hash=src_hash,
                )
                cand = candidate(ckpt)
                cand.lifted = lifted
                cand.past_request = not keep_request
                cand.left_out = dict(out.dropped)
                cand.left_out_weight = out.left_out_weight
                candidates.add(cand)
                if cand.fits:
                    fitting = True
                    if not cand.left_out_weight:
                        break
            if fitting and candidates.min_fitting_weight() == 0:
                break  # a cut before the latest request keeps everything: no mid-turn cut
        end_ladder_memo(line_memo)
        durations[LAYER_SUMMARY] = (time.perf_counter() - t_sum) * 1000
        # The ladder's working sets (the lifter's indexes of every covered call) go before the
        # picked state is dumped: that dump is the compaction's peak (issue 17, memory). The
        # candidates keep their own lifted states; the prefix sums are covered_text's.
        # (and the last rung's state, outcome and checkpoint: their items are the picked state's,
        # let go of while it is dumped, ``candidates.dump_releasing``)
        del lifter, covered_sums, covered_seqs
        lifted = out = ckpt = cand = frame = None  # type: ignore[assignment]  # (frame: the last rung's view)
    if candidates.n:
        chosen = candidates.pick()
        if best is None and not chosen.valid:
            # Keep the invariant and say so: the view as it is (over budget) beats one that
            # breaks an invariant (e.g. a giant latest request the summary cannot quote).
            unchanged = candidate(checkpoint(end0))
            if unchanged.valid:
                best = unchanged
        if chosen.tokens < current and (
            # (best.valid last: it may validate the cleared view, needed only when chosen is not)
            best is None or (chosen.valid and chosen.tokens < best.tokens) or not best.valid
        ):
            layers.append(LAYER_SUMMARY)
            freed[LAYER_SUMMARY] = current - chosen.tokens
            best = chosen
    if best is None:
        best = candidate(checkpoint(end0))
    # Likewise the whole-session facts of the checks, once the candidate returned has been
    # checked (a lazy one now), and the replacements its checkpoint does not hold.
    best.violations  # a lazy candidate's checks run now (they read covered_text)
    best.checkpoint, best.view  # (one let go of made again now: checkpoint() reads covered_all)
    covered_text = None  # type: ignore[assignment]  # a check run later still works: index=None is the full search
    repl.clear()
    # The body's lists and the safe cuts' walk's tables (a pointer or two per event, ~15 MB at
    # 300k events, issue 17, memory) go before the picked state is dumped (``_result``: the
    # compaction's peak is its own or the ladder's): nothing after reads them.
    covered_all = _body = _calls = _safe = safe_points = covered_hash = hash_lines = None  # type: ignore[assignment]
    return _result(best, artifacts, layers, freed, durations, evs, candidates.n, full_state)


def _keep_after(d: dict[int, Any], cut: int) -> None:
    """Keep ``d``'s entries of seqs after ``cut``, in order, in a table of their size."""
    kept = {s: v for s, v in d.items() if s > cut}
    d.clear()
    d.update(kept)


def _shown_digests(repl: dict[int, Any]) -> set[str]:
    """The sha256 of every artifact ref the replacements show (a lazily cleared result's: its
    text's, ``layers.ClearedText``, whose blocks hold one ref to it)."""
    out: set[str] = set()
    for b in repl.values():
        if type(b) is ClearedText:
            out.add(b.digest)
        else:
            out.update(r.sha256 for r in _refs(b))
    return out


def _clear_lazily(events: Sequence[Event], policy: Policy) -> Any:
    """The clearing layer with its cleared blocks made only for the events a view shows
    (``layers.ClearedText``; ``apply_layers``'s checkpoints make them: ``realize_cleared``)."""
    return clear_old_tool_results(events, policy, lazy=True)


def _known_counts(counted: dict[int, tuple[list[Block], int]]) -> Callable[[Event], int]:
    """``count_event``, answered from the layers' own counts for an event a view shows with a
    replacement they made (the same blocks: the clearing layer counted each cleared event
    once already, and a replaced event's copy carries no count)."""
    def count(e: Event) -> int:
        n = e.tokens
        if n is not None:
            return n
        got = counted.get(e.seq)
        if got is not None:
            blocks, n = got
            shown = e.blocks
            if n is not None and len(shown) == len(blocks) and all(map(is_, shown, blocks)):
                return n
        return count_event(e)
    return count


def repair_candidate(
    evs: Sequence[Event],
    ckpt: Checkpoint,
    view: list[Event],
    tokens: int,
    violations: list[Violation],
    target: int | None,
    artifacts: dict[str, bytes] | None,
    prev: Checkpoint | None,
    *,
    index: CoveredText | None = None,
) -> tuple[Checkpoint, list[Event], int, list[Violation], int]:
    """Drop the summary items that state identifiers the covered range lacks, and validate
    again (``repair.drop_identifier_lines``). Returns the (possibly) repaired checkpoint, its
    view, tokens, violations and the number of items dropped (0: unchanged)."""
    idents = {v.detail for v in violations if v.code == "unknown_identifier" and v.detail}
    if not idents or not ckpt.summary or ckpt.native is not None:
        return ckpt, view, tokens, violations, 0
    text, dropped = drop_identifier_lines(ckpt.summary, idents)
    if not dropped:
        return ckpt, view, tokens, violations, 0
    fixed = ckpt.model_copy(update={
        "summary": text, "sections": drop_identifier_items(dict(ckpt.sections), idents),
        "summary_tokens": count_text(text),
    })
    view2 = _indexed_view(evs, fixed, index)
    n2 = view_tokens(view2)
    vio2 = validate(events=evs, checkpoint=fixed, view=view2, target_tokens=target,
                    artifacts=artifacts, prev_checkpoint=prev, tokens=n2, index=index)
    return fixed, view2, n2, vio2, dropped


def _indexed_view(evs: Sequence[Event], ckpt: Checkpoint, index: CoveredText | None) -> list[Event]:
    """``build_view(evs, ckpt)``; when ``index`` was made on these very events (in seq order:
    ``prepare``), a summary candidate's tail is found by bisection (``build_view``'s ``at``)."""
    facts = index.range_facts() if index is not None and index.events is evs else None
    return build_view(evs, ckpt, at=None if facts is None else (facts[1], facts[3]))


def _result(
    cand: Candidate,
    artifacts: dict[str, bytes],
    layers: list[str],
    freed: dict[str, int],
    durations: dict[str, float],
    evs: list[Event],
    n_candidates: int,
    full_state: bool = True,
) -> LayerResult:
    if full_state:
        cand.complete_state()
    ckpt = cand.checkpoint
    end = 0 if ckpt.covers.empty else ckpt.covers.end
    used = set(ckpt.artifacts)
    tail = [e for e in cand.view if e.seq > end and e.kind != "pinned"]
    return LayerResult(
        view=cand.view,
        checkpoint=ckpt,
        artifacts={k: v for k, v in artifacts.items() if k in used},
        layers=layers,
        freed_by_layer=freed,
        tokens_after=cand.tokens,
        summary_tokens=ckpt.summary_tokens if not ckpt.covers.empty else 0,
        retained_tail_tokens=view_tokens(tail) if tail else 0,
        violations=cand.violations,
        fallback_reason=(
            "no cut before the latest request met the target; the cut passes it and the summary "
            "quotes the request in full" if cand.past_request else None
        ),
        candidates=n_candidates,
        mid_turn=cand.past_request,
        left_out=dict(cand.left_out),
        repaired=cand.repaired,
        durations_ms=durations,
    )


# --- the entry point ---------------------------------------------------------------------------

def compact(
    events: Sequence[Event],
    policy: Policy,
    target_tokens: int | None = None,
    prev: Checkpoint | None = None,
    *,
    checkpoint_id: str | None = None,
    now: datetime | None = None,
    tenant: str | None = None,
    session: str | None = None,
    trigger: str = "manual",
    record_id: str | None = None,
    provider_usage: int | None = None,
    tokens_before: int | None = None,
    full_state: bool = True,
) -> CompactResult:
    """Compact ``events`` so their view fits ``target_tokens`` (default: the policy's
    post-compaction size).

    ``events``: every event of the log after ``prev.covers.end`` plus all pinned events (the
    whole log when ``prev`` is None). Same inputs -> same view, checkpoint and record (but for
    ``record.durations_ms``). ``tokens_before``: ``measure.quick_view_tokens(events,
    placed=True)`` when the caller counted it already (the CLI, for its default target): with
    no ``prev``, and ``events`` in seq order with every one counted, it is the plan's count of
    the view, which is then not made again (issue 17: a walk of the session); else ignored.
    ``full_state`` False: a summary checkpoint's ``state`` holds only the lifted state's fields
    the checks read (``_CHECKED_STATE``), not its whole dump - for a caller that stores and
    prints no checkpoint, only the record (``compact --inline`` without ``--out``: the dump of a
    big session's state, ~600k items at 300k events, was ~0.5 s of CPU and the run's peak, read
    by nobody, issue 17); the view, record and artifacts are the same.
    """
    if target_tokens is not None and target_tokens < 1:
        raise InvalidInput(f"target_tokens must be a positive number of tokens, not {target_tokens}")
    with collector_paused():
        return _compact(events, policy, target_tokens, prev, checkpoint_id=checkpoint_id, now=now,
                        tenant=tenant, session=session, trigger=trigger, record_id=record_id,
                        provider_usage=provider_usage, counted=tokens_before, full_state=full_state)


def _compact(
    events: Sequence[Event],
    policy: Policy,
    target_tokens: int | None,
    prev: Checkpoint | None,
    *,
    checkpoint_id: str | None,
    now: datetime | None,
    tenant: str | None,
    session: str | None,
    trigger: str,
    record_id: str | None,
    provider_usage: int | None,
    counted: int | None = None,
    full_state: bool = True,
) -> CompactResult:
    t0 = time.perf_counter()
    evs = prepare(events, prev)
    safe: dict[bool, list[int]] = {}  # plan's safe cut points, for the ladder on the same events
    shown: dict[str, int] = {}  # plan's count of the view, for the replacement layers' views
    if counted is not None and (prev is not None or len(evs) != len(events) or not all(map(is_, evs, events))):
        # plan counts prepare(events): the caller's count holds only for the very same events in
        # the same order (prepare drops none, sorts none, copies none to count it)
        counted = None
    walked: list[list[Event]] = []  # plan's body of the events, for the layers
    calls: dict[str, Any] = {}  # what plan's walk for the safe cuts learnt of the calls, for the checks
    p = plan(evs, policy, target_tokens, prev, provider_usage=provider_usage, _safe=safe, _view=shown,
             _counted=counted, _prepared=True, _body=walked, _calls=calls)
    plan_ms = (time.perf_counter() - t0) * 1000
    tenant = tenant or (prev.tenant if prev is not None else "inline")
    session = session or (prev.session if prev is not None else "inline")

    def noop(violations: Sequence[Any], error: str | None, durations: dict[str, float],
             view: list[Event] | None = None) -> CompactResult:
        """The view stays as it is; the record says why."""
        rec = CompactionRecord(
            id=record_id or "inline-noop-" + hashlib.sha256(content_hash(evs).encode()).hexdigest()[:16],
            tenant=tenant, session=session, trigger=trigger, policy=policy.name,
            checkpoint=prev.id if prev is not None else None,
            covers=prev.covers if prev is not None else None,
            snapshot_version=p.snapshot_version, committed_version=p.snapshot_version,
            tokens_before=p.tokens_before, tokens_after=p.tokens_before, target_tokens=p.target_tokens,
            retained_tail_tokens=p.tokens_before, status="noop",
            violations=[str(v) for v in violations], error=error, durations_ms=durations,
            created_at=now,
        )
        view = view if view is not None else build_view(evs, prev)
        return CompactResult(view=view, checkpoint=None, record=rec, artifacts={})

    if p.noop:
        view = build_view(evs, prev)
        vio = validate(events=evs, checkpoint=None, view=view, target_tokens=p.target_tokens,
                       prev_checkpoint=prev)
        return noop(vio, None, {"plan": plan_ms}, view)
    # plan's lists and tables handed on: this frame holds none of them while the layers run
    # (apply_layers lets go of its own before the result's dump, the peak: issue 17, memory)
    handed: dict[str, Any] = {"_safe": safe, "_view": shown, "_body": walked[0] if walked else None,
                              "_calls": calls}
    safe = shown = walked = calls = None  # type: ignore[assignment]
    res = apply_layers(evs, p, policy, prev=prev, checkpoint_id=checkpoint_id, now=now,
                       tenant=tenant, session=session, _prepared=True, _safe=handed.pop("_safe"),
                       _view=handed.pop("_view"), _body=handed.pop("_body"), _calls=handed.pop("_calls"),
                       full_state=full_state)
    ckpt = res.checkpoint
    assert ckpt is not None
    if not res.layers or res.tokens_after >= p.tokens_before:
        # nothing to externalize, clear or cover, or nothing that shrinks the view: the view
        # stays as it is and no checkpoint is written (the durable workflow does the same)
        return noop(
            res.violations,
            "nothing left to compact: pinned events, the latest request and pending calls "
            "stay verbatim" if res.violations else None,
            {"plan": plan_ms, **res.durations_ms},
        )
    hard = [v for v in res.violations if v.code != "over_budget"]
    status = "failed" if hard else "committed"
    error = None
    floor: dict[str, int] = {}
    if hard:
        error = "no candidate kept every invariant; do not commit: " + "; ".join(str(v) for v in hard[:3])
    elif res.violations:
        floor = irreducible_tokens(evs, policy, p)
        error = over_budget_reason(p.target_tokens, res.tokens_after, floor)
    repairs = ([f"unknown_identifier: {res.repaired} summary item(s) dropped"] if res.repaired else [])
    durations = {"plan": plan_ms, **res.durations_ms, "total": (time.perf_counter() - t0) * 1000}
    rec = CompactionRecord(
        id=record_id or "inline-" + ckpt.id.removeprefix("ck-")[:16],
        tenant=tenant, session=session, trigger=trigger, policy=policy.name,
        checkpoint=ckpt.id, covers=ckpt.covers,
        snapshot_version=p.snapshot_version, committed_version=p.snapshot_version,
        tokens_before=p.tokens_before, tokens_after=res.tokens_after, target_tokens=p.target_tokens,
        summary_tokens=res.summary_tokens, retained_tail_tokens=res.retained_tail_tokens,
        layers=res.layers, freed_by_layer=res.freed_by_layer, artifacts_written=len(res.artifacts),
        summarizer=ckpt.summarizer, fallback_reason=res.fallback_reason,
        mid_turn=res.mid_turn, left_out=res.left_out, repairs=repairs, irreducible_tokens=floor,
        violations=[str(v) for v in res.violations], status=status,
        error=error, durations_ms=durations, created_at=now,
    )
    return CompactResult(view=res.view, checkpoint=ckpt, record=rec, artifacts=res.artifacts)


_FLOOR_NAMES = {
    "pinned": "pinned events",
    "latest_request": "the latest request",
    "pending": "pending calls and the turn around them",
    "frame": "the summary frame",
}


def irreducible_tokens(events: Sequence[Event], policy: Policy, p: Plan) -> dict[str, int]:
    """What no compaction may remove from the view, in tokens: the pinned events, the latest
    request (verbatim, as an event or quoted by the summary) and the events a cut may never
    pass (pending calls with the turn around them)."""
    evs = list(events)  # prepared by the caller (compact): tokens cached, pinned + after prev
    end0 = p.prev_end
    last = choose_cut(evs, policy, 0, tail_min=0, tail_max=0, min_text_messages=0, prev_end=end0,
                      keep_latest_request=False)
    tail = [e for e in body(evs, end0) if e.seq > max(last, end0)]
    req = latest_request(evs, end0)
    out = {"pinned": p.pinned_tokens}
    if req is not None:
        out["latest_request"] = count_text(req.text)
    pending = [e for e in tail if req is None or e.seq != req.seq]
    if pending:
        out["pending"] = view_tokens(pending)
    out["frame"] = frame_tokens(p.snapshot_version)
    return out


def over_budget_reason(target: int, best: int, floor: dict[str, int]) -> str:
    """The record's error for a view over its target: what alone exceeds it, by name."""
    total = sum(floor.values())
    parts = ", ".join(f"{_FLOOR_NAMES.get(k, k)} {v:,}" for k, v in floor.items() if v and k != "frame")
    if total > target:
        return (f"target {target:,} cannot be met: what no compaction may remove is {total:,} "
                f"tokens ({parts}); best view is {best:,} tokens")
    return (f"target {target:,} not met: best view is {best:,} tokens although what no "
            f"compaction may remove is only {total:,} ({parts})")
