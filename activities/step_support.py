"""What the store-bound activity steps share: error mapping to Temporal failures, the policy a
step works with, the run it works for, the unsynced store for per-run work objects and a
read-counting store wrapper, the collector's pause during a step's engine work, and what
``engine.plan`` hands on to ``engine.apply_layers`` within one step (``store_activities``,
``summary_steps``, ``commit_steps``)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.contracts import ErrorType, PolicyRef
from compactor import errors


T = TypeVar("T")

HEARTBEAT_EVERY_S = 1.0


def to_application_error(exc: BaseException) -> BaseException:
    """Map our typed errors to Temporal failures: bad input never retries, blips do."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, errors.InvalidInput):
        etype = ErrorType.INVALID_INPUT
    elif isinstance(exc, errors.NotFound):
        etype = ErrorType.NOT_FOUND
    elif isinstance(exc, errors.IntegrityError):
        etype = ErrorType.INTEGRITY
    elif isinstance(exc, errors.InvariantViolation):
        etype = ErrorType.INVARIANT_VIOLATION
    else:
        return exc  # transient (PreconditionFailed, ConcurrentModification, I/O): retry
    code = getattr(exc, "code", None)
    return ApplicationError(str(exc), {"code": code}, type=str(etype), non_retryable=True)


def policy_of(ref: PolicyRef) -> Any:
    from compactor.engine.policy import make_policy

    return make_policy(ref.preset, window=ref.window, max_output=ref.max_output, configured=ref.configured)


def attempt_meta() -> dict[str, Any]:
    """``{"attempt": n}`` of the running activity (1 outside one): what every step reports."""
    try:
        return {"attempt": activity.info().attempt}
    except RuntimeError:
        return {"attempt": 1}


def workflow_run_id() -> str:
    """The run this activity works for ("" outside an activity, e.g. direct calls in tests)."""
    try:
        return activity.info().workflow_run_id or ""
    except RuntimeError:
        return ""


def unsynced(store: Any) -> Any:
    """The store for per-run work objects: a local store without fsync, else ``store``.

    Work objects live under ``work/`` keys derived from the run's inputs and are re-made by
    re-running their step; nothing committed points at them (``commit_swap`` writes the
    checkpoint, fsync'ed, before the head's compare-and-swap). A killed worker loses no page
    cache, so only a crash of the host can lose one, and the run then fails before its commit
    with the session unchanged. Measured: an fsync'ed put costs ~12 ms of wall time on the
    bench VM (0.5 ms without), and a compaction wrote five of them in sequence.
    """
    from compactor.store.local import LocalStore

    if not isinstance(store, LocalStore) or not store.fsync:
        return store
    import copy

    scratch = copy.copy(store)
    scratch.fsync = False
    return scratch


@dataclass
class PlannedWork:
    """What ``engine.plan`` learnt on a snapshot's events, for ``engine.apply_layers`` on the
    same events in the same step (``freeze_snapshot``: its plan, then externalize_finish), as
    ``engine.compact`` hands it on inline: the prepared events, the safe cut points (both
    lists, one walk of the session), the view's count, the body and what the walk learnt of
    its calls. Without it the durable path prepared the events and walked them for the safe
    cuts again in ``apply_layers`` (issue 17: ~3.5 ms of CPU of a 100k-token compaction's ~50
    in the engine, work the inline path does once). ``plan_key`` and ``prev_id`` name the plan
    and previous checkpoint it was made for; a step on anything else does not use it."""

    plan_key: str = ""
    prev_id: str | None = None
    events: list[Any] = field(default_factory=list)
    safe: dict[bool, list[int]] = field(default_factory=dict)
    view: dict[str, int] = field(default_factory=dict)
    body: list[Any] = field(default_factory=list)
    calls: dict[str, Any] = field(default_factory=dict)

    def plan_args(self) -> dict[str, Any]:
        """``engine.plan``'s keyword arguments that fill this (on ``events``, prepared)."""
        return {"_safe": self.safe, "_view": self.view, "_prepared": True, "_body": self.body,
                "_calls": self.calls}

    def layer_args(self) -> dict[str, Any]:
        """``engine.apply_layers``' keyword arguments that hand this on (as ``engine.compact``)."""
        return {"_safe": self.safe, "_view": self.view, "_prepared": True,
                "_body": self.body[0] if self.body else None, "_calls": self.calls}

    def serves(self, plan_key: str, prev_id: str | None) -> bool:
        """Whether this was planned for ``plan_key`` on top of ``prev_id`` (and planned at all)."""
        return bool(self.plan_key) and self.plan_key == plan_key and self.prev_id == prev_id


class CountingStore:
    """An ObjectStore wrapper that counts reads (what a sweep costs per session)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.url = store.url
        self.gets = 0

    def get(self, key: str) -> tuple[bytes, str]:
        self.gets += 1
        return self._store.get(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


# --- the cyclic collector paused during the engine's work in a step ----------------------------
MAX_GC_HOLD_S = 10.0
_hold_lock = threading.Lock()
_holds = 0
_held_since = 0.0


@contextmanager
def engine_work() -> Iterator[None]:
    """The collector paused while a step runs the engine (``externalize``: ``apply_layers``;
    ``finish_structured``: lift, render, validation; ``freeze_snapshot``: plan, view count),
    as ``engine.compact`` pauses it inline (``engine.gc_pause.collector_paused``, shared with
    it): the engine allocates many objects that live until it returns and makes almost no
    cycles, and every collection of a worker's heap (its segment cache) re-scans the cache's
    events for nothing. Overlapping steps share one pause; so that a worker that is never
    idle still collects, the step that ends a pause chain held for ``MAX_GC_HOLD_S`` or more
    runs a full collection (and starts the count again)."""
    from compactor.engine.gc_pause import collector_paused

    global _holds, _held_since
    with _hold_lock:
        if _holds == 0:
            _held_since = time.monotonic()
        _holds += 1
    try:
        with collector_paused():
            yield
    finally:
        with _hold_lock:
            _holds -= 1
            # (the last one out: collector_paused turns the collector back on)
            overdue = _holds > 0 and time.monotonic() - _held_since >= MAX_GC_HOLD_S
            if overdue:
                _held_since = time.monotonic()
        if overdue:
            gc.collect()


def paused(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` inside ``engine_work()``."""
    with engine_work():
        return fn(*args)
