"""The session log: immutable segments plus a head manifest updated by compare-and-swap.

Layout (DESIGN §4)::

    t/{tenant}/s/{session}/head.json                          manifest + version (CAS target)
    t/{tenant}/s/{session}/log/{first:012d}-{last:012d}.jsonl immutable segments
    t/{tenant}/s/{session}/ckpt/{id}.json                     immutable checkpoints
    t/{tenant}/s/{session}/records/{id}.json                  compaction records
    t/{tenant}/a/sha256/{hex}                                 content-addressed artifacts

Why it is built this way
------------------------
**Append** = write one new segment with ``if_none_match``, then CAS the head (``if_match`` on the
etag we read). The head lists every live segment with its seq range, size, sha256 and the seqs
of its pinned events; readers follow the head and never guess keys. On a lost CAS the writer
re-reads the head and retries at the new next seq (bounded attempts, full-jitter backoff,
``ConcurrentModification`` when exhausted). A writer's batch lands whole or not at all, so each
writer's order is preserved and seqs stay gap-free.

**Orphans.** A writer that loses the CAS leaves its segment behind, unreferenced. That is
harmless: nothing reads a segment the head does not list (readers never list the log
directory), and no segment is ever overwritten. A later writer can want the same key
``{first}-{last}`` only if its range coincides exactly: two writers racing for the same range
right now, a writer that died between its two writes, or (rarely) a merged range that equals
an old loser's range. The ``if_none_match`` then fails and we compare bytes: identical means
it is our own earlier attempt (a client retry, a retried HTTP request) and we reuse it;
different bytes with a moved head mean we lost the race, so we re-read and retry; different
bytes while the head stays put (an in-flight writer about to commit, or a dead one) get two
backoffs, then this one segment goes to a unique key ``{first}-{last}.{nonce}.jsonl``, so
nothing can wedge a session. The head records whichever key holds the bytes.

**Merging keeps the head small.** Every append adds a segment, and the head is rewritten on
every append, so a manifest of one entry per append would make a 100k-event session cost
O(n) per append. Segments are therefore merged on the way in, like a binary counter: the new
batch absorbs the previous segments while each is no larger than what is being written so
far (size = events, or 2 KiB units for large events), up to 8192 events / 16 MiB per segment.
The append then writes one segment (the absorbed segments' verified bytes + the new lines)
and the head swaps those entries for it, in the same CAS. Measured in simulation for appends
of 1-20 events: manifest <= 32 entries at 100k events, each event written ~4.4 times in
total. Absorbed segments stay in storage, unreferenced (like orphans).

**Idempotency.** Dedup is by event id against the exact head we CAS from: an id -> seq index
of seqs 1..K, brought up to the head's version before each attempt by reading only the
segments added since (segments are immutable, so the index never goes stale). One index per
log per process (keyed by store URL, tenant, session and the head's random ``log_id``), so
short-lived SessionLog objects (one per request) stay warm, and a session deleted and
re-created under the same name starts a new index. A writer's own appends update it without a
read. A cold process reads the whole log once (a few dozen GETs thanks to merging; ~1 s for
100k events, measured by ``compactor bench store``); after that an append costs one segment
PUT and one head PUT, plus one head GET unless this object wrote the head last.

**Pinned events.** Each manifest entry carries the seqs of its pinned events, so ``read_view``
fetches only the segments that hold pinned events or events after the checkpoint.

**Verification (tamper evidence).** Segment bytes are checked against the head's sha256 and
artifact bytes against their address on every read from the store (IntegrityError naming the
key). The head records the sha256 of its checkpoint's stored bytes (``checkpoint_sha256``),
checked when the checkpoint is read: one hash of bytes already read. A head must also be
consistent on its own: its segments cover ``1..version`` with no gap, and its checkpoint covers
nothing past ``version`` - an edited version would otherwise hide events or make the next
append write seqs under the checkpoint. Appends and checkpoint swaps check all of this before
they write anything. Records carry a self-digest (``records.record_digest``; a record is
written after the swap, so its digest cannot live in the head without another CAS) and the
digest of the checkpoint they committed, which is what lets a rollback verify an older
checkpoint. Heads and records written before this have no digests: they are read as before
and ``compactor verify`` reports them as unverified; the next append or swap adds the head's.
Verified segments and checkpoints are cached by (key, sha256): they never change, so the
caches need no invalidation.

Ids (tenant, session, checkpoint, record) are validated before any I/O.
"""

