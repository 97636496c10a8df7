"""Streamed append: a bulk import written segment by segment, the head swapped once at the end.

``SessionLog.append`` takes the whole batch in memory: a transcript of 300,000 events was
held as events, as serialized lines and as segment bytes at once (1.7 GB). ``append_stream``
takes the events as a producer hands them over and writes each segment as soon as it is
full, so what it holds is one segment's bytes (plus the id of every event, for dedup).

The bytes stored are those ``append`` stores for the same events: the same chunking
(``CHUNK_EVENTS`` / ``CHUNK_BYTES``), the same seqs and lines, and when the whole batch fits in
one chunk the same merge with the tail of the log (the first chunk is held back until a second
one starts, since only then is it known not to be the only one).

The append protocol is unchanged (``compactor.store.log``): segments first (``if_none_match``),
then one CAS of the head. An import that fails midway, or loses the CAS, leaves the head as it
was; the segments it wrote are unreferenced, and nothing reads a segment the head does not
list. A lost CAS re-runs the producer against the new head (it cannot be replayed from
memory: nothing is kept), so the producer must give the same events again - an import does.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from compactor import tokens as tokens_mod
from compactor.errors import ConcurrentModification, PreconditionFailed
from compactor.events import Event
from compactor.records import Head, Segment
from compactor.store.caches import _IdIndex
from compactor.store import segments
from compactor.store.ids import utc_now
from compactor.store.log import AppendResult, SessionLog
from compactor.store.segments import Chunk, event_line

T = TypeVar("T")

#: Sink the producer hands its events to, a batch at a time, in order.
Sink = Callable[[list[Event]], None]


class _Moved(Exception):
    """The head moved under this attempt: start over from the new head."""


def append_stream(log: SessionLog, produce: Callable[[Sink], T], *, max_attempts: int = 20) -> tuple[AppendResult, T]:
    """Append the events ``produce(sink)`` hands to ``sink``; returns the append's result and
    what ``produce`` returned. Idempotent by event id like ``SessionLog.append``.

    ``produce`` is called once per attempt (again only when another writer moved the head
    first); an exception it raises propagates with the head unchanged.
    """
    attempts = max(1, min(max_attempts, log.max_attempts))
    with log._lock:
        stalled: dict[str, int] = {}
        for attempt in range(attempts):
            guessed = attempt == 0 and log._last_head is not None
            head = log._last_head if guessed else log.head()
            log._last_head = None
            ckpt_sha = head.checkpoint_sha256 if guessed else log._checked_checkpoint_sha256(head)
            log_id = head.log_id or uuid.uuid4().hex
            w = _Writer(log, head, log._index_ids(head, log_id), stalled)
            try:
                out = produce(w.add)
                return w.commit(log_id, ckpt_sha, attempt + 1), out
            except _Moved:
                if not guessed:
                    log._backoff(attempt)
        raise ConcurrentModification(
            f"session {log.tenant}/{log.session}: the head kept moving while appending "
            f"({attempts} attempts); nothing was appended, retry the call",
            attempts=attempts,
        )


class _Writer:
    """One attempt: lines numbered from the head's next seq, segments written as they fill."""

    def __init__(self, log: SessionLog, head: Head, index: _IdIndex, stalled: dict[str, int]) -> None:
        self.log = log
        self.head = head
        self.index = index
        self.stalled = stalled
        self.first = self.seq = head.version + 1
        self.total = 0
        self.seen: set[str] = set()
        self.todo: list[str] = []  # ids appended, in seq order (for the shared index)
        self.added = 0  # tokens appended
        self.buf: list[bytes] = []
        self.pinned: list[int] = []
        self.size = 0
        self.start = self.first
        self.held: Chunk | None = None  # the previous full chunk, not written yet
        self.written: list[Segment] = []

    def add(self, events: list[Event]) -> None:
        for e in events:
            self.total += 1
            if e.id in self.seen:
                continue
            self.seen.add(e.id)
            if e.id in self.index.ids:
                continue
            if e.tokens is None:
                e = e.with_(tokens=tokens_mod.count_event(e))
            self.added += tokens_mod.count_event(e)
            self.todo.append(e.id)
            # the same bytes and chunk boundaries as ``segments.chunk_lines``
            full = b'{"seq":%d,' % self.seq + event_line(e) + b"\n"
            if self.buf and (len(self.buf) >= segments.CHUNK_EVENTS or self.size + len(full) > segments.CHUNK_BYTES):
                self._close()
            self.buf.append(full)
            self.size += len(full)
            if e.kind == "pinned":
                self.pinned.append(self.seq)
            self.seq += 1

    def _close(self) -> None:
        chunk = Chunk(self.start, self.seq - 1, b"".join(self.buf), self.pinned)
        self.buf, self.pinned, self.size, self.start = [], [], 0, self.seq
        if self.held is not None:  # more than one chunk: each is a segment of its own
            self._write(*self.log._seg(self.held.first, self.held.last, self.held.data, self.held.pinned))
        self.held = chunk

    def _write(self, seg: Segment, data: bytes) -> None:
        """Create one segment (the foreign-segment rules of ``SessionLog._append``)."""
        log = self.log
        while not log._put_segment(seg.key, data):
            if log.store.head(log.head_key) != self.head.etag:
                raise _Moved
            n = self.stalled[seg.key] = self.stalled.get(seg.key, 0) + 1
            if n < 3:
                log._backoff(n)
                continue
            seg = seg.model_copy(update={"key": log._segment_key(seg.first, seg.last, uuid.uuid4().hex[:12])})
        self.written.append(seg)

    def commit(self, log_id: str, ckpt_sha: str | None, attempts: int) -> AppendResult:
        log, head = self.log, self.head
        if not self.todo:
            return AppendResult(first_seq=head.version + 1, last_seq=head.version, appended=0,
                                duplicates=self.total, version=head.version, attempts=attempts)
        replaced = 0
        if self.buf:
            if self.held is None:  # one chunk: merged with the log's tail like append's
                last = Chunk(self.start, self.seq - 1, b"".join(self.buf), self.pinned)
                self.buf = []
                segments, replaced = log._plan(head, [last])
                for seg, data in segments:
                    self._write(seg, data)
            else:
                self._close()
        if self.held is not None:
            self._write(*log._seg(self.held.first, self.held.last, self.held.data, self.held.pinned))
            self.held = None
        kept = head.segments[: len(head.segments) - replaced]
        new_head = Head(
            tenant=log.tenant,
            session=log.session,
            log_id=log_id,
            version=self.seq - 1,
            checkpoint=head.checkpoint,
            checkpoint_sha256=ckpt_sha,
            checkpoint_run=head.checkpoint_run,
            segments=[*kept, *self.written],
            updated_at=utc_now(),
            view_tokens=(
                self.added if head.version == 0
                else None if head.view_tokens is None else head.view_tokens + self.added
            ),
            noop_view_tokens=head.noop_view_tokens,
        )
        try:
            etag = log._put_head(new_head, head.etag)
        except PreconditionFailed:
            cur = log.head()  # a retried request may have landed: the head lists our segments
            if not all(s in cur.segments for s in self.written):
                raise _Moved from None
            new_head, etag = cur, cur.etag
        self.index.committed(self.todo, self.first)
        log._last_head = new_head.model_copy(update={"etag": etag})
        return AppendResult(first_seq=self.first, last_seq=self.seq - 1, appended=len(self.todo),
                            duplicates=self.total - len(self.todo), version=new_head.version,
                            attempts=attempts)
