"""Circuit-breaker persistence: ``t/{tenant}/s/{session}/breaker.json`` through the object store.

The transitions are pure (``compactor.breaker``); this module reads and writes the state with
compare-and-swap (two compactions of one session never run at once, but an operator's clear
may race a workflow's update, and neither may be lost), and exposes two activities the
workflow calls: ``check_breaker`` before any work and ``record_breaker`` after the record.
Their bodies are ``check_gate`` and ``count_run``: since the ``breaker-in-steps`` patch the
workflow has ``freeze_snapshot`` and ``write_record`` run them (two local activities fewer
per run); the two activities stay for runs from before it.
Operators clear a breaker with ``clear_breaker(store, tenant, session, by=...)`` (or by
requesting a manual compaction, which always runs).

A corrupt ``breaker.json`` (hand-edited, truncated) is treated as a closed breaker: the check
logs one warning line naming the file and the reset command and lets the compaction run, the
record leaves the file as it is (debug log only: the check of the same run has warned). Neither
activity fails: a failed activity is logged by the worker with its traceback, twice per run,
for a condition retrying cannot repair. ``compactor breaker SESSION`` tells the operator to
reset it with ``--clear``.

Each tenant's open breakers are also listed in ``t/{tenant}/breakers-open.json`` (sessions,
CAS-updated after the state), so the ``compactor_breakers_open`` gauge is a count read from
the store rather than a per-process tally of transitions that would drift across restarts.
``record_breaker`` re-syncs the index whenever the state is or was open, or the run was seen
before (a retry after a worker died between the two writes).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio import activity

from activities import metrics
from compactor import breaker
from compactor.errors import CorruptState, NotFound, PreconditionFailed
from compactor.store import validate_id
from compactor.store.breakers import sync_open_index

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


def load_breaker(
    store: Any, tenant: str, session: str, *, corrupt_ok: bool = False
) -> tuple[breaker.BreakerState | None, str | None]:
    """(state, etag); (None, None) when the session never had one.

    Raises:
        CorruptState: the stored state does not parse (it names the reset command), unless
            ``corrupt_ok``: then (None, etag), so that a reset can overwrite it.
    """
    key = breaker.breaker_key(validate_id(tenant, "tenant id"), validate_id(session, "session id"))
    try:
        data, etag = store.get(key)
    except NotFound:
        return None, None
    try:
        return breaker.BreakerState.model_validate_json(data), etag
    except ValidationError:
        if corrupt_ok:
            return None, etag
        raise CorruptState(
            f"circuit breaker {key} in {getattr(store, 'url', 'the store')} is corrupt (not a "
            f"breaker state); reset it with `compactor breaker {session} --clear`",
            key=key,
        ) from None


def update_breaker(
    store: Any, tenant: str, session: str,
    change: Callable[[breaker.BreakerState | None], breaker.BreakerState],
    *,
    corrupt_ok: bool = False,
) -> tuple[breaker.BreakerState | None, breaker.BreakerState]:
    """Apply ``change`` with compare-and-swap; returns (before, after).

    A corrupt stored state is a CorruptState error, except with ``corrupt_ok`` (an operator
    reset), which replaces it.
    """
    key = breaker.breaker_key(validate_id(tenant, "tenant id"), validate_id(session, "session id"))
    for _ in range(_CAS_ATTEMPTS):
        before, etag = load_breaker(store, tenant, session, corrupt_ok=corrupt_ok)
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
        store, tenant, session, lambda st: breaker.clear(st, tenant=tenant, session=session, by=by, at=now),
        corrupt_ok=True,
    )
    sync_open_index(store, tenant, session, is_open=False)
    return after


def _log(level: str, msg: str, *args: Any) -> None:
    """One line (no traceback), through the activity logger inside an activity."""
    import logging

    logger = activity.logger if activity.in_activity() else logging.getLogger(__name__)
    getattr(logger, level)(msg, *args)


def check_gate(store: Any, inp: BreakerCheckInput, *, count_start: bool = True) -> BreakerCheckOutput:
    """May this compaction run? (blocking; ``check_breaker``'s body, also run inside
    ``freeze_snapshot`` when the workflow asks it to). ``count_start``: count the run's start
    in the metrics (once per run, not per retry)."""
    try:
        state, _ = load_breaker(store, inp.tenant, inp.session)
    except CorruptState as exc:
        _log("warning", "%s; treated as closed, the compaction runs", exc)
        if count_start:
            metrics.record_started(inp.trigger, inp.tenant)
        return BreakerCheckOutput(allowed=True, reason="breaker unreadable (corrupt): treated as closed")
    d = breaker.check(state, inp.trigger)
    # The first step of every run: where a run's start (and a refusal) is known.
    if count_start:
        metrics.record_started(inp.trigger, inp.tenant)
    if not d.allowed:
        metrics.record_breaker(None, refused=True, trigger=inp.trigger, tenant=inp.tenant,
                               session=inp.session,
                               consecutive_failures=state.consecutive_failures if state else None)
    return BreakerCheckOutput(
        allowed=d.allowed,
        reason=d.reason,
        open=bool(state and state.open),
        consecutive_failures=state.consecutive_failures if state else 0,
    )


def count_run(store: Any, inp: BreakerRecordInput, *, threshold: int = breaker.THRESHOLD) -> BreakerRecordOutput:
    """Count one finished compaction (blocking; ``record_breaker``'s body, also run inside
    ``write_record`` when the workflow asks it to): a success closes, the threshold-th
    failure opens."""
    now = datetime.now(timezone.utc)

    def change(st: breaker.BreakerState | None) -> breaker.BreakerState:
        return breaker.record(
            st, tenant=inp.tenant, session=inp.session, ok=inp.ok, at=now, trigger=inp.trigger,
            run_id=inp.run_id, error=inp.error, threshold=threshold,
        )

    try:
        before, after = update_breaker(store, inp.tenant, inp.session, change)
    except CorruptState as exc:
        _log("debug", "%s; not updated", exc)  # the check of this run has warned
        return BreakerRecordOutput()
    t = breaker.transition(before, after)
    seen = inp.run_id is not None and before is not None and any(o.run_id == inp.run_id for o in before.history)
    if after.open or (before is not None and before.open) or seen:
        sync_open_index(store, inp.tenant, inp.session, is_open=after.open)
    metrics.record_breaker(t, trigger=inp.trigger, tenant=inp.tenant, session=inp.session,
                           consecutive_failures=after.consecutive_failures)
    return BreakerRecordOutput(open=after.open, consecutive_failures=after.consecutive_failures, transition=t)


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
        return await asyncio.to_thread(check_gate, self.store, inp)

    @activity.defn(name=RECORD_BREAKER)
    async def record_breaker(self, inp: BreakerRecordInput) -> BreakerRecordOutput:
        """Count one finished compaction: a success closes, the threshold-th failure opens."""
        return await asyncio.to_thread(count_run, self.store, inp, threshold=self.threshold)
