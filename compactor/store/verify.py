"""Whole-session integrity check behind ``compactor verify``.

Reads work (``SessionLog``) stop at the first damaged object; an operator needs the full list,
so this walks every object of a session and collects findings instead of raising. It checks
the same things the read path does (see ``compactor.store.log``), plus the objects a read of
the current view never touches: every segment, every checkpoint, every record.

Findings are *problems* (the session must not be trusted until restored) or *notes* (objects
written before digests existed: readable, but not verifiable).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from compactor.errors import BucketNotFound, IntegrityError, NotFound
from compactor.events import ArtifactRefBlock
from compactor.records import Checkpoint, Head, foreign_segment
from compactor.store.ckpt_slim import parse_slim
from compactor.store.ids import sha256_hex
from compactor.store.log import SessionLog


class Finding(BaseModel):
    model_config = {"frozen": True}

    kind: Literal["problem", "note"]
    key: str = Field(description="Store key of the object concerned.")
    message: str


class SessionReport(BaseModel):
    tenant: str
    session: str
    version: int = 0
    checked: dict[str, int] = Field(
        default_factory=dict, description="Objects checked, by kind (segments, checkpoints, ...)."
    )
    findings: list[Finding] = Field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "problem"]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_session(log: SessionLog) -> SessionReport:
    """Check one session: head, segments, checkpoints, records, current artifacts.

    Raises NotFound if the session has no head; every other defect is a finding.
    """
    rep = SessionReport(tenant=log.tenant, session=log.session)
    try:
        head = log.read_head_unchecked()
    except IntegrityError as exc:
        rep.findings.append(Finding(kind="problem", key=log.head_key, message=str(exc)))
        _links(log, rep)
        return rep
    if head.etag is None:
        raise NotFound(
            f"no session {log.tenant}/{log.session} in {log.store.url}", key=log.head_key
        )
    rep.version = head.version
    linked = _links(log, rep)
    for msg in head.integrity_problems():
        rep.findings.append(Finding(kind="problem", key=log.head_key, message=msg))
    _segments(log, head, rep)
    digests = _records(log, rep)
    current = _checkpoints(log, head, digests, rep)
    if current is not None:
        _artifacts(log, current, rep)
    if linked:  # a link is one problem: the read that refused to follow it says it again
        rep.findings = [f for f in rep.findings if f.key not in linked or f.message.startswith(_LINK)]
    return rep


def _problem(rep: SessionReport, key: str, message: str) -> None:
    rep.findings.append(Finding(kind="problem", key=key, message=message))


def _note(rep: SessionReport, key: str, message: str) -> None:
    rep.findings.append(Finding(kind="note", key=key, message=message))


_LINK = "a symbolic link inside the store"


def _links(log: SessionLog, rep: SessionReport) -> set[str]:
    """Symbolic links in the session's directories (a local store; S3 has none): no read or
    write follows them, and each is reported so an operator can replace it. Returns their keys."""
    links = getattr(log.store, "links", None)
    if links is None:
        return set()
    keys = links(log.prefix)
    for key in keys:
        _problem(rep, key, _LINK + ": never followed (it could lead out of the store or into "
                           "another tenant); replace it with the real object")
    return set(keys)


def _segments(log: SessionLog, head: Head, rep: SessionReport) -> None:
    """Each listed segment: present, bytes match the sha256, holds exactly its seqs.

    A key outside the session's log is reported with the head and never read: reading it
    would tell whether another session's object exists.

    One segment at a time and nothing cached (like ``SessionLog.iter_events``): a huge
    session is checked in the memory of its largest segment, and its events do not evict
    what other sessions keep in the shared cache.
    """
    for seg in head.segments:
        if foreign_segment(seg.key, log.tenant, log.session):
            continue
        try:
            log._decode(seg, log._get_verified(seg))  # fetch + sha256 + parse + seq range
        except IntegrityError as exc:
            _problem(rep, str(exc.details.get("key", seg.key)), str(exc))
    rep.checked["segments"] = len(head.segments)


def _records(log: SessionLog, rep: SessionReport) -> dict[str, str]:
    """Each record's self-digest; returns checkpoint id -> digest the records hold for it."""
    digests: dict[str, str] = {}
    keys = [k for k in log.store.list(f"{log.prefix}records/") if k.endswith(".json")]
    for key in keys:
        try:
            rec = log.read_record(key)
        except IntegrityError as exc:
            _problem(rep, key, str(exc))
            continue
        if rec.sha256 is None:
            _note(rep, key, "record written before records were sealed: not verified")
        if rec.checkpoint and rec.checkpoint_sha256:
            digests.setdefault(rec.checkpoint, rec.checkpoint_sha256)
    rep.checked["records"] = len(keys)
    return digests


