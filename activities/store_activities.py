"""Activities that hold the object store: every compaction step except the LLM summarizers.

Why they are shaped this way:

* **Same pure functions as the inline engine.** ``plan_compaction`` calls ``engine.plan`` and
  ``externalize`` calls ``engine.apply_layers`` (layers a/b and the tail-shrinking summary
  ladder, which lifts state and renders the structured summary with the same functions the
  inline path uses); ``validate_candidate`` calls ``invariants.validate``; the merge in
  ``commit_swap`` calls ``engine.reconcile.reconcile_checkpoint``. So a durable compaction commits
  exactly the checkpoint ``engine.compact`` computes on the same events.
* **Idempotent.** Every output is written under a key derived from the inputs (the work
  prefix, content-addressed artifacts, the checkpoint's deterministic id), so a retry - or a
  second worker after a crash - overwrites or re-finds the same objects. Checkpoints and
  artifacts are immutable (``if_none_match``); the head changes only by compare-and-swap.
* **Nothing before ``commit_swap`` touches the head**, so failing anywhere earlier leaves the
  session as it was.
* Blocking store calls (boto3) and CPU-bound engine work run in a sized thread pool; the
  segment cache (verified, immutable segments) is shared by every call on this worker, so the
  steps of one compaction parse the log once.

This module holds the class, its plumbing and the first two steps (freeze_snapshot,
plan_compaction); the summary steps are ``summary_steps.SummarySteps``, commit, record and
the sweep's listing ``commit_steps.CommitSteps``, what they share ``step_support``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.commit_steps import CommitSteps, FrozenReads, frozen_reads
from activities.contracts import (
    ActivityName,
    CommitInput,
    CommitRecordInput,
    CommitRecordOutput,
    ExternalizeFinishInput,
    ExternalizeFinishOutput,
    ExternalizeInput,
    FinishStructuredInput,
    FinishStructuredOutput,
    FreezeInput,
    OwnCommit,
    PlanInput,
    PlanOutput,
    RecordInput,
    SnapshotRef,
    committed_record,
    finish_follows,
    finish_structured_input,
    params_hash,
    work_prefix,
)
from activities.freeze_commit import commit_ready, record_before_commit
from activities.merge import _dumps
from activities.step_support import (
    HEARTBEAT_EVERY_S,
    PlannedWork,
    T,
    paused,
    policy_of,
    to_application_error,
    unsynced,
    workflow_run_id,
)
from activities.summary_steps import SummarySteps
from activities.work_docs import WorkDocs, dumps_nested
from compactor import errors
from compactor.events import Event
from compactor.records import Checkpoint, Head
from compactor.store import SegmentCache, SessionLog
from compactor.store.base import read_bytes, write_bytes


class StoreActivities(SummarySteps, CommitSteps):
    """The store-bound compaction steps. ``store`` is an ObjectStore (local dir or S3).

    Args:
        store: the object store every session of this worker lives in.
        executor: thread pool for blocking I/O and engine work (default: 16 threads).
        cache: segment cache shared by every SessionLog this worker opens.
        breaker_threshold: failures that open a session's circuit breaker, for the count
            ``write_record`` makes (default ``compactor.breaker.THRESHOLD``).
    """

    def __init__(
        self,
        store: Any,
        *,
        executor: concurrent.futures.ThreadPoolExecutor | None = None,
        cache: SegmentCache | None = None,
        breaker_threshold: int | None = None,
    ) -> None:
        from compactor.breaker import THRESHOLD

        self.store = store
        self.breaker_threshold = THRESHOLD if breaker_threshold is None else breaker_threshold
        self._work_store = unsynced(store)
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(max_workers=16)
        self.cache = cache or SegmentCache(max_bytes=256 << 20)
        self._logs: OrderedDict[tuple[str, str], SessionLog] = OrderedDict()
        self._artifacts: OrderedDict[str, bytes] = OrderedDict()
        self._docs = WorkDocs()
        self._artifact_bytes = 0
        # freeze_snapshot runs externalize_finish when asked (FreezeInput.finish_now); off when a
        # worker replaces one of its parts (workers.worker: the workflow then runs the step,
        # composed of the replacements).
        self.finishes_in_freeze = True
        # ... and commit_record when asked (FreezeInput.commit_as); off when a worker replaces
        # commit_swap, write_record or commit_record but not freeze_snapshot (workers.worker).
        self.commits_in_freeze = True
        self._lock = threading.Lock()
        # Separate pool for fan-out writes made from inside an executor thread.
        # (artifact writes are latency-bound: fsync locally, a round trip on S3)
        self._io_pool = concurrent.futures.ThreadPoolExecutor(max_workers=32)

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity of this class, for ``Worker(activities=...)``."""
        return [
            self.freeze_snapshot,
            self.plan_compaction,
            self.externalize,
            self.lift_state,
            self.summarize_structured,
            self.validate_candidate,
            self.finish_structured,
            self.externalize_finish,
            self.commit_swap,
            self.write_record,
            self.commit_record,
            self.list_due_sessions,
        ]

    # --- plumbing ---------------------------------------------------------------------------
    async def _run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        fut = loop.run_in_executor(self._executor, ctx.run, fn)
        beat = activity.in_activity() and not activity.info().is_local
        try:
            while True:
                # Heartbeat while the thread works, so a killed worker's attempt is retried
                # elsewhere after the heartbeat timeout rather than the full step timeout.
                done, _ = await asyncio.wait({fut}, timeout=HEARTBEAT_EVERY_S)
                if done:
                    return fut.result()
                if beat:
                    activity.heartbeat()
        except BaseException as exc:  # noqa: BLE001 - re-raised, mapped
            mapped = to_application_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    @staticmethod
    def _meta() -> dict[str, Any]:
        try:
            return {"attempt": activity.info().attempt}
        except RuntimeError:
            return {"attempt": 1}

    def log(self, tenant: str, session: str) -> SessionLog:
        key = (tenant, session)
        with self._lock:
            log = self._logs.get(key)
            if log is None:
                log = SessionLog(self.store, tenant, session, cache=self.cache)
                self._logs[key] = log
                while len(self._logs) > 4096:
                    self._logs.popitem(last=False)
            else:
                self._logs.move_to_end(key)
            return log

    def _put_json(self, key: str, obj: Any, *, parsed: Any = None) -> bytes:
        """A per-run work object (plan, layers, state, summary, candidate): not fsync'ed.

        ``parsed``: what ``json.loads`` gives for the bytes written (``obj`` itself when it was
        parsed from sorted-key JSON: same values, same key order), when the caller has it; the
        next step of this worker that reads the object then uses it unparsed (``WorkDocs``).
        """
        data = (self._docs.dumped(obj) if parsed is obj else None) or _dumps(obj)
        write_bytes(self._work_store, key, data)
        if parsed is not None:
            self._docs.put(key, data, parsed)
        return data

    def _put_parsed(self, key: str, obj: Any, parts: tuple[str, ...] = ()) -> Any:
        """``_put_json``, then parse what was written and keep it for the next steps (returned).

        ``parts``: a path of keys into ``obj`` (``("checkpoint", "state")``): each object along
        it is dumped once (``work_docs.dumps_nested``) and its bytes kept with the parsed copy,
        for a later step that writes that object as a work object of its own (``_put_json``
        with ``parsed``)."""
        nested = dumps_nested(obj, parts) if parts else None
        if nested is None:
            data = self._put_json(key, obj)
            doc = json.loads(data)
            self._docs.put(key, data, doc)
            return doc
        data = nested[0]
        write_bytes(self._work_store, key, data)
        doc = json.loads(data)
        sub, kept = doc, []
        for name, b in zip(parts, nested[1:]):
            sub = sub[name]
            if isinstance(sub, (dict, list)):  # (a str or number has no identity to key on)
                kept.append((sub, b))
        self._docs.put(key, data, doc, kept)
        return doc

    def _get_json(self, key: str) -> Any:
        """A work object, parsed. Always read from the store (a missing or changed object is
        seen as such); when its bytes are those this worker last wrote or read under the key,
        the document parsed then is returned. Callers must not modify it."""
        try:
            data = read_bytes(self.store, key)
        except errors.NotFound:
            raise errors.NotFound(
                f"work object {key!r} is missing from {self.store.url}: the compaction's "
                f"intermediate objects were removed while it ran; start it again",
                key=key,
            ) from None
        hit = self._docs.get(key, data)
        if hit is not None:
            return hit
        try:
            doc = json.loads(data)
        except ValueError:
            # Only a host crash between an unsynced write and its flush leaves one torn
            # (unsynced): the run fails before commit_swap, the session unchanged.
            raise errors.NotFound(
                f"work object {key!r} in {self.store.url} is damaged (a host crash during the "
                f"compaction?); the session is unchanged - start the compaction again",
                key=key,
            ) from None
        self._docs.put(key, data, doc)
        return doc

    def _prev(self, log: SessionLog, snap: SnapshotRef) -> Checkpoint | None:
        return log.read_checkpoint(snap.checkpoint, snap.checkpoint_sha256) if snap.checkpoint else None

    def engine_events(self, log: SessionLog, snap: SnapshotRef, head: Head | None = None) -> list[Event]:
        """Pinned events + every event after the previous checkpoint, up to the snapshot.

        What ``engine.compact`` receives. Reads only segments holding pinned events or events
        after the previous checkpoint (like ``SessionLog.read_view``); the current head's
        segments are used, since events 1..v are the same under any later head.
        """
        head = head or log.head()
        end = snap.prev_covers_end
        v = snap.version
        segs = [s for s in head.segments if s.first <= v and (s.last > end or s.pinned)]
        log._fetch_many(segs)
        out: list[Event] = []
        for s in segs:
            for e in log._events(s):
                if e.seq > v:
                    break
                if e.seq > end or e.kind == "pinned":
                    out.append(e)
        return out

    def _remember_artifacts(self, arts: dict[str, bytes]) -> None:
        with self._lock:
            for k, v in arts.items():
                if k not in self._artifacts:
                    self._artifact_bytes += len(v)
                self._artifacts[k] = v
                self._artifacts.move_to_end(k)
            while self._artifact_bytes > (64 << 20) and len(self._artifacts) > 1:
                _, old = self._artifacts.popitem(last=False)
                self._artifact_bytes -= len(old)

    def _artifact(self, log: SessionLog, sha: str) -> bytes:
        with self._lock:
            hit = self._artifacts.get(sha)
        return hit if hit is not None else log.get_artifact(sha)

    def _view_artifacts(
        self, log: SessionLog, evs: list[Event], ckpt: Checkpoint, view: list[Event]
    ) -> dict[str, bytes]:
        """Bytes of every artifact the checkpoint introduced into the view (to verify them)."""
        from compactor.engine.invariants import _refs

        source = {r.sha256 for e in evs for r in _refs(e.blocks)}
        listed = set(ckpt.artifacts)
        need = {r.sha256 for e in view for r in _refs(e.blocks)} - source
        out: dict[str, bytes] = {}
        for sha in sorted(need & listed):
            try:
                out[sha] = self._artifact(log, sha)
            except errors.NotFound:
                pass  # reported by the validator as unresolved
        return out

    # --- 1. freeze_snapshot -----------------------------------------------------------------
    @activity.defn(name=ActivityName.FREEZE_SNAPSHOT)
    async def freeze_snapshot(self, inp: FreezeInput) -> SnapshotRef:
        """Read the head (version + etag) and the metadata of the events a compaction sees."""
        meta = self._meta()

        def work() -> SnapshotRef:
            t = time.perf_counter()
            if inp.check_breaker:
                refused = self._breaker_refuses(inp, meta["attempt"])
                if refused is not None:
                    return SnapshotRef(tenant=inp.tenant, session=inp.session, version=0, etag=None,
                                       breaker_refused=refused, ms=(time.perf_counter() - t) * 1000, **meta)
            log = self.log(inp.tenant, inp.session)
            head = log.head()
            if head.version == 0:
                raise errors.NotFound(
                    f"session {inp.tenant}/{inp.session} has no events in {self.store.url}; "
                    f"append events before compacting it",
                )
            prev = log.current_checkpoint(head)
            end = 0 if prev is None or prev.covers.empty else prev.covers.end
            snap = SnapshotRef(
                tenant=inp.tenant,
                session=inp.session,
                version=head.version,
                etag=head.etag,
                checkpoint=head.checkpoint,
                checkpoint_sha256=head.checkpoint_sha256,
                prev_covers_end=end,
            )
            from compactor.engine.planning import prepare
            from compactor.engine.measure import view_tokens
            from compactor.engine.view import build_view

            evs = self.engine_events(log, snap, head)
            read = FrozenReads(inp.tenant, inp.session, head, tuple(evs)) if inp.commit_as is not None else None
            run = workflow_run_id()
            own_run = bool(run and head.checkpoint_run == run and prev is not None)
            planned = None
            work_done = PlannedWork()  # the plan's byproducts, for externalize_finish below
            if inp.plan_policy is not None and not own_run:
                planned = self._plan_in_freeze(inp, snap, evs, prev, meta, work_done)
            # engine.plan counts the same view (tokens_before): counted once when it ran here
            tokens = planned.tokens_before if planned is not None else view_tokens(build_view(prepare(evs, prev), prev))
            own = None
            if own_run:
                assert prev is not None
                own = self._describe_own_commit(log, head, prev, run, tokens)
            out = snap.model_copy(
                update={
                    "own_commit": own,
                    "events": head.version,
                    "view_tokens": tokens,
                    "tool_uses": sum(len(e.tool_uses) for e in evs),
                    "pinned": sum(1 for e in evs if e.kind == "pinned"),
                    "ms": (time.perf_counter() - t) * 1000,
                    **meta,
                }
            )
            finished = None
            if inp.finish_now is not None and planned is not None and planned.needed and self.finishes_in_freeze:
                finished = self._finish_in_freeze(inp, out, planned, meta, work_done)
            done = out.model_copy(update={"plan": planned, "finished": finished,
                                          "ms": (time.perf_counter() - t) * 1000})
            if inp.commit_as is not None and self.commits_in_freeze and commit_ready(finished):
                # (the snapshot as the workflow passes it on: without its plan and finish)
                return done.model_copy(update={"committed": self._commit_in_freeze(inp, out, done, meta, read)})
            return done

        return await self._run(lambda: paused(work))

    def _plan_in_freeze(self, inp: FreezeInput, snap: SnapshotRef, evs: list[Event], prev: Checkpoint | None,
                        meta: dict[str, Any], work: PlannedWork | None = None) -> PlanOutput | None:
        """plan_compaction's work for ``FreezeInput.plan_policy``, on the events freeze read, under
        the work prefix the workflow derives from the snapshot (``contracts.work_prefix``). Any
        failure gives None: the workflow then runs plan_compaction, which fails as it always
        did (same record, same error)."""
        assert inp.plan_policy is not None
        phash = params_hash(policy=inp.plan_policy.model_dump(), summarizer=inp.plan_summarizer,
                            model=inp.plan_model, prev=snap.checkpoint)
        key = work_prefix(inp.tenant, inp.session, snap.version, phash) + "plan.json"
        try:
            return self._plan(PlanInput(snapshot=snap, policy=inp.plan_policy, plan_key=key), meta, evs, prev, work)
        except Exception as exc:  # noqa: BLE001 - reported by plan_compaction, run next
            if activity.in_activity():
                activity.logger.warning("planning in freeze_snapshot failed, left to plan_compaction: %s",
                                        type(exc).__name__)
            return None

    def _finish_in_freeze(self, inp: FreezeInput, snap: SnapshotRef, plan: PlanOutput,
                          meta: dict[str, Any], work: PlannedWork | None = None) -> ExternalizeFinishOutput | None:
        """externalize_finish's work for ``FreezeInput.finish_now``, with the input the workflow
        builds after a separate freeze (``snap``: the snapshot as the workflow passes it on, without
        its plan), under the run's work prefix. Any failure gives None: the workflow then runs
        externalize_finish, which fails (or succeeds on its retry) as it always did; its work
        objects are keyed by the run's inputs, so what this attempt wrote is overwritten. ``work``:
        what the plan learnt on the same events (``PlannedWork``), handed on to ``apply_layers``."""
        assert inp.plan_policy is not None
        prefix = plan.plan_key[: -len("plan.json")]
        ext_in = ExternalizeInput(snapshot=snap, policy=inp.plan_policy, plan_key=plan.plan_key,
                                  layers_key=prefix + "layers.json", now=inp.finish_now)
        try:
            return self._externalize_finish(
                ExternalizeFinishInput(externalize=ext_in, prefix=prefix, tenant=inp.tenant, session=inp.session,
                                       tokens_before=plan.tokens_before), meta, work)
        except Exception as exc:  # noqa: BLE001 - reported by externalize_finish, run next
            if activity.in_activity():
                activity.logger.warning("externalize_finish in freeze_snapshot failed, left to its own step: %s",
                                        type(exc).__name__)
            return None

    def _commit_in_freeze(self, inp: FreezeInput, snap: SnapshotRef, done: SnapshotRef, meta: dict[str, Any],
                          read: FrozenReads | None = None) -> CommitRecordOutput | None:
        """commit_record's work for ``FreezeInput.commit_as`` once the candidate validated
        (``done``: freeze's output so far; ``read``: what freeze read, for the commit to use), with
        the input the workflow builds for that step. Any
        failure gives None: the workflow then runs commit_record, which fails as it always did -
        or, when the head was swapped before the failure (the record's write), takes commit_swap's
        own-commit path and writes the record."""
        assert inp.commit_as is not None and inp.plan_policy is not None and done.finished is not None
        fin = done.finished.finish
        assert fin is not None
        try:
            with frozen_reads(read):
                return self._commit_and_record(CommitRecordInput(
                    commit=CommitInput(snapshot=snap, policy=inp.plan_policy, candidate_key=fin.check.candidate_key,
                                       max_merges=inp.max_merges),
                    record=record_before_commit(inp.commit_as, done), count_breaker=True), meta)
        except Exception as exc:  # noqa: BLE001 - reported by commit_record, run next
            if activity.in_activity():
                activity.logger.warning("commit_record in freeze_snapshot failed, left to its own step: %s",
                                        type(exc).__name__)
            return None

    def _breaker_refuses(self, inp: FreezeInput, attempt: int) -> str | None:
        """The circuit breaker's refusal of this trigger (its reason), else None. Fails open like
        the workflow's own check_breaker step: a breaker that cannot be read never blocks."""
        from activities.breaker import BreakerCheckInput, check_gate

        try:
            gate = check_gate(self.store, BreakerCheckInput(tenant=inp.tenant, session=inp.session,
                                                            trigger=inp.trigger), count_start=attempt <= 1)
        except Exception as exc:  # noqa: BLE001 - fail open, one line
            activity.logger.warning("circuit breaker unreadable, proceeding: %s", exc)
            return None
        return None if gate.allowed else (gate.reason or "circuit breaker open")

    def _describe_own_commit(self, log: SessionLog, head: Head, ckpt: Checkpoint, run: str, tokens_now: int) -> OwnCommit:
        """What this run committed before it was executed again: the head's checkpoint, the
        record that execution stored (if any), and the view size before and after it."""
        key = f"{log.prefix}records/{run}.json"
        try:
            record = log.read_record(key)
        except errors.NotFound:
            record = None
        prev = None
        if ckpt.based_on:
            try:  # only counted here, never served or built on
                prev = log.read_checkpoint(ckpt.based_on)
            except errors.NotFound:
                pass
        start = 0 if prev is None or prev.covers.empty else prev.covers.end
        upto = ckpt.snapshot_version or head.version
        from compactor.engine.planning import prepare
        from compactor.engine.measure import view_tokens
        from compactor.engine.view import build_view

        shown = prepare(log.read_pinned_and_after(start, upto, head=head), prev)
        before = view_tokens(build_view(shown, prev))
        return OwnCommit(
            checkpoint=ckpt.id,
            checkpoint_sha256=head.checkpoint_sha256,
            committed_version=upto,
            covers_end=0 if ckpt.covers.empty else ckpt.covers.end,
            summarizer=ckpt.summarizer,
            summary_tokens=ckpt.summary_tokens,
            tokens_before=before,
            tokens_after=tokens_now,
            record=record,
            record_key=key,
        )

    # --- 2. plan ----------------------------------------------------------------------------
    @activity.defn(name=ActivityName.PLAN_COMPACTION)
    async def plan_compaction(self, inp: PlanInput) -> PlanOutput:
        """``engine.plan`` on the snapshot: target, tail budgets, cut, layers; plan JSON stored."""
        meta = self._meta()
        return await self._run(lambda: self._plan(inp, meta))

    def _plan(self, inp: PlanInput, meta: dict[str, Any], evs: list[Event] | None = None,
              prev: Checkpoint | None = None, work: PlannedWork | None = None) -> PlanOutput:
        """plan_compaction's work (``evs``, ``prev``: the snapshot's, when the caller read them;
        ``work`` receives the prepared events and what the plan learnt of them, for
        ``apply_layers`` later in the same step)."""
        from compactor.engine.planning import plan, prepare

        t = time.perf_counter()
        if evs is None:
            log = self.log(inp.snapshot.tenant, inp.snapshot.session)
            prev = self._prev(log, inp.snapshot)
            evs = self.engine_events(log, inp.snapshot)
        policy = policy_of(inp.policy)
        extra: dict[str, Any] = {}
        if work is not None:  # (plan prepares the events itself otherwise: the same list)
            work.events = evs = prepare(evs, prev)
            extra = work.plan_args()
        p = plan(evs, policy, inp.policy.target_tokens, prev, **extra)
        if work is not None:
            work.plan_key, work.prev_id = inp.plan_key, (prev.id if prev is not None else None)
        self._put_json(inp.plan_key, p.model_dump(mode="json"))
        return PlanOutput(
            needed=not p.noop,
            reason=(
                f"view is {p.tokens_before:,} tokens, within the target {p.target_tokens:,}"
                if p.noop
                else ""
            ),
            covers_end=p.cut,
            layers=list(p.layers),
            tokens_before=p.tokens_before,
            target_tokens=p.target_tokens,
            plan_key=inp.plan_key,
            ms=(time.perf_counter() - t) * 1000,
            **meta,
        )


