"""The Claude Code importer's one-pass path (issue 17): lines of the usual shape go straight to
their drafts (``_claude_code._fast_assistant`` / ``_fast_user``) and a streamed import bounds
and counts each event as it is made (``_common.Finishing``). Whatever the transcript, the
result must be the general path's: the same events (dumps, fields-sets, key order, counts),
stats, skipped lines and truncations, streamed or not, counted or not."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from compactor import importers
from compactor.bench.scale import write_session
from compactor.importers import _claude_code, import_file
from compactor.importers._common import ImportLimits
from compactor.importers._drafts import compute_stats
from tests.unit.test_importers_common import _line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _edge_transcript(seed: int, n: int = 300) -> str:
    """A random Claude Code transcript with the shapes the importer treats apart: the lines of
    ``test_importers_common._line`` (merged responses, orphan results, repeated uuids, odd
    timestamps, flags, compactions, broken and foreign lines) and more the fast path must
    leave to the general one (parts of odd types, results with images or over a 600-byte
    limit, API errors, redacted thinking)."""
    r = random.Random(seed)
    lines = []
    for i in range(n):
        if r.random() < 0.75:
            lines.append(_line(r, i))
            continue
        base: dict[str, Any] = {"uuid": f"v-{i}", "sessionId": "s", "timestamp": r.choice(
            ["2026-01-01T00:00:%02d.000Z" % (i % 60), "2026-01-01T00:00:01.5Z", " 2026-01-01T00:00:01.000Z ",
             "2026-13-01T00:00:01.000Z", None])}
        if r.random() < 0.1:
            base["isApiErrorMessage"] = True
        if r.random() < 0.5:
            part = r.choice([{"type": "text", "text": 5}, {"type": "redacted_thinking", "data": "zz"},
                             {"type": "thinking", "thinking": 3}, {"type": "weird"}, "notadict",
                             {"type": "tool_use", "id": r.choice([7, None, f"toolu_{i % 12}"]), "name": None, "input": {}}])
            msg = {"id": r.choice([f"msg_{i - 1}", 9, None]), "role": "assistant",
                   "content": [{"type": "text", "text": "ok"}, part], "usage": r.choice([0, {}, {"output_tokens": 3}])}
            lines.append(json.dumps({"type": "assistant", "message": msg, **base}))
        else:
            result = {"type": "tool_result", "tool_use_id": r.choice([f"toolu_{k}" for k in range(12)] + [3]),
                      "content": r.choice(["z" * r.randint(550, 900), [{"type": "image", "source": {"data": "AAAA"}}], None])}
            content = r.choice([[result], [result, result], [result, {"type": "text", "text": "and"}], []])
            lines.append(json.dumps({"type": "user", "message": {"role": "user", "content": content}, **base}))
    return "\n".join(lines) + "\n"


def _general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line through ``_assistant`` / ``_user``, each event bounded and counted by the sink."""
    monkeypatch.setattr(_claude_code, "_fast_assistant", lambda *a: False)
    monkeypatch.setattr(_claude_code, "_fast_user", lambda *a: False)
    monkeypatch.setattr(importers, "Finishing", lambda *a: None)


def _outcomes(path: Path) -> list[Any]:
    out = []
    for limits in (None, ImportLimits(max_inline_tool_output=600)):
        for count in (False, True):
            for streamed in (False, True):
                events: list[Any] = []
                try:
                    res = import_file(path, sink=events.extend if streamed else None, count=count, limits=limits)
                except Exception as exc:  # (the same error either way)
                    out.append((type(exc).__name__, str(exc), len(events)))
                    continue
                if not streamed:
                    events = res.events
                out.append((
                    res.format, res.stats, [s.model_dump() for s in res.skipped], [t.model_dump() for t in res.truncated],
                    [(e.model_dump_json(), sorted(e.model_fields_set), list(e.__dict__), e.__pydantic_extra__,
                      e.__pydantic_private__, [(sorted(b.model_fields_set), list(b.__dict__)) for b in e.blocks])
                     for e in events],
                ))
                # the stats counted as the events were made are those of the events made
                assert {k: res.stats[k] for k in compute_stats(events)} == compute_stats(events)
    return out


