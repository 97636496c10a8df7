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