def compose_finish_structured(lift: Callable[..., Any], summarize: Callable[..., Any],
                              validate: Callable[..., Any]) -> Callable[..., Any]:
    """A ``finish_structured`` activity made of three step activities, called in order.

    What a worker registers when one of the three steps is replaced (``build_workers``'
    ``extra_activities``: a custom structured summarizer, a test's broken one), so runs that
    take the one-step path still call the replacement. A failing part is named in the error.
    """

    async def part(name: str, fn: Callable[..., Any], arg: Any) -> Any:
        try:
            return await fn(arg)
        except ApplicationError as err:
            raise ApplicationError(f"{name}: {err.message}", *err.details, type=err.type,
                                   non_retryable=err.non_retryable) from err

    @activity.defn(name=ActivityName.FINISH_STRUCTURED)
    async def finish_structured(inp: FinishStructuredInput) -> FinishStructuredOutput:
        t = time.perf_counter()
        lift_out = await part(ActivityName.LIFT_STATE, lift, inp.lift)
        t1 = time.perf_counter()
        summ = await part(ActivityName.SUMMARIZE_STRUCTURED, summarize, inp.summarize)
        t2 = time.perf_counter()
        check = await part(ActivityName.VALIDATE_CANDIDATE, validate, inp.check)
        return FinishStructuredOutput(
            lift=lift_out, summarize=summ, check=check, summarize_ms=(t2 - t1) * 1000,
            ms=(time.perf_counter() - t) * 1000, attempt=StoreActivities._meta()["attempt"],
        )

    return finish_structured


