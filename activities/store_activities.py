"""Activities that hold the object store: every compaction step except the LLM summarizers.

Why they are shaped this way:

* **Same pure functions as the inline engine.** ``plan_compaction`` calls ``engine.plan`` and
  ``externalize`` calls ``engine.apply_layers`` (layers a/b and the tail-shrinking summary
  ladder, which lifts state and renders the structured summary with the same functions the
  inline path uses); ``validate_candidate`` calls ``invariants.validate``; the merge in
  ``commit_swap`` calls ``engine.reconcile_checkpoint``. So a durable compaction commits
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
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import metrics
from activities.contracts import (
    ActivityName,
    CommitInput,
    CommitOutput,
    DueSessions,
    ErrorType,
    ExternalizeInput,
    ExternalizeOutput,
    FinishStructuredInput,
    FinishStructuredOutput,
    FreezeInput,
    LiftInput,
    LiftOutput,
    OwnCommit,
    PlanInput,
    PlanOutput,
    PolicyRef,
    RecordInput,
    RecordOutput,
    SkippedSession,
    SnapshotRef,
    SummarizeInput,
    SummarizeOutput,
    SweepInput,
    ValidateInput,
    ValidateOutput,
    params_hash,
    work_prefix,
)
from activities.merge import SOFT_VIOLATIONS, Merge, _dumps, committed_by
from activities.work_docs import WorkDocs
from compactor import errors
from compactor.events import Event
from compactor.records import Checkpoint, CompactionRecord, Head
from compactor.store import SegmentCache, SessionLog, list_sessions, list_sessions_page

T = TypeVar("T")

HEARTBEAT_EVERY_S = 1.0


def to_application_error(exc: BaseException) -> BaseException:
    """Map our typed errors to Temporal failures: bad input never retries, blips do."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, errors.InvalidInput):
        etype = ErrorType.INVALID_INPUT
    elif isinstance(exc, errors.NotFound):
        etype = ErrorType.NOT_FOUND
    elif isinstance(exc, errors.IntegrityError):
        etype = ErrorType.INTEGRITY
    elif isinstance(exc, errors.InvariantViolation):
        etype = ErrorType.INVARIANT_VIOLATION
    else:
        return exc  # transient (PreconditionFailed, ConcurrentModification, I/O): retry
    code = getattr(exc, "code", None)
    return ApplicationError(str(exc), {"code": code}, type=str(etype), non_retryable=True)


def _policy(ref: PolicyRef) -> Any:
    from compactor.engine.policy import make_policy

    return make_policy(ref.preset, window=ref.window, max_output=ref.max_output, configured=ref.configured)


def _workflow_run_id() -> str:
    """The run this activity works for ("" outside an activity, e.g. direct calls in tests)."""
    try:
        return activity.info().workflow_run_id or ""
    except RuntimeError:
        return ""


