"""The clearing layer builds its cleared results without pydantic (issue 17: a result of one
text alone in its event is cleared inline, its ref and copy stored field by field): what a
user sees must be what the generic path gives - each cleared result equal to
``model_copy`` with ``make_artifact``'s ref (fields, fields-set, JSON dump), the same
artifacts, the tokens counted as ``count_blocks`` counts them - on generated, fixture and
corpus sessions, with every kind of block a result can hold."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from compactor.engine.layers import CLEARED_TEXT, clear_old_tool_results, externalize_tool_results, make_artifact
from compactor.engine.policy import make_policy
from compactor.events import ArtifactRefBlock, Event, ImageBlock, TextBlock, ToolResultBlock
from compactor.importers import import_file
from compactor.tokens import count_blocks, count_event
from tests.conftest import corpus_files, fixture_sessions
from tests.unit.engine_fixtures import Conv

POLICY = make_policy("default").model_copy(update={"clear_tool_results_after": 0})


def _want(r: ToolResultBlock) -> tuple[ToolResultBlock, dict[str, bytes]]:
    """The generic path's cleared copy of ``r`` (pydantic's ``model_copy``, ``make_artifact``)
    for a result of texts only, and the artifacts it names."""
    assert all(type(c) is TextBlock for c in r.content)
    text = r.text
    if not text:
        return r.model_copy(update={"content": [TextBlock(text=CLEARED_TEXT)]}), {}
    data = text.encode("utf-8")
    ref = make_artifact(data, head_chars=0, tail_chars=0, preview_head=CLEARED_TEXT)
    return r.model_copy(update={"content": [ref]}), {ref.sha256: data}


def _check(events: list[Event], keep: int = 2) -> int:
    """Clear ``events`` (externalized first, as the engine shows them) and compare each
    cleared result of texts with the generic path's; the number compared."""
    ext = externalize_tool_results(events, POLICY)
    shown = [e.with_(blocks=ext.replacements[e.seq], tokens=None) if e.seq in ext.replacements else e
             for e in events]
    out = clear_old_tool_results(shown, POLICY, keep=keep)
    by_seq = {e.seq: e for e in shown}
    freed = 0
    compared = 0
    for seq, blocks in out.replacements.items():
        e = by_seq[seq]
        assert out.counts[seq] == count_blocks(blocks), seq
        freed += count_event(e) - out.counts[seq]
        assert len(blocks) == len(e.blocks)
        for old, new in zip(e.blocks, blocks):
            if new is old or not isinstance(old, ToolResultBlock) or any(
                    type(c) is not TextBlock for c in old.content):
                continue
            want, arts = _want(old)
            assert type(new) is ToolResultBlock and new == want, seq
            assert new.model_dump_json() == want.model_dump_json()
            assert new.model_dump() == want.model_dump()
            assert new.__pydantic_fields_set__ == want.__pydantic_fields_set__
            for got_c, want_c in zip(new.content, want.content):
                assert type(got_c) is type(want_c) and got_c == want_c
                assert got_c.__pydantic_fields_set__ == want_c.__pydantic_fields_set__
                assert got_c.model_dump_json() == want_c.model_dump_json()
            for digest, data in arts.items():
                assert out.artifacts[digest] == data
            compared += 1
    assert out.freed_tokens == freed
    return compared


def test_a_generated_session_clears_as_the_generic_path(tmp_path: Path):
    from compactor.bench.scale import write_session

    write_session(tmp_path / "s.jsonl", 3_000)
    assert _check(import_file(tmp_path / "s.jsonl").events) > 1_000


def test_fixture_sessions_clear_as_the_generic_path():
    assert sum(_check(events, keep=0) for events in fixture_sessions()) > 20


@pytest.mark.corpus
@pytest.mark.skipif(not corpus_files(), reason="corpus not present")
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_sessions_clear_as_the_generic_path(path: Path):
    _check(import_file(path).events, keep=0)


def test_results_of_every_shape_clear_as_before():
    """Results alone in their event or beside text, of one text or several, empty, an error,
    with an image or a ref already: the inline path takes only the first kind, the others
    go the general way; the outcome is the generic path's for every result of texts, and
    the counts are ``count_blocks``'s for all."""
    c = Conv()
    c.user("go")
    for i in range(6):
        c.call("Bash", {"command": f"echo {i}"}, f"out {i}\n" * (i + 1))
    c.call("Bash", {"command": "true"}, "")
    c.call("Bash", {"command": "false"}, "failed \u2014 caf\u00e9 \U0001F600", is_error=True)
    events = list(c.events)
    seq = events[-1].seq
    r = ToolResultBlock(tool_use_id="t-many", content=[TextBlock(text="a"), TextBlock(text="b\n")])
    img = ToolResultBlock(tool_use_id="t-img", content=[TextBlock(text="see"), ImageBlock(data="aGVsbG8=")])
    ref = ToolResultBlock(tool_use_id="t-ref", content=[ArtifactRefBlock(
        uri="artifact://sha256/" + "ab" * 32, sha256="ab" * 32, bytes=9, preview_head="x", preview_tail="y")])
    events += [
        Event(seq=seq + 1, id="m1", role="user", blocks=[r]),
        Event(seq=seq + 2, id="m2", role="user", blocks=[TextBlock(text="and"), r.model_copy(update={"tool_use_id": "t2"})]),
        Event(seq=seq + 3, id="m3", role="user", blocks=[img]),
        Event(seq=seq + 4, id="m4", role="user", blocks=[ref]),
        # a result whose fields-set lacks its content
        Event(seq=seq + 5, id="m5", role="user", blocks=[ToolResultBlock.model_construct(
            _fields_set={"tool_use_id"}, tool_use_id="t-fs", content=[TextBlock(text="late")])]),
    ]
    for e in events:
        object.__setattr__(e, "tokens", count_blocks(e.blocks))
    assert _check(events, keep=0) >= 10
    out = clear_old_tool_results(events, POLICY, keep=0)
    assert out.counts == {s: count_blocks(b) for s, b in out.replacements.items()}
    (cleared,) = out.replacements[seq + 5]
    assert "content" in cleared.__pydantic_fields_set__ and cleared.model_dump(exclude_unset=True)["content"]
    (got,) = out.replacements[seq + 4][0].content
    assert got.sha256 == "ab" * 32 and got.preview_head == CLEARED_TEXT and got.preview_tail == ""
    assert hashlib.sha256(b"hello").hexdigest() in out.artifacts  # the image's bytes


def test_clearing_twice_clears_nothing_more():
    """A cleared result is seen as cleared (``_is_cleared`` reads the ref made inline)."""
    c = Conv()
    c.user("go")
    for i in range(8):
        c.call("Bash", {"command": f"echo {i}"}, f"out {i}")
    first = clear_old_tool_results(c.events, POLICY, keep=1)
    shown = [e.with_(blocks=first.replacements.get(e.seq, e.blocks), tokens=None) for e in c.events]
    again = clear_old_tool_results(shown, POLICY, keep=1)
    assert first.items == 7 and again.items == 0 and not again.replacements