def _transcripts(tmp_path: Path) -> list[Path]:
    paths = []
    for seed in range(8):
        p = tmp_path / f"edge{seed}.jsonl"
        p.write_text(_edge_transcript(seed))
        paths.append(p)
    scale = tmp_path / "small.jsonl"
    write_session(scale, 400)
    paths.append(scale)
    paths += sorted(p for p in FIXTURES.rglob("*.jsonl") if p.is_file())
    return paths


def test_one_pass_import_gives_the_general_paths_events_stats_skips_and_truncations(tmp_path, monkeypatch) -> None:
    paths = _transcripts(tmp_path)
    fast = {p: _outcomes(p) for p in paths}
    with monkeypatch.context() as m:
        _general_path(m)
        general = {p: _outcomes(p) for p in paths}
    for p in paths:
        assert fast[p] == general[p], p.name
    # the edge cases were there: orphans, truncations (the 600-byte limit), skipped lines
    counted = [fast[p][6] for p in paths[:8] if len(fast[p][6]) == 5]
    assert len(counted) >= 6
    assert all(c[1]["orphan_results"] and c[2] for c in counted) and sum(len(c[3]) for c in counted) >= 10


def test_the_fast_path_takes_the_usual_lines(tmp_path, monkeypatch) -> None:
    """The generated session's lines all go the fast way (else the test above compares the
    general path with itself)."""
    path = tmp_path / "small.jsonl"
    write_session(path, 200)
    taken = []
    for name in ("_fast_assistant", "_fast_user"):
        real = getattr(_claude_code, name)

        def spy(*a: Any, _real: Any = real) -> bool:
            taken.append(_real(*a))
            return taken[-1]

        monkeypatch.setattr(_claude_code, name, spy)
    import_file(path, sink=lambda events: None, count=True)
    assert len(taken) == 200 and all(taken)


class _Refused(Exception):
    pass


def test_a_failing_sink_or_store_stops_the_import_with_its_own_error(tmp_path) -> None:
    path = tmp_path / "small.jsonl"
    write_session(path, 600)

    def sink(events: list[Any]) -> None:
        raise _Refused("full")

    with pytest.raises(_Refused):
        import_file(path, sink=sink, count=True)

    def spill(data: bytes) -> Any:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):  # not a ParseError nor an InvalidInput
        import_file(path, sink=lambda events: None, count=True, spill=spill,
                    limits=ImportLimits(max_inline_tool_output=16))


def test_the_usual_lines_events_keep_their_drafts_meta_and_share_the_line_number(tmp_path) -> None:
    """Memory (issue 17): an event of a usual line keeps the ``meta`` its draft was made with,
    a dict with its keys' shared table (the size of ``shared_keys_dict``'s copy, which a
    merged response's or results' draft, a key more, is finished into); a seq equal to its line number is the line's int (one int for both)."""
    import sys

    from compactor.importers import _build as build

    paths = _transcripts(tmp_path)
    merged = 0
    for path in paths:
        for count in (False, True):
            events: list[Any] = []
            try:
                import_file(path, sink=events.extend, count=count)
            except Exception:  # (a fixture of broken input)
                continue
            for e in events:
                if not e.id.isascii():
                    continue  # (validated: ``build.event`` leaves such an id to pydantic)
                assert sys.getsizeof(e.meta) == sys.getsizeof(build.shared_keys_dict(dict(e.meta))), (path.name, e.meta)
                merged += "lines" in e.meta
            if path.name == "small.jsonl":
                assert all(e.seq is e.meta["line"] for e in events) and len(events) == 400
    assert merged > 20
