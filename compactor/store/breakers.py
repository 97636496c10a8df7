"""The tenant's open-breaker index, ``t/{tenant}/breakers-open.json``: the sessions whose
circuit breaker is open, CAS-updated after each breaker state change (activities/breaker.py) and
when a session is deleted (store/erase.py), so the ``compactor_breakers_open`` gauge is a count
read from the store rather than a per-process tally that drifts across restarts."""

from __future__ import annotations

import json
from typing import Any

from compactor.errors import NotFound, PreconditionFailed
from compactor.store.log import validate_id

CAS_ATTEMPTS = 10


def open_index_key(tenant: str) -> str:
    return f"t/{validate_id(tenant, 'tenant id')}/breakers-open.json"


def _read_open_index(store: Any, tenant: str) -> tuple[list[str], str | None]:
    try:
        data, etag = store.get(open_index_key(tenant))
    except NotFound:
        return [], None
    try:
        sessions = json.loads(data).get("sessions", [])
        return sorted({str(s) for s in sessions}), etag
    except (ValueError, AttributeError):
        return [], etag  # unreadable: rebuilt by the next sync (it lists sessions, not text)


def sync_open_index(store: Any, tenant: str, session: str, *, is_open: bool) -> None:
    """Make ``session``'s membership of the tenant's open-breaker index match ``is_open``."""
    key = open_index_key(tenant)
    for _ in range(CAS_ATTEMPTS):
        sessions, etag = _read_open_index(store, tenant)
        if (session in sessions) == is_open:
            return
        new = sorted({*sessions, session}) if is_open else [s for s in sessions if s != session]
        data = json.dumps({"sessions": new}, indent=1).encode()
        try:
            if etag is None:
                store.put(key, data, if_none_match=True)
            else:
                store.put(key, data, if_match=etag)
            return
        except PreconditionFailed:
            continue
    raise PreconditionFailed(f"breaker index {key} kept changing; try again")


def count_open_breakers(store: Any, tenants: list[str] | None = None) -> dict[str, int]:
    """Open breakers per tenant, from the index (tenants: those given, else every ``t/*``)."""
    if not tenants:
        lister = getattr(store, "list_children", None)
        tenants = list(lister("t/", limit=100_000)) if lister is not None else []
    out: dict[str, int] = {}
    for tenant in tenants:
        try:
            sessions, _ = _read_open_index(store, tenant)
        except Exception:  # noqa: BLE001 - a bad tenant name or an unreadable index counts 0
            continue
        out[tenant] = len(sessions)
    return out
