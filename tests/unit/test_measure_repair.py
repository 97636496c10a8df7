"""``measure.repair_tokens`` works from the events (no rendering); it must give what the
rendered request adds: placeholder results for unanswered calls, a "(continued)" first turn."""

from __future__ import annotations

import random
from pathlib import Path

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine.measure import _repair_tokens_rendered, render_request, repair_tokens, view_tokens
from compactor.engine.view import build_view, place_results
from compactor.events import Event
from compactor.tokens import count_event
from tests.conftest import corpus_files


def _sessions() -> list[list[Event]]:
    from compactor.importers import import_file

    return [evs for _, evs in synthetic_sessions(3, seed=2)] + [import_file(p).events for p in corpus_files()]


def test_repair_tokens_match_the_rendered_request() -> None:
    rnd = random.Random(3)
    repaired = 0
    for events in _sessions():
        for _ in range(12):
            # random windows and dropped events: calls left unanswered, results without calls,
            # views opening on an assistant turn
            a = rnd.randrange(len(events))
            b = rnd.randrange(a, len(events)) + 1
            view = [e for e in events[a:b] if rnd.random() > 0.15]
            view = place_results(view, None)
            got = repair_tokens(view)
            assert got == _repair_tokens_rendered(view)
            repaired += got > 0
    assert repaired > 10


def test_view_tokens_count_the_placeholders_render_request_adds() -> None:
    for events in _sessions()[:3]:
        view = build_view(events[: len(events) // 2], None)
        system, messages = render_request(view)
        placeholders = sum(1 for m in messages for b in m["content"]
                           if b.get("type") == "tool_result" and b.get("is_error")
                           and b["content"][0]["text"].startswith("[no result"))
        assert (view_tokens(view) > sum(count_event(e) for e in view)) == (placeholders > 0
                                                                            or messages[0]["content"][0].get("text") == "(continued)")


def test_a_view_counted_as_it_is_made_counts_what_the_built_view_does() -> None:
    """The replacement layers count the cleared view event by event (``iter_view`` +
    ``streamed_view_tokens``) instead of building it whole: same number, and the running repair
    count agrees with ``repair_tokens`` of every prefix read so far."""
    from compactor.engine.layers import clear_old_tool_results
    from compactor.engine.measure import RepairCount, streamed_view_tokens
    from compactor.engine.policy import make_policy
    from compactor.engine.view import iter_view
    from compactor.records import Checkpoint, SeqRange

    rnd = random.Random(5)
    cleared = 0
    for events in _sessions():
        out = clear_old_tool_results([e for e in events if e.kind != "pinned"], make_policy("default"))
        cleared += len(out.replacements)
        ckpt = Checkpoint(id="ck-x", tenant="t", session="s", covers=SeqRange(start=1, end=0),
                          replacements=out.replacements, snapshot_version=len(events))
        view = build_view(events, ckpt)
        assert [e.model_dump() for e in iter_view(events, ckpt)] == [e.model_dump() for e in view]
        assert streamed_view_tokens(iter_view(events, ckpt)) == view_tokens(view)
        count = RepairCount()
        stops = {rnd.randrange(len(view)) for _ in range(8)} if view else set()
        for i, e in enumerate(view):
            assert count.add(e)
            if i in stops:
                assert count.total() == repair_tokens(view[: i + 1])
    assert cleared > 20


def _fixture_sessions(tmp: Path) -> list[list[Event]]:
    """The sessions above, every importable fixture, and a generated session of small events."""
    from compactor.bench.scale import write_session
    from compactor.importers import import_file
    from tests.conftest import FIXTURES

    out = _sessions()
    for p in sorted(FIXTURES.rglob("*")):
        if p.is_file() and p.suffix in (".jsonl", ".json"):
            try:
                out.append(import_file(p).events)
            except Exception:  # (fixtures of malformed input)
                continue
    write_session(tmp / "small.jsonl", 600)
    out.append(import_file(tmp / "small.jsonl").events)
    return out


def test_the_quick_count_is_the_general_count_or_declines(tmp_path: Path) -> None:
    """``quick_view_tokens`` (one loop) gives ``view_tokens``'s general walk, and with
    ``placed`` the count of the built view (``streamed_view_tokens(iter_view_roles(...))``, as
    ``plan`` counted it), on whole sessions and on random windows with events dropped (calls
    left unanswered, results without their call, views opening on an assistant turn); it
    declines (None) only where a result is placed as text, a provider compaction block or
    a late-result list is shown."""
    from compactor.engine.measure import quick_view_tokens, streamed_view_tokens
    from compactor.engine.view import LATE_RESULTS, iter_view_roles
    from compactor.events import CompactionBlock

    def special(evs: list[Event]) -> bool:
        return any(e.meta.get(LATE_RESULTS) or any(isinstance(b, CompactionBlock) and b.raw is not None
                                                   for b in e.blocks) for e in evs)

    rnd = random.Random(11)
    counted = declined = 0
    for events in _fixture_sessions(tmp_path):
        windows = [events]
        for _ in range(10):
            a = rnd.randrange(len(events)) if events else 0
            b = rnd.randrange(a, len(events)) + 1 if events else 0
            windows.append([e for e in events[a:b] if rnd.random() > 0.15])
        for evs in windows:
            general = sum(count_event(e) for e in evs) + repair_tokens(evs)
            quick = quick_view_tokens(evs)
            assert quick == general or (quick is None and special(evs))
            late: list[int] = []
            shown = streamed_view_tokens(iter_view_roles(evs, None, late=late), roles=True)
            got = quick_view_tokens(evs, placed=True)
            assert got == shown or (got is None and (late or special(evs)))
            if shown is not None:
                assert shown == view_tokens(build_view(evs, None))
            counted += got is not None
            declined += got is None
    assert counted > 100 and declined > 10
