"""freeze_snapshot that commits too (FreezeInput.commit_as, workflows since the freeze-commits
patch) called directly (no Temporal): it leaves what freeze, then the commit_record step, leave -
the same head, checkpoint, work objects and record - and it leaves the commit to that step when
it must not or cannot commit."""

from __future__ import annotations

from typing import Any

import pytest

from activities.contracts import (
    CommitInput,
    CommitRecordInput,
    FreezeInput,
    PolicyRef,
    SnapshotRef,
    committed_record,
)
from activities.freeze_commit import commit_ready, record_before_commit
from activities.store_activities import StoreActivities
from compactor.records import CompactionRecord, SeqRange
from compactor.store import SessionLog, open_store
from tests.integration.durable_support import coding_session
from tests.unit.test_commit_record import _stored
from tests.unit.test_store_activities import NOW, TARGET, _env, _session

RUN = "run-a"


def _base() -> CompactionRecord:
    """The run's first record, as the workflow makes it before freeze_snapshot."""
    return CompactionRecord(id=RUN, tenant="t1", session="s1", workflow_id="compact/t1/s1", trigger="manual",
                            policy="default", summarizer="structured", status="running", created_at=NOW)


def _freeze_input(commit: bool) -> FreezeInput:
    return FreezeInput(tenant="t1", session="s1", check_breaker=True, plan_policy=PolicyRef(target_tokens=TARGET),
                       plan_model="m", finish_now=NOW, **({"commit_as": _base()} if commit else {}))


def _record_as_the_workflow_built_it(snap: SnapshotRef) -> CompactionRecord:
    """The record before commit_record of a freeze-finishes run (workflows/compact_session before
    freeze-commits: its updates written out here, not activities.freeze_commit's helpers)."""
    plan, ext, val = snap.plan, snap.finished.externalize, snap.finished.finish.check  # type: ignore[union-attr]
    return _base().model_copy(update={
        "snapshot_version": snap.version,
        "tokens_before": plan.tokens_before, "target_tokens": plan.target_tokens,  # type: ignore[union-attr]
        "layers": list(ext.layers), "freed_by_layer": dict(ext.freed_by_layer),
        "artifacts_written": ext.artifacts_written, "covers": SeqRange(start=1, end=ext.covers_end),
        "retained_tail_tokens": ext.retained_tail_tokens, "mid_turn": ext.mid_turn, "left_out": dict(ext.left_out),
        "summarizer": "structured", "summary_tokens": val.summary_tokens,
        "violations": [*val.violations, *val.warnings], "repairs": [], "checkpoint": val.checkpoint_id,
        "tokens_after": val.view_tokens, "attempts": 1,
    })


@pytest.mark.parametrize("second", [False, True])
async def test_freeze_that_commits_leaves_what_freeze_then_commit_record_leave(tmp_path, second):
    """Also on top of a checkpoint (``second``). The record is the one the freeze-finishes workflow
    wrote through commit_record, but for the durations (each step's own, from freeze's output)."""
    results = {}
    for mode in ("two steps", "one step"):
        store, acts = await _session(f"file://{tmp_path}/{mode.replace(' ', '-')}", second)
        log = SessionLog(store, "t1", "s1")
        run = _env(RUN)
        snap = await run.run(acts.freeze_snapshot, _freeze_input(commit=mode == "one step"))
        assert commit_ready(snap.finished)
        fin = snap.finished.finish  # type: ignore[union-attr]
        if mode == "two steps":
            assert snap.committed is None and log.head().checkpoint_run != RUN
            passed_on = snap.model_copy(update={"plan": None, "finished": None})
            out = await run.run(acts.commit_record, CommitRecordInput(
                commit=CommitInput(snapshot=passed_on, policy=PolicyRef(target_tokens=TARGET),
                                   candidate_key=fin.check.candidate_key),
                record=_record_as_the_workflow_built_it(snap)))
        else:
            out = snap.committed
            assert out is not None
            before = record_before_commit(_base(), snap)
            assert list(before.durations_ms) == ["freeze_snapshot", "plan_compaction", "externalize", "lift_state",
                                                 "summarize_structured", "validate_candidate"]
            assert before.model_dump(exclude={"durations_ms"}) == \
                _record_as_the_workflow_built_it(snap).model_dump(exclude={"durations_ms"})
            [stored] = [r for r in log.list_records() if r.id == RUN]
            # the record stored is the one the workflow builds again from freeze's output
            assert stored.model_dump(exclude={"sha256"}) == \
                committed_record(before, out.commit).model_dump(exclude={"sha256"})
        head = log.head()
        assert head.checkpoint == out.commit.checkpoint_id and head.checkpoint_run == RUN
        assert out.record.key == f"t/t1/s/s1/records/{RUN}.json"
        results[mode] = (out.commit.model_dump(exclude={"ms"}), _stored(tmp_path / mode.replace(" ", "-")))
    assert results["two steps"] == results["one step"]


