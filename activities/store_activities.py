"""Activities that hold the object store: every compaction step except the LLM summarizers.

Why they are shaped this way:

* **Same pure functions as the inline engine.** ``plan_compaction`` calls ``engine.plan`` and
  ``externalize`` calls ``engine.apply_layers`` (layers a/b and the tail-shrinking summary
  ladder, which lifts state and renders the structured summary with the same functions the
  inline path uses); ``validate_candidate`` calls ``invariants.validate``; the merge in
  ``commit_swap`` calls ``engine.reconcile.reconcile_checkpoint``. So a durable compaction commits
  exactly the checkpoint ``engine.compact`` computes on the same events.
* **Idempotent.** Every output is written under a key derived from the inputs (the work
  prefix, content-addressed artifacts, the checkpoint's deterministic id), so a retry - or a
  second worker after a crash - overwrites or re-finds the same objects. Checkpoints and
  artifacts are immutable (``if_none_match``); the head changes only by compare-and-swap.
* **Nothing before ``commit_swap`` touches the head**, so failing anywhere earlier leaves the
  session as it was.
* Blocking store calls (boto3) and CPU-bound engine work run in a sized thread pool; the
  segment cache (verified, immutable segments) is shared by every call on this worker, so the
  steps of one compaction parse the log once.

This module holds the class and its plumbing; the steps are mixins: freeze_snapshot and
plan_compaction ``freeze_steps.FreezeSteps``, the summary steps ``summary_steps.SummarySteps``,
commit, record and the sweep's listing ``commit_steps.CommitSteps``, what they share
``step_support``; the combined activities a worker makes of replaced parts are ``composed``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.commit_steps import CommitSteps
from activities.contracts import SnapshotRef
from activities.freeze_steps import FreezeSteps
from activities.merge import _dumps
from activities.step_support import HEARTBEAT_EVERY_S, T, attempt_meta, to_application_error, unsynced
from activities.summary_steps import SummarySteps
from activities.work_docs import WorkDocs, dumps_nested
from compactor import errors
from compactor.events import Event
from compactor.records import Checkpoint, Head
from compactor.store import SegmentCache, SessionLog
from compactor.store.base import read_bytes, write_bytes


class StoreActivities(FreezeSteps, SummarySteps, CommitSteps):
    """The store-bound compaction steps. ``store`` is an ObjectStore (local dir or S3).

    Args:
        store: the object store every session of this worker lives in.
        executor: thread pool for blocking I/O and engine work (default: 16 threads).
        cache: segment cache shared by every SessionLog this worker opens.
        breaker_threshold: failures that open a session's circuit breaker, for the count
            ``write_record`` makes (default ``compactor.breaker.THRESHOLD``).
    """

    def __init__(
        self,
        store: Any,
        *,
        executor: concurrent.futures.ThreadPoolExecutor | None = None,
        cache: SegmentCache | None = None,
        breaker_threshold: int | None = None,
    ) -> None:
        from compactor.breaker import THRESHOLD

        self.store = store
        self.breaker_threshold = THRESHOLD if breaker_threshold is None else breaker_threshold
        self._work_store = unsynced(store)
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(max_workers=16)
        self.cache = cache or SegmentCache(max_bytes=256 << 20)
        self._logs: OrderedDict[tuple[str, str], SessionLog] = OrderedDict()
        self._artifacts: OrderedDict[str, bytes] = OrderedDict()
        self._docs = WorkDocs()
        self._artifact_bytes = 0
        # freeze_snapshot runs externalize_finish when asked (FreezeInput.finish_now); off when a
        # worker replaces one of its parts (workers.worker: the workflow then runs the step,
        # composed of the replacements).
        self.finishes_in_freeze = True
        # ... and commit_record when asked (FreezeInput.commit_as); off when a worker replaces
        # commit_swap, write_record or commit_record but not freeze_snapshot (workers.worker).
        self.commits_in_freeze = True
        self._lock = threading.Lock()
        # Separate pool for fan-out writes made from inside an executor thread.
        # (artifact writes are latency-bound: fsync locally, a round trip on S3)
        self._io_pool = concurrent.futures.ThreadPoolExecutor(max_workers=32)

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity of this class, for ``Worker(activities=...)``."""
        return [
            self.freeze_snapshot,
            self.plan_compaction,
            self.externalize,
            self.lift_state,
            self.summarize_structured,
            self.validate_candidate,
            self.finish_structured,
            self.externalize_finish,
            self.commit_swap,
            self.write_record,
            self.commit_record,
            self.list_due_sessions,
        ]

    # --- plumbing ---------------------------------------------------------------------------
    async def _run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        fut = loop.run_in_executor(self._executor, ctx.run, fn)
        beat = activity.in_activity() and not activity.info().is_local
        try:
            while True:
                # Heartbeat while the thread works, so a killed worker's attempt is retried
                # elsewhere after the heartbeat timeout rather than the full step timeout.
                done, _ = await asyncio.wait({fut}, timeout=HEARTBEAT_EVERY_S)
                if done:
                    return fut.result()
                if beat:
                    activity.heartbeat()
        except BaseException as exc:  # noqa: BLE001 - re-raised, mapped
            mapped = to_application_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    _meta = staticmethod(attempt_meta)

    def log(self, tenant: str, session: str) -> SessionLog:
        key = (tenant, session)
        with self._lock:
            log = self._logs.get(key)
            if log is None:
                log = SessionLog(self.store, tenant, session, cache=self.cache)
                self._logs[key] = log
                while len(self._logs) > 4096:
                    self._logs.popitem(last=False)
            else:
                self._logs.move_to_end(key)
            return log

    def _put_json(self, key: str, obj: Any, *, parsed: Any = None) -> bytes:
        """A per-run work object (plan, layers, state, summary, candidate): not fsync'ed.

        ``parsed``: what ``json.loads`` gives for the bytes written (``obj`` itself when it was
        parsed from sorted-key JSON: same values, same key order), when the caller has it; the
        next step of this worker that reads the object then uses it unparsed (``WorkDocs``).
        """
        data = (self._docs.dumped(obj) if parsed is obj else None) or _dumps(obj)
        write_bytes(self._work_store, key, data)
        if parsed is not None:
            self._docs.put(key, data, parsed)
        return data

    def _put_parsed(self, key: str, obj: Any, parts: tuple[str, ...] = ()) -> Any:
        """``_put_json``, then parse what was written and keep it for the next steps (returned).

        ``parts``: a path of keys into ``obj`` (``("checkpoint", "state")``): each object along
        it is dumped once (``work_docs.dumps_nested``) and its bytes kept with the parsed copy,
        for a later step that writes that object as a work object of its own (``_put_json``
        with ``parsed``)."""
        nested = dumps_nested(obj, parts) if parts else None
        if nested is None:
            data = self._put_json(key, obj)
            doc = json.loads(data)
            self._docs.put(key, data, doc)
            return doc
        data = nested[0]
        write_bytes(self._work_store, key, data)
        doc = json.loads(data)
        sub, kept = doc, []
        for name, b in zip(parts, nested[1:]):
            sub = sub[name]
            if isinstance(sub, (dict, list)):  # (a str or number has no identity to key on)
                kept.append((sub, b))
        self._docs.put(key, data, doc, kept)
        return doc

    def _get_json(self, key: str) -> Any:
        """A work object, parsed. Always read from the store (a missing or changed object is
        seen as such); when its bytes are those this worker last wrote or read under the key,
        the document parsed then is returned. Callers must not modify it."""
        try:
            data = read_bytes(self.store, key)
        except errors.NotFound:
            raise errors.NotFound(
                f"work object {key!r} is missing from {self.store.url}: the compaction's "
                f"intermediate objects were removed while it ran; start it again",
                key=key,
            ) from None
        hit = self._docs.get(key, data)
        if hit is not None:
            return hit
        try:
            doc = json.loads(data)
        except ValueError:
            # Only a host crash between an unsynced write and its flush leaves one torn
            # (unsynced): the run fails before commit_swap, the session unchanged.
            raise errors.NotFound(
                f"work object {key!r} in {self.store.url} is damaged (a host crash during the "
                f"compaction?); the session is unchanged - start the compaction again",
                key=key,
            ) from None
        self._docs.put(key, data, doc)
        return doc

    def _prev(self, log: SessionLog, snap: SnapshotRef) -> Checkpoint | None:
        return log.read_checkpoint(snap.checkpoint, snap.checkpoint_sha256) if snap.checkpoint else None

    def engine_events(self, log: SessionLog, snap: SnapshotRef, head: Head | None = None) -> list[Event]:
        """Pinned events + every event after the previous checkpoint, up to the snapshot.

        What ``engine.compact`` receives. Reads only segments holding pinned events or events
        after the previous checkpoint (like ``SessionLog.read_view``); the current head's
        segments are used, since events 1..v are the same under any later head.
        """
        head = head or log.head()
        end = snap.prev_covers_end
        v = snap.version
        segs = [s for s in head.segments if s.first <= v and (s.last > end or s.pinned)]
        log._fetch_many(segs)
        out: list[Event] = []
        for s in segs:
            for e in log._events(s):
                if e.seq > v:
                    break
                if e.seq > end or e.kind == "pinned":
                    out.append(e)
        return out

    def _remember_artifacts(self, arts: dict[str, bytes]) -> None:
        with self._lock:
            for k, v in arts.items():
                if k not in self._artifacts:
                    self._artifact_bytes += len(v)
                self._artifacts[k] = v
                self._artifacts.move_to_end(k)
            while self._artifact_bytes > (64 << 20) and len(self._artifacts) > 1:
                _, old = self._artifacts.popitem(last=False)
                self._artifact_bytes -= len(old)

    def _artifact(self, log: SessionLog, sha: str) -> bytes:
        with self._lock:
            hit = self._artifacts.get(sha)
        return hit if hit is not None else log.get_artifact(sha)

    def _view_artifacts(
        self, log: SessionLog, evs: list[Event], ckpt: Checkpoint, view: list[Event]
    ) -> dict[str, bytes]:
        """Bytes of every artifact the checkpoint introduced into the view (to verify them)."""
        from compactor.engine.invariants import _refs

        source = {r.sha256 for e in evs for r in _refs(e.blocks)}
        listed = set(ckpt.artifacts)
        need = {r.sha256 for e in view for r in _refs(e.blocks)} - source
        out: dict[str, bytes] = {}
        for sha in sorted(need & listed):
            try:
                out[sha] = self._artifact(log, sha)
            except errors.NotFound:
                pass  # reported by the validator as unresolved
        return out