class StoreActivities:
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
        self._work_store = _unsynced(store)
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(max_workers=16)
        self.cache = cache or SegmentCache(max_bytes=256 << 20)
        self._logs: OrderedDict[tuple[str, str], SessionLog] = OrderedDict()
        self._artifacts: OrderedDict[str, bytes] = OrderedDict()
        self._docs = WorkDocs()
        self._artifact_bytes = 0
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
            self.commit_swap,
            self.write_record,
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
        data = _dumps(obj)
        self._work_store.put(key, data)
        if parsed is not None:
            self._docs.put(key, data, parsed)
        return data

    def _put_parsed(self, key: str, obj: Any) -> Any:
        """``_put_json``, then parse what was written and keep it for the next steps (returned)."""
        data = _dumps(obj)
        self._work_store.put(key, data)
        doc = json.loads(data)
        self._docs.put(key, data, doc)
        return doc

    def _get_json(self, key: str) -> Any:
        """A work object, parsed. Always read from the store (a missing or changed object is
        seen as such); when its bytes are those this worker last wrote or read under the key,
        the document parsed then is returned. Callers must not modify it."""
        try:
            data, _ = self.store.get(key)
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
            # (_unsynced): the run fails before commit_swap, the session unchanged.
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
            from compactor.engine.compact import prepare
            from compactor.engine.measure import view_tokens
            from compactor.engine.view import build_view

            evs = self.engine_events(log, snap, head)
            run = _workflow_run_id()
            own_run = bool(run and head.checkpoint_run == run and prev is not None)
            planned = None
            if inp.plan_policy is not None and not own_run:
                planned = self._plan_in_freeze(inp, snap, evs, prev, meta)
            # engine.plan counts the same view (tokens_before): counted once when it ran here
            tokens = planned.tokens_before if planned is not None else view_tokens(build_view(prepare(evs, prev), prev))
            own = None
            if own_run:
                assert prev is not None
                own = self._describe_own_commit(log, head, prev, run, tokens)
            return snap.model_copy(
                update={
                    "plan": planned,
                    "own_commit": own,
                    "events": head.version,
                    "view_tokens": tokens,
                    "tool_uses": sum(len(e.tool_uses) for e in evs),
                    "pinned": sum(1 for e in evs if e.kind == "pinned"),
                    "ms": (time.perf_counter() - t) * 1000,
                    **meta,
                }
            )

        return await self._run(work)

    def _plan_in_freeze(self, inp: FreezeInput, snap: SnapshotRef, evs: list[Event], prev: Checkpoint | None,
                        meta: dict[str, Any]) -> PlanOutput | None:
        """plan_compaction's work for ``FreezeInput.plan_policy``, on the events freeze read, under
        the work prefix the workflow derives from the snapshot (``contracts.work_prefix``). Any
        failure gives None: the workflow then runs plan_compaction, which fails as it always
        did (same record, same error)."""
        assert inp.plan_policy is not None
        phash = params_hash(policy=inp.plan_policy.model_dump(), summarizer=inp.plan_summarizer,
                            model=inp.plan_model, prev=snap.checkpoint)
        key = work_prefix(inp.tenant, inp.session, snap.version, phash) + "plan.json"
        try:
            return self._plan(PlanInput(snapshot=snap, policy=inp.plan_policy, plan_key=key), meta, evs, prev)
        except Exception as exc:  # noqa: BLE001 - reported by plan_compaction, run next
            if activity.in_activity():
                activity.logger.warning("planning in freeze_snapshot failed, left to plan_compaction: %s",
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
        from compactor.engine.compact import prepare
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
              prev: Checkpoint | None = None) -> PlanOutput:
        """plan_compaction's work (``evs``, ``prev``: the snapshot's, when the caller read them)."""
        from compactor.engine.compact import plan

        t = time.perf_counter()
        if evs is None:
            log = self.log(inp.snapshot.tenant, inp.snapshot.session)
            prev = self._prev(log, inp.snapshot)
            evs = self.engine_events(log, inp.snapshot)
        policy = _policy(inp.policy)
        p = plan(evs, policy, inp.policy.target_tokens, prev)
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

    # --- 3. externalize (layers a/b + the summary ladder) -------------------------------------
    @activity.defn(name=ActivityName.EXTERNALIZE)
    async def externalize(self, inp: ExternalizeInput) -> ExternalizeOutput:
        """Run ``engine.apply_layers``: store the artifacts it makes, keep the candidate.

        Large tool results go to the content-addressed artifact store (idempotent); the layer
        result (candidate checkpoint with its replacements, cut and structured summary) is
        written to ``layers_key``.
        """
        meta = self._meta()

        def work() -> ExternalizeOutput:
            from compactor.engine.compact import Plan, apply_layers
            from compactor.tokens import count_event

            t = time.perf_counter()
            snap = inp.snapshot
            log = self.log(snap.tenant, snap.session)
            prev = self._prev(log, snap)
            evs = self.engine_events(log, snap)
            policy = _policy(inp.policy)
            p = Plan.model_validate(self._get_json(inp.plan_key))
            res = apply_layers(
                evs, p, policy, prev=prev, now=inp.now, tenant=snap.tenant, session=snap.session
            )
            ckpt = res.checkpoint
            assert ckpt is not None
            # Content-addressed, create-only: a retry re-finds them. Written concurrently.
            list(self._io_pool.map(log.put_artifact, res.artifacts.values()))
            self._remember_artifacts(res.artifacts)
            end = 0 if ckpt.covers.empty else ckpt.covers.end
            covered_tokens = sum(count_event(e) for e in evs if e.kind != "pinned" and snap.prev_covers_end < e.seq <= end)
            # Room an LLM summary may take: what the structured one had, up to the target.
            from compactor.engine.model_summary import summary_budget

            budget = summary_budget(policy, target_tokens=p.target_tokens, tokens_after=res.tokens_after,
                                    summary_tokens=res.summary_tokens, covered_tokens=covered_tokens)
            # The state is already JSON data (the engine's dump): not copied by model_dump.
            ckpt_doc = ckpt.model_dump(mode="json", exclude={"state"})
            ckpt_doc["state"] = ckpt.state
            doc = {
                "checkpoint": ckpt_doc,
                "layers": res.layers,
                "freed_by_layer": res.freed_by_layer,
                "tokens_after": res.tokens_after,
                "summary_tokens": res.summary_tokens,
                "retained_tail_tokens": res.retained_tail_tokens,
                "violations": [str(v) for v in res.violations],
                "validated": {
                    "hard": [str(v) for v in res.violations if v.code not in SOFT_VIOLATIONS],
                    "soft": [str(v) for v in res.violations if v.code in SOFT_VIOLATIONS],
                },
                "artifacts": sorted(res.artifacts),
                "candidates": res.candidates,
                "covered_tokens": covered_tokens,
                "summary_budget": budget,
                "mid_turn": res.mid_turn,
            }
            # Parsed here once, as every reader would parse it (sorted keys: the candidate and
            # the checkpoint written from it keep that order), so the next steps of this worker
            # read it unparsed: lift, summary and validation, then commit_swap's candidate.
            self._put_parsed(inp.layers_key, doc)
            return ExternalizeOutput(
                layers_key=inp.layers_key,
                artifacts_written=len(res.artifacts),
                replacements=len(ckpt.replacements),
                freed_by_layer=dict(res.freed_by_layer),
                layers=list(res.layers),
                checkpoint_id=ckpt.id,
                covers_end=end,
                covered_tokens=covered_tokens,
                summary_budget=budget,
                tokens_after=res.tokens_after,
                retained_tail_tokens=res.retained_tail_tokens,
                mid_turn=res.mid_turn,
                left_out=dict(res.left_out),
                repaired=res.repaired,
                ms=(time.perf_counter() - t) * 1000,
                **meta,
            )

        return await self._run(work)

    # --- 4. lift_state ----------------------------------------------------------------------
    @activity.defn(name=ActivityName.LIFT_STATE)
    async def lift_state(self, inp: LiftInput) -> LiftOutput:
        """Publish the lifted state of 1..covers_end (on top of the previous checkpoint's) at
        ``state_key`` for the summarizers.

        The summary ladder already lifted the chosen range with ``lift.lift_state`` (the
        candidate's ``state``); it is reused when it covers exactly this range, else lifted here.
        """
        meta = self._meta()
        return await self._run(lambda: self._lift(inp, meta))

    def _lift(self, inp: LiftInput, meta: dict[str, Any], layers: Any = None,
              docs: dict[str, Any] | None = None) -> LiftOutput:
        """lift_state's work (``layers``: the layers document when the caller has it parsed;
        ``docs["state"]`` receives the state document written)."""
        from compactor.lifting.lift import LiftedState, dump_state, lift_state

        t = time.perf_counter()
        snap = inp.snapshot
        if layers is None:
            layers = self._get_json(inp.layers_key) if inp.layers_key else None
        state_doc = (layers or {}).get("checkpoint", {}).get("state") or None
        if not state_doc or state_doc.get("covers_end") != inp.covers_end:
            log = self.log(snap.tenant, snap.session)
            prev = self._prev(log, snap)
            prev_state = LiftedState.model_validate(prev.state) if prev and prev.state else None
            covered = [
                e
                for e in self.engine_events(log, snap)
                if e.kind != "pinned" and e.seq <= inp.covers_end
            ]
            state_doc = dump_state(lift_state(covered, prev_state))
            self._put_json(inp.state_key, state_doc)
        else:
            # The ladder's state of exactly this range, published as the layers document holds
            # it (parsed): the engine's JSON dump of the LiftedState, which a parse and a dump
            # give back unchanged. It grows with the session (~100 KB after eight compactions).
            self._put_json(inp.state_key, state_doc, parsed=state_doc)
        if docs is not None:
            docs["state"] = state_doc
        return LiftOutput(
            state_key=inp.state_key,
            requests=len(state_doc.get("requests") or ()),
            constraints=len(state_doc.get("constraints") or ()),
            unknown_actions=len(state_doc.get("unknown_actions") or ()),
            todos=len(state_doc.get("todos") or ()),
            ms=(time.perf_counter() - t) * 1000,
            **meta,
        )

    # --- 5. summarize (structured) ----------------------------------------------------------
    @activity.defn(name=ActivityName.SUMMARIZE_STRUCTURED)
    async def summarize_structured(self, inp: SummarizeInput) -> SummarizeOutput:
        """The deterministic structured summary of the state at ``state_key``.

        Rendered by ``summary.render_summary``; when the summary ladder already rendered this
        same state (the layer candidate), that text is used, so durable == inline exactly.
        """
        meta = self._meta()
        return await self._run(lambda: self._summarize(inp, meta))

    def _summarize(self, inp: SummarizeInput, meta: dict[str, Any], state_doc: Any = None,
                   layers: Any = None, docs: dict[str, Any] | None = None) -> SummarizeOutput:
        """summarize_structured's work (``state_doc``, ``layers``: parsed by the caller;
        ``docs["summary"]`` receives the summary document written)."""
        from compactor.lifting.lift import LiftedState
        from compactor.summarize.structured import render_summary

        if state_doc is None:
            state_doc = self._get_json(inp.state_key)
        ckpt_doc: dict[str, Any] = {}
        if layers is None:
            layers_key = inp.state_key.rsplit("/", 1)[0] + "/layers.json"
            try:
                layers = self._get_json(layers_key)
            except errors.NotFound:
                layers = {}
        ckpt_doc = layers.get("checkpoint", {})
        if ckpt_doc.get("state") == state_doc and ckpt_doc.get("summary"):
            doc = {"summary": ckpt_doc["summary"], "sections": ckpt_doc.get("sections", {}), "native": None}
            tokens = int(ckpt_doc.get("summary_tokens", 0))
        else:
            rendered = render_summary(LiftedState.model_validate(state_doc), inp.budget_tokens)
            doc = {"summary": rendered.text, "sections": dict(rendered.sections), "native": None}
            tokens = rendered.tokens
        raw = self._put_json(inp.output_key, doc)
        if docs is not None:
            docs["summary"] = json.loads(raw)  # what validate_candidate would read back
        return SummarizeOutput(
            output_key=inp.output_key, summary_tokens=tokens, model="structured", attempts=meta["attempt"]
        )

    # --- 6. validate ------------------------------------------------------------------------
    def candidate(
        self, inp: ValidateInput, layer_doc: dict[str, Any] | None = None, summ: Any = None
    ) -> tuple[Checkpoint, bool, list[str]]:
        """The layer candidate with the chosen summarizer's summary swapped in (a model summary
        completed from the lifted state), whether it is the layer candidate itself
        (unchanged), and the sections the completion added."""
        layer_doc = layer_doc if layer_doc is not None else self._get_json(inp.layers_key)
        base = Checkpoint.model_validate(layer_doc["checkpoint"])
        if not inp.summary_key:
            return base, True, []  # replacement layers only: no summary to swap in
        if summ is None:
            summ = self._get_json(inp.summary_key)
        if summ.get("summary") == base.summary and summ.get("native") is None and (
            not inp.checkpoint_id or inp.checkpoint_id == base.id
        ):
            return base, True, []
        from compactor.engine.model_summary import with_summary

        ckpt, completed = with_summary(
            base, summ.get("summary") or "", summarizer=inp.summarizer,
            budget=int(layer_doc.get("summary_budget") or 0), mid_turn=bool(layer_doc.get("mid_turn")),
            sections=summ.get("sections") or {}, native=summ.get("native"),
            checkpoint_id=inp.checkpoint_id or base.id,
        )
        return ckpt, False, completed

    @activity.defn(name=ActivityName.VALIDATE_CANDIDATE)
    async def validate_candidate(self, inp: ValidateInput) -> ValidateOutput:
        """Every invariant (DESIGN §7) on the candidate view; the candidate is stored for
        ``commit_swap``. Violations are returned (the workflow falls back or fails)."""
        meta = self._meta()
        return await self._run(lambda: self._validate(inp, meta))

    def _validate(self, inp: ValidateInput, meta: dict[str, Any], layer_doc: Any = None,
                  summ: Any = None) -> ValidateOutput:
        """validate_candidate's work (``layer_doc``, ``summ``: parsed by the caller)."""
        from compactor.engine.invariants import validate
        from compactor.engine.measure import view_tokens
        from compactor.engine.view import build_view

        t = time.perf_counter()
        snap = inp.snapshot
        log = self.log(snap.tenant, snap.session)
        prev = self._prev(log, snap)
        from compactor.engine.compact import prepare

        evs = prepare(self.engine_events(log, snap), prev)
        if layer_doc is None:
            layer_doc = self._get_json(inp.layers_key)
        ckpt, unchanged, completed = self.candidate(inp, layer_doc, summ)
        repaired = 0
        if unchanged and "validated" in layer_doc:
            # The summary ladder validated exactly this candidate with the same function
            # on the same events (engine.apply_layers); its verdict stands.
            hard = list(layer_doc["validated"]["hard"])
            soft = list(layer_doc["validated"]["soft"])
            n_tokens = int(layer_doc["tokens_after"])
        else:
            view = build_view(evs, ckpt)
            arts = self._view_artifacts(log, evs, ckpt, view)
            target = self._get_json(inp.plan_key)["target_tokens"]
            vio = validate(
                events=evs, checkpoint=ckpt, view=view, target_tokens=target, artifacts=arts,
                prev_checkpoint=prev,
            )
            n_tokens = view_tokens(view)
            from compactor.engine.compact import repair_candidate

            ckpt, view, n_tokens, vio, repaired = repair_candidate(
                evs, ckpt, view, n_tokens, vio, target, arts, prev)
            hard = [str(v) for v in vio if v.code not in SOFT_VIOLATIONS]
            soft = [str(v) for v in vio if v.code in SOFT_VIOLATIONS]
            if inp.summarizer != "structured":
                from compactor.engine.model_summary import over_budget

                too_big = over_budget(n_tokens, target, int(layer_doc["tokens_after"]))
                if too_big is not None:
                    hard.append(too_big)
        # The layer candidate unchanged: its document as the layers document holds it (parsed;
        # a model_dump of the same checkpoint gives the same data), not dumped again.
        if unchanged and not repaired:
            self._put_json(inp.candidate_key, layer_doc["checkpoint"], parsed=layer_doc["checkpoint"])
        else:
            self._put_json(inp.candidate_key, ckpt.model_dump(mode="json"))
        return ValidateOutput(
            candidate_key=inp.candidate_key,
            checkpoint_id=ckpt.id,
            violations=hard,
            warnings=soft,
            view_tokens=n_tokens,
            summary_tokens=ckpt.summary_tokens,
            repaired=repaired,
            completed=completed,
            ms=(time.perf_counter() - t) * 1000,
            **meta,
        )

    # --- 4-6 in one step (structured summarizer) ------------------------------------------------
    @activity.defn(name=ActivityName.FINISH_STRUCTURED)
    async def finish_structured(self, inp: FinishStructuredInput) -> FinishStructuredOutput:
        """lift_state, summarize_structured and validate_candidate in one call, in that order.

        The same work as the three steps, on one worker: the layers document is parsed once and
        the state and summary each step writes are handed to the next in memory (they are
        still written, so a later step or an operator finds the same work objects). One
        local activity instead of three: measured, each costs the worker ~3.7 ms of SDK CPU
        (an activation, its dispatch, the core's side) besides its own work.
        """
        meta = self._meta()

        def work() -> FinishStructuredOutput:
            t = time.perf_counter()
            layers = self._get_json(inp.lift.layers_key)
            docs: dict[str, Any] = {}
            lift = self._lift(inp.lift, meta, layers, docs)
            t1 = time.perf_counter()
            same_state = inp.summarize.state_key == inp.lift.state_key
            same_layers = inp.summarize.state_key.rsplit("/", 1)[0] + "/layers.json" == inp.lift.layers_key
            summ = self._summarize(inp.summarize, meta, docs["state"] if same_state else None,
                                   layers if same_layers else None, docs)
            t2 = time.perf_counter()
            same_summary = inp.check.summary_key == inp.summarize.output_key
            check = self._validate(inp.check, meta, layers if inp.check.layers_key == inp.lift.layers_key else None,
                                   docs["summary"] if same_summary else None)
            return FinishStructuredOutput(
                lift=lift, summarize=summ, check=check, summarize_ms=(t2 - t1) * 1000,
                ms=(time.perf_counter() - t) * 1000, **meta,
            )

        return await self._run(work)

    # --- 7. commit_swap ---------------------------------------------------------------------
    @activity.defn(name=ActivityName.COMMIT_SWAP)
    async def commit_swap(self, inp: CommitInput) -> CommitOutput:
        """Write the checkpoint, then CAS the head from the snapshot's etag; merge if it moved.

        Merge: events appended after the snapshot stay verbatim after the checkpoint (it still
        covers 1..k <= v); results that resolve an action the state marked unknown are
        reconciled (``engine.reconcile_checkpoint``: state updated, summary re-rendered, late
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
        run = _workflow_run_id()

        def work() -> CommitOutput:
            from compactor.engine.measure import view_tokens
            from compactor.engine.view import build_view

            t = time.perf_counter()
            snap = inp.snapshot
            log = self.log(snap.tenant, snap.session)
            base = Checkpoint.model_validate(self._get_json(inp.candidate_key))

            merge = Merge(self, log, snap, base, self._prev(log, snap))
            ckpt = base
            etag = snap.etag
            head: Head | None = None
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

        return await self._run(work)

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

        def work() -> RecordOutput:
            t = time.perf_counter()
            rec = inp.record
            log = self.log(rec.tenant, rec.session)
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
            if inp.mark_noop and rec.snapshot_version:
                log.mark_noop(rec.snapshot_version, rec.tokens_before)
            if inp.count_breaker:
                self._count_breaker(rec)
            return RecordOutput(key=key, ms=(time.perf_counter() - t) * 1000, **meta)

        return await self._run(work)

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
            policy = _policy(inp.policy)
            counting = _CountingStore(self.store)
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


def _unsynced(store: Any) -> Any:
    """The store for per-run work objects: a local store without fsync, else ``store``.

    Work objects live under ``work/`` keys derived from the run's inputs and are re-made by
    re-running their step; nothing committed points at them (``commit_swap`` writes the
    checkpoint, fsync'ed, before the head's compare-and-swap). A killed worker loses no page
    cache, so only a crash of the host can lose one, and the run then fails before its commit
    with the session unchanged. Measured: an fsync'ed put costs ~12 ms of wall time on the
    bench VM (0.5 ms without), and a compaction wrote five of them in sequence.
    """
    from compactor.store.local import LocalStore

    if not isinstance(store, LocalStore) or not store.fsync:
        return store
    import copy

    scratch = copy.copy(store)
    scratch.fsync = False
    return scratch


class _CountingStore:
    """An ObjectStore wrapper that counts reads (what a sweep costs per session)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.url = store.url
        self.gets = 0

    def get(self, key: str) -> tuple[bytes, str]:
        self.gets += 1
        return self._store.get(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
