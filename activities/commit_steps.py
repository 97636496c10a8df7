"""The committing steps of ``StoreActivities``: commit_swap (the merge and the head's
compare-and-swap), write_record (and the breaker count), both as one step (commit_record), and
the sweep's list_due_sessions. A
mixin: the store plumbing (``_run``, ``log``, work objects) is ``StoreActivities``'."""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import metrics
from activities.contracts import (
    ActivityName,
    CommitInput,
    CommitOutput,
    CommitRecordInput,
    CommitRecordOutput,
    DueSessions,
    ErrorType,
    RecordInput,
    RecordOutput,
    SkippedSession,
    SnapshotRef,
    SweepInput,
    committed_record,
)
from activities.merge import Merge, committed_by
from activities.step_support import CountingStore, policy_of, workflow_run_id
from compactor import errors
from compactor.events import Event
from compactor.records import Checkpoint, CompactionRecord, Head
from compactor.store import SessionLog, list_sessions, list_sessions_page


@dataclass(frozen=True)
class FrozenReads:
    """What freeze_snapshot read for the snapshot it commits (``FreezeInput.commit_as``): the head
    at the snapshot and the events the compaction saw (``StoreActivities.engine_events``)."""

    tenant: str
    session: str
    head: Head
    events: Sequence[Event]

    def of(self, snap: SnapshotRef) -> bool:
        return (self.tenant, self.session, self.head.etag, self.head.version) == (
            snap.tenant, snap.session, snap.etag, snap.version)


_FROZEN: contextvars.ContextVar[FrozenReads | None] = contextvars.ContextVar("frozen_reads", default=None)


@contextlib.contextmanager
def frozen_reads(reads: FrozenReads | None) -> Iterator[None]:
    """``_commit`` of ``reads``' snapshot, inside this block (freeze_snapshot's commit, same
    thread), uses them instead of reading them again: the head it read is the first CAS's
    (``SessionLog.set_checkpoint(head=)``: one head GET fewer; the CAS still guards it, a moved
    head fails it and is read as before) and its events are the merge's (``Merge(events=)``)."""
    if reads is None:
        yield
        return
    token = _FROZEN.set(reads)
    try:
        yield
    finally:
        _FROZEN.reset(token)


