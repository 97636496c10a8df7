"""An import fills each event's ``tool_uses`` and ``tool_results`` as it makes it
(``importers._drafts._Finisher.events``, issue 17: the default target's count read both of every event first).
What an event then answers must be what the properties compute: the same blocks, the same
lists (the event's ``blocks`` itself, the shared empty one, or one of exactly their number),
and so the same counts, views and compactions as the events validation makes of the same
values."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from compactor.engine.measure import quick_view_tokens, view_tokens
from compactor.events import Event, ToolResultBlock, ToolUseBlock, _of_type
from compactor.importers import import_file
from compactor.importers._common import ImportLimits
from tests.conftest import corpus_files
from tests.unit.test_importers_fast_path import FIXTURES, _transcripts


def _paths(tmp_path: Path) -> list[Path]:
    """The fast path's edge cases, a generated session and the fixtures (JSON ones too)."""
    return _transcripts(tmp_path) + sorted(p for p in FIXTURES.rglob("*.json") if p.is_file())


def _imports(path: Path) -> list[list[Event]]:
    """The events of every way the CLIs import ``path`` (plain, streamed, counted, bounded)."""
    out = []
    for limits in (None, ImportLimits(max_inline_tool_output=600)):
        for count in (False, True):
            for streamed in (False, True):
                events: list[Event] = []
                try:
                    res = import_file(path, sink=events.extend if streamed else None, count=count, limits=limits)
                except Exception:  # (a fixture of broken input)
                    continue
                out.append(events if streamed else res.events)
    return out


def _same_lists(e: Event, where: Any) -> bool:
    """``e``'s cached calls and results, where set, are what the properties compute; True when
    the import set them."""
    filled = False
    for name, cls in (("tool_uses", ToolUseBlock), ("tool_results", ToolResultBlock)):
        if name not in e.__dict__:
            continue
        filled = True
        got, want = e.__dict__[name], _of_type(e.blocks, cls)
        assert got == want, where
        assert all(x is y for x, y in zip(got, want, strict=True)), where
        assert (got is e.blocks) == (want is e.blocks) and (got is _of_type([], cls)) == (not want), where
        assert sys.getsizeof(got) == sys.getsizeof(want), where
    return filled


def test_imported_events_know_their_calls_and_results(tmp_path) -> None:
    filled = 0
    seen = 0
    for path in _paths(tmp_path):
        for events in _imports(path):
            made = [_same_lists(e, (path.name, e.seq)) for e in events]
            if path.name == "small.jsonl":  # (the usual lines: each event's filled)
                assert all(made) and len(made) >= 400
            seen += len(made)
            filled += sum(made)
            # a count that reads them: the same as on the events made afresh (nothing cached)
            fresh = [Event.model_validate(e.model_dump()) for e in events]
            assert quick_view_tokens(events, placed=True) == quick_view_tokens(fresh, placed=True), path.name
            assert view_tokens(events) == view_tokens(fresh), path.name
    assert filled > seen / 2  # (the import did fill them: else this test compares nothing)


@pytest.mark.corpus
@pytest.mark.skipif(not corpus_files(), reason="no corpus on this machine")
def test_corpus_events_know_their_calls_and_results() -> None:
    filled = 0
    for path in corpus_files():
        events: list[Event] = []
        try:
            import_file(path, sink=events.extend, count=True)
        except Exception:
            continue
        filled += sum(_same_lists(e, (path.name, e.seq)) for e in events)
        fresh = [Event.model_validate(e.model_dump()) for e in events]
        assert quick_view_tokens(events, placed=True) == quick_view_tokens(fresh, placed=True), path.name
    assert filled