from __future__ import annotations

import gc
import json
import random
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Sequence

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from compactor import tokens as tokens_mod
from compactor.errors import (
    BucketNotFound,
    ConcurrentModification,
    IntegrityError,
    NotFound,
    PreconditionFailed,
)
from compactor.events import Event
from compactor.records import (
    Checkpoint,
    Head,
    Segment,
    foreign_segment,
)
from compactor.store.base import ObjectStore, read_bytes, write_bytes
from compactor.store.caches import (  # noqa: F401 - _INDEXES/_VERIFIED_CKPTS: tests reset them here
    _INDEXES,
    _VERIFIED_CKPTS,
    SegmentCache,
    _IdIndex,
    _shared_index,
)
from compactor.engine.view import build_view, stream_view
from compactor.store.documents import SessionDocuments
from compactor.store.segment_decode import trusted_events
from compactor.store.segments import Chunk, absorbable, chunk_lines, event_line
from compactor.store.ids import parse_problem, sha256_hex, utc_now, validate_id  # noqa: F401 - re-exported

# Segments are written by us: every line starts with seq then id, so indexing ids needs no
# full JSON parse of each event (5-10x faster on a cold 100k-event session).
_SEQ_ID = re.compile(rb'^\{"seq":(\d+),"id":("(?:[^"\\]|\\.)*")', re.M)
_EVENTS = TypeAdapter(list[Event])



class AppendResult(BaseModel):
    first_seq: int = Field(description="Seq of the first event appended by this call.")
    last_seq: int = Field(description="Seq of the last appended event (first_seq - 1 if none).")
    appended: int = Field(description="Events newly stored.")
    duplicates: int = Field(description="Events skipped because their id was already stored.")
    version: int = Field(description="Head version after the call.")
    attempts: int = Field(default=1, description="CAS attempts it took.")