async def test_freeze_leaves_the_commit_to_its_step_when_it_must_not_or_cannot_commit(tmp_path):
    """No commit in the snapshot (the workflow then runs commit_record) when not asked, when this
    worker's commit steps are replaced (and freeze_snapshot is not), or when the commit fails inside
    freeze - then after the head was swapped, and commit_record's own-commit path records it."""
    store = open_store(f"file://{tmp_path}")
    log = SessionLog(store, "t1", "s1")
    log.append(coding_session())
    run = _env(RUN)
    unchanged = log.head()

    snap = await run.run(StoreActivities(store).freeze_snapshot, _freeze_input(commit=False))
    assert snap.finished is not None and snap.committed is None

    from workers.worker import _freeze_commits_of

    replaced, kept, own = StoreActivities(store), StoreActivities(store), StoreActivities(store)
    _freeze_commits_of(replaced.activities(), {"write_record"})  # (build_workers' extra_activities)
    _freeze_commits_of(kept.activities(), {"summarize_structured"})
    _freeze_commits_of(own.activities(), {"freeze_snapshot", "commit_record"})  # the chaos worker's
    assert not replaced.commits_in_freeze and kept.commits_in_freeze and own.commits_in_freeze
    snap = await run.run(replaced.freeze_snapshot, _freeze_input(commit=True))
    assert snap.finished is not None and snap.committed is None
    assert log.head().etag == unchanged.etag and log.list_records() == []

    failing = StoreActivities(store)

    def lost(*_: Any) -> Any:
        raise OSError("the record's write was lost after the commit")

    failing._write_record = lost  # type: ignore[method-assign]
    snap = await run.run(failing.freeze_snapshot, _freeze_input(commit=True))
    assert snap.finished is not None and snap.committed is None
    swapped = log.head()
    assert swapped.checkpoint_run == RUN and log.list_records() == []
    fin = snap.finished.finish  # type: ignore[union-attr]
    out = await run.run(StoreActivities(store).commit_record, CommitRecordInput(
        commit=CommitInput(snapshot=snap.model_copy(update={"plan": None, "finished": None}),
                           policy=PolicyRef(target_tokens=TARGET), candidate_key=fin.check.candidate_key),
        record=record_before_commit(_base(), snap)))
    assert out.commit.checkpoint_id == swapped.checkpoint and log.head().etag == swapped.etag
    [rec] = log.list_records()
    assert rec.status == "committed" and rec.checkpoint == swapped.checkpoint


def test_a_candidate_with_violations_is_not_committed_by_freeze():
    from activities.contracts import (
        ExternalizeFinishOutput,
        ExternalizeOutput,
        FinishStructuredOutput,
        LiftOutput,
        SummarizeOutput,
        ValidateOutput,
    )

    ext = ExternalizeOutput.model_construct(layers=["summary"], tokens_after=1, covers_end=3)
    ok = ValidateOutput.model_construct(violations=[], candidate_key="c")
    fin = FinishStructuredOutput.model_construct(lift=LiftOutput.model_construct(), summarize=SummarizeOutput.model_construct(),
                                                 check=ok)
    done = ExternalizeFinishOutput.model_construct(externalize=ext, finish=fin)
    assert commit_ready(done)
    bad = fin.model_copy(update={"check": ok.model_copy(update={"violations": ["tool pairing"]})})
    assert not commit_ready(done.model_copy(update={"finish": bad}))
    assert not commit_ready(done.model_copy(update={"finish": None})) and not commit_ready(None)
