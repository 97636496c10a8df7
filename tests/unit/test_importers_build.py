"""compactor.importers._build: blocks and events built without re-validation are the instances
validation gives (same values, fields-set, dumps); anything validation would change or refuse
still goes through it; a counted import gives the events ``with_tokens`` gives."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from compactor.events import Event, ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Usage
from compactor.importers import _build as build
from compactor.importers import import_file
from compactor.importers._common import _json_object
from compactor.tokens import with_tokens

FIXTURES = Path(__file__).parent.parent / "fixtures"
CORPUS = Path("/work/shared/corpus")


def same(got, want) -> None:
    assert type(got) is type(want)
    assert got == want
    assert got.model_dump_json() == want.model_dump_json()
    assert got.model_dump_json(exclude_unset=True) == want.model_dump_json(exclude_unset=True)
    assert got.model_fields_set == want.model_fields_set
    assert got.__pydantic_fields_set__ is want.__pydantic_fields_set__  # the shared set
    assert list(got.__dict__) == list(want.__dict__)
    assert (got.__pydantic_extra__, got.__pydantic_private__) == (want.__pydantic_extra__, want.__pydantic_private__)


def test_blocks_built_are_the_validated_blocks() -> None:
    text = build.text_block("hi")
    same(text, TextBlock(text="hi"))
    same(build.thinking_block("t", None), ThinkingBlock(thinking="t", signature=None))
    same(build.thinking_block("t", "sig"), ThinkingBlock(thinking="t", signature="sig"))
    same(build.tool_use_block("c1", "Bash", {"command": "ls"}), ToolUseBlock(id="c1", name="Bash", input={"command": "ls"}))
    content = [text, ImageBlock(media_type="image/png")]
    same(build.tool_result_block("c1", content, True), ToolResultBlock(tool_use_id="c1", content=content, is_error=True))
    same(build.usage(1, 2, 3, 4), Usage(input_tokens=1, output_tokens=2, cache_read_input_tokens=3, cache_creation_input_tokens=4))


def test_an_event_built_is_the_validated_event() -> None:
    blocks = [build.text_block("hi"), build.tool_use_block("c", "Read", {"path": "a"})]
    at = datetime(2026, 1, 1, tzinfo=UTC)
    got = build.event(3, "u-1", at, "message", "assistant", blocks, build.usage(1, 0, 0, 0), False, "claude-code", {"line": 3})
    want = Event(seq=3, id="u-1", at=at, kind="message", role="assistant", blocks=blocks,
                 usage=Usage(input_tokens=1, output_tokens=0, cache_read_input_tokens=0, cache_creation_input_tokens=0),
                 injected=False, source="claude-code", meta={"line": 3})
    same(got, want)
    assert got.blocks is not blocks and got.blocks == blocks  # a copy, as validation's
    same(with_tokens([got])[0], with_tokens([want])[0])


def test_what_validation_would_change_or_refuse_still_goes_through_it() -> None:
    class S(str):
        pass

    assert type(build.text_block(S("x")).text) is str  # validation turns a subclass into str
    assert type(build.tool_use_block("c", S("n"), {}).name) is str
    with pytest.raises(ValidationError):
        build.event(1, "a\ud800", None, "message", "user", [], None, False, "x", {})  # not UTF-8
    with pytest.raises(ValidationError):
        build.event(1, "", None, "message", "user", [], None, False, "x", {})
    with pytest.raises(ValidationError):
        build.event(1, "p", None, "pinned", "assistant", [], None, False, "x", {})  # Event._check
    with pytest.raises(ValidationError):
        build.event(1, "k", None, "message", "robot", [], None, False, "x", {})
    with pytest.raises(ValidationError):
        build.thinking_block("t", 5)
    with pytest.raises(ValidationError):
        build.tool_result_block("c", [{"type": "nope"}], False)
    uni = build.event(1, "é", None, "message", "user", [], None, False, "x", {})  # valid, validated
    same(uni, Event(seq=1, id="é", at=None, kind="message", role="user", blocks=[], usage=None, injected=False,
                    source="x", meta={}))


def _transcripts() -> list[Path]:
    files = sorted(p for p in FIXTURES.rglob("*") if p.is_file())
    if CORPUS.is_dir():
        files += sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name != "README.md")
    return files


def test_a_counted_import_gives_the_events_with_tokens_gives(tmp_path) -> None:
    from compactor.bench.scale import write_session

    small = tmp_path / "small.jsonl"
    write_session(small, 600)
    seen = 0
    for path in _transcripts() + [small]:
        try:
            plain = import_file(path)
        except Exception:  # (a fixture of broken input)
            continue
        want = with_tokens(plain.events)
        counted = import_file(path, count=True)
        streamed: list[Event] = []
        res = import_file(path, count=True, sink=streamed.extend)
        for got in (counted.events, streamed):
            assert [e.model_dump_json() for e in got] == [e.model_dump_json() for e in want], path
            assert [e.model_fields_set for e in got] == [e.model_fields_set for e in want], path
        assert counted.stats == plain.stats == res.stats
        assert all(e.tokens is None for e in plain.events)
        seen += len(want)
    assert seen > 600


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', '{"a": [1, {"b": "c"}]}', ' {"a": 1}', '{"a": 1} ', '{"a": 1}{"b": 2}', '{"a": 1} x',
     '{"a": }', "{", "{}", '{"a": "\\ud800"}', "[1]", '"s"', "\ufeff{}", '{"a": NaN}', '{"a" 1}'],
)
def test_a_json_line_parses_as_json_loads_does(text) -> None:
    try:
        want = json.loads(text)
    except json.JSONDecodeError as e:
        with pytest.raises(json.JSONDecodeError) as got:
            _json_object(text)
        assert (got.value.msg, got.value.pos) == (e.msg, e.pos)
    else:
        assert repr(_json_object(text)) == repr(want)


def test_import_stats_count_the_user_requests_the_events_say_they_are() -> None:
    from compactor.importers._common import compute_stats

    for path in _transcripts():
        try:
            events = import_file(path).events
        except Exception:  # (a fixture of broken input)
            continue
        stats = compute_stats(events)
        assert stats["user_messages"] == sum(e.is_user_request for e in events), path
        assert stats["tool_results"] == sum(len(e.tool_results) for e in events), path
