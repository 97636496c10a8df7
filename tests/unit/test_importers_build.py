"""compactor.importers._build: blocks and events built without re-validation are the instances
validation gives (same values, fields-set, dumps); anything validation would change or refuse
still goes through it; a counted import gives the events ``with_tokens`` gives."""

from __future__ import annotations

import copy
import json
import pickle
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from compactor.events import _EVENT_CACHES, Event, content_hash_line, ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Usage
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
    from compactor.importers._drafts import compute_stats

    for path in _transcripts():
        try:
            events = import_file(path).events
        except Exception:  # (a fixture of broken input)
            continue
        stats = compute_stats(events)
        assert stats["user_messages"] == sum(e.is_user_request for e in events), path
        assert stats["tool_results"] == sum(len(e.tool_results) for e in events), path


def _twin(m):
    """The model validation gives for the fields set on ``m`` (every dict and list its own)."""
    values = {}
    for name in m.model_fields_set:
        v = getattr(m, name)
        if isinstance(v, BaseModel):
            v = _twin(v)
        elif isinstance(v, list):
            v = [_twin(x) if isinstance(x, BaseModel) else copy.deepcopy(x) for x in v]
        else:
            v = copy.deepcopy(v)
        values[name] = v
    return type(m)(**values)


def _same_event(got: Event, want: Event, where: object) -> None:
    assert got == want and want == got, where
    for kw in ({}, {"exclude_unset": True}, {"exclude_none": True}):
        assert got.model_dump_json(**kw) == want.model_dump_json(**kw), where
    assert got.model_dump() == want.model_dump(), where
    # (the calls and results an import fills in, ``importers._drafts._Finisher.events``, are not
    # fields: they are what the properties give, ``test_importers_known_calls.py``)
    assert [k for k in got.__dict__ if k not in _EVENT_CACHES] == list(want.__dict__), where
    assert list(got.meta.items()) == list(want.meta.items()) and type(got.meta) is dict, where
    assert json.dumps(got.meta) == json.dumps(want.meta), where
    for b, c in zip(got.blocks, want.blocks, strict=True):
        assert b == c and list(b.__dict__.items()) == list(c.__dict__.items()), where
        if isinstance(b, ToolUseBlock):
            assert type(b.input) is dict and json.dumps(b.input) == json.dumps(c.input), where
    back = pickle.loads(pickle.dumps(got))
    assert back == want and back.model_dump_json() == want.model_dump_json(), where
    assert copy.deepcopy(got) == want and copy.copy(got) == want, where
    assert content_hash_line(got) == content_hash_line(want), where


def test_imported_events_are_their_validated_twins(tmp_path) -> None:
    """Every event an import builds - blocks in their class's shared-key values, ``meta`` and
    tool inputs with shared key tables (memory, issue 17) - equals, dumps, pickles, copies and
    hashes as the event validation makes of the same values, its dicts in the same order;
    streamed and counted as ``compact --inline`` imports them too."""
    from compactor.bench.scale import write_session

    small = tmp_path / "small.jsonl"
    write_session(small, 800)
    seen = 0
    for path in _transcripts() + [small]:
        try:
            plain = import_file(path).events
        except Exception:  # (a fixture of broken input)
            continue
        streamed: list[Event] = []
        import_file(path, count=True, sink=streamed.extend)
        for e in plain + streamed:
            _same_event(e, _twin(e), path)
        seen += len(plain)
    assert seen > 800


def test_a_result_pointed_at_its_call_keeps_the_validated_shape() -> None:
    """A result whose call id is an equal string from another line holds the call's string
    (``_fix_tool_pairing``), set without making a dict for the block: the same block still."""
    from compactor.importers._drafts import Draft, _fix_tool_pairing

    call = build.tool_use_block("toolu_1", "Bash", {"command": "ls"})
    result = build.tool_result_block("".join(["toolu_", "1"]), [build.text_block("a.py")], False)
    assert result.tool_use_id is not call.id
    drafts = [Draft("assistant", "a", blocks=[call]), Draft("user", "u", blocks=[result])]
    assert _fix_tool_pairing(drafts) == 0
    got = drafts[1].blocks[0]
    assert got is result and got.tool_use_id is call.id
    same(got, ToolResultBlock(tool_use_id="toolu_1", content=[TextBlock(text="a.py")], is_error=False))


_keys = st.sampled_from(["line", "message_id", "model", "command", "file_path", "a", "é", "__class__", ""])
_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                       max_leaves=6)


@given(st.lists(st.dictionaries(_keys, _values, max_size=5), min_size=1, max_size=6), st.data())
@settings(max_examples=300, deadline=None, database=None)
def test_a_shared_keys_dict_is_an_ordinary_copy(dicts, data) -> None:
    """``shared_keys_dict`` gives a plain dict equal to its source, items in the same order,
    that dumps and pickles the same and changes as a dict of its own would (other copies of
    the same keys, and the source, unchanged)."""
    copies = [build.shared_keys_dict(d) for d in dicts]
    for d, c in zip(dicts, copies):
        assert type(c) is dict and c is not d and c == d and list(c.items()) == list(d.items())
        assert json.dumps(c) == json.dumps(d) and pickle.loads(pickle.dumps(c)) == d
    i = data.draw(st.integers(0, len(dicts) - 1))
    key, value = data.draw(_keys), data.draw(_values)
    before = [list(c.items()) for c in copies]
    want = dict(dicts[i])
    got = copies[i]
    for change in (lambda m: m.__setitem__(key, value), lambda m: m.pop(key, None), lambda m: m.setdefault("x", 1)):
        change(want)
        change(got)
        assert list(got.items()) == list(want.items())
    assert [list(c.items()) for j, c in enumerate(copies) if j != i] == [b for j, b in enumerate(before) if j != i]
    assert dicts == [dict(b) for b in before]  # the sources untouched


def test_built_blocks_and_meta_hold_less_than_validated_ones() -> None:
    """What an import keeps per event (memory, issue 17): a built text block with its fields
    in its class's shared-key values, and a ``meta`` dict with a shared key table, hold well
    under the validated block and a dict of its own (traced bytes, 2,000 of each)."""
    import gc
    import tracemalloc

    texts = [f"text {i}" for i in range(2000)]
    lines = list(range(1000, 3000))

    def traced(make) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            made = [make(i) for i in range(2000)]
            gc.collect()
            return tracemalloc.get_traced_memory()[0] - start + 0 * len(made)
        finally:
            tracemalloc.stop()

    assert traced(lambda i: build.text_block(texts[i])) < 0.6 * traced(lambda i: TextBlock(text=texts[i]))
    assert traced(lambda i: build.shared_keys_dict({"line": lines[i]})) < 0.6 * traced(lambda i: {"line": lines[i]})
