"""Stored segments decoded without pydantic's validation pass (``store/segment_decode.py``,
issue 17): the events are the validated ones - equal, the same dumps, the same fields-sets and
field order in every model - on generated, fixture and corpus sessions, and every malformed or
unusual line gives what validation gives: the same events or the same error."""

from __future__ import annotations

import json
import random
import tracemalloc
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from compactor.bench.synthetic import synthetic_sessions
from compactor.errors import IntegrityError
from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from compactor.importers import import_file
from compactor.store import LocalStore, SessionLog, caches
from compactor.store import log as log_mod
from compactor.store.segment_decode import trusted_events
from compactor.store.segments import event_line
from compactor.tokens import with_tokens
from tests.conftest import corpus_files, fixture_sessions


def _segment(events: list[Event], first: int = 1) -> bytes:
    """A segment's events as ``SessionLog._decode`` hands them to the parse."""
    lines = [b'{"seq":%d,' % (first + i) + bytes(event_line(e)) for i, e in enumerate(events)]
    return b"[" + b",".join(lines) + b"]"


def _validated(data: bytes) -> list[Event]:
    return log_mod._EVENTS.validate_json(data)


def _same_model(a: Any, b: Any, where: str) -> None:
    """``a`` and ``b`` are the same model as far as anyone can tell: type, fields-set, field
    order and values, recursively (blocks, result content, refs, usage)."""
    assert type(a) is type(b), where
    if isinstance(a, BaseModel):
        assert a.model_fields_set == b.model_fields_set, where
        assert a.__pydantic_extra__ is None and b.__pydantic_extra__ is None, where
        assert b.__pydantic_private__ is None, where
        assert list(a.__dict__) == list(b.__dict__), where
        for k in type(a).model_fields:
            _same_model(getattr(a, k), getattr(b, k), f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same_model(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a.items()) == list(b.items()), where
    else:
        assert a == b and type(a) is type(b), where
        if hasattr(a, "tzinfo"):
            assert type(a.tzinfo) is type(b.tzinfo), where


def _same_events(want: list[Event], got: list[Event], name: str) -> None:
    assert got == want, name
    for i, (a, b) in enumerate(zip(want, got)):
        _same_model(a, b, f"{name}[{i}]")
        assert b.model_dump_json() == a.model_dump_json()
        assert b.to_json_line() == a.to_json_line()
        assert b.model_dump() == a.model_dump()
        assert b.text == a.text and b.tool_uses == a.tool_uses and b.tool_results == a.tool_results


def _sessions() -> list[tuple[str, list[Event]]]:
    out = [(name, events) for name, events in synthetic_sessions(4, seed=11)]
    out += [(f"fixture-{i}", evs) for i, evs in enumerate(fixture_sessions()) if evs]
    out += [(f"corpus-{p.name}", import_file(p).events) for p in corpus_files()]
    return out


def _every_block() -> list[Event]:
    """Events holding every block type, every optional field set and unset."""
    ref = ArtifactRefBlock(uri="artifact://sha256/ab", sha256="ab", bytes=12, preview_head="h", preview_tail="t")
    return [
        Event(id="e1", role="user", blocks=[TextBlock(text="héllo \x1b[0m \u2028 😀")], at="2026-01-01T00:00:01.5Z",
              meta={"x": [1, 2.5, {"y": None}], "z": True, "big": 10**30, "f": 1e-7}),
        Event(id="e2", role="assistant", kind="message", blocks=[
            ThinkingBlock(thinking="hmm", signature="sig"), ThinkingBlock(thinking="no sig"),
            ToolUseBlock(id="c1", name="Bash", input={"command": "ls", "opts": {"a": [1, {"b": 2}]}}),
            ToolUseBlock(id="c2", name="Read"),
        ], usage=Usage(input_tokens=3, output_tokens=4), tokens=9, source="pi", at="2026-01-01T00:00:02+05:30"),
        Event(id="e3", role="user", blocks=[
            ToolResultBlock(tool_use_id="c1", content=[TextBlock(text="out"), ImageBlock(ref=ref), ref,
                                                        ImageBlock(data="aGk=", media_type="image/jpeg")], is_error=True),
            ToolResultBlock(tool_use_id="c2"),
        ], injected=True, at="2026-01-01T00:00:03"),
        Event(id="e4", role="assistant", kind="compaction", blocks=[CompactionBlock(content="sum", raw={"type": "x", "n": [1]}),
                                                                    CompactionBlock()]),
        Event(id="e5", role="system", kind="pinned", blocks=[ImageBlock(), ref], usage=Usage()),
        Event(id="ü" * 256, role="user"),
    ]


def test_every_session_decodes_to_the_validated_events() -> None:
    """Generated, fixture and corpus sessions, as stored: the fast path takes every segment
    and gives the validated events (same ==, dumps, fields-sets, field order, cached views)."""
    sessions = _sessions() + [("every-block", _every_block())]
    assert len(sessions) > 5
    for name, events in sessions:
        events = with_tokens(events)
        for start in range(0, len(events), 500):
            data = _segment(events[start:start + 500], first=start + 1)
            got = trusted_events(data)
            assert got is not None, name
            _same_events(_validated(data), got, name)


def test_the_log_reads_the_same_events_and_uses_the_fast_path(tmp_path, monkeypatch) -> None:
    """``SessionLog`` reads, through the segment decode, what validation gives; and it did
    not fall back to validation for a segment it wrote."""
    events = with_tokens(_every_block() + next(iter(synthetic_sessions(1, seed=3)))[1])
    log = SessionLog(LocalStore(tmp_path / "s"), "acme", "s1")
    for i in range(0, len(events), 7):
        log.append(events[i:i + 7])
    validated = []
    real = log_mod._EVENTS

    class Spy:
        def validate_json(self, data: bytes) -> list[Event]:
            validated.append(data)
            return real.validate_json(data)

    monkeypatch.setattr(log_mod, "_EVENTS", Spy())
    caches.SegmentCache.__init__(log.cache)
    got = SessionLog(LocalStore(tmp_path / "s"), "acme", "s1").read_events()
    assert not validated
    monkeypatch.setattr(log_mod, "trusted_events", lambda data: None)
    want = SessionLog(LocalStore(tmp_path / "s"), "acme", "s1", cache=caches.SegmentCache()).read_events()
    assert validated
    _same_events(want, got, "log")


def _outcome(data: bytes) -> tuple[str, Any]:
    try:
        events = log_mod._parse_events(data)
    except ValidationError as exc:
        return "error", (str(exc), repr(exc.errors(include_url=False, include_context=False)))
    return "ok", [(e.model_dump_json(), repr(e.model_dump()), sorted(e.model_fields_set)) for e in events]


def _want(data: bytes) -> tuple[str, Any]:
    try:
        events = _validated(data)
    except ValidationError as exc:
        return "error", (str(exc), repr(exc.errors(include_url=False, include_context=False)))
    return "ok", [(e.model_dump_json(), repr(e.model_dump()), sorted(e.model_fields_set)) for e in events]


_VALUES: list[Any] = [None, True, False, 0, 1, -1, 1.0, 2.5, -0.0, 10**20, 10**19, 2**63, -(2**63), "", "x", "1",
                      "message", "pinned", "user", "assistant", "text", [], [1], {}, {"a": 1}, "ü" * 257, "a" * 256,
                      "2026-01-01T00:00:00Z", "2026-01-01", "2026-01-01T00:00:60Z", 1700000000, 1.5e9]
_AT_TEXTS = ["2026-01-01T00:00:01Z", "2026-01-01T00:00:01.123456789Z", "2026-01-01t00:00:01z", "2026-01-01 00:00:01Z",
             "2026-01-01T00:00:01+01:75", "2026-01-01T00:00:01+23:59", "2026-01-01T00:00:01-00:00",
             "2026-01-01T00:00:01+2400", "0000-01-01T00:00:01Z", "2026-02-29T00:00:00Z", "2024-02-29T00:00:00Z",
             "2026-01-01T24:00:00Z", "2026-01-01T00:00", "2026-01-01T00:00:01.Z", "20260101T000001Z",
             "2026-01-01T00:00:01,5Z", "٢٠٢٦-01-01T00:00:01Z", "2026-01-01T00:00:01 ", "1700000000", "1e3", "now"]


def _mutations(line: dict[str, Any], rnd: random.Random) -> list[str]:
    """Lines made from one stored line: every field and every block field given each odd
    value, removed, doubled, plus keys unknown to the models."""
    out = []
    dump = lambda d: json.dumps(d, ensure_ascii=False, separators=(",", ":"))  # noqa: E731
    for key in list(line) + ["nope", "type"]:
        for value in _VALUES + ([_ABSENT] if key in line else []):
            d = dict(line)
            if value is _ABSENT:
                del d[key]
            else:
                d[key] = value
            out.append(dump(d))
    for at in _AT_TEXTS:
        out.append(dump({**line, "at": at}))
    for i, block in enumerate(line.get("blocks", [])):
        for key in list(block) + ["nope"]:
            for value in _VALUES + [_ABSENT]:
                b = dict(block)
                if value is _ABSENT:
                    b.pop(key, None)
                else:
                    b[key] = value
                blocks = list(line["blocks"])
                blocks[i] = b
                out.append(dump({**line, "blocks": blocks}))
        for inner in ("content", "ref", "usage"):
            for value in ({"type": "text", "text": 1}, {"type": "image", "ref": {"type": "text"}},
                          {"uri": "u", "sha256": "s", "bytes": 1}, {"type": "artifact_ref", "uri": "u", "sha256": "s",
                                                                  "bytes": True}, [{"type": "nope"}], [{"text": "t"}]):
                out.append(dump({**line, "blocks": [{**block, inner: value}]}))
    text = dump(line)
    # duplicated keys (the last one counts, in json and pydantic alike), raw-text edits
    out.append(text[:-1] + ',"id":"dup"}')
    out.append(text[:-1] + ',"role":"assistant","kind":"pinned"}')
    out.append(text.replace('"type":', '"type":"text","type":', 1))
    out.append(text.replace('"blocks":[', '"blocks":[{"type":"text","text":"a","text":"b"},', 1))
    for literal in ("NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1.7976931348623157e308", "123456789.123456789e-5",
                    '"\\ud800"', '"\\udc00\\ud800"', '"\\ud83d\\ude00"', '"\\u0000"', '"\\/"', '"a\\qb"', '"\x01"',
                    "[" * 150 + "]" * 150, "[" * 198 + "]" * 198, "[" * 199 + "]" * 199, "[" * 250 + "]" * 250,
                    '{"a":' * 100 + "1" + "}" * 100, "01", "1.", "-", "tru", "nul", "[1,]", "{}"):
        out.append(text[:-1] + ',"meta":{"k":%s}}' % literal)
        if line.get("blocks"):
            out.append(text.replace('"blocks":[', '"blocks":[{"type":"tool_use","id":"i","name":"n","input":{"k":%s}},'
                                    % literal, 1))
    for _ in range(60):  # random cuts and byte edits
        i = rnd.randrange(len(text))
        out.append(text[:i])
        out.append(text[:i] + rnd.choice('{}[]",:0a\\ é\x00') + text[i + 1:])
    return out


_ABSENT = object()


def test_malformed_and_unusual_lines_give_the_validated_result_or_error() -> None:
    """Thousands of lines made from stored ones (every field of every block type given odd
    types, values, datetimes, bounds, duplicates, unknown keys, bad JSON, escapes, depths):
    each gives exactly what validation gives - the same events, or the same error text and
    details. Many take the fast path (valid variations), many go to validation."""
    rnd = random.Random(17)
    base = [json.loads(b'{"seq":%d,' % (i + 1) + bytes(event_line(e))) for i, e in enumerate(with_tokens(_every_block()))]
    good = _segment(with_tokens(_every_block()))[1:-1]
    fast = slow = 0
    for line in base:
        for text in _mutations(line, rnd):
            for data in (("[" + text + "]").encode("utf-8", "surrogatepass"),
                         b"[" + good + b"," + text.encode("utf-8", "surrogatepass") + b"]"):
                if trusted_events(data) is None:
                    slow += 1
                else:
                    fast += 1
                assert _outcome(data) == _want(data), text[:300]
    assert fast > 1_000 and slow > 1_000, (fast, slow)


@pytest.mark.parametrize("raw", [
    b"[\xff]", b'[{"id":"a\xed\xa0\x80","role":"user"}]', b'[{"id":"a","role":"user"}] ', b" []", b"[]",
    b'{"id":"a","role":"user"}', b'[{"id":"a","role":"user"},]', b"[" + b'{"id":"a","role":"user"}' * 2 + b"]",
    b'[{"id":"a","role":"user","meta":{"k":1}}]\n', b"", b"null", b'[{"id":"\xc3\xa9","role":"user"}]',
])
def test_raw_bytes_give_the_validated_result_or_error(raw: bytes) -> None:
    """Not UTF-8, an encoded surrogate, whitespace, not an array, trailing commas, empty."""
    assert _outcome(raw) == _want(raw)


def test_a_stored_segment_that_does_not_parse_is_the_same_integrity_error(tmp_path) -> None:
    """A tampered segment (a bad block type, its digest fixed) raises the IntegrityError a
    validated read raises, naming the segment and the problem."""
    store = LocalStore(tmp_path / "s")
    log = SessionLog(store, "acme", "s1")
    log.append(with_tokens(_every_block()))
    head = log.head()
    seg = head.segments[0]
    path = tmp_path / "s" / seg.key
    data = path.read_bytes().replace(b'"type":"thinking"', b'"type":"thinkin"', 1)
    path.write_bytes(data)
    fresh = SessionLog(store, "acme", "s1", cache=caches.SegmentCache())
    with pytest.raises(IntegrityError) as fast:
        fresh._decode(seg, data)
    assert "do not parse" in str(fast.value) and "1.blocks.0: union_tag_invalid" in str(fast.value)
    body = b",".join(x for x in data.split(b"\n") if x.strip())
    with pytest.raises(ValidationError) as slow:
        _validated(b"[" + body + b"]")
    assert log_mod.parse_problem(slow.value) in str(fast.value)


def test_decoded_events_hold_less_than_validated_ones() -> None:
    """The point of building them (issue 17): no per-instance dict of their own. Traced bytes
    of a generated session's events, decoded both ways."""
    events = with_tokens([
        Event(id=f"u-{i}", role="assistant" if i % 2 else "user", at="2026-01-01T00:00:01Z", source="claude-code",
              meta={"line": i}, blocks=[TextBlock(text=f"Checking module {i}."), ToolUseBlock(id=f"c{i}", name="Bash",
                                                                                          input={"command": f"cat m{i}"})]
              if i % 2 else [ToolResultBlock(tool_use_id=f"c{i - 1}", content=[TextBlock(text=f"def f_{i}(): pass")])])
        for i in range(2_000)
    ])
    data = _segment(events)

    def traced(fn):
        tracemalloc.start()
        got = fn(data)
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert got
        return size

    assert traced(trusted_events) < 0.85 * traced(_validated)
