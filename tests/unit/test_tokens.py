"""compactor.tokens: long texts are counted piece by piece with the same result."""

from __future__ import annotations

import random

from compactor import tokens


def test_piecewise_count_of_a_long_text_equals_the_whole_count(monkeypatch):
    rng = random.Random(3)
    words = ["def", "return", "(x)", "  ", "\n", "\n\n", "error:", "файл", "token", "🙂", "a.b.c"]
    text = " ".join(rng.choice(words) for _ in range(20_000))
    whole = len(tokens.encoding().encode(text, disallowed_special=()))
    monkeypatch.setattr(tokens, "COUNT_PIECE", 997)
    assert len(list(tokens._pieces(text))) > 50
    assert "".join(tokens._pieces(text)) == text
    assert tokens._count(text) == whole


def _texts(seed: int, n: int) -> list[str]:
    """Multi-line texts built from the pieces where cl100k's pre-split is delicate: trailing
    spaces before a newline, blank lines, punctuation that takes the newline after it, CRLF,
    tabs, a special-token string, non-Latin letters and digits."""
    rng = random.Random(seed)
    parts = ["a", "b", " ", "\n", "\n\n", "-", "#", "`", "é", "1", "23", " \n", "\t", ")", "'s",
             "<|endoftext|>", "  ", "→", "🙂", "\r\n", "xxxxx", "- #12 `ls` → exit 0\n", "\n  - "]
    return ["".join(rng.choice(parts) for _ in range(rng.randint(1, 2_000))) for _ in range(n)]


def test_count_lines_is_the_count_of_the_whole_text():
    for text in _texts(5, 1_500):
        assert tokens.count_lines(text) == tokens._count(text), repr(text[:120])


def test_count_lines_of_a_text_over_the_piece_size_is_the_count_of_the_whole(monkeypatch):
    monkeypatch.setattr(tokens, "COUNT_PIECE", 1_500)  # (also cuts where it is off by a token)
    for text in _texts(6, 60):
        text = text * 4
        assert tokens.count_lines(text) == tokens._count(text)


def test_with_tokens_gives_the_events_with_gives():
    """The counted import's copy (``tokens._with_count``) is the event ``with_(tokens=n)``
    gives: equal, the same dump and fields-set, cached properties kept, the original unchanged."""
    from pathlib import Path

    from compactor.importers import import_file

    fixtures = sorted(p for p in (Path(__file__).parent.parent / "fixtures").rglob("*") if p.is_file())
    seen = 0
    for path in fixtures:
        try:
            events = import_file(path).events
        except Exception:  # (a fixture of broken input, or not a transcript)
            continue
        for e in events:
            if e.tokens is not None:
                continue
            e.text  # noqa: B018 - a cached property the copy carries, as model_copy's does
            n = tokens.count_event(e)
            want = e.with_(tokens=n)
            (got,) = tokens.with_tokens([e])
            assert got == want and got is not e and e.tokens is None
            assert got.model_dump_json() == want.model_dump_json()
            assert got.__pydantic_fields_set__ == want.__pydantic_fields_set__
            assert got.__dict__ == want.__dict__
            assert got.with_(tokens=None) == e
            seen += 1
    assert seen > 100


def test_a_newline_after_a_letter_or_digit_is_one_token_more():
    """``count_lines`` counts a line ending in an ASCII letter or digit as its text plus one
    (the newline is a piece of its own): true of every text built from the delicate pieces."""
    rng = random.Random(8)
    for text in _texts(9, 600):
        text = text[: rng.randint(1, 300)] + rng.choice("aZ09x")
        assert tokens._count(text + "\n") == tokens._count(text) + 1, repr(text[-60:])
        doc = text + "\n" + text + "\n- next"
        assert tokens.count_lines(doc) == tokens._count(doc)


