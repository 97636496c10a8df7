"""The source hash of a compaction's events in one pass (issue 17): each event's content-hash
line is made once, for both the checkpoint id (``content_hash`` of every event) and the source
hash of any covered prefix a candidate of the shrink ladder asks for."""

from __future__ import annotations

import hashlib
from typing import Sequence

from compactor.events import Event, content_hash_line


class HashLines:
    """``content_hash`` of every event, feeding the covered events' lines to a
    ``PrefixHash`` in the same pass: each event's content-hash line (a JSON dump) is made
    once per compaction for both the checkpoint id and the source hash (5% of a compaction
    of small events when made twice), and no line is kept (issue 17, memory: ~230 bytes per
    event held for the whole compaction)."""

    def __init__(self, prefix: PrefixHash | None = None) -> None:
        self._prefix = prefix

    def digest(self, events: Sequence[Event]) -> str:
        """``content_hash(events)``."""
        h = hashlib.sha256()
        for e in events:
            line = content_hash_line(e)
            h.update(line)
            if self._prefix is not None:
                self._prefix.offer(e, line)
        return h.hexdigest()


class PrefixHash:
    """``content_hash(events[:n])`` for any ``n`` in about one pass (the hash is a running
    sha256 over the events in order, so a longer prefix continues a copy of the shorter one).
    A copy of the running hash is kept every ``EVERY`` events: a shorter prefix than the
    longest asked for continues the copy before it (at most ``EVERY - 1`` lines again)."""

    EVERY = 256

    def __init__(self, events: Sequence[Event]) -> None:
        self._events = events
        self._h = hashlib.sha256()
        self._n = 0
        self._snaps = [self._h.copy()]  # the running hash after 0, EVERY, 2 * EVERY... events

    def _step(self, line: bytes) -> None:
        self._h.update(line)
        self._n += 1
        if self._n % self.EVERY == 0:
            self._snaps.append(self._h.copy())

    def offer(self, e: Event, line: bytes) -> None:
        """``e``'s content-hash line, when ``e`` is the next event of the prefix."""
        if self._n < len(self._events) and self._events[self._n] is e:
            self._step(line)

    def at(self, n: int) -> str:
        if n >= self._n:
            while self._n < n:
                self._step(content_hash_line(self._events[self._n]))
            return self._h.copy().hexdigest()
        k = n // self.EVERY
        h = self._snaps[k].copy()
        for e in self._events[k * self.EVERY:n]:
            h.update(content_hash_line(e))
        return h.hexdigest()
