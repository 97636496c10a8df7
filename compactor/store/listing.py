"""Listing a tenant's sessions: all at once, or a page at a time (what a sweep reads)."""

from __future__ import annotations

from compactor.store.base import ObjectStore
from compactor.store.log import validate_id


def list_sessions_page(
    store: ObjectStore, tenant: str, after: str | None = None, limit: int = 1000
) -> tuple[list[str], str | None]:
    """One page of a tenant's session ids (sorted), after ``after``; and the cursor of the
    next page (None at the end). Ordered like the keys (``name + "/"``), as S3 lists them.
    Stores with ``list_children`` list one level only (S3:
    delimiter + start-after), so a page costs one request whatever the sessions hold."""
    prefix = f"t/{validate_id(tenant, 'tenant id')}/s/"
    lister = getattr(store, "list_children", None)
    if lister is not None:
        names = lister(prefix, start_after=after, limit=limit + 1)
    else:
        names = sorted(list_sessions(store, tenant), key=lambda n: n + "/")
        names = [n for n in names if after is None or n + "/" > after + "/"][: limit + 1]
    page = names[:limit]
    return page, (page[-1] if len(names) > limit else None)


def list_sessions(store: ObjectStore, tenant: str) -> list[str]:
    """Session ids of a tenant (those with a head)."""
    prefix = f"t/{validate_id(tenant, 'tenant id')}/s/"
    out = set()
    for key in store.list(prefix):
        parts = key[len(prefix) :].split("/")
        if len(parts) == 2 and parts[1] == "head.json":
            out.add(parts[0])
    return sorted(out)