class CommitSteps:
    """Steps of ``StoreActivities`` (see the module docstring); mixed into it."""

    # --- 7. commit_swap ---------------------------------------------------------------------
    @activity.defn(name=ActivityName.COMMIT_SWAP)
    async def commit_swap(self, inp: CommitInput) -> CommitOutput:
        """Write the checkpoint, then CAS the head from the snapshot's etag; merge if it moved.

        Merge: events appended after the snapshot stay verbatim after the checkpoint (it still
        covers 1..k <= v); results that resolve an action the state marked unknown are
        reconciled (``engine.reconcile.reconcile_checkpoint``: state updated, summary re-rendered, late
        results shown as text naming their covered call), and the CAS is retried, at most
        ``max_merges`` times. A merge costs O(events appended since the snapshot): only what
        they can break is re-checked (``invariants.validate_merge``), plus the summary checks
        when the state was reconciled. Events appended after the snapshot are never
        overwritten: the head keeps its segments, only ``checkpoint`` changes.

        Exactly once per run: the head records the committing workflow run
        (``Head.checkpoint_run``); a re-execution of the run that finds its own commit (a lost
        worker, a replayed workflow task) reports it instead of failing or committing again.
        """
        meta = self._meta()
        return await self._run(lambda: self._commit(inp, meta))

    def _commit(self, inp: CommitInput, meta: dict[str, Any]) -> CommitOutput:
        """commit_swap's work (in an executor thread): also the first part of commit_record."""
        from compactor.engine.measure import view_tokens
        from compactor.engine.view import build_view

        run = workflow_run_id()
        t = time.perf_counter()
        snap = inp.snapshot
        log = self.log(snap.tenant, snap.session)
        base = Checkpoint.model_validate(self._get_json(inp.candidate_key))
        frozen = _FROZEN.get()
        if frozen is not None and not frozen.of(snap):
            frozen = None

        merge = Merge(self, log, snap, base, self._prev(log, snap), events=frozen.events if frozen else None)
        ckpt = base
        etag = snap.etag
        head: Head | None = frozen.head if frozen else None  # (None: set_checkpoint reads it)
        written: set[str] = set()
        cas = 0
        while True:
            if ckpt.id not in written:  # a merge that reconciled nothing keeps the same one
                ckpt = self._write_or_adopt(log, ckpt)
                written.add(ckpt.id)
                if ckpt.id == base.id:
                    merge.base = base = ckpt
            cas += 1
            # The head carries the new view's size (what a sweep reads instead of the log).
            n_view = view_tokens(build_view(merge.old_events() + list(merge.new), ckpt))
            try:
                head = log.set_checkpoint(ckpt.id, expected_etag=etag, run=run or None, head=head,
                                          view_tokens=n_view)
                break
            except errors.PreconditionFailed:
                head = log.head()
            if committed_by(head, run, base.id):
                # An earlier execution of this run committed (its reply or its workflow
                # task was lost): report that commit.
                ckpt = log.read_checkpoint(head.checkpoint or "", head.checkpoint_sha256)
                merge.read_new(head)
                n_view = view_tokens(build_view(merge.old_events() + merge.new, ckpt))
                break
            if head.checkpoint != snap.checkpoint:
                raise ApplicationError(
                    f"the head of {snap.tenant}/{snap.session} now points at checkpoint "
                    f"{head.checkpoint!r}, not {snap.checkpoint!r} as at the snapshot "
                    f"(another compaction or a rollback committed meanwhile); nothing was "
                    f"changed - request a new compaction",
                    type=str(ErrorType.SNAPSHOT_CHANGED),
                    non_retryable=True,
                )
            if merge.count >= inp.max_merges:
                raise ApplicationError(
                    f"the head of {snap.tenant}/{snap.session} kept moving: {merge.count} merges "
                    f"did not land; nothing was changed - retry the compaction",
                    type=str(ErrorType.CONFLICT_RETRIES_EXHAUSTED),
                    non_retryable=True,
                )
            ckpt = merge.candidate(head)
            etag = head.etag
        # unchanged view (no merge): the workflow keeps validate's count
        tokens_after = n_view if merge.new else 0
        return CommitOutput(
            checkpoint_id=ckpt.id,
            committed_version=head.version,
            checkpoint_sha256=head.checkpoint_sha256,
            conflicts_merged=merge.count,
            reconciled=merge.reconciled,
            tokens_after=tokens_after,
            cas_attempts=cas,
            ms=(time.perf_counter() - t) * 1000,
            **meta,
        )

    @staticmethod
    def _write_or_adopt(log: SessionLog, ckpt: Checkpoint) -> Checkpoint:
        """Write the checkpoint (create-only); if an earlier execution of this compaction
        already wrote one under the same deterministic id with other bytes (e.g. an LLM
        summary or timestamps from before a lost worker), that one is adopted: it was made
        from the same events and parameters, and immutable objects are never overwritten."""
        try:
            log.write_checkpoint(ckpt)
            return ckpt
        except errors.PreconditionFailed:
            existing = log.read_checkpoint(ckpt.id)
            if existing.covers != ckpt.covers or existing.snapshot_version != ckpt.snapshot_version:
                raise
            diff = sorted(k for k, v in ckpt.model_dump().items() if existing.model_dump().get(k) != v)
            if activity.in_activity():
                activity.logger.warning("adopting existing checkpoint %s (differs in %s)", ckpt.id, diff)
            return existing

    # --- 8. record --------------------------------------------------------------------------
    @activity.defn(name=ActivityName.WRITE_RECORD)
    async def write_record(self, inp: RecordInput) -> RecordOutput:
        """Persist the CompactionRecord beside the session (immutable, keyed by the run id)."""
        meta = self._meta()
        return await self._run(lambda: self._write_record(inp, meta))

    def _write_record(self, inp: RecordInput, meta: dict[str, Any]) -> RecordOutput:
        """write_record's work (in an executor thread): also the second part of commit_record."""
        t = time.perf_counter()
        rec = inp.record
        log = self.log(rec.tenant, rec.session)
        # The breaker's count (its own object, idempotent by run id, never failing the record)
        # is written while the record is: two fsync'ed writes side by side, not one after the other.
        counted = (self._io_pool.submit(contextvars.copy_context().run, self._count_breaker, rec)
                   if inp.count_breaker else None)
        try:
            key = log.write_record(rec)
        except errors.PreconditionFailed:
            # An earlier execution of this run (before a lost worker) recorded it already.
            # A committed record stands; a noop/failure of the lost execution gives way to
            # this one, which is the run's outcome (bench chaos: a run reported committed
            # while its only record said noop). Metrics counted the run then, not again.
            try:
                key = log.supersede_record(rec)
            except errors.PreconditionFailed:  # a concurrent retry replaced it: same run
                key = f"{log.prefix}records/{rec.id}.json"
        else:
            metrics.record_compaction(rec)
        finally:
            if counted is not None:
                counted.result()
        if inp.mark_noop and rec.snapshot_version:
            log.mark_noop(rec.snapshot_version, rec.tokens_before)
        return RecordOutput(key=key, ms=(time.perf_counter() - t) * 1000, **meta)

    # --- 7+8. commit_record: the commit and its record in one step ----------------------------
    @activity.defn(name=ActivityName.COMMIT_RECORD)
    async def commit_record(self, inp: CommitRecordInput) -> CommitRecordOutput:
        """commit_swap, then write_record of the committed run, in one local activity (one
        activation and one round trip fewer per compaction; workflows since the
        ``commit-records`` patch). The record is ``contracts.committed_record`` of the input's
        record and the commit's output, as the workflow builds it after a separate commit_swap.

        A retry after the commit went through (the record's write failed, a lost reply) takes
        commit_swap's own-commit path (the head names this run: the checkpoint is adopted, the
        commit reported, nothing committed twice), then writes the record. Each part runs in
        its own span (``commit_swap``, ``write_record``) with the attributes its own activity
        span carried; the step's span gets the committed record's."""
        meta = self._meta()
        return await self._run(lambda: self._commit_and_record(inp, meta))

    def _commit_and_record(self, inp: CommitRecordInput, meta: dict[str, Any]) -> CommitRecordOutput:
        """commit_record's work (in an executor thread): also freeze_snapshot's commit
        (``FreezeInput.commit_as``)."""
        t = time.perf_counter()
        with metrics.part_span(str(ActivityName.COMMIT_SWAP), inp.commit) as span:
            commit = self._commit(inp.commit, meta)
            metrics.annotate_span(commit, span=span)
        rec_in = RecordInput(record=committed_record(inp.record, commit), count_breaker=inp.count_breaker)
        with metrics.part_span(str(ActivityName.WRITE_RECORD), rec_in):
            written = self._write_record(rec_in, meta)
        metrics.annotate_span(rec_in)
        return CommitRecordOutput(commit=commit, record=written, ms=(time.perf_counter() - t) * 1000, **meta)

    def _count_breaker(self, rec: CompactionRecord) -> None:
        """record_breaker's count, after the record (RecordInput.count_breaker). Never fails the
        record: like the workflow's own record_breaker step, a failed count is one warning."""
        from activities.breaker import BreakerRecordInput, count_run

        try:
            count_run(self.store, BreakerRecordInput(
                tenant=rec.tenant, session=rec.session, ok=rec.status in ("committed", "noop"),
                trigger=rec.trigger, run_id=rec.id, error=rec.error,
            ), threshold=self.breaker_threshold)
        except Exception as exc:  # noqa: BLE001 - the record stands; one line
            activity.logger.warning("circuit breaker not updated: %s", exc)

    # --- sweep ------------------------------------------------------------------------------
    @activity.defn(name=ActivityName.LIST_DUE_SESSIONS)
    async def list_due_sessions(self, inp: SweepInput) -> DueSessions:
        """One page of a tenant's sessions (after ``inp.cursor``): those over the trigger.

        Reads one object per session, the head, which carries the view's token count and the
        noop mark (legacy heads without a count: the view is read and counted). A session
        that fails (damaged head, unreadable checkpoint, anything) is reported in
        ``skipped`` and the page goes on: one session never stops a tenant's sweep.
        """
        meta = self._meta()

        def work() -> DueSessions:
            t = time.perf_counter()
            policy = policy_of(inp.policy)
            counting = CountingStore(self.store)
            if inp.page_size is None:
                sessions, nxt = list_sessions(self.store, inp.tenant), None
            else:
                sessions, nxt = list_sessions_page(self.store, inp.tenant, inp.cursor, inp.page_size)
            due: list[str] = []
            skipped: list[SkippedSession] = []
            unshrinkable = 0
            lags: list[float] = []
            now = time.time()
            for s in sessions:
                try:
                    verdict, updated = self._sweep_verdict(counting, inp, policy, s)
                except Exception as exc:  # noqa: BLE001 - reported, the sweep goes on
                    skipped.append(SkippedSession(session=s, error=f"{type(exc).__name__}: {exc}"[:500]))
                    if activity.in_activity():
                        activity.logger.warning("sweep skips %s/%s: %s", inp.tenant, s, exc)
                    continue
                if verdict == "start":
                    due.append(s)
                    if updated is not None:
                        lags.append(now - updated.timestamp())
                elif verdict == "unshrinkable":
                    unshrinkable += 1
            metrics.record_sweep(scanned=len(sessions), due=len(due), failed=len(skipped),
                                 lags_s=lags)
            return DueSessions(
                sessions=due, scanned=len(sessions), next_cursor=nxt, skipped=skipped,
                unshrinkable=unshrinkable, objects_read=counting.gets,
                ms=(time.perf_counter() - t) * 1000, **meta,
            )

        return await self._run(work)

    def _sweep_verdict(self, store: Any, inp: SweepInput, policy: Any, session: str) -> tuple[str, Any]:
        """policy.start_decision for one session, from its head (the view if the head has no
        count); and when the head last changed (the sweep's lag)."""
        from compactor.engine.policy import should_compact, start_decision

        log = SessionLog(store, inp.tenant, session, cache=self.cache)
        head = log.head()
        if head.version == 0:
            return "none", head.updated_at
        tokens = log.view_size(head)
        return start_decision(
            policy, should_compact(policy, tokens), tokens,
            target_tokens=inp.policy.target_tokens, noop_view_tokens=head.noop_view_tokens,
        ), head.updated_at
