"""The merges of one ``commit_swap`` (DESIGN §5 step 7), apart from the store activities.

Events appended after the snapshot stay verbatim after the candidate checkpoint; each merge
reads only the events new since the last one and re-checks only what they can break
(``invariants.validate_merge``), so a merge costs O(events appended), and a re-executed run
recognizes the commit an earlier execution of it made (``committed_by``).
"""

from __future__ import annotations

import json
from typing import Any, Protocol, Sequence

from temporalio.exceptions import ApplicationError

from activities.contracts import ErrorType, SnapshotRef
from compactor.events import Event
from compactor.records import Checkpoint, Head
from compactor.store import SessionLog

SOFT_VIOLATIONS = {"over_budget"}
"""Violation codes that do not block a commit (the engine commits them too, with a note)."""


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class ViewSource(Protocol):
    """What a merge reads through the store activities (``StoreActivities`` is one)."""

    def engine_events(self, log: SessionLog, snap: SnapshotRef) -> list[Event]: ...

    def _view_artifacts(self, log: SessionLog, evs: Any, ckpt: Checkpoint, view: Any) -> Any: ...


def committed_by(head: Head, run: str, base_id: str) -> bool:
    """Did this workflow run (an earlier execution of it) set the head's checkpoint?"""
    if not head.checkpoint:
        return False
    if run and head.checkpoint_run:
        return head.checkpoint_run == run
    # heads without a run (older writers, direct calls): the deterministic checkpoint id
    return head.checkpoint == base_id or head.checkpoint.startswith(base_id + "-m")


class Merge:
    """The merges of one ``commit_swap``: events appended since the snapshot, read
    incrementally, and the candidate rebuilt over them in O(new events).

    Attributes:
        base: the validated candidate (as stored).
        new: events appended after the snapshot, read so far.
        count: merges done; reconciled: tool_use ids resolved by the latest merge.
    """

    def __init__(self, acts: ViewSource, log: SessionLog, snap: SnapshotRef,
                 base: Checkpoint, prev: Checkpoint | None, events: Sequence[Event] | None = None) -> None:
        """``events``: ``acts.engine_events(log, snap)``, when the caller read them already."""
        self.acts, self.log, self.snap, self.base, self.prev = acts, log, snap, base, prev
        self._events = events
        self.new: list[Event] = []
        self.count = 0
        self.reconciled: list[str] = []
        self._context: list[Event] | None = None
        self._old: list[Event] | None = None
        self._checked: set[str] = set()  # digests of reconciled summaries already validated

    def read_new(self, head: Head) -> list[Event]:
        """Events appended since the snapshot (only those since the last read are fetched)."""
        upto = self.new[-1].seq if self.new else self.snap.version
        if head.version > upto:
            self.new += self.log.read_events(upto + 1, head.version, head=head)
        return self.new

    def old_events(self) -> list[Event]:
        """What the compaction saw (pinned + events after the previous checkpoint), read once."""
        if self._old is None:
            from compactor.engine.planning import prepare

            evs = list(self._events) if self._events is not None else self.acts.engine_events(self.log, self.snap)
            self._old = prepare(evs, self.prev)
        return self._old

    def context(self, head: Head) -> list[Event]:
        """The snapshot's view tail from its last assistant message on (``merge_context``):
        read from the last segments back, usually one."""
        if self._context is not None:
            return self._context
        from compactor.engine.invariants import merge_context

        end, v = self.base.covers.end if not self.base.covers.empty else 0, self.snap.version
        segs = [s for s in head.segments if s.first <= v and s.last > end]
        tail: list[Event] = []
        for seg in reversed(segs):
            tail = [e for e in self.log._events(seg) if end < e.seq <= v] + tail
            i = merge_context(tail)
            if i is not None:
                tail = tail[i:]
                break
        self._context = tail
        return tail

    def candidate(self, head: Head) -> Checkpoint:
        """The candidate over every event appended since the snapshot; raises a
        non-retryable InvariantViolation if they break the view."""
        from compactor.engine.reconcile import reconcile_checkpoint
        from compactor.events import content_hash
        from compactor.engine.invariants import validate_merge

        self.count += 1
        new = self.read_new(head)
        merged_id = f"{self.base.id}-m{content_hash(new)[:10]}"[:128]
        ckpt, self.reconciled = reconcile_checkpoint(self.base, new, checkpoint_id=merged_id)
        vio = validate_merge(context=self.context(head), new_events=new, checkpoint=ckpt,
                             snapshot_version=self.snap.version)
        if self.reconciled and not vio:
            vio = self._summary_checks(ckpt)
        if vio:
            raise ApplicationError(
                "merging the events appended during the compaction breaks "
                f"{len(vio)} invariant(s); nothing was changed: " + "; ".join(str(v) for v in vio),
                [str(v) for v in vio],
                type=str(ErrorType.INVARIANT_VIOLATION),
                non_retryable=True,
            )
        return ckpt

    def _summary_checks(self, ckpt: Checkpoint) -> list[Any]:
        """A reconciled state re-renders the summary: validate it in full, once per summary."""
        import hashlib

        from compactor.engine.invariants import validate
        from compactor.engine.view import build_view

        key = hashlib.sha256(_dumps([ckpt.summary, ckpt.state])).hexdigest()
        if key in self._checked:
            return []
        evs = self.old_events() + self.new
        view = build_view(evs, ckpt)
        arts = self.acts._view_artifacts(self.log, evs, ckpt, view)
        vio = [v for v in validate(events=evs, checkpoint=ckpt, view=view, target_tokens=None,
                                   artifacts=arts, prev_checkpoint=self.prev)
               if v.code not in SOFT_VIOLATIONS]
        if not vio:
            self._checked.add(key)
        return vio