def _checkpoints(
    log: SessionLog, head: Head, digests: dict[str, str], rep: SessionReport
) -> Checkpoint | None:
    """Each checkpoint: digest (from the head or a record), parses, covers within the version.

    Returns the current checkpoint if it passed, for the artifact check.
    """
    keys = [k for k in log.store.list(f"{log.prefix}ckpt/") if k.endswith(".json")]
    current: Checkpoint | None = None
    if head.checkpoint and log._ckpt_key(head.checkpoint) not in keys:
        _problem(rep, log._ckpt_key(head.checkpoint), "the head's checkpoint is missing")
    for key in keys:
        ckpt_id = key.rsplit("/", 1)[-1][: -len(".json")]
        is_current = ckpt_id == head.checkpoint
        expected = head.checkpoint_sha256 if is_current else digests.get(ckpt_id)
        try:
            data, _ = log.store.get(key)
        except BucketNotFound:
            raise
        except NotFound:
            continue  # removed while listing
        if expected is not None and sha256_hex(data) != expected:
            whom = "the head" if is_current else "its compaction record"
            _problem(rep, key, f"stored bytes do not match the sha256 {whom} recorded "
                               f"({expected[:16]}...): changed outside compactor; restore it "
                               f"from a backup")
            continue
        if expected is None and is_current:
            _note(rep, key, "the head records no digest for its checkpoint (written before "
                            "checkpoints were verified): not verified")
        try:
            ckpt = parse_slim(data)  # every field checked; the lifted state not built
        except ValidationError as exc:
            _problem(rep, key, f"does not parse: {exc.errors()[0]['msg']}")
            continue
        if (ckpt.id, ckpt.tenant, ckpt.session) != (ckpt_id, log.tenant, log.session):
            _problem(rep, key, f"names {ckpt.tenant}/{ckpt.session}/{ckpt.id}")
            continue
        if not ckpt.covers.empty and ckpt.covers.end > head.version:
            where = log.head_key if is_current else key
            _problem(rep, where, f"checkpoint {ckpt_id} covers events 1-{ckpt.covers.end}, past "
                                 f"the head's version {head.version}")
            continue
        if is_current:
            current = ckpt
    rep.checked["checkpoints"] = len(keys)
    return current


def _artifacts(log: SessionLog, ckpt: Checkpoint, rep: SessionReport) -> None:
    """Every artifact the current checkpoint references exists and matches its address."""
    shas = set(ckpt.artifacts)
    for blocks in ckpt.replacements.values():
        shas.update(b.sha256 for b in blocks if isinstance(b, ArtifactRefBlock) and b.sha256)
    for sha in sorted(shas):
        try:
            log.get_artifact(sha)
        except (IntegrityError, NotFound) as exc:
            _problem(rep, str(exc.details.get("key", sha)), str(exc))
    rep.checked["artifacts"] = len(shas)


def render(reports: list[SessionReport]) -> str:
    """A readable report: one line per session, then its findings by object."""
    lines = []
    for r in reports:
        counts = "  ".join(f"{k} {v}" for k, v in r.checked.items())
        n = len(r.problems)
        status = "ok" if r.ok else f"{n} problem{'s' if n != 1 else ''}"
        lines.append(f"{r.tenant}/{r.session}  version {r.version}  {counts}: {status}")
        for f in r.findings:
            lines.append(f"  {'PROBLEM' if f.kind == 'problem' else 'note   '}  {f.key}: {f.message}")
    return "\n".join(lines)
