"""Process-wide caches of the session log: verified segments, event-id indexes, verified
checkpoints. Each is an LRU bounded by size or count, shared between short-lived
``SessionLog`` objects and threads (entries are immutable or guarded by a lock).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Sequence

from compactor.events import Event
from compactor.records import Checkpoint, Segment


class SegmentCache:
    """Verified segment bytes and parsed events, by (key, sha256); LRU bounded by size.

    Safe to share between SessionLog objects and threads: entries are immutable. Parsed events
    are charged at ``PARSED_FACTOR`` x their bytes (pydantic objects outweigh the JSON).
    """

    PARSED_FACTOR = 4

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self._d: OrderedDict[tuple[str, str], list] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        # (directory of the key, first seq) -> cached segments starting there (decoded_prefix)
        self._starts: dict[tuple[str, int], set[tuple[str, str]]] = {}

    def _cost(self, v: list) -> int:
        return len(v[0]) * (1 + (self.PARSED_FACTOR if v[1] is not None else 0))

    def get(self, seg: Segment) -> list | None:
        with self._lock:
            v = self._d.get((seg.key, seg.sha256))
            if v is not None:
                self._d.move_to_end((seg.key, seg.sha256))
            return v

    def put(self, seg: Segment, data: bytes, events: list[Event] | None = None) -> list:
        k = (seg.key, seg.sha256)
        with self._lock:
            v = self._d.get(k)
            if v is None:
                v = [data, events, seg.first, seg.last]
                self._d[k] = v
                self._size += self._cost(v)
                self._starts.setdefault((seg.key.rpartition("/")[0], seg.first), set()).add(k)
            elif events is not None and v[1] is None:
                self._size -= self._cost(v)
                v[1] = events
                self._size += self._cost(v)
            else:
                return v
            while self._size > self.max_bytes and len(self._d) > 1:
                gone, old = self._d.popitem(last=False)
                self._size -= self._cost(old)
                start = (gone[0].rpartition("/")[0], old[2])
                same = self._starts.get(start)
                if same is not None:
                    same.discard(gone)
                    if not same:
                        del self._starts[start]
            return v

    def decoded_prefix(self, seg: Segment, data: bytes) -> tuple[list[Event], int]:
        """Events already decoded for the start of ``data``, the bytes of ``seg``, and how many
        bytes of it they cover.

        An append folds the log's small tail segments into one new segment whose bytes are
        theirs followed by the new events' lines (``SessionLog._plan``); a reader that decoded
        those segments before decodes only the new lines. Used segments are consecutive cached
        segments of the same log, each decoded, whose bytes are exactly the next part of
        ``data`` and end at a line break; the events are shared (they are immutable).
        """
        where = seg.key.rpartition("/")[0]
        events: list[Event] = []
        pos, first = 0, seg.first
        with self._lock:
            while first <= seg.last:
                best = None
                for k in self._starts.get((where, first)) or ():
                    v = self._d[k]
                    if (v[1] is not None and v[3] <= seg.last and (best is None or v[3] > best[3])
                            and v[0].endswith(b"\n") and data.startswith(v[0], pos)):
                        best = v
                if best is None:
                    break
                events.extend(best[1])
                pos += len(best[0])
                first = best[3] + 1
        return events, pos


class _IdIndex:
    """Event id -> seq for seqs 1..``upto`` of one session log. Shared, so guarded by a lock."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.upto = 0
        self.lock = threading.Lock()

    def committed(self, ids: Sequence[str], first: int) -> None:
        """Record ids a writer just committed at ``first..``."""
        with self.lock:
            for n, eid in enumerate(ids):
                self.ids.setdefault(eid, first + n)
            if self.upto >= first - 1:
                self.upto = max(self.upto, first + len(ids) - 1)


_INDEXES: OrderedDict[tuple[str, str, str, str], _IdIndex] = OrderedDict()
_INDEXES_LOCK = threading.Lock()
MAX_SHARED_INDEXES = 256


def _shared_index(key: tuple[str, str, str, str]) -> _IdIndex:
    """One id index per log per process, so short-lived SessionLog objects stay warm."""
    with _INDEXES_LOCK:
        idx = _INDEXES.get(key)
        if idx is None:
            idx = _INDEXES[key] = _IdIndex()
            while len(_INDEXES) > MAX_SHARED_INDEXES:
                _INDEXES.popitem(last=False)
        else:
            _INDEXES.move_to_end(key)
        return idx


_VERIFIED_CKPTS: OrderedDict[tuple[str, str, str], Checkpoint] = OrderedDict()
_VERIFIED_CKPTS_LOCK = threading.Lock()
MAX_VERIFIED_CKPTS = 1024


def _verified_ckpt(key: tuple[str, str, str], ckpt: Checkpoint | None = None) -> Checkpoint | None:
    """Process-wide cache of checkpoints verified against a head digest, by (store, key, sha256).

    Appends check the head's checkpoint; with this, a short-lived SessionLog per request reads
    it once per process, not once per append.
    """
    with _VERIFIED_CKPTS_LOCK:
        if ckpt is None:
            hit = _VERIFIED_CKPTS.get(key)
            if hit is not None:
                _VERIFIED_CKPTS.move_to_end(key)
            return hit
        _VERIFIED_CKPTS[key] = ckpt
        while len(_VERIFIED_CKPTS) > MAX_VERIFIED_CKPTS:
            _VERIFIED_CKPTS.popitem(last=False)
        return ckpt
