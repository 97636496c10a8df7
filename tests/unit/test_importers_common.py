"""compactor.importers._common: a streamed, counted import of Claude Code transcripts full of
edge cases (merged responses, repeated and orphan call ids, compactions, bad and mixed lines,
escapes, surrogates, nesting, big outputs) gives the events, stats, skips and truncations of
the validated, uncounted path; the JSONL reader gives the objects ``_loads`` gives."""

from __future__ import annotations

import gc
import json
import random
from pathlib import Path

import pytest

from compactor import tokens
from compactor.events import Event
from compactor.importers import import_file
from compactor.errors import ParseError
from compactor.importers._common import (
    _BAD_ESCAPE,
    ImportLimits,
    Source,
    TooDeep,
    _loads,
    iter_jsonl,
)
from compactor.importers._drafts import Builder
from compactor.importers._lines import line_format
from compactor.tokens import with_tokens


def _line(r: random.Random, i: int) -> str:
    """One line of a Claude Code log, or of something that only looks like one."""
    ids = [f"toolu_{k}" for k in range(12)]
    base = {"uuid": r.choice([f"u-{i}", f"u-{i % 7}", None, "", f"é-{i}", "x" * 300]), "sessionId": "s",
            "timestamp": r.choice(["2026-01-01T00:00:01.000Z", "2026-01-01T00:00:01+02:00", "", 1767225600000, "bad"])}
    if r.random() < 0.1:
        base["isSidechain"] = True
    if r.random() < 0.05:
        base["isMeta"] = True
    k = r.random()
    if k < 0.35:
        parts = []
        for _ in range(r.randint(0, 3)):
            t = r.random()
            if t < 0.4:
                parts.append({"type": "text", "text": r.choice(["hi", "", "  ", "é \u2028 ok", "x" * r.randint(0, 900)])})
            elif t < 0.8:
                parts.append({"type": "tool_use", "id": r.choice(ids), "name": r.choice(["Bash", "Read", ""]),
                              "input": r.choice([{"command": "ls"}, {"n": [1, 2.5, None, True]}, "s", None, {"é": {}}])})
            elif t < 0.9:
                parts.append({"type": "thinking", "thinking": "hmm", "signature": r.choice([None, "sig"])})
            else:
                parts.append({"type": "image", "source": {"media_type": "image/png", "data": "iVBORw0KGgo="}})
        msg = {"id": r.choice([f"msg_{i}", f"msg_{i - 1}", None]), "role": "assistant",
               "content": r.choice([parts, parts, "plain", ""]), "model": r.choice(["m", None])}
        if r.random() < 0.5:
            msg["usage"] = r.choice([{"input_tokens": r.randint(0, 9), "output_tokens": r.choice([1, None, "7"])}, {}, None])
        return json.dumps({"type": "assistant", "message": msg, **base}, ensure_ascii=r.random() < 0.5)
    if k < 0.75:
        parts = []
        for _ in range(r.randint(0, 3)):
            t = r.random()
            if t < 0.6:
                parts.append({"type": "tool_result", "tool_use_id": r.choice(ids + ["orphan"]),
                              "content": r.choice(["out", "", "y" * r.randint(0, 1500), [{"type": "text", "text": "a"}],
                                                   {"k": 1}, None, 5]),
                              "is_error": r.choice([True, False, None, 1])})
            elif t < 0.9:
                parts.append({"type": "text", "text": r.choice(["fix it", "<system-reminder>x</system-reminder>",
                                                                 "<command-name>/clear</command-name>", " "])})
            else:
                parts.append("not a part")
        content = r.choice([parts, parts, parts, "typed", "<local-command-stdout>x", 7])
        return json.dumps({"type": "user", "message": {"role": "user", "content": content}, **base},
                          ensure_ascii=r.random() < 0.5)
    if k < 0.8:
        return json.dumps({"type": "system", "subtype": r.choice(["compact_boundary", "other"]),
                           "compactMetadata": {"trigger": "auto", "preTokens": 100}, **base})
    if k < 0.85:
        return json.dumps({"type": "user", "isCompactSummary": True, "message": {"role": "user", "content": "sum"}, **base})
    if k < 0.9:
        return json.dumps({"type": r.choice(["progress", "summary", "weird"]), **base})
    return r.choice(["{bad json", "[1,2]", '{"type": "response_item", "payload": {}}', '  {"type": "user", "uuid": "w", '
                     '"message": {"role": "user", "content": "ws"}}  ', '{"type": "user", "uuid": "e", "message": '
                     '{"role": "user", "content": "bad \\q escape"}}', '{"type": "user", "uuid": "s", "message": '
                     '{"role": "user", "content": "lone \\ud83d here"}}', '{"a": 1} {"b": 2}', '{"a": [[[[1]]]]}',
                     '{"a": "\\u00e9"}', '{"type": "user"} x'])


