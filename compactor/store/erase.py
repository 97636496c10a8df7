"""Erasure: ``compactor delete`` removes everything of a session or a tenant.

A session is everything under ``t/{tenant}/s/{session}/`` plus the artifacts only it
references (artifacts are per tenant and content-addressed, so two sessions can share one: an
artifact whose sha256 occurs in any object of another session of the tenant stays). A tenant is
everything under ``t/{tenant}/``. Nothing outside those prefixes is read for writing or touched,
so other sessions and tenants stay byte-identical.

Order: the head first (readers and appenders then see no session), then the session's own
artifacts, then the rest, then the deletion record. An interrupted delete leaves a headless remainder; running it again finishes
(``gc`` never touches a session without a head).

The deletion record is written outside what was deleted: ``t/{tenant}/deletions/...`` for a
session, ``deletions/{tenant}/...`` (top level) for a tenant. It says who, when, what (tenant,
session) and how many objects and bytes of each kind; never content.

Writers must be stopped first: an append racing with the delete re-creates the session.
"""

from __future__ import annotations

import getpass
import socket
import uuid
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, Field

from compactor.errors import NotFound
from compactor.store.base import ObjectInfo, ObjectStore
from compactor.store.breakers import sync_open_index
from compactor.store.gc import delete_all, lifecycle_store, object_kind, referenced_artifacts, session_ids
from compactor.store.ids import validate_id


class DeletionRecord(BaseModel):
    """What a delete removed: counts and sizes, never content."""

    kind: Literal["session", "tenant"]
    tenant: str
    session: str | None = None
    by: str = Field(description="Who asked (--by, else user@host).")
    at: datetime
    store: str = Field(description="Store URL.")
    dry_run: bool = False
    objects: dict[str, int] = Field(default_factory=dict, description="Objects removed, by kind.")
    bytes: dict[str, int] = Field(default_factory=dict, description="Bytes removed, by kind.")
    artifacts_shared: int = Field(
        default=0, description="Artifacts the session referenced that another session of the tenant "
        "also references: kept."
    )
    record_key: str | None = Field(default=None, description="Where this record is stored.")

    @property
    def total_objects(self) -> int:
        return sum(self.objects.values())


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _count(rec: DeletionRecord, info: ObjectInfo, kind: str) -> None:
    rec.objects[kind] = rec.objects.get(kind, 0) + 1
    rec.bytes[kind] = rec.bytes.get(kind, 0) + info.size


def _remove(store: ObjectStore, infos: list[ObjectInfo]) -> None:
    delete_all(store, [i.key for i in infos])


def _finish(store: ObjectStore, rec: DeletionRecord, key: str, prefix: str) -> DeletionRecord:
    if rec.dry_run:
        return rec
    prune = getattr(store, "prune", None)
    if prune is not None:
        prune(prefix)
    rec = rec.model_copy(update={"record_key": key})
    store.put(key, rec.model_dump_json(indent=2).encode(), if_none_match=True)
    return rec


def _stamp(at: datetime) -> str:
    return at.strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:8]


def delete_session(store: ObjectStore, tenant: str, session: str, *, by: str | None = None,
                   dry_run: bool = False) -> DeletionRecord:
    """Remove the session and the artifacts no other session of the tenant references.

    NotFound (exit 2) when nothing of the session is stored.
    """
    validate_id(tenant, "tenant id")
    validate_id(session, "session id")
    lstore = lifecycle_store(store)
    prefix = f"t/{tenant}/s/{session}/"
    infos = lstore.list_info(prefix)
    if not infos:
        raise NotFound(f"no session {tenant}/{session} in {store.url}: nothing deleted", key=prefix + "head.json")
    at = datetime.now(timezone.utc)
    rec = DeletionRecord(kind="session", tenant=tenant, session=session, by=by or default_actor(),
                         at=at, store=store.url, dry_run=dry_run)
    for info in infos:
        _count(rec, info, object_kind(info.key[len(prefix):]))
    mine = referenced_artifacts(store, [i.key for i in infos])
    art_prefix = f"t/{tenant}/a/sha256/"
    arts = [i for i in lstore.list_info(art_prefix) if i.key[len(art_prefix):] in mine]
    if arts:
        others = [k for s in session_ids(store, tenant) if s != session
                  for k in store.list(f"t/{tenant}/s/{s}/")]
        shared = referenced_artifacts(store, others) & mine
        rec.artifacts_shared = sum(1 for a in arts if a.key[len(art_prefix):] in shared)
        arts = [a for a in arts if a.key[len(art_prefix):] not in shared]
    for a in arts:
        _count(rec, a, "artifact")
    if not dry_run:  # head, artifacts, the rest: a second run finds what a first left
        head = [i for i in infos if i.key == prefix + "head.json"]
        _remove(store, head)
        _remove(store, arts)
        _remove(store, [i for i in infos if i.key != prefix + "head.json"])
        sync_open_index(store, tenant, session, is_open=False)  # its breaker no longer counts
    return _finish(store, rec, f"t/{tenant}/deletions/{_stamp(at)}-{session}.json", prefix)


def delete_tenant(store: ObjectStore, tenant: str, *, by: str | None = None,
                  dry_run: bool = False) -> DeletionRecord:
    """Remove everything under ``t/{tenant}/``; the record goes to ``deletions/{tenant}/``."""
    validate_id(tenant, "tenant id")
    lstore = lifecycle_store(store)
    prefix = f"t/{tenant}/"
    infos = lstore.list_info(prefix)
    if not infos:
        raise NotFound(f"no tenant {tenant} in {store.url}: nothing deleted", key=prefix)
    at = datetime.now(timezone.utc)
    rec = DeletionRecord(kind="tenant", tenant=tenant, by=by or default_actor(), at=at,
                         store=store.url, dry_run=dry_run)
    for info in infos:
        rest = info.key[len(prefix):]
        if rest.startswith("s/") and rest.count("/") >= 2:
            kind = object_kind(rest.split("/", 2)[2])
        elif rest.startswith("a/"):
            kind = "artifact"
        elif rest.startswith("deletions/"):
            kind = "deletion_record"
        else:
            kind = "other"
        _count(rec, info, kind)
    if not dry_run:
        heads = [i for i in infos if i.key.endswith("/head.json")]
        _remove(store, heads)
        _remove(store, [i for i in infos if not i.key.endswith("/head.json")])
    return _finish(store, rec, f"deletions/{tenant}/{_stamp(at)}.json", prefix)
