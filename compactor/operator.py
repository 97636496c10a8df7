"""Operator reads and writes over a session log, shared by the CLI and the Python client.

Blocking (store I/O); the async client runs them in threads. Every function that names a
session raises :class:`~compactor.errors.NotFound` when it has no events, so the CLI exits 2
and the client raises the same typed error for the same missing thing.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from compactor.breaker import BreakerState
from compactor.engine.diff import CheckpointDiff, diff_checkpoint
from compactor.errors import IntegrityError, NotFound
from compactor.records import CompactionRecord, SeqRange
from compactor.store import SessionLog

class CheckpointInfo(BaseModel):
    id: str
    covers: SeqRange
    covers_end: int = 0
    based_on: str | None = None
    summarizer: str = "structured"
    summary_tokens: int = 0
    snapshot_version: int = 0
    created_at: datetime | None = None
    artifacts: list[str] = Field(default_factory=list)
    current: bool = Field(default=False, description="The head points at it.")


class SessionReport(BaseModel):
    """``inspect``: the head, every checkpoint and every compaction record of a session."""

    tenant: str
    session: str
    store: str
    version: int = Field(description="Head version (= last seq).")
    checkpoint: str | None = Field(description="Checkpoint the head points at (None: whole log).")
    segments: int = 0
    updated_at: datetime | None = None
    head: dict[str, Any] = Field(default_factory=dict, description="The head manifest without its "
                                 "segment list (version, checkpoint, digests, etag).")
    checkpoints: list[CheckpointInfo] = Field(default_factory=list)
    records: list[CompactionRecord] = Field(default_factory=list)


class RollbackResult(BaseModel):
    tenant: str
    session: str
    from_checkpoint: str | None
    to_checkpoint: str | None
    version: int
    changed: bool = Field(description="False when the head already pointed there.")
    digest_recorded: bool = Field(default=True, description="False for a legacy checkpoint with no "
                                  "recorded sha256 (its current bytes became the reference).")


def require(log: SessionLog) -> Any:
    """The session's head; NotFound (exit 2) when the session has no events."""
    head = log.head()
    if head.etag is None or head.version == 0:
        raise NotFound(
            f"no session {log.session!r} for tenant {log.tenant!r} in {log.store.url}; "
            f"list them with `compactor sessions --tenant {log.tenant}`",
            tenant=log.tenant, session=log.session,
        )
    return head


def inspect_session(log: SessionLog) -> SessionReport:
    """Head, checkpoints (verified against recorded digests) and records of one session."""
    head = require(log)
    recs = log.list_records()  # each verified against its self-digest
    digests = {r.checkpoint: r.checkpoint_sha256 for r in recs if r.checkpoint and r.checkpoint_sha256}
    if head.checkpoint and head.checkpoint_sha256:
        digests[head.checkpoint] = head.checkpoint_sha256
    ckpts = log.list_checkpoints(digests, slim=True)  # a report: no lifted state built
    log.current_checkpoint(head, slim=True)  # its range must lie inside the version
    return SessionReport(
        tenant=log.tenant, session=log.session, store=log.store.url, version=head.version,
        checkpoint=head.checkpoint, segments=len(head.segments), updated_at=head.updated_at,
        head=head.model_dump(mode="json", exclude={"segments"}),
        checkpoints=[CheckpointInfo(
            id=c.id, covers=c.covers, covers_end=0 if c.covers.empty else c.covers.end, based_on=c.based_on,
            summarizer=c.summarizer, summary_tokens=c.summary_tokens,
            snapshot_version=c.snapshot_version, created_at=c.created_at, artifacts=list(c.artifacts),
            current=c.id == head.checkpoint) for c in ckpts],
        records=recs,
    )


def records(log: SessionLog) -> list[CompactionRecord]:
    """The session's compaction records, oldest first."""
    require(log)
    return log.list_records()  # oldest first (created_at, then id)