def _transcript(path: Path, seed: int, n: int = 300) -> Path:
    r = random.Random(seed)
    path.write_text("\n".join(_line(r, i) for i in range(n)) + "\n")
    return path


def _validated(e: Event) -> Event:
    return Event.model_validate(e.model_dump())


@pytest.mark.parametrize("seed", range(6))
def test_a_streamed_counted_import_gives_the_validated_events_with_tokens_gives(tmp_path, seed) -> None:
    path = _transcript(tmp_path / "t.jsonl", seed)
    for limits in (None, ImportLimits(max_inline_tool_output=600)):  # (the small one cuts outputs)
        plain = import_file(path, limits=limits)
        want = with_tokens([_validated(e) for e in plain.events])
        streamed: list[Event] = []
        res = import_file(path, limits=limits, sink=streamed.extend, count=True)
        assert [e.model_dump_json() for e in streamed] == [e.model_dump_json() for e in want]
        assert [e.model_fields_set for e in streamed] == [e.model_fields_set for e in want]
        assert [e.tokens for e in streamed] == [tokens.count_blocks(e.blocks) for e in want]
        assert (res.stats, res.skipped, res.truncated) == (plain.stats, plain.skipped, plain.truncated)
        assert res.stats["events"] == len(want)
        assert res.stats["user_messages"] == sum(e.is_user_request for e in want)
        assert res.stats["tool_results"] == sum(len(e.tool_results) for e in want)
        assert res.stats["messages"] == sum(e.kind == "message" for e in want)
        assert res.stats["injected"] == sum(e.injected for e in want)
    assert plain.skipped and plain.stats["orphan_results"] and plain.stats["compactions"]  # the cases are there


def test_a_counted_event_keeps_its_fields_in_its_class_values(tmp_path) -> None:
    """The count of an imported event is set without making a ``__dict__`` of its own (64
    bytes an event, issue 17): its fields stay in the class's shared-key values."""
    from compactor.bench.scale import write_session

    path = tmp_path / "small.jsonl"
    write_session(path, 300)
    events: list[Event] = []
    import_file(path, sink=events.extend, count=True)
    assert events
    for e in events:
        assert not any(type(r) is dict and "seq" in r for r in gc.get_referents(e))
        assert e.tokens == tokens.count_blocks(e.blocks) and e == _validated(e)


def _read_before(text: str, depth: int) -> tuple[list[tuple[int, object]], list[tuple[int, str]], int]:
    """What ``iter_jsonl`` read before its fast path (each line through ``_loads``): the
    objects, the skipped lines, the repaired count; "too deep" where it stopped."""
    out: list[tuple[int, object]] = []
    skipped, repaired = [], 0
    for no, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = _loads(line, depth)
        except TooDeep:
            return out + [(no, "too deep")], skipped, repaired
        except json.JSONDecodeError as e:
            try:
                obj = _loads(_BAD_ESCAPE.sub(r"\\\\", line), depth, strict=False)
                repaired += 1
            except TooDeep:
                return out + [(no, "too deep")], skipped, repaired
            except json.JSONDecodeError:
                skipped.append((no, f"invalid JSON: {e.msg} (column {e.colno})"))
                continue
        if not isinstance(obj, dict):
            skipped.append((no, "not a JSON object"))
            continue
        other = line_format(obj)
        if other is not None and other != "claude-code":
            skipped.append((no, f"a {other} line in a claude-code file (mixed formats)"))
            continue
        out.append((no, obj))
    return out, skipped, repaired


@pytest.mark.parametrize("seed", range(3))
def test_the_jsonl_reader_gives_what_loads_gives(seed) -> None:
    r = random.Random(seed)
    lines = [_line(r, i) for i in range(400)]
    lines += ['{"a": "\\ud800"}', '{"a": "\\ud83d\\ude00"}', '{"a": ' + "[" * 8 + "]" * 8 + "}", "{}"]
    text = "\n".join(lines)
    for depth in (200, 30, 5):
        b = Builder("claude-code", "k")
        got: list[tuple[int, object]] = []
        try:
            got.extend(iter_jsonl(Source("t", ImportLimits(max_json_depth=depth), data=text.encode()), b))
        except ParseError as exc:
            got.append((exc.details["line"], "too deep"))
        assert [(no, repr(o)) for no, o in got] == [(no, repr(o)) for no, o in _read_before(text, depth)[0]]
        assert ([(s.line, s.reason) for s in b.skipped], b.repaired) == _read_before(text, depth)[1:]


def test_a_text_with_a_lone_surrogate_is_counted_as_tiktoken_counts_it() -> None:
    text = "half a pair \ud83d here"
    assert tokens._count(text) == len(tokens.encoding().encode_ordinary(text)) > 0