def compose_externalize_finish(externalize: Callable[..., Any], finish: Callable[..., Any]) -> Callable[..., Any]:
    """An ``externalize_finish`` activity made of the registered ``externalize`` and
    ``finish_structured`` activities, called in order (as ``compose_finish_structured``: what a
    worker registers when either, or a part of finish, is replaced)."""

    @activity.defn(name=ActivityName.EXTERNALIZE_FINISH)
    async def externalize_finish(inp: ExternalizeFinishInput) -> ExternalizeFinishOutput:
        t = time.perf_counter()
        ext = await externalize(inp.externalize)
        fin = None
        if finish_follows(inp, ext):
            fin = await finish(finish_structured_input(inp, ext))
        return ExternalizeFinishOutput(externalize=ext, finish=fin, ms=(time.perf_counter() - t) * 1000,
                                       attempt=StoreActivities._meta()["attempt"])

    return externalize_finish


def compose_commit_record(commit_swap: Callable[..., Any], write_record: Callable[..., Any]) -> Callable[..., Any]:
    """A ``commit_record`` activity made of the registered ``commit_swap`` and ``write_record``
    activities, called in order (as ``compose_finish_structured``: what a worker registers when
    either is replaced, so runs that take the one-step path still call the replacement)."""
    from activities import metrics

    @activity.defn(name=ActivityName.COMMIT_RECORD)
    async def commit_record(inp: CommitRecordInput) -> CommitRecordOutput:
        t = time.perf_counter()
        with metrics.part_span(str(ActivityName.COMMIT_SWAP), inp.commit) as span:
            commit = await commit_swap(inp.commit)
            metrics.annotate_span(commit, span=span)
        rec_in = RecordInput(record=committed_record(inp.record, commit), count_breaker=inp.count_breaker)
        with metrics.part_span(str(ActivityName.WRITE_RECORD), rec_in):
            written = await write_record(rec_in)
        metrics.annotate_span(rec_in)
        return CommitRecordOutput(commit=commit, record=written, ms=(time.perf_counter() - t) * 1000,
                                  attempt=StoreActivities._meta()["attempt"])

    return commit_record
