"""commit_record (commit_swap + write_record in one step) called directly (no Temporal): it
leaves what the two steps leave, and a retry whose commit went through takes commit_swap's
own-commit path, then writes the record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from activities.contracts import (
    ActivityName,
    CommitInput,
    CommitRecordInput,
    RecordInput,
    committed_record,
)
from activities.store_activities import StoreActivities
from compactor.events import Event, TextBlock
from compactor.records import CompactionRecord
from compactor.store import SessionLog, open_store
from tests.integration.durable_support import coding_session
from tests.unit.test_store_activities import _candidate, _env


def _record(run: str, version: int) -> CompactionRecord:
    """A running record as the workflow holds it before the commit (durations so far)."""
    return CompactionRecord(
        id=run, tenant="t1", session="s1", workflow_id="compact/t1/s1", trigger="manual", policy="default",
        summarizer="structured", status="running", snapshot_version=version, tokens_before=9_000,
        tokens_after=3_000, durations_ms={"freeze_snapshot": 4.0, "externalize": 30.0}, attempts=1,
    )


def _stored(root: Any) -> dict[str, Any]:
    """Every object of the store, parsed where it is JSON, without what differs between runs
    (wall-clock times, durations, the record's digest over them, the log's random id)."""
    store = open_store(f"file://{root}")
    out: dict[str, Any] = {}
    for key in store.list("t/"):
        data = store.get(key)[0]
        try:
            doc = json.loads(data)
        except ValueError:
            out[key] = data
            continue
        if "/records/" in key:
            for k in ("durations_ms", "sha256"):
                doc.pop(k, None)
        if key.endswith("/head.json"):
            doc.pop("log_id")  # random per session log
        out[key] = _timeless(doc)
    return out


def _timeless(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _timeless(v) for k, v in doc.items() if k not in ("at", "created_at", "updated_at")}
    if isinstance(doc, list):
        return [_timeless(v) for v in doc]
    return doc


async def _ready(root: Any) -> tuple[Any, SessionLog, StoreActivities, CommitInput, CompactionRecord]:
    """A session at root with a validated candidate: (store, log, activities, the commit's input,
    the running record of run-a)."""
    store = open_store(f"file://{root}")
    log = SessionLog(store, "t1", "s1")
    log.append(coding_session())
    acts = StoreActivities(store)
    snap, pol, val = await _candidate(acts, "t1", "s1")
    return store, log, acts, CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key), \
        _record("run-a", snap.version)


async def test_commit_record_leaves_what_commit_swap_then_write_record_leave(tmp_path):
    results = {}
    for how in ("two steps", "one step"):
        store, log, acts, commit_in, rec = await _ready(tmp_path / how)
        run = _env("run-a")
        if how == "two steps":
            commit = await run.run(acts.commit_swap, commit_in)
            written = await run.run(acts.write_record, RecordInput(record=committed_record(rec, commit),
                                                                   count_breaker=True))
        else:
            out = await run.run(acts.commit_record, CommitRecordInput(commit=commit_in, record=rec))
            commit, written = out.commit, out.record
        [stored] = log.list_records()
        # the record written is the one the workflow builds from the same inputs
        assert stored.model_dump(exclude={"sha256"}) == committed_record(rec, commit).model_dump(exclude={"sha256"})
        assert stored.status == "committed" and stored.checkpoint == commit.checkpoint_id == log.head().checkpoint
        assert stored.durations_ms[str(ActivityName.COMMIT_SWAP)] == round(commit.ms, 3)
        assert written.key == "t/t1/s/s1/records/run-a.json"
        results[how] = (commit.model_dump(exclude={"ms"}), _stored(tmp_path / how))
    assert results["two steps"] == results["one step"]
    # (the breaker was counted by both: a success leaves no breaker object with failures)


async def test_a_retry_whose_commit_went_through_reports_that_commit_and_records_it(tmp_path):
    """The worker 'dies' after the commit, before the record (the record's write fails); the
    agent appends meanwhile; the step's retry finds the run's own commit on the head (no second
    checkpoint, no second swap) and writes the record of that commit."""
    store, log, acts, commit_in, rec = await _ready(tmp_path)
    run = _env("run-a")
    inp = CommitRecordInput(commit=commit_in, record=rec)

    def crash(*_: Any) -> None:
        raise OSError("worker lost after the commit")

    acts._write_record = crash  # type: ignore[method-assign]
    with pytest.raises(OSError, match="after the commit"):
        await run.run(acts.commit_record, inp)
    del acts._write_record
    committed = log.head()
    assert committed.checkpoint_run == "run-a" and committed.checkpoint is not None
    assert log.list_records() == []
    ckpts = store.list("t/t1/s/s1/ckpt/")
    log.append([Event(id="meanwhile", role="assistant", blocks=[TextBlock(text="still working")])])
    moved = log.head()

    retry = await run.run(acts.commit_record, inp)
    assert retry.commit.checkpoint_id == committed.checkpoint
    assert retry.commit.checkpoint_sha256 == committed.checkpoint_sha256
    # the own-commit path: nothing swapped or written again
    assert log.head().etag == moved.etag and store.list("t/t1/s/s1/ckpt/") == ckpts
    [rec] = log.list_records()
    assert rec.status == "committed" and rec.checkpoint == committed.checkpoint
    assert rec.model_dump(exclude={"sha256"}) == committed_record(inp.record, retry.commit).model_dump(exclude={"sha256"})
    # another run with the same inputs is not this run: its commit is refused, nothing changes
    from temporalio.exceptions import ApplicationError

    with pytest.raises(ApplicationError):
        await _env("run-b").run(acts.commit_record, inp)
    assert log.head().etag == moved.etag and len(log.list_records()) == 1


async def test_a_worker_given_a_replacement_commit_swap_composes_commit_record_from_it(tmp_path):
    from workers.worker import _activity_name, _commit_record_of

    store, log, acts, commit_in, rec = await _ready(tmp_path)
    calls: list[str] = []
    from temporalio import activity

    @activity.defn(name="commit_swap")
    async def commit_swap(inp: CommitInput):  # noqa: ANN202
        calls.append(inp.candidate_key)
        return await acts.commit_swap(inp)

    registered = [a for a in acts.activities() if _activity_name(a) != "commit_swap"] + [commit_swap]
    composed = _commit_record_of(registered, {"commit_swap"})
    [step] = [a for a in composed if _activity_name(a) == "commit_record"]
    assert step is not acts.commit_record
    out = await _env("run-a").run(step, CommitRecordInput(commit=commit_in, record=rec))
    assert calls == [commit_in.candidate_key]
    [stored] = log.list_records()
    assert stored.checkpoint == out.commit.checkpoint_id == log.head().checkpoint
    # nothing replaced: the class's own step stays
    assert _commit_record_of(acts.activities(), set()) == acts.activities()
