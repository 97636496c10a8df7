"""Parsed work objects, kept by the worker that wrote or read them (``StoreActivities``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from activities.merge import _dumps

_HOLE = "\x00compactor:nested-part\x00"
_HOLE_JSON = _dumps(_HOLE)


def dumps_nested(doc: dict[str, Any], path: Sequence[str]) -> list[bytes] | None:
    """``[_dumps(doc), _dumps(doc[path[0]]), _dumps(doc[path[0]][path[1]]), ...]``, dumping each
    nested object once: the innermost is dumped, then each parent with a placeholder where
    the child goes, and the child's bytes put in its place. Sorted-key JSON without indents
    renders a nested object exactly as it renders it alone, so each entry is the plain dump.
    None when a placeholder is not found exactly once (a value equal to it: dump plainly)."""
    objs: list[Any] = [doc]
    for name in path:
        objs.append(objs[-1][name])
    out = [_dumps(objs[-1])]
    for parent, name in zip(reversed(objs[:-1]), reversed(path)):
        shell = dict(parent)
        shell[name] = _HOLE
        data = _dumps(shell)
        if data.count(_HOLE_JSON) != 1:
            return None
        out.append(data.replace(_HOLE_JSON, out[-1], 1))
    return out[::-1]


class WorkDocs:
    """Parsed work objects by key, with the bytes they were parsed from (or written as).

    The steps of one compaction run on one worker (local activities), each reading what the
    previous one wrote: the layers document and the candidate checkpoint hold the lifted
    state, which keeps every command and file of the session (~100 KB of JSON after eight
    compactions of the bench's growing session), and parsing it again cost each step several
    ms that grew with every compaction. An entry is used only when the bytes just read are
    the bytes it was made from, so an object rewritten by another worker or removed is read
    as it is. LRU, bounded by the bytes of the entries.

    An entry may also name ``parts``: objects nested in its document with the bytes each
    dumps to (``dumped``), so a step that publishes one of them as a work object of its own
    (the layers document's state and candidate checkpoint) writes those bytes instead of
    dumping the same ~100 KB again.
    """

    MAX_BYTES = 16 << 20

    def __init__(self) -> None:
        self._d: OrderedDict[str, tuple[bytes, Any, tuple[tuple[Any, bytes], ...]]] = OrderedDict()
        self._parts: dict[int, tuple[Any, bytes]] = {}
        self._size = 0
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes, doc: Any, parts: Sequence[tuple[Any, bytes]] = ()) -> None:
        """Keep ``doc`` (parsed from or written as ``data``) under ``key``; ``parts``: (object
        nested in ``doc``, ``_dumps`` of it), held as long as the entry."""
        with self._lock:
            self._drop(self._d.pop(key, None))
            size = len(data) + sum(len(b) for _, b in parts)
            if size > self.MAX_BYTES // 4:
                return
            self._d[key] = (data, doc, tuple(parts))
            for obj, b in parts:
                self._parts[id(obj)] = (obj, b)
            self._size += size
            while self._size > self.MAX_BYTES:
                _, gone = self._d.popitem(last=False)
                self._drop(gone)

    def _drop(self, entry: tuple[bytes, Any, tuple[tuple[Any, bytes], ...]] | None) -> None:
        if entry is None:
            return
        self._size -= len(entry[0]) + sum(len(b) for _, b in entry[2])
        for obj, _ in entry[2]:
            held = self._parts.get(id(obj))
            if held is not None and held[0] is obj:
                del self._parts[id(obj)]

    def get(self, key: str, data: bytes) -> Any:
        with self._lock:
            hit = self._d.get(key)
            if hit is None or (hit[0] is not data and hit[0] != data):
                return None
            self._d.move_to_end(key)
            return hit[1]

    def dumped(self, obj: Any) -> bytes | None:
        """``_dumps(obj)`` when ``obj`` is a part of a kept entry (that very object), else None."""
        with self._lock:
            held = self._parts.get(id(obj))
            return held[1] if held is not None and held[0] is obj else None
