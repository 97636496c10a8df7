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
from compactor.importers._common import ImportLimits, compute_stats

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _edge_transcript(seed: int, n: int = 300) -> str:
    """A random Claude Code transcript with the shapes the importer treats apart: merged
    responses, parallel and orphan results, repeated call ids and uuids, odd timestamps, flags,
    compactions, images, non-dict parts, outputs over a small limit, broken and foreign lines."""
    r = random.Random(seed)
    ids = [f"toolu_{i}" for i in range(8)]
    lines: list[Any] = []
    for i in range(n):
        k = r.random()
        ts = r.choice(["2026-01-01T00:00:%02d.000Z" % (i % 60), "2026-01-01T00:00:01.5Z", "2026-01-01T00:00:01+02:00",
                       "", None, 1767225600000, " 2026-01-01T00:00:01.000Z ", "2026-13-01T00:00:01.000Z", "bad", True])
        base: dict[str, Any] = {"uuid": r.choice([f"u-{i}", f"u-{i % 5}", None, "", f"é-{i}", "x" * 300]), "sessionId": "s"}
        if ts is not None:
            base["timestamp"] = ts
        for flag, p in (("isSidechain", 0.08), ("isMeta", 0.05), ("isApiErrorMessage", 0.03)):
            if r.random() < p:
                base[flag] = r.choice([True, 1, "yes"])
        if k < 0.4:
            parts: list[Any] = []
            for _ in range(r.randint(0, 3)):
                t = r.random()
                if t < 0.35:
                    parts.append({"type": "text", "text": r.choice(["hi", "", "  ", "x" * r.randint(0, 700), 5])})
                elif t < 0.75:
                    parts.append({"type": "tool_use", "id": r.choice(ids + [None, 7]), "name": r.choice(["Bash", "Read", "", None]),
                                  "input": r.choice([{"command": "ls -la"}, {"path": "a.py", "n": [1, 2.5, None]}, "s", None])})
                elif t < 0.87:
                    parts.append({"type": "thinking", "thinking": r.choice(["hmm", 3]), "signature": r.choice([None, "sig"])})
                elif t < 0.92:
                    parts.append({"type": "redacted_thinking", "data": "zz"})
                elif t < 0.96:
                    parts.append({"type": "image", "source": {"media_type": "image/png", "data": "iVBORw0KGgo="}})
                else:
                    parts.append(r.choice(["notadict", {"type": "weird"}]))
            msg: dict[str, Any] = {"id": r.choice([f"msg_{i}", f"msg_{i - 1}", f"msg_{i - 2}", None, 9]), "role": "assistant",
                                   "content": r.choice([parts, parts, parts, "plain text", "", None]),
                                   "model": r.choice(["claude-x", None, 5])}
            if r.random() < 0.5:
                msg["usage"] = r.choice([{"input_tokens": r.randint(0, 9), "output_tokens": r.choice([1, None, "7"])}, {}, 0])
            lines.append({"type": "assistant", "message": msg, **base})
        elif k < 0.8:
            parts = []
            for _ in range(r.randint(0, 3)):
                t = r.random()
                if t < 0.65:
                    parts.append({"type": "tool_result", "tool_use_id": r.choice(ids + ["orphan", 3]),
                                  "content": r.choice(["out", "", "y" * r.randint(0, 1500), "z" * r.randint(550, 900), [{"type": "text", "text": "a"}],
                                                       [{"type": "image", "source": {"media_type": "image/png", "data": "AAAA"}}],
                                                       {"k": 1}, None]),
                                  "is_error": r.choice([True, False, None, 1])})
                elif t < 0.9:
                    parts.append({"type": "text", "text": r.choice(["please fix", "<system-reminder>x</system-reminder>",
                                                                    "<command-name>/clear</command-name>", " "])})
                else:
                    parts.append("notadict")
            content = r.choice([parts, parts, parts, "typed text", "<local-command-stdout>x", "<command-name>/c</command-name>", 7])
            lines.append({"type": "user", "message": {"role": "user", "content": content}, **base})
        elif k < 0.85:
            lines.append({"type": "system", "subtype": r.choice(["compact_boundary", "other"]),
                          "compactMetadata": {"trigger": "auto", "preTokens": 100}, **base})
        elif k < 0.89:
            lines.append({"type": "user", "isCompactSummary": True,
                          "message": {"role": "user", "content": r.choice(["summary", [{"type": "text", "text": "s"}]])}, **base})
        elif k < 0.94:
            lines.append({"type": r.choice(["progress", "summary", "weird", "attachment"]), **base})
        elif k < 0.96:
            lines.append({"type": "user", "message": "notadict", **base})
        else:
            lines.append(r.choice(["{bad json", "[1,2]", '{"type": "response_item", "payload": {}}',
                                   '{"type":"user","uuid":"sur","message":{"role":"user","content":"lone \\ud83d"}}', ""]))
    return "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=r.random() < 0.5) for x in lines) + "\n"


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
