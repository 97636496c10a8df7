"""Circuit-breaker persistence: ``t/{tenant}/s/{session}/breaker.json`` through the object store.

The transitions are pure (``compactor.breaker``); this module reads and writes the state with
compare-and-swap (two compactions of one session never run at once, but an operator's clear
may race a workflow's update, and neither may be lost), and exposes two activities the
workflow calls: ``check_breaker`` before any work and ``record_breaker`` after the record.
Operators clear a breaker with ``clear_breaker(store, tenant, session, by=...)`` (or by
requesting a manual compaction, which always runs).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity

from compactor import breaker
from compactor.errors import NotFound, PreconditionFailed
from compactor.store import validate_id

CHECK_BREAKER = "check_breaker"
RECORD_BREAKER = "record_breaker"
_CAS_ATTEMPTS = 10


class BreakerCheckInput(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    tenant: str
    session: str
    trigger: str = "manual"


class BreakerCheckOutput(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    allowed: bool = True
    reason: str = ""
    open: bool = False
    consecutive_failures: int = 0


class BreakerRecordInput(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    tenant: str
    session: str
    ok: bool = Field(description="The compaction committed (or had nothing to do).")
    trigger: str = "manual"
    run_id: str | None = None
    error: str | None = None


class BreakerRecordOutput(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    open: bool = False
    consecutive_failures: int = 0
    transition: str = "unchanged"


def load_breaker(store: Any, tenant: str, session: str) -> tuple[breaker.BreakerState | None, str | None]:
    """(state, etag); (None, None) when the session never had one."""
    key = breaker.breaker_key(validate_id(tenant, "tenant id"), validate_id(session, "session id"))
    try:
        data, etag = store.get(key)
    except NotFound:
        return None, None
    return breaker.BreakerState.model_validate_json(data), etag


def update_breaker(
    store: Any, tenant: str, session: str,
    change: Callable[[breaker.BreakerState | None], breaker.BreakerState],
) -> tuple[breaker.BreakerState | None, breaker.BreakerState]:
    """Apply ``change`` with compare-and-swap; returns (before, after)."""
    key = breaker.breaker_key(validate_id(tenant, "tenant id"), validate_id(session, "session id"))
    for _ in range(_CAS_ATTEMPTS):
        before, etag = load_breaker(store, tenant, session)
        after = change(before)
        data = after.model_dump_json(indent=1).encode()
        try:
            if etag is None:
                store.put(key, data, if_none_match=True)
            else:
                store.put(key, data, if_match=etag)
            return before, after
        except PreconditionFailed:
            continue
    raise PreconditionFailed(f"breaker {key} kept changing; try again")


def clear_breaker(store: Any, tenant: str, session: str, *, by: str = "operator") -> breaker.BreakerState:
    """Operator reset: automatic compaction of the session resumes."""
    now = datetime.now(timezone.utc)
    _, after = update_breaker(
        store, tenant, session, lambda st: breaker.clear(st, tenant=tenant, session=session, by=by, at=now)
    )
    return after


class BreakerActivities:
    """The breaker's activities over one object store (blocking I/O in a thread)."""

    def __init__(self, store: Any, *, threshold: int = breaker.THRESHOLD) -> None:
        self.store = store
        self.threshold = threshold

    def activities(self) -> list[Any]:
        return [self.check_breaker, self.record_breaker]

    @activity.defn(name=CHECK_BREAKER)
    async def check_breaker(self, inp: BreakerCheckInput) -> BreakerCheckOutput:
        """May this compaction run? Automatic triggers are refused while the breaker is open."""
        state, _ = await asyncio.to_thread(load_breaker, self.store, inp.tenant, inp.session)
        d = breaker.check(state, inp.trigger)
        return BreakerCheckOutput(
            allowed=d.allowed,
            reason=d.reason,
            open=bool(state and state.open),
            consecutive_failures=state.consecutive_failures if state else 0,
        )

    @activity.defn(name=RECORD_BREAKER)
    async def record_breaker(self, inp: BreakerRecordInput) -> BreakerRecordOutput:
        """Count one finished compaction: a success closes, the threshold-th failure opens."""
        now = datetime.now(timezone.utc)

        def change(st: breaker.BreakerState | None) -> breaker.BreakerState:
            return breaker.record(
                st, tenant=inp.tenant, session=inp.session, ok=inp.ok, at=now, trigger=inp.trigger,
                run_id=inp.run_id, error=inp.error, threshold=self.threshold,
            )

        before, after = await asyncio.to_thread(update_breaker, self.store, inp.tenant, inp.session, change)
        t = breaker.transition(before, after)
        if t == "opened" and activity.in_activity():
            activity.logger.warning(
                "circuit breaker opened for %s/%s after %d consecutive failures",
                inp.tenant, inp.session, after.consecutive_failures,
            )
        return BreakerRecordOutput(open=after.open, consecutive_failures=after.consecutive_failures, transition=t)
