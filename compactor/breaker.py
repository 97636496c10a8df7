"""Per-session circuit breaker for automatic compaction (pure: no I/O, no clock).

Why: a session whose compaction keeps failing (a provider that rejects it, an invariant the
summary can never meet, a corrupt segment) would otherwise be retried by every sweep and
every threshold crossing, burning model calls and operator attention forever. After
``THRESHOLD`` consecutive failed compactions the breaker opens: automatic triggers for that
session are refused until an operator clears it or a manual request comes in (a manual
request always runs, and if it succeeds it closes the breaker).

The state is stored beside the session (``t/{tenant}/s/{session}/breaker.json``); this module
only computes transitions, the caller supplies the time and persists the result.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

THRESHOLD = 3
"""Consecutive failed compactions that open the breaker."""
MANUAL_TRIGGERS = frozenset({"manual", "operator", "cli"})
"""Triggers that bypass an open breaker (a person asked for this compaction)."""
MAX_HISTORY = 10


def breaker_key(tenant: str, session: str) -> str:
    return f"t/{tenant}/s/{session}/breaker.json"


def is_manual(trigger: str) -> bool:
    return trigger.split(":", 1)[0].strip().lower() in MANUAL_TRIGGERS


class Outcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    ok: bool
    at: datetime | None = None
    trigger: str = ""
    run_id: str | None = None
    error: str | None = None


class BreakerState(BaseModel):
    """One session's breaker. Durable (stored): new fields optional with defaults."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    session: str
    consecutive_failures: int = Field(default=0, ge=0)
    open: bool = Field(default=False, description="True: automatic triggers are refused.")
    opened_at: datetime | None = None
    last_error: str | None = None
    cleared_by: str | None = Field(default=None, description="Who or what last closed it.")
    cleared_at: datetime | None = None
    history: list[Outcome] = Field(default_factory=list, description="Latest outcomes, newest last.")


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True)

    allowed: bool
    reason: str
    clears: bool = Field(default=False, description="A manual request against an open breaker.")


def check(state: BreakerState | None, trigger: str) -> Decision:
    """May a compaction with this trigger run now?"""
    if state is None or not state.open:
        return Decision(allowed=True, reason="breaker closed")
    if is_manual(trigger):
        return Decision(allowed=True, reason="manual request overrides the open breaker", clears=True)
    return Decision(
        allowed=False,
        reason=(
            f"automatic compaction paused for {state.tenant}/{state.session}: "
            f"{state.consecutive_failures} consecutive failures (last: {state.last_error or 'unknown'}); "
            "clear the breaker or request a manual compaction"
        ),
    )


def record(
    state: BreakerState | None,
    *,
    tenant: str,
    session: str,
    ok: bool,
    at: datetime | None = None,
    trigger: str = "",
    run_id: str | None = None,
    error: str | None = None,
    threshold: int = THRESHOLD,
) -> BreakerState:
    """The state after one compaction finished (ok = committed or nothing to do)."""
    st = state or BreakerState(tenant=tenant, session=session)
    if run_id is not None and any(o.run_id == run_id for o in st.history):
        return st  # this run was counted already (a retried write that had landed)
    if not ok and operator_decision(error):
        return st  # an operator said no: nothing is wrong with the session's compaction
    hist = [*st.history, Outcome(ok=ok, at=at, trigger=trigger, run_id=run_id, error=error)][-MAX_HISTORY:]
    if ok:
        was_open = st.open
        return st.model_copy(
            update={
                "consecutive_failures": 0,
                "open": False,
                "opened_at": None if was_open else st.opened_at,
                "last_error": st.last_error,
                "cleared_by": f"success ({trigger or 'run'})" if was_open else st.cleared_by,
                "cleared_at": at if was_open else st.cleared_at,
                "history": hist,
            }
        )
    n = st.consecutive_failures + 1
    opens = n >= threshold
    return st.model_copy(
        update={
            "consecutive_failures": n,
            "open": st.open or opens,
            "opened_at": st.opened_at if st.open else (at if opens else None),
            "last_error": (error or "failed")[:500],
            "history": hist,
        }
    )


#: ``ErrorType.NOT_APPROVED`` (activities/contracts.py): a held run rejected or not approved in time.
OPERATOR_DECISIONS = ("NotApproved",)


def operator_decision(error: str | None) -> bool:
    """A run that ended because an operator rejected (or never approved) its swap: not a failure
    of compaction, so it neither opens the breaker nor breaks a streak."""
    return bool(error) and error.split(":", 1)[0].strip() in OPERATOR_DECISIONS


def clear(state: BreakerState | None, *, tenant: str, session: str, by: str,
          at: datetime | None = None) -> BreakerState:
    """Operator reset: close the breaker and forget the failure streak."""
    st = state or BreakerState(tenant=tenant, session=session)
    return st.model_copy(
        update={"consecutive_failures": 0, "open": False, "opened_at": None, "cleared_by": by, "cleared_at": at}
    )


Transition = Literal["opened", "closed", "unchanged"]


def transition(before: BreakerState | None, after: BreakerState) -> Transition:
    was = bool(before and before.open)
    if after.open and not was:
        return "opened"
    if was and not after.open:
        return "closed"
    return "unchanged"