def _parse_events(data: bytes) -> list[Event]:
    """Parse a JSON array of events with the cyclic GC paused: built without validation where
    ``segment_decode`` accepts the bytes, else validated (the same events, the same errors).

    Parsing allocates many small objects at once; with a large heap (a long session already in
    memory) each allocation burst would trigger full collections that scan everything.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        events = trusted_events(data)
        return _EVENTS.validate_json(data) if events is None else events
    finally:
        if enabled:
            gc.enable()


class SessionLog(SessionDocuments):
    """One session's append-only log on an object store.

    Args:
        store: the object store.
        tenant, session: validated ids.
        max_attempts: CAS attempts per append / head update before ConcurrentModification.
        backoff_base, backoff_max: full-jitter backoff between attempts, in seconds. The cap
            is low on purpose: a writer that lost many rounds must not wait much longer than a
            newcomer, or it starves (seen with 16 writers on one session).
        cache: a SegmentCache to share between logs (default: a private one).
        merge: merge small segments on append (keeps the head small; off only for tests).
    """

    def __init__(
        self,
        store: ObjectStore,
        tenant: str,
        session: str,
        *,
        max_attempts: int = 200,
        backoff_base: float = 0.004,
        backoff_max: float = 0.1,
        cache: SegmentCache | None = None,
        merge: bool = True,
    ) -> None:
        self.tenant = validate_id(tenant, "tenant id")
        self.session = validate_id(session, "session id")
        self.store = store
        self.max_attempts = max(1, max_attempts)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.cache = cache or SegmentCache()
        self.merge = merge
        self.prefix = f"t/{tenant}/s/{session}/"
        self.head_key = self.prefix + "head.json"
        self._index = _IdIndex()  # replaced by the shared one once the log's id is known
        self._index_key: tuple[str, str, str, str] | None = None
        self._ckpts: dict[str, tuple[Checkpoint, str]] = {}  # id -> (checkpoint, sha256 of its bytes)
        self._slim_ckpts: dict[str, tuple[Checkpoint, str]] = {}  # the same, read_checkpoint_slim's
        self._last_head: Head | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"SessionLog({self.store!r}, {self.tenant!r}, {self.session!r})"

    # --- head -------------------------------------------------------------------------------
    def head(self) -> Head:
        """The current head (``version=0, etag=None`` when the session does not exist).

        Raises IntegrityError (naming the head's key) if the manifest is inconsistent.
        """
        head = self.read_head_unchecked()
        problems = head.integrity_problems()
        if problems:
            raise IntegrityError(
                f"head {self.head_key!r} in {self.store.url} is inconsistent: "
                f"{'; '.join(problems)}; it was changed outside compactor - nothing was "
                f"written; run `compactor verify {self.session}` and restore it from a backup",
                key=self.head_key,
            )
        return head

    def read_head_unchecked(self) -> Head:
        """The head as stored, parsed but without the consistency checks (for ``verify``)."""
        try:
            data, etag = self.store.get(self.head_key)
        except BucketNotFound:
            raise
        except NotFound:
            return Head(tenant=self.tenant, session=self.session)
        try:
            head = Head.model_validate_json(data)
        except ValidationError as exc:
            raise IntegrityError(
                f"head {self.head_key!r} in {self.store.url} is not a valid manifest: {parse_problem(exc)}",
                key=self.head_key,
            ) from None
        if head.tenant != self.tenant or head.session != self.session:
            raise IntegrityError(
                f"head {self.head_key!r} names {head.tenant}/{head.session}, not "
                f"{self.tenant}/{self.session}",
                key=self.head_key,
            )
        return head.model_copy(update={"etag": etag})

    def exists(self) -> bool:
        return self.store.head(self.head_key) is not None

    def _put_head(self, head: Head, expected: str | None) -> str:
        data = head.model_dump_json(exclude={"etag"}).encode()
        if expected is None:
            return self.store.put(self.head_key, data, if_none_match=True)
        return self.store.put(self.head_key, data, if_match=expected)

    def _backoff(self, attempt: int) -> None:
        time.sleep(random.uniform(0, min(self.backoff_max, self.backoff_base * (2**attempt))))

    # --- segments ---------------------------------------------------------------------------
    def _segment_key(self, first: int, last: int, nonce: str | None = None) -> str:
        tail = f".{nonce}" if nonce else ""
        return f"{self.prefix}log/{first:012d}-{last:012d}{tail}.jsonl"

    def _fetch(self, seg: Segment) -> list:
        # Before the cache and the store: a foreign key gets the same answer whether it exists.
        why = foreign_segment(seg.key, self.tenant, self.session)
        if why:
            raise IntegrityError(f"head {self.head_key!r} in {self.store.url}: {why}", key=self.head_key)
        hit = self.cache.get(seg)
        if hit is not None:
            return hit
        return self.cache.put(seg, self._get_verified(seg))

    def _get_verified(self, seg: Segment) -> bytes:
        """A segment's bytes from the store, checked against its sha256 (no cache)."""
        try:
            data = read_bytes(self.store, seg.key)  # checked against its sha256 below
        except BucketNotFound:
            raise
        except NotFound:
            raise IntegrityError(
                f"segment {seg.key!r} (events {seg.first}-{seg.last}) listed in the head of "
                f"{self.tenant}/{self.session} is missing from {self.store.url}",
                key=seg.key,
            ) from None
        if sha256_hex(data) != seg.sha256:
            raise IntegrityError(
                f"segment {seg.key!r} in {self.store.url} does not match its sha256 "
                f"{seg.sha256[:16]}...: the stored bytes were changed outside compactor; "
                f"restore the object from a backup",
                key=seg.key,
            )
        return data

    def _fetch_many(self, segs: Sequence[Segment]) -> list[list]:
        missing = [s for s in segs if self.cache.get(s) is None]
        if len(missing) > 1:
            with ThreadPoolExecutor(max_workers=min(8, len(missing))) as ex:
                list(ex.map(self._fetch, missing))
        return [self._fetch(s) for s in segs]

    def _events(self, seg: Segment) -> list[Event]:
        entry = self._fetch(seg)
        if entry[1] is None:
            entry = self.cache.put(seg, entry[0], self._decode(seg, entry[0]))
        return entry[1]

    def _decode(self, seg: Segment, data: bytes) -> list[Event]:
        """A verified segment's events, checked to hold its seqs.

        The start of a segment an append folded from segments this process decoded before is
        not decoded again (``SegmentCache.decoded_prefix``): a growing session's tail segment
        is rewritten by many appends, and decoding it whole made every compaction's first
        read grow with the session.
        """
        known, pos = self.cache.decoded_prefix(seg, data)
        body = b",".join(line for line in data[pos:].split(b"\n") if line.strip())
        try:
            events = _parse_events(b"[" + body + b"]") if body else []
        except ValidationError as exc:
            raise IntegrityError(
                f"segment {seg.key!r} holds events that do not parse: {parse_problem(exc)}", key=seg.key
            ) from None
        first = seg.first + len(known)
        if [e.seq for e in events] != list(range(first, seg.last + 1)):
            raise IntegrityError(
                f"segment {seg.key!r} does not hold seqs {seg.first}-{seg.last}", key=seg.key
            )
        # Counts stored before thinking was excluded from the measure: recounted once
        # here (the decoded segment is cached), so count_event can trust every count.
        return known + [tokens_mod.recount_thinking(e) for e in events]

    def _ids_for(self, log_id: str | None) -> _IdIndex:
        """The id index of this log: process-wide per (store, tenant, session, log_id)."""
        if log_id is None:
            return self._index
        key = (self.store.url, self.tenant, self.session, log_id)
        if key != self._index_key:
            self._index = _shared_index(key)
            self._index_key = key
        return self._index

    def _index_ids(self, head: Head, log_id: str | None = None) -> _IdIndex:
        """The id index, brought up to ``head.version`` (reads only segments not indexed yet).

        The index may already reach past ``head.version`` (another SessionLog of this process
        saw a newer head): an id found there is stored, so treating it as a duplicate is right.
        """
        index = self._ids_for(head.log_id or log_id)
        upto = index.upto
        if upto >= head.version:
            return index
        need = [s for s in head.segments if s.last > upto]
        for seg, entry in zip(need, self._fetch_many(need)):
            data: bytes = entry[0]
            found = 0
            batch: list[tuple[str, int]] = []
            for m in _SEQ_ID.finditer(data):
                found += 1
                seq = int(m.group(1))
                if seq > upto:
                    raw = m.group(2)
                    eid = json.loads(raw) if b"\\" in raw else raw[1:-1].decode()
                    batch.append((eid, seq))
            if found != seg.last - seg.first + 1:
                raise IntegrityError(
                    f"segment {seg.key!r} holds {found} events, its manifest entry says "
                    f"{seg.last - seg.first + 1}",
                    key=seg.key,
                )
            with index.lock:
                for eid, seq in batch:
                    index.ids.setdefault(eid, seq)
        with index.lock:
            if index.upto < head.version:
                index.upto = head.version
        return index

    def _put_segment(self, key: str, data: bytes) -> bool:
        """Create a segment; True if ours is stored there (new or byte-identical), else False."""
        try:
            write_bytes(self.store, key, data, if_none_match=True)
            return True
        except PreconditionFailed:
            try:
                existing, _ = self.store.get(key)
            except BucketNotFound:
                raise
            except NotFound:
                return False
            return existing == data

    # --- append -----------------------------------------------------------------------------
    def append(self, events: Sequence[Event]) -> AppendResult:
        """Append events (seqs assigned here, tokens counted once); idempotent by event id."""
        with self._lock:
            return self._append(list(events))

    def _append(self, events: list[Event]) -> AppendResult:
        total = len(events)
        batch: list[Event] = []
        seen: set[str] = set()
        for e in events:
            if e.id not in seen:
                seen.add(e.id)
                batch.append(e)
        batch = tokens_mod.with_tokens(batch)
        stalled: dict[str, int] = {}
        for attempt in range(self.max_attempts):
            # First attempt: the head this object wrote last, if any (a lone writer then
            # needs no GET); a stale guess only costs a lost CAS and a re-read.
            guessed = attempt == 0 and self._last_head is not None
            head = self._last_head if guessed else self.head()
            self._last_head = None
            # Refuse a head that fails the checks before writing anything; the head we wrote
            # ourselves (guessed) passed them already.
            ckpt_sha = head.checkpoint_sha256 if guessed else self._checked_checkpoint_sha256(head)
            # A new log gets its id now, so the ids it commits land in the shared index.
            log_id = head.log_id or uuid.uuid4().hex
            index = self._index_ids(head, log_id)
            todo = [i for i, e in enumerate(batch) if e.id not in index.ids]
            if not todo:
                return AppendResult(
                    first_seq=head.version + 1,
                    last_seq=head.version,
                    appended=0,
                    duplicates=total,
                    version=head.version,
                    attempts=attempt + 1,
                )
            first = head.version + 1
            # Serialized per attempt and each line dropped once its segment bytes exist: a
            # giant event is held twice at most (its model and its segment), not three times.
            chunks = chunk_lines(first, [batch[i] for i in todo], [event_line(batch[i]) for i in todo])
            segments, replaced = self._plan(head, chunks)
            written: list[Segment] = []
            blocked = False
            for seg, data in segments:
                if self._put_segment(seg.key, data):
                    written.append(seg)
                    continue
                # A foreign segment sits at this exact range (see module docstring).
                if self.store.head(self.head_key) != head.etag:
                    blocked = True
                    break
                stalled[seg.key] = stalled.get(seg.key, 0) + 1
                if stalled[seg.key] < 3:
                    blocked = True
                    break
                alt = seg.model_copy(
                    update={"key": self._segment_key(seg.first, seg.last, uuid.uuid4().hex[:12])}
                )
                if not self._put_segment(alt.key, data):  # pragma: no cover - unique key
                    blocked = True
                    break
                written.append(alt)
            if blocked:
                if not guessed:
                    self._backoff(attempt)
                continue
            kept = head.segments[: len(head.segments) - replaced]
            added = sum(tokens_mod.count_event(batch[i]) for i in todo)
            new_head = Head(
                tenant=self.tenant,
                session=self.session,
                log_id=log_id,
                version=chunks[-1].last,
                checkpoint=head.checkpoint,
                checkpoint_sha256=ckpt_sha,
                checkpoint_run=head.checkpoint_run,
                segments=[*kept, *written],
                updated_at=utc_now(),
                view_tokens=(
                    added if head.version == 0
                    else None if head.view_tokens is None else head.view_tokens + added
                ),
                noop_view_tokens=head.noop_view_tokens,
            )
            try:
                etag = self._put_head(new_head, head.etag)
            except PreconditionFailed:
                # A retried request may have landed: then the head already lists our segments.
                cur = self.head()
                if not all(s in cur.segments for s in written):
                    if not guessed:  # a wrong guess of the head is not contention
                        self._backoff(attempt)
                    continue
                new_head = cur
                etag = cur.etag
            for seg, (_, data) in zip(written, segments):
                self.cache.put(seg, data)
            index.committed([batch[i].id for i in todo], first)
            self._last_head = new_head.model_copy(update={"etag": etag})
            return AppendResult(
                first_seq=first,
                last_seq=chunks[-1].last,
                appended=len(todo),
                duplicates=total - len(todo),
                version=new_head.version,
                attempts=attempt + 1,
            )
        raise ConcurrentModification(
            f"session {self.tenant}/{self.session}: the head kept moving while appending "
            f"({self.max_attempts} attempts); nothing was appended, retry the call",
            attempts=self.max_attempts,
        )

    def _checked_checkpoint_sha256(self, head: Head) -> str | None:
        """Verify the head's checkpoint (digest, range); its digest for the next head.

        A legacy head (no digest) gets the digest of the bytes read now, so every head written
        from now on carries one.
        """
        if self.current_checkpoint(head) is None:
            return None
        return head.checkpoint_sha256 or self.checkpoint_sha256(head.checkpoint)

    def _plan(self, head: Head, chunks: list[Chunk]) -> tuple[list[tuple[Segment, bytes]], int]:
        """Segments to write for ``chunks`` and how many tail entries of the head they replace."""
        if not (self.merge and len(chunks) == 1):
            return [self._seg(c.first, c.last, c.data, c.pinned) for c in chunks], 0
        c = chunks[0]
        absorbed = absorbable(head.segments, c.last - c.first + 1, len(c.data))
        if not absorbed:
            return [self._seg(c.first, c.last, c.data, c.pinned)], 0
        try:
            parts = [e[0] for e in self._fetch_many(absorbed)]
        except IntegrityError:
            # Never fold a damaged segment into a new one; append without merging.
            return [self._seg(c.first, c.last, c.data, c.pinned)], 0
        data = b"".join(parts) + c.data
        pinned = [p for s in absorbed for p in s.pinned] + c.pinned
        return [self._seg(absorbed[0].first, c.last, data, pinned)], len(absorbed)

    def _seg(self, first: int, last: int, data: bytes, pinned: list[int]) -> tuple[Segment, bytes]:
        seg = Segment(
            first=first,
            last=last,
            key=self._segment_key(first, last),
            sha256=sha256_hex(data),
            bytes=len(data),
            pinned=pinned,
        )
        return seg, data

    # --- reading ----------------------------------------------------------------------------
    def read_events(self, start: int = 1, end: int | None = None, *, head: Head | None = None) -> list[Event]:
        """Events with ``start <= seq <= end`` (end defaults to the head version), verified."""
        head = head or self.head()
        end = head.version if end is None else min(end, head.version)
        if end < start:
            return []
        segs = [s for s in head.segments if s.last >= start and s.first <= end]
        self._fetch_many(segs)
        out: list[Event] = []
        for s in segs:
            evs = self._events(s)
            if s.first >= start and s.last <= end:
                out.extend(evs)
            else:
                out.extend(e for e in evs if start <= e.seq <= end)
        return out

    def read_pinned_and_after(
        self, after: int, upto: int | None = None, *, head: Head | None = None
    ) -> list[Event]:
        """Pinned events with seq <= ``after``, then every event in ``after+1..upto``, in order.

        What a view or a compaction on top of a checkpoint covering ``1..after`` needs; reads
        only the segments holding pinned events or events after ``after``.
        """
        head = head or self.head()
        upto = head.version if upto is None else min(upto, head.version)
        segs = [s for s in head.segments if s.first <= upto and (s.last > after or s.pinned)]
        self._fetch_many(segs)
        events: list[Event] = []
        for s in segs:
            evs = self._events(s)
            if s.first > after and s.last <= upto:
                events.extend(evs)
            else:
                events.extend(
                    e for e in evs if e.seq <= upto and (e.seq > after or e.kind == "pinned")
                )
        return events

    def iter_events(self, start: int = 1, end: int | None = None, *, head: Head | None = None,
                    pinned_upto: int = 0) -> Iterator[Event]:
        """``read_events`` one segment at a time: memory bounded by a segment, not the session.

        Segments already in the cache are used; those read here are verified and decoded but
        not cached (a huge session would only evict what other sessions use). With
        ``pinned_upto``, pinned events at or before it come too (``read_pinned_and_after``).
        """
        head = head or self.head()
        end = head.version if end is None else min(end, head.version)
        for s in head.segments:
            if s.first > end or (s.last < start and not (s.pinned and s.first <= pinned_upto)):
                continue
            hit = self.cache.get(s)
            if hit is not None and hit[1] is not None:
                evs = hit[1]
            else:
                evs = self._decode(s, hit[0] if hit is not None else self._get_verified(s))
            for e in evs:
                if start <= e.seq <= end or (e.kind == "pinned" and e.seq <= pinned_upto):
                    yield e

    def stream_view(self, *, head: Head | None = None, first: Callable[[Event], None] | None = None
                    ) -> tuple[int, Iterator[Event]]:
        """``read_view`` streamed (``engine.view.stream_view``, ``first`` passed on): the number
        of view events and an iterator over them, reading the log segment by segment (twice)."""
        head = head or self.head()
        ckpt = self.current_checkpoint(head, slim=True)  # a view needs no lifted state
        if ckpt is None or ckpt.covers.empty:
            return stream_view(lambda: self.iter_events(head=head), ckpt, first=first)
        end = ckpt.covers.end
        return stream_view(lambda: self.iter_events(end + 1, head=head, pinned_upto=end), ckpt, first=first)

    def view_size(self, head: Head | None = None) -> int:
        """Tokens of the current view (``measure.view_tokens``): the count the head carries
        (appends and swaps keep it), else the view read and counted (heads from before it)."""
        from compactor.engine.measure import view_tokens

        head = head or self.head()
        return head.view_tokens if head.view_tokens is not None else view_tokens(self.read_view(head=head, slim=True))

    def read_view(self, *, head: Head | None = None, slim: bool = False) -> list[Event]:
        """The view the next model request is built from (reads only the segments it needs);
        ``slim``: the checkpoint read without its lifted state (``read_checkpoint_slim``)."""
        head = head or self.head()
        ckpt = self.current_checkpoint(head, slim=slim)
        if ckpt is None or ckpt.covers.empty:
            return build_view(self.read_events(head=head), ckpt)
        return build_view(self.read_pinned_and_after(ckpt.covers.end, head=head), ckpt)
