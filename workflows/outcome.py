"""How a compaction run ends: its commit (with its record, in one step or in freeze_snapshot's),
the record of a noop or failed run, the circuit breaker's count, the search attributes, and the
outcome an earlier execution of the same run committed (``RunOutcome``, a base of
``compact_session.CompactSessionWorkflow``).

Why apart from the transaction: every way out of a run writes one record and one final upsert
of the search attributes, whichever step it ends after; these are those ways, reviewed together
(an operator's queries and the savings reports read what they write). Deterministic like the
workflow.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.paths import BREAKER_PATCH
from workflows.steps import BREAKER_TIMEOUT, STORE_RETRY, StepRunner

with workflow.unsafe.imports_passed_through():
    from activities.breaker import (
        CHECK_BREAKER,
        RECORD_BREAKER,
        BreakerCheckInput,
        BreakerCheckOutput,
        BreakerRecordInput,
        BreakerRecordOutput,
    )
    from activities.contracts import (
        ActivityName,
        CommitInput,
        CommitRecordInput,
        CommitRecordOutput,
        CompactSessionInput,
        CompactSessionOutput,
        ExternalizeOutput,
        PolicyRef,
        RecordInput,
        RecordOutput,
        SnapshotRef,
        ValidateOutput,
        committed_record,
    )
    from activities.freeze_commit import record_before_commit
    from compactor.records import CompactionRecord, SeqRange

# --- search attributes (registered by workers.devstack and `compactor dev`) ---------------------
SA_TENANT = SearchAttributeKey.for_keyword("CompactorTenant")
SA_SESSION = SearchAttributeKey.for_keyword("CompactorSession")
SA_STATUS = SearchAttributeKey.for_keyword("CompactorStatus")
SA_TOKENS_BEFORE = SearchAttributeKey.for_int("CompactorTokensBefore")
SA_TOKENS_AFTER = SearchAttributeKey.for_int("CompactorTokensAfter")


class RunOutcome(StepRunner):
    """The ends of a run (``_record``, ``_frozen``, ``_tokens_before``, ``_breaker_refused``: the
    workflow's)."""

    _record: CompactionRecord
    _frozen: tuple[CompactionRecord, SnapshotRef] | None
    _tokens_before: int | None
    _breaker_refused: bool

    async def _report_own_commit(
        self, record: CompactionRecord, snap: SnapshotRef, started: Any
    ) -> CompactSessionOutput:
        """The outcome an earlier execution of this run committed: its stored record when it
        got that far (not written again: the first one stands), else one built from the head
        and the checkpoint."""
        own = snap.own_commit
        assert own is not None
        self._set(checkpoint=own.checkpoint)
        stored = own.record
        if stored is not None and stored.status == "committed" and stored.checkpoint == own.checkpoint:
            workflow.upsert_search_attributes([
                SA_TOKENS_BEFORE.value_set(stored.tokens_before),
                SA_STATUS.value_set(stored.status),
                SA_TOKENS_AFTER.value_set(stored.tokens_after),
            ])
            if self._patched(BREAKER_PATCH) and not self._breaker_refused:
                await self._breaker_record(stored)
            self._set(step="done")
            return CompactSessionOutput(
                status="committed", checkpoint=own.checkpoint, record_key=own.record_key, record=stored
            )
        self._upsert_tokens_before(own.tokens_before)
        committed = record.model_copy(
            update={
                "status": "committed",
                "checkpoint": own.checkpoint,
                "checkpoint_sha256": own.checkpoint_sha256,
                "committed_version": own.committed_version,
                "covers": SeqRange(start=1, end=own.covers_end),
                "summarizer": own.summarizer,
                "summary_tokens": own.summary_tokens,
                "tokens_before": own.tokens_before,
                "tokens_after": own.tokens_after,
            }
        )
        return await self._finish(committed, own.checkpoint, started)

    async def _commit_record(
        self, snap: SnapshotRef, policy: PolicyRef, val: ValidateOutput, ext: ExternalizeOutput,
        record: CompactionRecord,
    ) -> CompactSessionOutput:
        """commit_swap + write_record as one step (COMMIT_RECORD_PATCH), reported as the two steps
        it ran. The activity writes ``committed_record(before, commit)``; the run returns the same
        record, built here from the same inputs (nothing of it crosses the history twice)."""
        by_freeze = self._committed_by_freeze(val)
        if by_freeze is not None:  # FREEZE_COMMIT_PATCH: freeze_snapshot committed and recorded
            before, out = by_freeze
            total, attempt = out.ms, out.attempt
            self._durations = dict(before.durations_ms)
        else:
            before = record.model_copy(
                update={"durations_ms": dict(self._durations), "attempts": max([1, *self._attempts.values()])}
            )
            name = str(ActivityName.COMMIT_RECORD)
            out = await self._step(
                ActivityName.COMMIT_RECORD,
                CommitRecordInput(
                    commit=CommitInput(snapshot=snap, policy=policy, candidate_key=val.candidate_key,
                                       max_merges=self._inp.max_merges),
                    record=before,
                    count_breaker=not self._breaker_refused,
                ),
                CommitRecordOutput,
                f"swap head v{snap.version} -> checkpoint {val.checkpoint_id} (covers 1..{ext.covers_end}), "
                f"then record it",
            )
            total = self._durations.pop(name)
            attempt = self._attempts.pop(name, 1)
            self._steps_done.remove(name)
        commit = out.commit
        committed = committed_record(before, commit)
        for step, ms in ((ActivityName.COMMIT_SWAP, commit.ms),
                         (ActivityName.WRITE_RECORD, max(out.record.ms, total - commit.ms))):
            self._durations[str(step)] = round(ms, 3)
            self._attempts[str(step)] = max(attempt, 1)
            self._steps_done.append(str(step))
        self._set(checkpoint=commit.checkpoint_id)
        workflow.upsert_search_attributes(
            [
                *([SA_TOKENS_BEFORE.value_set(self._tokens_before)] if self._tokens_before is not None else []),
                SA_STATUS.value_set(committed.status),
                SA_TOKENS_AFTER.value_set(committed.tokens_after),
            ]
        )
        self._set(step="done")
        return CompactSessionOutput(
            status="committed", checkpoint=commit.checkpoint_id, record_key=out.record.key, record=committed
        )

    def _committed_by_freeze(self, val: ValidateOutput) -> tuple[CompactionRecord, CommitRecordOutput] | None:
        """The commit freeze_snapshot made of this candidate (FREEZE_COMMIT_PATCH), with the record
        it wrote before the commit's part (``freeze_commit.record_before_commit``, built again)."""
        if self._frozen is None:
            return None
        base, frozen = self._frozen
        fin = frozen.finished.finish if frozen.finished is not None else None
        if frozen.committed is None or fin is None or fin.check.candidate_key != val.candidate_key:
            return None
        return record_before_commit(base, frozen), frozen.committed

    async def _finish(
        self, record: CompactionRecord, checkpoint: str | None, started: Any, *, mark_noop: bool = False
    ) -> CompactSessionOutput:
        record = record.model_copy(
            update={
                "durations_ms": dict(self._durations),
                "attempts": max([1, *self._attempts.values()]),
            }
        )
        workflow.upsert_search_attributes(
            [
                *([SA_TOKENS_BEFORE.value_set(self._tokens_before)] if self._tokens_before is not None else []),
                SA_STATUS.value_set(record.status),
                SA_TOKENS_AFTER.value_set(record.tokens_after),
            ]
        )
        rec = await self._step(
            ActivityName.WRITE_RECORD,
            RecordInput(record=record, mark_noop=mark_noop, count_breaker=not self._breaker_refused)
            if self._v3 else RecordInput(record=record, mark_noop=mark_noop),
            RecordOutput,
            f"record {record.status} for {record.tenant}/{record.session}",
        )
        if not self._v3 and workflow.patched(BREAKER_PATCH) and not self._breaker_refused:
            await self._breaker_record(record)
        self._set(step="done")
        status = record.status if record.status in ("committed", "noop", "failed") else "failed"
        return CompactSessionOutput(
            status=status,  # type: ignore[arg-type]
            checkpoint=checkpoint,
            record_key=rec.key,
            record=record,
        )

    async def _breaker_check(self, inp: CompactSessionInput) -> BreakerCheckOutput:
        """May this trigger run? Fails open: a breaker that cannot be read never blocks."""
        try:
            return await workflow.execute_local_activity(
                CHECK_BREAKER,
                BreakerCheckInput(tenant=inp.tenant, session=inp.session, trigger=inp.trigger),
                result_type=BreakerCheckOutput,
                start_to_close_timeout=BREAKER_TIMEOUT,
                retry_policy=STORE_RETRY,
                summary=f"circuit breaker of {inp.tenant}/{inp.session} ({inp.trigger})",
            )
        except (ActivityError, ApplicationError) as err:  # local: raised unwrapped
            workflow.logger.warning("circuit breaker unreadable, proceeding: %s", getattr(err, "cause", None) or err)
            return BreakerCheckOutput()

    async def _breaker_record(self, record: CompactionRecord) -> None:
        """Count this run (committed/noop = ok, failed = one more failure)."""
        try:
            await workflow.execute_local_activity(
                RECORD_BREAKER,
                BreakerRecordInput(
                    tenant=record.tenant,
                    session=record.session,
                    ok=record.status in ("committed", "noop"),
                    trigger=record.trigger,
                    run_id=record.id,
                    error=record.error,
                ),
                result_type=BreakerRecordOutput,
                start_to_close_timeout=BREAKER_TIMEOUT,
                retry_policy=STORE_RETRY,
                summary=f"circuit breaker: {record.status}",
            )
        except (ActivityError, ApplicationError) as err:  # local: raised unwrapped
            workflow.logger.warning("circuit breaker not updated: %s", getattr(err, "cause", None) or err)

    def _upsert_tokens_before(self, tokens: int) -> None:
        """CompactorTokensBefore: its own upsert before STEPS_PATCH; since, part of the final
        upsert (a run is one workflow task: the server saw them together anyway; one history
        event and one visibility write fewer)."""
        if self._v3:
            self._tokens_before = tokens
        else:
            workflow.upsert_search_attributes([SA_TOKENS_BEFORE.value_set(tokens)])
