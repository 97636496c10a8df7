"""What the invariants learn from a compaction's events once for all its candidates (issue
17): where each identifier first occurs, which calls have results, which artifact refs came
with the log. Every candidate is validated against the same events; only the cut and the view
differ, so these whole-session facts were recomputed per candidate for nothing.

``invariants.check_identifiers`` accepts an identifier the summary states when it occurs in
the covered events (pinned events included), the previous checkpoint or the state's artifact
list. Every candidate of the shrink ladder covers a longer prefix of the same events, so
"does it occur in events up to seq ``end``" is "is its first occurrence at or before
``end``": one search per identifier for the whole ladder, not one per candidate over a
haystack that grows with the session. An identifier holding a newline (it could span two
texts of the joined haystack) is left to the full search.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Sequence

from compactor.engine.invariants import _block_texts, _refs, _result_texts
from compactor.events import Event, ToolResultBlock


class _Texts:
    """One text per event (its searchable parts joined), concatenated, with start offsets."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.starts: list[int] = []
        self.seqs: list[int] = []
        self._at = 0
        self.text = ""

    def add(self, seq: int, parts: list[str], words: dict[str, int]) -> None:
        if not parts:
            return
        t = "\n".join(parts)
        for w in t.split():
            words.setdefault(w, seq)
        self.chunks.append(t)
        self.starts.append(self._at)
        self.seqs.append(seq)
        self._at += len(t) + 1

    def done(self) -> None:
        self.text = "\n".join(self.chunks)
        self.chunks = []

    def first_seq(self, ident: str) -> int | None:
        i = self.text.find(ident)
        return None if i < 0 else self.seqs[bisect_right(self.starts, i) - 1]


class CoveredText:
    """The searchable texts of ``events`` (as given to ``invariants.validate``), indexed by the
    first event each identifier occurs in. Build once per compaction; pass to ``validate``."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self._built = False
        self._first: dict[str, tuple[int | None, int | None]] = {}
        self._answered: set[str] | None = None
        self._source_refs: set[tuple[str, str]] | None = None

    def answered(self) -> set[str]:
        """Ids of the calls a result in the events answers (read-only: shared)."""
        if self._answered is None:
            self._answered = {r.tool_use_id for e in self.events for r in e.tool_results}
        return self._answered

    def source_refs(self) -> set[tuple[str, str]]:
        """(sha256, uri) of every artifact ref the events carry (read-only: shared)."""
        if self._source_refs is None:
            self._source_refs = {(r.sha256, r.uri) for e in self.events for r in _refs(e.blocks)}
        return self._source_refs

    def _build(self) -> None:
        pinned: list[str] = []
        pinned_bulk: list[str] = []
        self._calls = _Texts()
        self._bulk = _Texts()
        # word -> first seq it stands alone in: an identifier that is a whole word there occurs
        # by then (maybe earlier, inside a longer word: then ``find`` tells), no search needed
        self._words: dict[str, int] = {}
        last = None
        self.ordered = True
        for e in self.events:
            parts: list[str] = []
            bodies: list[str] = []
            for b in e.blocks:
                parts.extend(_block_texts(b))
                if isinstance(b, ToolResultBlock):
                    bodies.extend(_result_texts(b))
            if e.kind == "pinned":
                pinned += parts
                pinned_bulk += bodies
                continue
            if last is not None and e.seq <= last:
                self.ordered = False
            last = e.seq
            self._calls.add(e.seq, parts, self._words)
            self._bulk.add(e.seq, bodies, self._words)
        self._calls.done()
        self._bulk.done()
        self._pinned = "\n".join(pinned)
        self._pinned_bulk = "\n".join(pinned_bulk)
        self._built = True

    def occurs(self, ident: str, end: int) -> bool | None:
        """Whether ``ident`` occurs in a pinned event or one with seq <= ``end``; None when this
        index cannot tell (a newline in ``ident``, events out of order): search in full."""
        if "\n" in ident:
            return None
        if not self._built:
            self._build()
        if not self.ordered:
            return None
        if ident in self._pinned or ident in self._pinned_bulk:
            return True
        word = self._words.get(ident)
        if word is not None and word <= end:
            return True
        got = self._first.get(ident)
        if got is None:
            got = self._first[ident] = (self._calls.first_seq(ident), self._bulk.first_seq(ident))
        return any(s is not None and s <= end for s in got)