def test_encode_ordinary_counts_what_encode_without_special_checks_counts():
    """``_count`` uses ``encode_ordinary``: the same count as ``encode(disallowed_special=())``,
    special-token strings included (they are counted as ordinary text either way)."""
    enc = tokens.encoding()
    for text in _texts(7, 300) + ["<|endoftext|>", "a<|fim_prefix|>b<|endofprompt|>", "\ud800x"]:
        assert tokens._count(text) == len(enc.encode(text, disallowed_special=())), repr(text[:80])


def _fixture_events():
    from pathlib import Path

    from compactor.importers import import_file

    out = []
    for path in sorted(p for p in (Path(__file__).parent.parent / "fixtures").rglob("*") if p.is_file()):
        try:
            out.extend(import_file(path).events)
        except Exception:  # (a fixture of broken input, or not a transcript)
            continue
    return out


def _count_blocks_as_defined(blocks) -> int:
    """``count_blocks`` as it was defined: every block's (text, extra), then the sum."""
    counted = [tokens._block_text(b) for b in blocks]
    if not any(t or x for t, x in counted):
        return 0
    return tokens.MESSAGE_OVERHEAD + sum(tokens.count_text(t) + x for t, x in counted)


def test_count_blocks_is_the_sum_of_each_blocks_text_and_extra():
    from compactor.events import (
        ArtifactRefBlock, CompactionBlock, ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock,
    )

    ref = ArtifactRefBlock(uri="artifact://sha256/ab", sha256="ab" * 32, bytes=9, preview_head="h", preview_tail="t")
    odd = [
        [], [TextBlock(text="  \n")], [ThinkingBlock(thinking="hm")], [TextBlock(text=" "), ThinkingBlock(thinking="x")],
        [ToolUseBlock(id="t", name="Bash", input={"command": "ls é", "n": [1, 2.5, None]})],
        [ToolResultBlock(tool_use_id="t")], [ToolResultBlock(tool_use_id="t", content=[TextBlock(text=" "), ref])],
        [ToolResultBlock(tool_use_id="t", content=[ImageBlock(data="aGk=")], is_error=True)],
        [ref], [ImageBlock()], [CompactionBlock()], [CompactionBlock(raw={"type": "compaction", "x": 1})],
        [CompactionBlock(content="sum")], [TextBlock(text="a"), ToolUseBlock(id="u", name="n")],
    ]
    events = _fixture_events()
    assert len(events) > 100
    for blocks in odd + [e.blocks for e in events]:
        assert tokens.count_blocks(blocks) == _count_blocks_as_defined(blocks), blocks


def test_a_tool_inputs_json_is_json_dumps_and_a_failed_one_leaves_no_trace():
    import json

    class Odd:
        pass

    loop: dict = {}
    loop["self"] = loop
    values = [{}, {"a": 1}, {"command": 'ls "é" \u2028', "n": [1, 2.5, None, True, float("nan")], "d": {"x": {}}}]
    for v in values:
        assert tokens._input_json(v) == json.dumps(v, ensure_ascii=False)
    for bad, err in (({"a": Odd()}, TypeError), (loop, ValueError), ({"a": {"b": Odd()}}, TypeError)):
        try:
            tokens._input_json(bad)
        except err:
            pass
        else:  # pragma: no cover
            raise AssertionError("no error")
        shared = {"k": [1]}  # the same objects again after a failure: no false "circular" error
        assert tokens._input_json({"x": shared, "y": shared}) == json.dumps({"x": shared, "y": shared})


def test_count_into_gives_the_event_with_tokens_gives():
    """An import's own event counted in place equals the copy ``with_tokens`` makes."""
    events = _fixture_events()
    for e in events:
        if e.tokens is not None:
            continue
        (want,) = tokens.with_tokens([e])
        got = tokens.count_into(e)
        assert got is e and e.tokens == want.tokens
        assert got.model_dump_json() == want.model_dump_json() and got.__dict__ == want.__dict__
        assert got.__pydantic_fields_set__ is want.__pydantic_fields_set__
