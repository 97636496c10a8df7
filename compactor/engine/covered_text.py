"""What the invariants learn from a compaction's events once for all its candidates (issue
17): where identifiers occur, which calls have results, which artifact refs came with the log.
Every candidate is validated against the same events; only the cut and the view differ, so
these whole-session facts were recomputed per candidate for nothing.

``invariants.check_identifiers`` accepts an identifier the summary states when it occurs in
the session's events (covered range and tail, pinned events included), the previous checkpoint
or the state's artifact list. The events are the same for every candidate of the shrink
ladder, so whether an identifier occurs in them is one search for the whole ladder (a whole
word is known without one), not one per candidate. An identifier holding a newline (it could
span two texts of the joined haystack) is left to the full search.
"""

from __future__ import annotations

from typing import Sequence

from compactor.engine.invariants import _block_texts, _refs, _result_texts
from compactor.events import Event, ToolResultBlock


class CoveredText:
    """The searchable texts of ``events`` (as given to ``invariants.validate``), with a cache of
    the identifiers looked up. Build once per compaction; pass to ``validate``."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self._built = False
        self._found: dict[str, bool] = {}
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
        calls: list[str] = []
        bulk: list[str] = []
        for e in self.events:
            for b in e.blocks:
                calls.extend(_block_texts(b))
                if isinstance(b, ToolResultBlock):
                    bulk.extend(_result_texts(b))
        self._calls = "\n".join(calls)
        self._bulk = "\n".join(bulk)
        # an identifier that stands as a whole word somewhere occurs, no search needed
        self._words = set(self._calls.split()) | set(self._bulk.split())
        self._built = True

    def occurs(self, ident: str) -> bool | None:
        """Whether ``ident`` occurs in the events; None when this index cannot tell (a newline
        in ``ident``): search in full."""
        if "\n" in ident:
            return None
        if not self._built:
            self._build()
        got = self._found.get(ident)
        if got is None:
            got = self._found[ident] = (ident in self._words or ident in self._calls
                                        or ident in self._bulk)
        return got
