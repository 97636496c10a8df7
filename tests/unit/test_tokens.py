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
