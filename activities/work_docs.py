"""Parsed work objects, kept by the worker that wrote or read them (``StoreActivities``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class WorkDocs:
    """Parsed work objects by key, with the bytes they were parsed from (or written as).

    The steps of one compaction run on one worker (local activities), each reading what the
    previous one wrote: the layers document and the candidate checkpoint hold the lifted
    state, which keeps every command and file of the session (~100 KB of JSON after eight
    compactions of the bench's growing session), and parsing it again cost each step several
    ms that grew with every compaction. An entry is used only when the bytes just read are
    the bytes it was made from, so an object rewritten by another worker or removed is read
    as it is. LRU, bounded by the bytes of the entries.
    """

    MAX_BYTES = 16 << 20

    def __init__(self) -> None:
        self._d: OrderedDict[str, tuple[bytes, Any]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes, doc: Any) -> None:
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self._size -= len(old[0])
            if len(data) > self.MAX_BYTES // 4:
                return
            self._d[key] = (data, doc)
            self._size += len(data)
            while self._size > self.MAX_BYTES:
                _, (gone, _) = self._d.popitem(last=False)
                self._size -= len(gone)

    def get(self, key: str, data: bytes) -> Any:
        with self._lock:
            hit = self._d.get(key)
            if hit is None or (hit[0] is not data and hit[0] != data):
                return None
            self._d.move_to_end(key)
            return hit[1]
