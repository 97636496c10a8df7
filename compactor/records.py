"""Stored records beside the events: head manifest, checkpoints, compaction records.

Durable contracts (they sit in object storage for the life of a session): new fields are
optional with defaults.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from compactor.events import Block


class Segment(BaseModel):
    model_config = ConfigDict(frozen=True)

    first: int = Field(ge=1)
    last: int = Field(ge=1)
    key: str
    sha256: str = Field(description="Hex sha256 of the segment bytes; verified on read.")
    bytes: int = Field(default=0, ge=0, description="Size of the segment in bytes (merge planning).")
    pinned: list[int] = Field(
        default_factory=list, description="Seqs of pinned events in this segment (view reads)."
    )


def session_prefix(tenant: str, session: str) -> str:
    """Where every object of one session lives: ``t/{tenant}/s/{session}/``."""
    return f"t/{tenant}/s/{session}/"


def foreign_segment(key: str, tenant: str, session: str) -> str | None:
    """Why a segment key does not belong to the session's log (None when it does).

    A head is only trusted to name objects under its own session's ``log/`` prefix: a key
    anywhere else (another session or tenant, a key with ``..`` or a nested path) is refused
    before any I/O, so the answer is the same whether that object exists or not.
    """
    base = session_prefix(tenant, session) + "log/"
    name = key[len(base):] if isinstance(key, str) and key.startswith(base) else None
    if not name or "/" in name or "\\" in name or "\x00" in name or name in (".", ".."):
        return f"segment key {key!r} lies outside the session's log {base!r}"
    return None


class Head(BaseModel):
    """The session's manifest, the compare-and-swap target. ``version`` is the last seq."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    session: str
    version: int = 0
    checkpoint: str | None = Field(default=None, description="Current checkpoint id, or none.")
    checkpoint_sha256: str | None = Field(
        default=None,
        description="Hex sha256 of the stored checkpoint's bytes; verified when it is read. None "
        "on heads written before checkpoints were verified (read, reported as unverified).",
    )
    checkpoint_run: str | None = Field(
        default=None,
        description="Workflow run id that set ``checkpoint`` (None for inline compactions, "
        "rollbacks and older heads). A compaction run re-executed after a lost worker finds "
        "its own commit by it and reports it instead of committing a second checkpoint.",
    )
    segments: list[Segment] = Field(default_factory=list)
    log_id: str | None = Field(
        default=None,
        description="Random id given when the log is created; process caches key on it, so a "
        "session deleted and re-created under the same name never reuses stale cache entries.",
    )
    etag: str | None = Field(default=None, description="Store etag it was read with (not stored).")
    updated_at: datetime | None = None
    view_tokens: int | None = Field(
        default=None,
        description="Tokens of the view (measure.view_tokens without request repairs): + the "
        "appended events' count_event on every append, the committed view's count on every "
        "swap. Lets a sweep decide from this one small object. None on heads written before it "
        "(and after a rollback) until the next swap: readers then count the view.",
    )
    noop_view_tokens: int | None = Field(
        default=None,
        description="view_tokens when the last compaction could not shrink the view (noop). "
        "Sweeps and ensure_budget do not start another until the view has grown past it "
        "(policy.has_grown); cleared by the next swap.",
    )

    def integrity_problems(self) -> list[str]:
        """What is inconsistent in this manifest on its own (no I/O); empty when sound.

        The segments must cover 1..version without gap or overlap: every writer sets the
        version to the last seq it listed, so any difference means the head was edited.
        """
        out: list[str] = []
        for s in self.segments:
            why = foreign_segment(s.key, self.tenant, self.session)
            if why:
                out.append(why)
        expect = 1
        for s in self.segments:
            if s.first != expect or s.last < s.first:
                out.append(
                    f"segment {s.key!r} holds events {s.first}-{s.last}, expected it to start "
                    f"at {expect} (the manifest has a gap or an overlap)"
                )
                break
            expect = s.last + 1
        last = self.segments[-1].last if self.segments else 0
        if self.version != last:
            out.append(f"version {self.version} differs from the last listed seq {last}")
        if self.checkpoint_sha256 is not None and self.checkpoint is None:
            out.append("a checkpoint digest without a checkpoint")
        return out


class SeqRange(BaseModel):
    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=1)
    end: int = Field(ge=0, description="Inclusive; end < start means an empty range.")

    @property
    def empty(self) -> bool:
        return self.end < self.start


