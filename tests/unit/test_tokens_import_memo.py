"""An import's count (issue 17, memory): each imported event carries ``count_blocks`` of its
blocks, counted through memos of the import's own (``tokens.import_counter``), so the texts
of a big import do not stay in ``count_text``'s memos (131k texts, 14 MB at 100k small
events) once it is over; on generated, edge-case and corpus sessions, streamed or not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor import tokens
from compactor.bench.scale import write_session
from compactor.events import Event
from compactor.importers import import_file
from tests.conftest import corpus_files


def _shared_memos() -> list[int]:
    return [tokens._count_short.cache_info().currsize, tokens._count_cached.cache_info().currsize]


def _repeats(path: Path, n: int) -> Path:
    """A session that runs the same few commands and gets the same outputs again and again,
    with long outputs too (the import's memos' hits)."""
    lines = []
    for i in range(n):
        k = i % 5
        out = ("line of output %d\n" % k) * (40 if k == 4 else 1)  # (k == 4: over SHORT_TEXT)
        lines.append({"type": "assistant", "uuid": f"a{i}", "sessionId": "s", "timestamp": "2026-01-01T00:00:01.000Z",
                      "message": {"id": f"m{i}", "role": "assistant", "content": [
                          {"type": "text", "text": f"Step {k}."},
                          {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"run {k}"}}]}})
        lines.append({"type": "user", "uuid": f"u{i}", "sessionId": "s", "timestamp": "2026-01-01T00:00:02.000Z",
                      "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": out}]}})
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return path


def _sessions(tmp_path: Path) -> list[Path]:
    from tests.unit.test_importers_common import _transcript  # (its edge cases)

    small = tmp_path / "small.jsonl"
    write_session(small, 3000)

    return [small, _repeats(tmp_path / "repeats.jsonl", 400), *(_transcript(tmp_path / f"e{s}.jsonl", s) for s in range(3)),
            *corpus_files()]


def _counted_as_defined(events: list[Event]) -> list[int]:
    return [tokens.count_blocks(e.blocks) for e in events]


@pytest.mark.parametrize("streamed", [True, False])
def test_an_import_counts_as_count_blocks_and_leaves_the_shared_memos_as_they_were(tmp_path, streamed):
    for path in _sessions(tmp_path):
        tokens.count_text("warm up")  # (the tokenizer loaded: its first count fills a memo)
        before = _shared_memos()
        events: list[Event] = []
        if streamed:
            res = import_file(path, sink=events.extend, count=True)
        else:
            res = import_file(path, count=True)
            events = res.events
        assert events, path
        assert _shared_memos() == before, path  # the import's texts are not kept there
        assert [e.tokens for e in events] == _counted_as_defined(events), path
        assert [e.model_dump_json() for e in events] == [
            e.model_dump_json() for e in tokens.with_tokens(e.with_(tokens=None) for e in events)
        ], path


def test_an_imports_own_memos_count_a_repeated_text_once(tmp_path, monkeypatch):
    """Repeats (the same command, the same output) are counted from the import's memos: the
    tokenizer sees each distinct text once per import, as it did with the shared memos."""
    seen: list[str] = []
    for name in ("_count_small", "_count"):
        real = getattr(tokens, name)
        monkeypatch.setattr(tokens, name, lambda text, real=real: seen.append(text) or real(text))
    path = _repeats(tmp_path / "r.jsonl", 50)
    for streamed in (True, False):
        seen.clear()
        events: list[Event] = []
        res = import_file(path, sink=events.extend, count=True) if streamed else import_file(path, count=True)
        events = events or res.events
        assert len(events) == 100
        assert sorted(seen) == sorted(set(seen)) and len(seen) == 5 * 3  # (5 steps: text, call, output)
        monkeypatch.undo()
        assert [e.tokens for e in events] == _counted_as_defined(events)
        for name in ("_count_small", "_count"):
            real = getattr(tokens, name)
            monkeypatch.setattr(tokens, name, lambda text, real=real: seen.append(text) or real(text))
