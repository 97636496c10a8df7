"""The source hash of a compaction's events in one pass (issue 17): each event's content-hash
line is made once, for both the checkpoint id (``content_hash`` of every event) and the source
hash of any covered prefix a candidate of the shrink ladder asks for."""

from __future__ import annotations

import hashlib
from operator import is_
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
        """``content_hash(events)``: the lines made ``CHUNK`` events at a time and hashed
        joined (sha256 of the joined bytes is that of the lines fed one by one), a chunk that
        is the prefix's next events fed to it at once (``PrefixHash.take``): no Python step per
        event besides its line (issue 17), and at most a chunk's lines held."""
        h = hashlib.sha256()
        prefix = self._prefix
        step = self.CHUNK
        for k in range(0, len(events), step):
            chunk = events[k:k + step]
            lines = list(map(content_hash_line, chunk))
            h.update(b"".join(lines))
            if prefix is not None:
                prefix.take(chunk, lines)
        return h.hexdigest()

    CHUNK = 1024


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

    def take(self, events: Sequence[Event], lines: list[bytes]) -> None:
        """``offer`` of each of ``events`` with its line, in order: a run that is the prefix's
        next events is hashed in pieces joined between the snapshots' boundaries."""
        n, own = self._n, self._events
        if not (len(own) - n >= len(events) and all(map(is_, own[n:n + len(events)], events))):
            for e, line in zip(events, lines):  # (e.g. a pinned event first: one by one)
                self.offer(e, line)
            return
        every, i, end = self.EVERY, 0, len(lines)
        while i < end:
            j = min(end, i + every - (self._n % every))  # to the next snapshot's boundary
            self._h.update(b"".join(lines[i:j]))
            self._n += j - i
            if self._n % every == 0:
                self._snaps.append(self._h.copy())
            i = j

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
