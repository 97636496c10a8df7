"""The first steps of ``StoreActivities``: freeze_snapshot (the head, the events a compaction
sees, the circuit breaker's gate, an earlier execution's own commit - and, when the workflow asks,
the plan, externalize_finish and commit_record of the same run on the events it read) and
plan_compaction. A mixin: the store plumbing (``_run``, ``log``, work objects) is
``StoreActivities``', the later steps ``summary_steps`` and ``commit_steps``."""

from __future__ import annotations

import time
from typing import Any

from temporalio import activity

from activities.commit_steps import FrozenReads, frozen_reads
from activities.contracts import (
    ActivityName,
    CommitInput,
    CommitRecordInput,
    CommitRecordOutput,
    ExternalizeFinishInput,
    ExternalizeFinishOutput,
    ExternalizeInput,
    FreezeInput,
    OwnCommit,
    PlanInput,
    PlanOutput,
    SnapshotRef,
    params_hash,
    work_prefix,
)
from activities.freeze_commit import commit_ready, record_before_commit
from activities.step_support import PlannedWork, paused, policy_of, workflow_run_id
from compactor import errors
from compactor.events import Event
from compactor.records import Checkpoint, Head
from compactor.store import SessionLog


class FreezeSteps:
    """Steps of ``StoreActivities`` (see the module docstring); mixed into it."""

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
