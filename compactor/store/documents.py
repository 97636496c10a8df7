"""A session's immutable documents: checkpoints, compaction records and artifacts.

``SessionLog`` (``compactor.store.log``) is the append-only log of events and its head; this
mixin holds what is stored beside it and never overwritten (layout and verification: the
``log`` module's docstring). Checkpoints are verified against the digest the head or a record
holds, records against their self-digest, artifacts against their address.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime, timezone

from pydantic import BaseModel, ValidationError

from compactor.errors import (
    BucketNotFound,
    ConcurrentModification,
    IntegrityError,
    InvalidId,
    InvalidInput,
    NotFound,
    PreconditionFailed,
)
from compactor.events import ArtifactRefBlock
from compactor.records import Checkpoint, CompactionRecord, Head, record_digest
from compactor.store.base import ObjectStore, read_bytes, write_bytes
from compactor.store.caches import _verified_ckpt
from compactor.store.ckpt_slim import parse_slim
from compactor.store.ids import HEX64, parse_problem, sha256_hex, utc_now, validate_id


class SessionDocuments:
    """Checkpoints, records and artifacts of one session (a mixin of ``SessionLog``, which
    provides the attributes and the head's read and CAS write named here)."""

    store: ObjectStore
    tenant: str
    session: str
    prefix: str
    head_key: str
    max_attempts: int
    _ckpts: dict[str, tuple[Checkpoint, str]]
    _slim_ckpts: dict[str, tuple[Checkpoint, str]]
    _last_head: Head | None
    _lock: threading.RLock

    def head(self) -> Head:  # pragma: no cover - SessionLog's
        raise NotImplementedError

    def _put_head(self, head: Head, expected: str | None) -> str:  # pragma: no cover - SessionLog's
        raise NotImplementedError

    def _backoff(self, attempt: int) -> None:  # pragma: no cover - SessionLog's
        raise NotImplementedError

    # --- checkpoints ------------------------------------------------------------------------
    def _ckpt_key(self, ckpt_id: str) -> str:
        return f"{self.prefix}ckpt/{validate_id(ckpt_id, 'checkpoint id')}.json"

    def read_checkpoint(self, ckpt_id: str, sha256: str | None = None) -> Checkpoint:
        """A stored checkpoint; with ``sha256``, its bytes must hash to it (IntegrityError)."""
        key = self._ckpt_key(ckpt_id)
        hit = self._ckpts.get(ckpt_id)
        if hit is not None and (sha256 is None or hit[1] == sha256):
            return hit[0]
        if sha256 is not None:
            shared = _verified_ckpt((self.store.url, key, sha256))
            if shared is not None:
                self._ckpts[ckpt_id] = (shared, sha256)
                return shared
        data, digest = self._checkpoint_bytes(ckpt_id, key, sha256)
        ckpt = self._owned_checkpoint(ckpt_id, key, data, Checkpoint.model_validate_json)
        self._ckpts[ckpt_id] = (ckpt, digest)
        if sha256 is not None:
            _verified_ckpt((self.store.url, key, sha256), ckpt)
        return ckpt

    def read_checkpoint_slim(self, ckpt_id: str, sha256: str | None = None) -> Checkpoint:
        """``read_checkpoint`` for readers that show a view or a report: the same checks and
        fields, but ``state`` holds only ``unknown_actions`` (``store.ckpt_slim``: a huge
        session's lifted state is never built). Kept apart from full checkpoints' caches."""
        key = self._ckpt_key(ckpt_id)
        for cache in (self._ckpts, self._slim_ckpts):
            hit = cache.get(ckpt_id)
            if hit is not None and (sha256 is None or hit[1] == sha256):
                return hit[0]
        if sha256 is not None:
            shared = _verified_ckpt((self.store.url, key, sha256))
            if shared is not None:
                return shared
        data, digest = self._checkpoint_bytes(ckpt_id, key, sha256)
        ckpt = self._owned_checkpoint(ckpt_id, key, data, parse_slim)
        self._slim_ckpts[ckpt_id] = (ckpt, digest)
        return ckpt

    def _checkpoint_bytes(self, ckpt_id: str, key: str, sha256: str | None) -> tuple[bytes, str]:
        """A checkpoint's stored bytes and their digest, which must be ``sha256`` if given."""
        try:
            data = read_bytes(self.store, key)
        except BucketNotFound:
            raise
        except NotFound:
            raise NotFound(
                f"no checkpoint {ckpt_id!r} in session {self.tenant}/{self.session}", key=key
            ) from None
        digest = sha256_hex(data)
        if sha256 is not None and digest != sha256:
            raise IntegrityError(
                f"checkpoint {key!r} in {self.store.url} does not match the sha256 "
                f"{sha256[:16]}... recorded for it: the stored bytes were changed outside "
                f"compactor - nothing was written; restore it from a backup or roll the "
                f"session back to another checkpoint (compactor rollback)",
                key=key,
            )
        return data, digest

    def _owned_checkpoint(self, ckpt_id: str, key: str, data: bytes,
                          parse: Callable[[bytes], Checkpoint]) -> Checkpoint:
        """``parse(data)``, which must parse and name this session's ``ckpt_id``."""
        try:
            ckpt = parse(data)
        except ValidationError as exc:
            raise IntegrityError(f"checkpoint {key!r} does not parse: {parse_problem(exc)}", key=key) from None
        if (ckpt.id, ckpt.tenant, ckpt.session) != (ckpt_id, self.tenant, self.session):
            raise IntegrityError(
                f"checkpoint {key!r} names {ckpt.tenant}/{ckpt.session}/{ckpt.id}", key=key
            )
        return ckpt

    def checkpoint_sha256(self, ckpt_id: str) -> str:
        """The sha256 of a checkpoint's stored bytes (as this object wrote or read them)."""
        hit = self._ckpts.get(ckpt_id) or self._slim_ckpts.get(ckpt_id)
        if hit is None:
            self.read_checkpoint(ckpt_id)
            hit = self._ckpts[ckpt_id]
        return hit[1]

    def current_checkpoint(self, head: Head | None = None, *, slim: bool = False) -> Checkpoint | None:
        """The head's checkpoint, verified: its digest (unless a legacy head has none) and its
        range, which must end at or before the head's version (IntegrityError otherwise).
        ``slim``: as ``read_checkpoint_slim`` reads it (for views and reports)."""
        head = head or self.head()
        if not head.checkpoint:
            return None
        read = self.read_checkpoint_slim if slim else self.read_checkpoint
        ckpt = read(head.checkpoint, head.checkpoint_sha256)
        if not ckpt.covers.empty and ckpt.covers.end > head.version:
            raise IntegrityError(
                f"head {self.head_key!r} in {self.store.url} is at version {head.version} but "
                f"its checkpoint {head.checkpoint!r} covers events 1-{ckpt.covers.end}: the head "
                f"was changed outside compactor - nothing was written; run "
                f"`compactor verify {self.session}` and restore it from a backup",
                key=self.head_key,
                checkpoint=self._ckpt_key(head.checkpoint),
            )
        return ckpt

    def write_checkpoint(self, ckpt: Checkpoint) -> str:
        """Store an immutable checkpoint; returns its key. Same content again is a no-op."""
        key = self._ckpt_key(ckpt.id)
        self._check_owner(ckpt.tenant, ckpt.session, "checkpoint")
        digest = self._put_immutable(key, ckpt.model_dump_json().encode(), Checkpoint)
        self._ckpts[ckpt.id] = (ckpt, digest)
        return key

    def recorded_checkpoint_sha256(self, ckpt_id: str, head: Head | None = None) -> str | None:
        """The digest recorded for a checkpoint: by the head if it is current, else by the
        (verified) compaction records that committed it; None if only legacy objects name it."""
        head = head or self.head()
        if head.checkpoint == ckpt_id and head.checkpoint_sha256:
            return head.checkpoint_sha256
        for rec in reversed(self.list_records()):
            if rec.checkpoint == ckpt_id and rec.checkpoint_sha256:
                return rec.checkpoint_sha256
        return None

    def set_checkpoint(
        self,
        ckpt_id: str | None,
        *,
        expected_etag: str | None,
        sha256: str | None = None,
        run: str | None = None,
        head: Head | None = None,
        view_tokens: int | None = None,
        slim: bool = False,
    ) -> Head:
        """Point the head at ``ckpt_id`` (or none) by CAS; the head records its digest.

        ``expected_etag`` is the head etag the caller decided on; PreconditionFailed if the head
        moved since. ``None`` means "whatever the head is now" (read-modify-write, retried).
        ``sha256``: the digest the checkpoint must have (a rollback passes the one its record
        holds); without it, the bytes this object wrote or read are the reference.
        ``run``: the workflow run that commits (``Head.checkpoint_run``), so a re-execution of
        that run recognizes its own commit. ``head``: the head the caller just read at
        ``expected_etag`` (saves a GET; the CAS still guards it).
        ``view_tokens``: the new view's size (measure.view_tokens, at the head version the
        caller decided on); None leaves the head's count unknown until the next swap.
        ``slim``: the checkpoint is checked as ``read_checkpoint_slim`` reads it (a rollback,
        which never uses its lifted state; the same integrity and ownership checks).
        """
        if ckpt_id is not None:
            self._ckpt_key(ckpt_id)  # validate before I/O
        for attempt in range(self.max_attempts):
            given = attempt == 0 and head is not None and head.etag == expected_etag and expected_etag
            head = head if given else self.head()
            assert head is not None
            if expected_etag is not None and head.etag != expected_etag:
                raise PreconditionFailed(
                    f"head of {self.tenant}/{self.session} moved (expected etag {expected_etag}, "
                    f"found {head.etag}); re-read the session and try again",
                    key=self.head_key,
                )
            # The current checkpoint is not checked here on purpose: moving the head off a
            # damaged checkpoint (rollback) is how an operator recovers from one.
            digest = None
            if ckpt_id is not None:
                ck = (self.read_checkpoint_slim if slim else self.read_checkpoint)(ckpt_id, sha256)
                digest = self.checkpoint_sha256(ckpt_id) if sha256 is None else sha256
                if ck.covers.end > head.version:
                    raise InvalidInput(
                        f"checkpoint {ckpt_id} covers up to seq {ck.covers.end}, beyond the "
                        f"session's version {head.version}",
                    )
            new = head.model_copy(update={
                "checkpoint": ckpt_id, "checkpoint_sha256": digest, "updated_at": utc_now(), "etag": None,
                "checkpoint_run": run if ckpt_id is not None else None,
                # A count for another version would be wrong, and a swap changes what the
                # view is: the noop mark no longer applies.
                "view_tokens": view_tokens if expected_etag is not None else None,
                "noop_view_tokens": None,
            })
            try:
                etag = self._put_head(new, head.etag)
            except PreconditionFailed:
                cur = self.head()
                if (
                    cur.checkpoint == ckpt_id
                    and cur.checkpoint_sha256 == digest
                    and cur.checkpoint_run == new.checkpoint_run
                    and cur.version == head.version
                    and cur.segments == head.segments
                ):
                    return cur  # our retried request landed
                if expected_etag is not None:
                    raise PreconditionFailed(
                        f"head of {self.tenant}/{self.session} moved while setting the "
                        f"checkpoint; re-read the session and try again",
                        key=self.head_key,
                    ) from None
                self._backoff(attempt)
                continue
            self._last_head = new.model_copy(update={"etag": etag})
            return self._last_head
        raise ConcurrentModification(
            f"session {self.tenant}/{self.session}: the head kept moving while setting the "
            f"checkpoint ({self.max_attempts} attempts); retry",
        )

    def mark_noop(self, version: int, view_tokens: int) -> Head | None:
        """Note on the head that a compaction of ``version`` could not shrink the view.

        Only while the head is still at ``version`` (events appended since: the view has
        grown, nothing to note). The mark is the head's own count when it has one. Returns the
        new head, or None when nothing was written.
        """
        for attempt in range(self.max_attempts):
            head = self.head()
            if head.version != version:
                return None
            mark = head.view_tokens if head.view_tokens is not None else view_tokens
            if head.noop_view_tokens == mark:
                return head
            new = head.model_copy(update={"noop_view_tokens": mark, "updated_at": utc_now(), "etag": None})
            try:
                etag = self._put_head(new, head.etag)
            except PreconditionFailed:
                self._backoff(attempt)
                continue
            self._last_head = new.model_copy(update={"etag": etag})
            return self._last_head
        return None

    def list_checkpoints(self, digests: dict[str, str] | None = None, *, slim: bool = False) -> list[Checkpoint]:
        """Every stored checkpoint; those in ``digests`` (id -> sha256) are verified.
        ``slim``: as ``read_checkpoint_slim`` reads them (for reports)."""
        digests = digests or {}
        read = self.read_checkpoint_slim if slim else self.read_checkpoint
        out = []
        for key in self.store.list(f"{self.prefix}ckpt/"):
            name = key.rsplit("/", 1)[-1]
            if name.endswith(".json"):
                ckpt_id = name[: -len(".json")]
                out.append(read(ckpt_id, digests.get(ckpt_id)))
        return sorted(out, key=lambda c: (c.created_at or datetime.min.replace(tzinfo=timezone.utc), c.id))

    # --- records ----------------------------------------------------------------------------
    def write_record(self, rec: CompactionRecord) -> str:
        """Store a compaction record (immutable; same content again is a no-op); returns its key."""
        key = f"{self.prefix}records/{validate_id(rec.id, 'record id')}.json"
        self._check_owner(rec.tenant, rec.session, "record")
        doc = json.loads(rec.model_dump_json(exclude={"sha256"}))
        sealed = rec.model_copy(update={"sha256": record_digest(doc)})
        self._put_immutable(key, sealed.model_dump_json().encode(), CompactionRecord)
        return key

    def supersede_record(self, rec: CompactionRecord) -> str:
        """Replace the record an earlier execution of the same run wrote, unless it says
        committed; returns its key.

        A workflow task lost with its worker is executed again from its last recorded point;
        the record of the lost execution (a noop or a failure: it changed nothing) is not the
        run's outcome when the re-execution, on a newer snapshot, decided otherwise. A committed
        record stands: the head names its run, and a re-execution reports that commit.
        """
        key = f"{self.prefix}records/{validate_id(rec.id, 'record id')}.json"
        data, etag = self.store.get(key)
        if self.read_record(key, data).status == "committed":
            return key
        doc = json.loads(rec.model_dump_json(exclude={"sha256"}))
        sealed = rec.model_copy(update={"sha256": record_digest(doc)})
        self.store.put(key, sealed.model_dump_json().encode(), if_match=etag)
        return key

    def read_record(self, key: str, data: bytes | None = None) -> CompactionRecord:
        """A stored record, verified against its self-digest (legacy records have none), and
        its tenant and session against its key."""
        base = f"{self.prefix}records/"
        if not key.startswith(base) or "/" in key[len(base):]:
            raise IntegrityError(f"record key {key!r} lies outside {base!r}", key=key)
        if data is None:
            data = read_bytes(self.store, key)
        try:
            doc = json.loads(data)
            rec = CompactionRecord.model_validate(doc)
        except (ValueError, ValidationError) as exc:
            raise IntegrityError(f"record {key!r} does not parse: {parse_problem(exc)}", key=key) from None
        if rec.sha256 is not None and record_digest(doc) != rec.sha256:
            raise IntegrityError(
                f"record {key!r} in {self.store.url} does not match its sha256 "
                f"{rec.sha256[:16]}...: it was changed outside compactor; restore it from a backup",
                key=key,
            )
        if (rec.tenant, rec.session) != (self.tenant, self.session):
            raise IntegrityError(
                f"record {key!r} in {self.store.url} names session {rec.tenant}/{rec.session}, "
                f"not {self.tenant}/{self.session}: it was copied here from another session; "
                f"remove it or restore the session from a backup",
                key=key,
            )
        return rec

    def list_records(self) -> list[CompactionRecord]:
        out = []
        for key in self.store.list(f"{self.prefix}records/"):
            if key.endswith(".json"):
                out.append(self.read_record(key))
        return sorted(out, key=lambda r: (r.created_at or datetime.min.replace(tzinfo=timezone.utc), r.id))

    # --- artifacts --------------------------------------------------------------------------
    def _artifact_key(self, sha256: str) -> str:
        if not isinstance(sha256, str) or not HEX64.fullmatch(sha256):
            raise InvalidId(f"invalid artifact sha256 {sha256!r}: expected 64 lowercase hex digits")
        return f"t/{self.tenant}/a/sha256/{sha256}"

    def put_artifact(
        self,
        data: bytes,
        media_type: str = "text/plain",
        *,
        preview_head: int = 300,
        preview_tail: int = 300,
    ) -> ArtifactRefBlock:
        """Store bytes under their sha256 (idempotent) and return a reference with previews."""
        digest = sha256_hex(data)
        key = self._artifact_key(digest)
        try:
            write_bytes(self.store, key, data, if_none_match=True)
        except PreconditionFailed:
            existing, _ = self.store.get(key)
            if existing != data:
                raise IntegrityError(
                    f"artifact {key!r} in {self.store.url} exists but its bytes do not match "
                    f"its sha256; restore it from a backup",
                    key=key,
                ) from None
        # decode only the ends (4 bytes per character at most): a 50 MB output is not copied
        head = data[: preview_head * 4].decode("utf-8", errors="replace")[:preview_head]
        tail = ""
        if preview_tail and len(data) > len(head.encode("utf-8", errors="replace")):
            tail = data[-preview_tail * 4 :].decode("utf-8", errors="replace")[-preview_tail:]
        return ArtifactRefBlock(
            uri=f"artifact://sha256/{digest}",
            sha256=digest,
            bytes=len(data),
            preview_head=head,
            preview_tail=tail,
            media_type=media_type,
        )

    def get_artifact(self, sha256: str) -> bytes:
        """The artifact's bytes, verified against its address (IntegrityError if altered)."""
        key = self._artifact_key(sha256)
        try:
            data = read_bytes(self.store, key)
        except BucketNotFound:
            raise
        except NotFound:
            raise NotFound(f"no artifact {sha256} for tenant {self.tenant}", key=key) from None
        if sha256_hex(data) != sha256:
            raise IntegrityError(
                f"artifact {key!r} in {self.store.url} does not match its sha256: the stored "
                f"bytes were changed outside compactor; restore it from a backup",
                key=key,
            )
        return data

    # --- helpers ----------------------------------------------------------------------------
    def _check_owner(self, tenant: str, session: str, what: str) -> None:
        if tenant != self.tenant or session != self.session:
            raise InvalidInput(
                f"{what} belongs to {tenant}/{session}, not {self.tenant}/{self.session}"
            )

    def _put_immutable(self, key: str, data: bytes, model: type[BaseModel]) -> str:
        """Create-only write; returns the sha256 of the bytes stored under ``key``."""
        try:
            write_bytes(self.store, key, data, if_none_match=True)
            return sha256_hex(data)
        except PreconditionFailed:
            existing, _ = self.store.get(key)
        if existing == data:
            return sha256_hex(data)
        try:
            same = model.model_validate_json(existing) == model.model_validate_json(data)
        except ValidationError:
            same = False
        if not same:
            raise PreconditionFailed(
                f"{key!r} already exists with different content; immutable objects are never "
                f"overwritten (use a new id)",
                key=key,
            )
        return sha256_hex(existing)


__all__ = ["SessionDocuments"]
