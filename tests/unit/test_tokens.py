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
