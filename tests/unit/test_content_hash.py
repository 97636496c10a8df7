"""``events.content_hash_line`` writes the JSON of the common blocks itself (issue 17): the
bytes must be those of its definition - pydantic's JSON-mode dump of seq, id, kind, role and
blocks, then ``json.dumps`` with sorted keys (``events._dumped_line``) - for every event: a
checkpoint id or source hash that changed would orphan every stored checkpoint's id."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

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
    _dumped_line,
    content_hash,
    content_hash_line,
)
from compactor.importers import import_file
from tests.conftest import corpus_files, fixture_sessions



def _same(events: list[Event]) -> int:
    """Each event's line is its dump's, or both raise the same error (pydantic refuses a lone
    surrogate in a dict key); the number of events that raised."""
    refused = 0
    for e in events:
        try:
            want = _dumped_line(e)
        except Exception as ex:
            with pytest.raises(type(ex)):
                content_hash_line(e)
            refused += 1
            continue
        assert content_hash_line(e) == want, e.id
    return refused


def test_the_written_blocks_have_the_fields_the_line_writes():
    # a new field on one of these blocks must reach the line: the direct writer lists them
    assert set(TextBlock.model_fields) == {"type", "text"}
    assert set(ThinkingBlock.model_fields) == {"type", "thinking", "signature"}
    assert set(ToolUseBlock.model_fields) == {"type", "id", "name", "input"}
    assert set(ToolResultBlock.model_fields) == {"type", "tool_use_id", "content", "is_error"}


@pytest.mark.corpus
@pytest.mark.skipif(not corpus_files(), reason="corpus not present")
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_events_hash_as_their_dump(path: Path):
    _same(import_file(path).events)


def test_fixture_events_hash_as_their_dump():
    n = 0
    for events in fixture_sessions():
        _same(events)
        n += len(events)
    assert n > 100


def test_generated_session_hashes_as_its_dump(tmp_path: Path):
    from compactor.bench.scale import write_session

    write_session(tmp_path / "s.jsonl", 2_000)
    events = import_file(tmp_path / "s.jsonl").events
    assert len(events) == 2_000
    _same(events)
    h = __import__("hashlib").sha256()
    for e in events:
        h.update(_dumped_line(e))
    assert content_hash(events) == h.hexdigest()


_TEXTS = ["", " ", "plain", "caf\u00e9 \u2014 \u65e5\u672c\u8a9e", "emoji \U0001F600", "quote \" and \\ slash /",
          "ctl \x00\x01\t\n\r\x7f", "lone \ud800 surrogate", "\u2028\u2029", "<script>&amp;</script>"]


def _value(r: random.Random, depth: int = 0) -> Any:
    pick = r.randrange(14 if depth < 3 else 9)
    return [
        lambda: r.choice(_TEXTS), lambda: r.randint(-10**20, 10**20), lambda: r.random() * 1e6,
        lambda: r.choice([True, False]), lambda: None, lambda: 0, lambda: -0.0,
        lambda: r.choice([math.inf, -math.inf, math.nan, 1e308, 5e-324]), lambda: r.choice(["a", 1, 2.5]),
        lambda: [_value(r, depth + 1) for _ in range(r.randrange(4))],
        lambda: {r.choice(_TEXTS) + str(i): _value(r, depth + 1) for i in range(r.randrange(4))},
        lambda: tuple(_value(r, depth + 1) for _ in range(r.randrange(3))),
        lambda: {r.choice([1, 10, 9, True, None, 2.5]): _value(r, depth + 1) for _ in range(r.randrange(3))},
        lambda: {"nested": {"deeper": [{"k": _value(r, depth + 1)}]}},
    ][pick]()


def _ref(r: random.Random) -> ArtifactRefBlock:
    return ArtifactRefBlock(uri=f"artifact://sha256/{r.getrandbits(256):064x}", sha256=f"{r.getrandbits(256):064x}",
                            bytes=r.randrange(10**9), preview_head=r.choice(_TEXTS), preview_tail=r.choice(_TEXTS))


def _block(r: random.Random) -> Any:
    kind = r.randrange(9)
    if kind == 0:
        return TextBlock(text=r.choice(_TEXTS))
    if kind == 1:
        return ThinkingBlock(thinking=r.choice(_TEXTS), signature=r.choice([None, "sig", "\u00e9"]))
    if kind == 2:
        return ImageBlock(media_type="image/jpeg", ref=r.choice([None, _ref(r)]), data=r.choice([None, "aGk="]))
    if kind in (3, 4):
        inp = r.choice([{}, {"command": r.choice(_TEXTS)}, {f"k{i}": _value(r) for i in range(r.randrange(5))}])
        return ToolUseBlock(id=f"toolu_{r.randrange(10**6)}", name=r.choice(["Bash", "Read", "\u00e9dit"]), input=inp)
    if kind in (5, 6):
        content: list[Any] = [TextBlock(text=r.choice(_TEXTS)) for _ in range(r.randrange(3))]
        if kind == 6 and r.random() < 0.5:
            content.append(r.choice([_ref(r), ImageBlock(data="aGk=")]))
        return ToolResultBlock(tool_use_id=f"toolu_{r.randrange(10**6)}", content=content,
                               is_error=r.random() < 0.3)
    if kind == 7:
        return _ref(r)
    return CompactionBlock(content=r.choice(_TEXTS), raw=r.choice([None, {"type": "compaction", "x": _value(r)}]))


def test_random_events_of_every_block_kind_hash_as_their_dump():
    r = random.Random(17)
    events = []
    for i in range(3_000):
        role = r.choice(["user", "assistant", "system"])
        events.append(Event(
            seq=r.choice([0, i, 10**12]), id=r.choice(["e", f"id-{i}", "\u00e9v\u00e9nement", "a\"b"]),
            kind=r.choice(["message", "pinned", "compaction"]) if role != "assistant" else "message",
            role=role, blocks=[_block(r) for _ in range(r.randrange(5))], tokens=r.choice([None, 7]),
            usage=r.choice([None, Usage(input_tokens=3)]), injected=r.random() < 0.2,
            source=r.choice([None, "claude-code"]), meta=r.choice([{}, {"k": _value(r)}, {"late_results": ["x"]}]),
        ))
    assert _same(events) < 100
    # the unusual values are met (else the fallback went untested)
    inputs = [b.input for e in events for b in e.blocks if isinstance(b, ToolUseBlock)]
    assert any(any(isinstance(v, float) and not math.isfinite(v) for v in i.values()) for i in inputs)
    assert any(any(isinstance(v, tuple) for v in i.values()) for i in inputs)


def test_a_model_copy_and_a_counted_event_hash_as_their_dump():
    from compactor.tokens import with_tokens

    e = Event(seq=3, id="x", role="assistant", blocks=[TextBlock(text="hi"), ToolUseBlock(id="t", name="Bash",
                                                                                         input={"command": "ls"})])
    for x in (e, e.with_(blocks=[TextBlock(text="other")]), with_tokens([e])[0], e.model_copy(update={"seq": 4})):
        assert content_hash_line(x) == _dumped_line(x)


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # (the int and None keys)
def test_one_argument_calls_hash_as_their_dump():
    # a call of one argument is written without the sorted encoder when the argument is an
    # ASCII-named str (issue 17): every other one-argument input takes the general path
    # (inputs as an importer builds them: not validated, so any key and value)
    values: list[Any] = ["ls -la", "", "caf\u00e9", "lone \ud800", "quote \" \\ \n", 1, 2.5, math.nan, None, True,
                         ("a", 1), ["a"], {"x": "y"}, {"x": ("t",)}]
    keys: list[Any] = ["command", "", "caf\u00e9", "lone \ud800", "q\"k", 1, None]
    events = [Event(seq=i, id=f"c{i}", role="assistant",
                    blocks=[ToolUseBlock.model_construct(id="t", name="Bash", input={k: v})])
              for i, (k, v) in enumerate((k, v) for k in keys for v in values)]
    assert _same(events) == 0  # (a key with a lone surrogate: pydantic writes U+FFFD for each byte)