def rollback(log: SessionLog, to: str | None, *, force: bool = False) -> RollbackResult:
    """Point the head at checkpoint ``to`` (None: no checkpoint); writes a ``rolled_back``
    record. Nothing is deleted. NotFound for an unknown session or checkpoint.

    A log whose segments are damaged (missing, altered, unparsable) is refused with
    IntegrityError unless ``force``: the view after the rollback would be read from them, and
    a fresh head would hide the damage. Damage to the current checkpoint is what a rollback
    moves away from, so it does not block (a damaged target is refused when it is read).
    """
    head = require(log)
    if not force:
        _refuse_damaged(log, head)
    digest = None
    if to is not None:
        log.read_checkpoint_slim(to)  # NotFound names the checkpoint (its lifted state unused)
        # The digest its record (or the head) holds; legacy checkpoints have none.
        digest = log.recorded_checkpoint_sha256(to, head)
    if head.checkpoint == to:
        return RollbackResult(tenant=log.tenant, session=log.session, from_checkpoint=to, to_checkpoint=to,
                              version=head.version, changed=False)
    new = log.set_checkpoint(to, expected_etag=head.etag, sha256=digest, slim=True)
    now = datetime.now(timezone.utc)
    log.write_record(CompactionRecord(
        id=f"rollback-{now.strftime('%Y%m%dT%H%M%S%f')}", tenant=log.tenant, session=log.session,
        trigger="rollback", checkpoint=to, checkpoint_sha256=new.checkpoint_sha256,
        snapshot_version=head.version, committed_version=new.version, status="rolled_back",
        error=f"rolled back from {head.checkpoint or 'none'} to {to or 'none'}", created_at=now,
    ))
    return RollbackResult(tenant=log.tenant, session=log.session, from_checkpoint=head.checkpoint,
                          to_checkpoint=to, version=new.version, changed=True,
                          digest_recorded=to is None or digest is not None)


def _refuse_damaged(log: SessionLog, head: Any) -> None:
    from compactor.store.verify import verify_session

    segments = f"{log.prefix}log/"
    blocking = [f for f in verify_session(log).problems if f.key.startswith(segments)]
    if blocking:
        n = len(blocking)
        raise IntegrityError(
            f"session {log.tenant}/{log.session} is damaged ({n} problem{'s' if n != 1 else ''}, "
            f"first: {blocking[0].key}); nothing was changed; see `compactor verify "
            f"{log.session}` and restore from a backup, or roll back anyway with --force",
            key=blocking[0].key,
        )


def breaker(log: SessionLog, *, clear_by: str | None = None) -> BreakerState:
    """The session's circuit breaker (a closed one when it never failed); ``clear_by`` closes it."""
    from activities.breaker import clear_breaker, load_breaker

    # A stored breaker is answered even when the log is gone; neither is a not-found.
    st, _ = load_breaker(log.store, log.tenant, log.session, corrupt_ok=clear_by is not None)
    if st is None:
        require(log)
    if clear_by is not None:
        return clear_breaker(log.store, log.tenant, log.session, by=clear_by)
    return st or BreakerState(tenant=log.tenant, session=log.session)


def checkpoint_diff(log: SessionLog, checkpoint: str | None = None) -> CheckpointDiff:
    """What ``checkpoint`` (default: the current one) replaced and what its summary kept."""
    head = require(log)
    ckpt_id = checkpoint or head.checkpoint
    if ckpt_id is None:
        raise NotFound(f"session {log.tenant}/{log.session} has no checkpoint yet; compact it with "
                       f"`compactor compact {log.session}` or name one (`compactor inspect {log.session}`)")
    ckpt = log.read_checkpoint(ckpt_id, log.recorded_checkpoint_sha256(ckpt_id, head))
    prev = log.read_checkpoint(ckpt.based_on) if ckpt.based_on else None
    last = max(ckpt.snapshot_version, 0 if ckpt.covers.empty else ckpt.covers.end) or head.version
    events = log.read_events(1, min(last, head.version), head=head)
    return diff_checkpoint(events, ckpt, prev)
