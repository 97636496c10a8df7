"""Garbage collection of a session log: what ``compactor gc`` removes, and why that is safe.

Nothing in the log is rewritten in place, so a busy session leaves objects behind that no
reader will ever follow again:

* **superseded segments**: every append merges small segments into a new one (``log.py``,
  "Merging keeps the head small"), and a writer that lost its compare-and-swap leaves its
  segment unreferenced;
* **checkpoints nobody names**: a merge in ``commit_swap`` writes a new checkpoint
  (``...-m1``, ``-m2``) per head that moved, and only the last one is committed;
* **work objects** of finished runs (``work/{version}-{params}/``: plan, layers, state,
  summaries, candidate).

What gc keeps (the live set), read from the head and the records at the start:

* the head; every segment it lists; every record (records are the audit trail: never deleted
  by gc); every object of a kind gc does not know (``breaker.json``, ...);
* the kept checkpoints: the head's, every checkpoint a record names (a committed compaction or
  a rollback: ``compactor rollback --to`` any of them keeps working), and the checkpoint each
  kept one is ``based_on`` (transitively; ``inspect --diff`` and state lifting read it). With
  ``retain_checkpoints = N`` (``COMPACTOR_RETAIN_CHECKPOINTS``) only the head's, the N most
  recently recorded and the one each of those is based on are kept; older ones are removed and
  their records stay (a rollback to one then answers "no checkpoint", exit 2);
* artifacts (tenant-wide, so only by ``gc --tenant`` / ``--all``): any artifact whose sha256
  occurs in any object left under the tenant's sessions.

Why it is safe under concurrent appends and compactions (nothing is locked):

* An object is removed only when it is unreferenced **and** older than the grace period
  (``grace_s``, ``COMPACTOR_GC_GRACE_S``): a segment or checkpoint written a moment ago and
  not yet in the head, an artifact spilled by an import still running, survive. The grace
  period must be longer than any reader holds a head before it fetches the segments the head
  lists (bench chaos with 1 s, on a loaded 2-core machine, failed compactions whose freshly
  started worker imported the engine between the two reads; 5 s lost nothing).
* A segment is removed only if it ends at or before the head's version: any segment a future
  head can list ends past the version of the head it replaces (appends add seqs), so one that
  ends at or before it can never be listed again. Its age counts from when it was superseded
  (the newest write of the head's segments over the same seqs), so a reader still holding the
  previous head has the whole grace period to read it.
* A work prefix is removed once the run that wrote it finished - a record of the same snapshot
  version was written after the prefix's newest object - and that object is older than the
  grace period; a prefix no record closes (a held compaction awaiting approval, a run whose
  worker died) only after ``work_ttl_s`` (``COMPACTOR_WORK_TTL_S``, longer than any run).
* A checkpoint named like a run's (``c{version}-{params}``) stays while that run's work prefix
  is not closed by a record: a ``commit_swap`` retried after its worker died adopts the
  checkpoint the lost attempt wrote, however old.
* The head is read again before deleting; if it moved, the plan is computed again from the
  new head. After deleting, the head is read once more: a checkpoint it names that gc has just
  removed (a rollback raced with gc) is written back from the bytes read before the delete.

Known limit: an artifact unreferenced for longer than the grace period that an import or a
compaction re-uses (same bytes, so it is not written again) while a tenant gc runs can be
removed under it; ``compactor verify`` reports such a reference.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any, Iterable, Protocol

from pydantic import BaseModel, Field

from compactor.errors import IntegrityError, InvalidInput, NotFound
from compactor.store.base import ObjectInfo, ObjectStore
from compactor.store.log import SessionLog, validate_id

_SEG = re.compile(r"log/(\d{12})-(\d{12})(?:\.[0-9a-f]+)?\.jsonl$")
_WORK = re.compile(r"work/(\d{12})-[^/]+/")
_CKPT = re.compile(r"c(\d{12})-([0-9a-f]{12})(?:-|$)")
_HEX = re.compile(rb"[0-9a-f]{64}")
_FINISHED = ("committed", "noop", "failed")
REPLAN_ATTEMPTS = 3


class LifecycleStore(ObjectStore, Protocol):
    """An object store that can also list sizes/times and delete (both backends)."""

    def list_info(self, prefix: str) -> list[ObjectInfo]: ...

    def delete(self, key: str) -> None: ...


class GcSettings(BaseModel):
    """How conservative gc is (workers/settings.py: ``COMPACTOR_GC_GRACE_S``, ...)."""

    model_config = {"frozen": True}

    grace_s: float = Field(default=900.0, ge=0, description="Unreferenced objects younger than this stay.")
    work_ttl_s: float = Field(
        default=172_800.0, ge=0,
        description="Work objects no record closes are removed after this long (set it above "
        "the longest run, approval waits included).",
    )
    retain_checkpoints: int = Field(
        default=0, ge=0,
        description="0: keep every checkpoint the head or a record names. N: the head's, the N "
        "most recently recorded and the ones those are based on.",
    )

    @property
    def slack(self) -> float:
        """S3 keeps LastModified in whole seconds (truncated): a positive grace period gets one
        more second so an object is never taken for older than it is."""
        return 1.0 if self.grace_s > 0 else 0.0


class SessionGc(BaseModel):
    """What gc found and did in one session. Sizes in bytes; kinds: segment, checkpoint, work."""

    tenant: str
    session: str
    version: int = 0
    dry_run: bool = False
    skipped: str | None = Field(default=None, description="Why nothing was removed (no head, damaged).")
    damaged: bool = Field(default=False, description="Skipped because the head or a record fails its checks.")
    stored_bytes: int = Field(default=0, description="Every object of the session before gc.")
    stored_objects: int = 0
    live_bytes: int = Field(
        default=0, description="What gc must keep: head, its segments, kept checkpoints, records, other state."
    )
    removed: dict[str, int] = Field(default_factory=dict, description="Objects removed, by kind.")
    removed_bytes: dict[str, int] = Field(default_factory=dict)
    kept_checkpoints: list[str] = Field(default_factory=list)
    retired_checkpoints: list[str] = Field(
        default_factory=list, description="Checkpoints a record names, removed by retain_checkpoints."
    )
    restored: list[str] = Field(default_factory=list, description="Keys written back after a race.")
    replans: int = Field(default=0, description="Times the head moved and the plan was made again.")

    @property
    def after_bytes(self) -> int:
        return self.stored_bytes - sum(self.removed_bytes.values())


class TenantGc(BaseModel):
    tenant: str
    dry_run: bool = False
    sessions: list[SessionGc] = Field(default_factory=list)
    artifacts_stored: int = 0
    artifacts_stored_bytes: int = 0
    artifacts_removed: int = 0
    artifacts_removed_bytes: int = 0

    def totals(self) -> dict[str, int]:
        """Stored / live / removed bytes over the tenant (artifacts included)."""
        stored = sum(s.stored_bytes for s in self.sessions) + self.artifacts_stored_bytes
        removed = sum(sum(s.removed_bytes.values()) for s in self.sessions) + self.artifacts_removed_bytes
        live = sum(s.live_bytes for s in self.sessions) + self.artifacts_stored_bytes - self.artifacts_removed_bytes
        return {"stored_bytes": stored, "live_bytes": live, "removed_bytes": removed,
                "after_bytes": stored - removed}


def delete_all(store: ObjectStore, keys: list[str]) -> None:
    """Delete ``keys`` in order: in batches where the store has them (S3 DeleteObjects)."""
    many = getattr(store, "delete_many", None)
    if many is not None:
        many(keys)
        return
    lstore = lifecycle_store(store)
    for key in keys:
        lstore.delete(key)


def lifecycle_store(store: ObjectStore) -> LifecycleStore:
    if not (hasattr(store, "list_info") and hasattr(store, "delete")):
        raise InvalidInput(f"store {store.url} cannot list object times or delete: gc needs a "
                           "file:// or s3:// store")
    return store  # type: ignore[return-value]


class _Plan:
    """The deletions decided from one reading of the head."""

    def __init__(self) -> None:
        self.delete: list[tuple[ObjectInfo, str]] = []  # (object, kind)
        self.live_bytes = 0
        self.kept: list[str] = []
        self.retired: list[str] = []
        self.etag: str | None = None
        self.version = 0


def object_kind(rel: str) -> str:
    if rel == "head.json":
        return "head"
    for prefix, kind in (("log/", "segment"), ("ckpt/", "checkpoint"), ("work/", "work"),
                         ("records/", "record")):
        if rel.startswith(prefix):
            return kind
    return "other"


def _kept_checkpoints(log: SessionLog, head: Any, records: list[tuple[Any, float]],
                      present: set[str], retain: int) -> tuple[set[str], list[str]]:
    """(kept checkpoint ids, record-named ids retired by ``retain``)."""
    named: dict[str, float] = {}  # checkpoint id -> newest record time naming it
    for rec, _mtime in records:
        if rec.checkpoint:
            t = rec.created_at.timestamp() if rec.created_at else 0.0
            named[rec.checkpoint] = max(named.get(rec.checkpoint, t), t)
    roots = [head.checkpoint] if head.checkpoint else []
    ordered = sorted(named, key=lambda c: (named[c], c), reverse=True)
    roots += ordered if retain == 0 else ordered[:retain]
    kept: set[str] = set()
    for root in roots:
        cid, depth = root, 0
        while cid and cid not in kept and (retain == 0 or depth <= 1):
            kept.add(cid)
            if cid not in present:
                break
            try:
                cid = log.read_checkpoint_slim(cid).based_on  # (its lifted state is never built)
            except (NotFound, IntegrityError):
                break
            depth += 1
    retired = [c for c in ordered if c not in kept and c in present]
    return kept, retired


def _plan(log: SessionLog, infos: list[ObjectInfo], now: float, cfg: GcSettings) -> _Plan:
    """Decide what to delete; raises IntegrityError if the head or a record cannot be trusted."""
    plan = _Plan()
    head = log.head()  # checked: a damaged head stops gc of this session
    if head.etag is None:
        raise NotFound(f"the head of {log.tenant}/{log.session} is gone", key=log.head_key)
    plan.etag, plan.version = head.etag, head.version
    pre = len(log.prefix)
    by_rel = {i.key[pre:]: i for i in infos}
    listed = {s.key for s in head.segments}
    seg_time = {s.key: by_rel[s.key[pre:]].modified for s in head.segments if s.key[pre:] in by_rel}

    records: list[tuple[Any, float]] = []
    for rel, info in by_rel.items():
        if rel.startswith("records/") and rel.endswith(".json"):
            records.append((log.read_record(info.key), info.modified))  # IntegrityError: stop
    present = {rel[len("ckpt/"):-len(".json")] for rel in by_rel if rel.startswith("ckpt/") and rel.endswith(".json")}
    kept, retired = _kept_checkpoints(log, head, records, present, cfg.retain_checkpoints)
    plan.kept, plan.retired = sorted(kept & present), retired

    finished: dict[int, float] = {}  # snapshot version -> newest finishing record's write time
    for rec, mtime in records:
        if rec.status in _FINISHED and rec.snapshot_version:
            finished[rec.snapshot_version] = max(finished.get(rec.snapshot_version, 0.0), mtime)
    work_newest: dict[str, float] = {}
    for rel, info in by_rel.items():
        m = _WORK.match(rel)
        if m:
            work_newest[m.group(0)] = max(work_newest.get(m.group(0), 0.0), info.modified)

    for rel, info in by_rel.items():
        kind = object_kind(rel)
        old = now - info.modified > cfg.grace_s + cfg.slack
        gone = False
        if kind == "segment" and info.key not in listed:
            m = _SEG.search(rel)
            if m and old and int(m.group(2)) <= head.version:
                first, last = int(m.group(1)), int(m.group(2))
                over = [seg_time.get(s.key, now) for s in head.segments if s.first <= last and s.last >= first]
                gone = now - max(over, default=now) > cfg.grace_s + cfg.slack
        elif kind == "checkpoint":
            cid = rel[len("ckpt/"):-len(".json")] if rel.endswith(".json") else None
            gone = old and cid is not None and cid not in kept and not _in_flight(cid, work_newest, finished)
        elif kind == "work":
            m = _WORK.match(rel)
            if m is None:
                gone = now - info.modified > cfg.work_ttl_s
            else:
                newest = work_newest[m.group(0)]
                closed = finished.get(int(m.group(1)), -1.0) >= newest
                gone = now - newest > (cfg.grace_s if closed else max(cfg.work_ttl_s, cfg.grace_s)) + cfg.slack
        if gone:
            plan.delete.append((info, kind))
        elif (kind in ("head", "record", "other") or (kind == "segment" and info.key in listed)
              or (kind == "checkpoint" and rel[len("ckpt/"):-len(".json")] in kept)):
            plan.live_bytes += info.size
    return plan


def _in_flight(cid: str, work_newest: dict[str, float], finished: dict[int, float]) -> bool:
    """A checkpoint of a run no record has closed yet (``c{version}-{params}...``, the id
    ``checkpoint_id_for`` gives, beside its work prefix): a commit_swap retried after its worker
    died adopts the checkpoint the lost attempt wrote, so it stays while the run may go on."""
    m = _CKPT.match(cid)
    if m is None:
        return False
    newest = work_newest.get(f"work/{m.group(1)}-{m.group(2)}/")
    return newest is not None and finished.get(int(m.group(1)), -1.0) < newest


def gc_session(store: ObjectStore, tenant: str, session: str, cfg: GcSettings | None = None, *,
               dry_run: bool = False, now: float | None = None) -> SessionGc:
    """Remove what no head, kept checkpoint or record of one session references (see module doc)."""
    return _gc_session(store, tenant, session, cfg or GcSettings(), dry_run, now)[0]


def _gc_session(store: ObjectStore, tenant: str, session: str, cfg: GcSettings, dry_run: bool,
                now: float | None) -> tuple[SessionGc, list[str]]:
    lstore = lifecycle_store(store)
    log = SessionLog(store, tenant, session)
    rep = SessionGc(tenant=log.tenant, session=log.session, dry_run=dry_run)
    infos = lstore.list_info(log.prefix)
    rep.stored_objects, rep.stored_bytes = len(infos), sum(i.size for i in infos)
    if store.head(log.head_key) is None:
        rep.skipped = "no head (not a session, or a delete in progress): nothing removed"
        rep.live_bytes = rep.stored_bytes
        return rep, []
    plan: _Plan | None = None
    for attempt in range(REPLAN_ATTEMPTS):
        t = time.time() if now is None else now
        try:
            plan = _plan(log, infos, t, cfg)
        except IntegrityError as exc:
            rep.skipped, rep.damaged = f"{exc}; nothing removed", True
            rep.live_bytes = rep.stored_bytes
            return rep, []
        except NotFound:  # removed while we read it (a delete running): look again
            plan = None
        if plan is not None and store.head(log.head_key) == plan.etag:
            break
        rep.replans += 1
        infos = lstore.list_info(log.prefix)
    if plan is None or store.head(log.head_key) is None:
        rep.skipped = "the session changed while gc read it (a delete running?): nothing removed"
        rep.live_bytes = rep.stored_bytes
        return rep, []
    rep.stored_objects, rep.stored_bytes = len(infos), sum(i.size for i in infos)  # as planned
    rep.version, rep.live_bytes = plan.version, plan.live_bytes
    rep.kept_checkpoints, rep.retired_checkpoints = plan.kept, plan.retired
    if not dry_run:
        saved: dict[str, bytes] = {}
        for info, kind in plan.delete:
            if kind == "checkpoint":
                try:
                    saved[info.key] = store.get(info.key)[0]
                except NotFound:
                    continue
        delete_all(store, [i.key for i, _ in plan.delete])
        rep.restored = _restore_named(log, saved)
    removed = [(i, k) for i, k in plan.delete if i.key not in rep.restored]
    rep.removed = dict(Counter(k for _, k in removed))
    rep.removed_bytes = {}
    for info, kind in removed:
        rep.removed_bytes[kind] = rep.removed_bytes.get(kind, 0) + info.size
    return rep, [i.key for i, _ in removed]


def _restore_named(log: SessionLog, saved: dict[str, bytes]) -> list[str]:
    """Write back a removed checkpoint the head names now (a rollback raced with gc)."""
    if not saved:
        return []
    head = log.read_head_unchecked()
    key = log._ckpt_key(head.checkpoint) if head.checkpoint else None
    if key in saved:
        log.store.put(key, saved[key], if_none_match=True)
        return [key]
    return []


def list_tenants(store: ObjectStore) -> list[str]:
    """Tenant ids with anything stored under ``t/``."""
    lister = getattr(store, "list_children", None)
    if lister is not None:
        names = lister("t/", limit=1_000_000)
    else:
        names = sorted({k.split("/")[1] for k in store.list("t/") if k.count("/") >= 2})
    out = []
    for n in names:
        try:
            out.append(validate_id(n, "tenant id"))
        except InvalidInput:
            continue
    return out


def session_ids(store: ObjectStore, tenant: str) -> list[str]:
    """Every session id with any object under ``t/{tenant}/s/`` (with or without a head)."""
    prefix = f"t/{validate_id(tenant, 'tenant id')}/s/"
    lister = getattr(store, "list_children", None)
    if lister is not None:
        return list(lister(prefix, limit=1_000_000))
    return sorted({k[len(prefix):].split("/")[0] for k in store.list(prefix)})


def referenced_artifacts(store: ObjectStore, keys: Iterable[str]) -> set[str]:
    """Every 64-hex string in the given objects: a superset of the artifacts they reference
    (segments hold artifact_ref blocks, checkpoints ``artifacts`` and replacements)."""
    out: set[str] = set()
    for key in keys:
        try:
            data, _ = store.get(key)
        except NotFound:
            continue
        out.update(m.decode() for m in _HEX.findall(data))
    return out


def gc_tenant(store: ObjectStore, tenant: str, cfg: GcSettings | None = None, *,
              dry_run: bool = False, now: float | None = None) -> TenantGc:
    """gc every session of the tenant, then its artifacts that no remaining object names."""
    cfg = cfg or GcSettings()
    lstore = lifecycle_store(store)
    rep = TenantGc(tenant=validate_id(tenant, "tenant id"), dry_run=dry_run)
    gone: set[str] = set()
    for session in session_ids(store, tenant):
        srep, removed = _gc_session(store, tenant, session, cfg, dry_run, now)
        rep.sessions.append(srep)
        gone.update(removed)
    # heads and records hold digests of segments and checkpoints, never artifact references
    left = [k for k in store.list(f"t/{tenant}/s/") if k not in gone
            and not k.endswith("/head.json") and "/records/" not in k]
    refs = referenced_artifacts(store, left)
    t = time.time() if now is None else now
    art_prefix = f"t/{tenant}/a/sha256/"
    doomed = []
    for info in lstore.list_info(art_prefix):
        rep.artifacts_stored += 1
        rep.artifacts_stored_bytes += info.size
        sha = info.key[len(art_prefix):]
        if sha in refs or t - info.modified <= cfg.grace_s + cfg.slack:
            continue
        doomed.append(info.key)
        rep.artifacts_removed += 1
        rep.artifacts_removed_bytes += info.size
    if not dry_run:
        delete_all(store, doomed)
    return rep