class Checkpoint(BaseModel):
    """What replaces a range of the log in the view.

    View = pinned events (verbatim, in order) + the summary message (if ``covers`` is not
    empty) + every event after ``covers.end``, where an event whose seq is in ``replacements``
    is shown with those blocks instead (externalized or cleared tool results: layers a/b).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    tenant: str
    session: str
    covers: SeqRange
    summary: str = Field(default="", description="Rendered summary text shown in the view.")
    sections: dict[str, Any] = Field(default_factory=dict, description="Structured sections.")
    native: dict[str, Any] | None = Field(
        default=None, description="Provider compaction block replayed verbatim (anthropic-native)."
    )
    state: dict[str, Any] = Field(default_factory=dict, description="Lifted state (lift.LiftedState).")
    replacements: dict[int, list[Block]] = Field(
        default_factory=dict, description="seq -> blocks shown instead, for events after covers."
    )
    artifacts: list[str] = Field(default_factory=list, description="sha256 of artifacts referenced.")
    based_on: str | None = None
    source_hash: str = Field(default="", description="content_hash of the covered events.")
    snapshot_version: int = Field(default=0, description="Head version the snapshot was taken at.")
    summarizer: str = "structured"
    summary_tokens: int = 0
    created_at: datetime | None = None

    @model_validator(mode="after")
    def _check(self) -> Checkpoint:
        if not self.covers.empty and self.covers.start != 1:
            raise ValueError("a checkpoint covers a prefix of the log: covers.start must be 1")
        return self


CompactionStatus = Literal["committed", "noop", "failed", "rolled_back", "running"]


class StepTiming(BaseModel):
    step: str
    ms: float
    attempts: int = 1


class CompactionRecord(BaseModel):
    """One per compaction run: what was done and why. Persisted and exported."""

    id: str = Field(description="Workflow run id, or an inline id.")
    tenant: str
    session: str
    workflow_id: str | None = None
    trigger: str = "manual"
    policy: str = "default"
    checkpoint: str | None = None
    covers: SeqRange | None = None
    snapshot_version: int = 0
    committed_version: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    target_tokens: int = 0
    summary_tokens: int = 0
    retained_tail_tokens: int = 0
    layers: list[str] = Field(default_factory=list)
    freed_by_layer: dict[str, int] = Field(default_factory=dict)
    artifacts_written: int = 0
    attempts: int = 1
    conflicts_merged: int = 0
    reconciled: list[str] = Field(default_factory=list)
    summarizer: str = "structured"
    fallback_reason: str | None = None
    mid_turn: bool = Field(
        default=False,
        description="The cut falls inside the current turn (past the latest request), which the "
        "summary quotes in full (DESIGN §5, mid-turn compaction).",
    )
    left_out: dict[str, int] = Field(
        default_factory=dict, description="Summary section -> state items left out for space."
    )
    repairs: list[str] = Field(
        default_factory=list,
        description="What was repaired in the candidate instead of abandoning it (e.g. items "
        "dropped for naming an identifier the covered range lacks); counts, never text.",
    )
    irreducible_tokens: dict[str, int] = Field(
        default_factory=dict,
        description="When over budget: tokens of what no compaction may remove (pinned events, "
        "the latest request, pending calls and their turn).",
    )
    llm_calls: list[dict[str, Any]] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)
    status: CompactionStatus = "committed"
    error: str | None = None
    durations_ms: dict[str, float] = Field(default_factory=dict)
    created_at: datetime | None = None
    checkpoint_sha256: str | None = Field(
        default=None,
        description="Hex sha256 of the committed checkpoint's stored bytes (what the head "
        "recorded), so a rollback to it later can verify it.",
    )
    sha256: str | None = Field(
        default=None,
        description="Self-digest, set when stored: sha256 of the record's canonical JSON "
        "without this field (records.record_digest). None on records written before.",
    )


def canonical_json(obj: Any) -> bytes:
    """Stable bytes for a JSON value: sorted keys, no spaces, ASCII (so any text encodes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def record_digest(doc: dict[str, Any]) -> str:
    """The self-digest of a stored record document: sha256 of its canonical JSON without
    ``sha256``. Computed over the stored JSON, not the model, so records stay verifiable when
    the model gains fields."""
    body = {k: v for k, v in doc.items() if k != "sha256"}
    return hashlib.sha256(canonical_json(body)).hexdigest()
