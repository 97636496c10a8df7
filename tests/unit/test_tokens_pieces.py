"""compactor.tokens: an ASCII text is counted by its cl100k pieces (``_split``, each piece's
count memoized by ``_PieceCounts``, issue 17). The count must be tiktoken's for every text,
whatever its whitespace, contractions, digits or control characters."""

from __future__ import annotations

import random
import string

import pytest

from compactor import tokens
from compactor.bench.scale import small_session_lines

# where cl100k's pre-split is delicate: whitespace runs before a letter, a newline or the end,
# the six ASCII White_Space characters and the four (\x1c-\x1f) that re's \s adds to them,
# contractions in any case, digit runs, punctuation taking the newlines after it
EDGES = [
    "", " ", "a", "a ", "a  ", "a \n", "a  \n", "a\n ", "a \n b", "x\n\n  y", "  \n\n", "\t\n", "\n\n\n",
    "it's", "IT'S", "we'll", "We'Ll", "'VE", "'re", "'", "''s", "'s'", "don't stop", "'dx",
    "1", "12", "123", "1234567", "a1b2", "x 12 y", "3.14159", "v1.2.3-rc4",
    "a\x1cb", "\x1c\x1d\x1e\x1f", " \x1c ", "a \x1f\n", "\x0b\x0c", "a\x0b b", "x \x0c\n",
    "\r\n\r\n", "a\r\nb", "a \r\n", "\r", "foo  bar", "foo \tbar", "foo\t \tbar",
    "!!!\n\n", " ?!\r\n", ")\n\n  ", "x  ", "x \n ", "x \n \n", "<|endoftext|>", "\x00\x7f", "~~~ ```\n",
    "def f(x):\n    return x + 1\n", 'Bash {"command": "cat src/mod_1.py"}',
]


def _encoded(text: str) -> int:
    return len(tokens.encoding().encode(text, disallowed_special=()))


def _random_texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    tricky = list("aAsSdDtTlLvVeErR'09 \t\n\r\x0b\x0c\x1c\x1f\x00!?.,_-:;\"{}()/\\#*+=<>|~`@")
    words = ["'s", "'ll", "'VE", "'Re", "  ", "\n\n", " \n", "\r\n", "123456", "abc", " def", "\t\t", "'t", "'"]
    every = [chr(i) for i in range(128)]
    out = []
    for _ in range(n):
        alphabet = rng.choice([every, tricky, tricky + words, list(string.printable)])
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))))
    return out


@pytest.fixture(autouse=True)
def _pieces_on() -> None:
    tokens._encoder()
    assert tokens._PIECE is not None  # (else the tests below compare tiktoken with itself)


def test_an_ascii_texts_pieces_count_what_tiktoken_counts() -> None:
    texts = EDGES + _random_texts(17, 20_000) + list(small_session_lines(300))
    for text in texts:
        assert text.isascii()
        assert tokens._count(text) == _encoded(text), repr(text)


def test_the_pieces_are_tiktokens_pieces() -> None:
    """The split itself is the tokenizer's: pieces that rejoin into the text, each counted
    alone as tiktoken counts it inside the text."""
    for text in EDGES + _random_texts(18, 2_000):
        pieces = tokens._split(text)
        assert "".join(pieces) == text
        assert sum(tokens._PIECE(p) for p in pieces) == _encoded(text), repr(text)


def test_a_text_that_is_not_ascii_is_counted_by_tiktoken() -> None:
    for text in ["café", "a\x85b", "x\u00a0y", "файл 12", "🙂 ok", "a\u2028b", "\udc80"]:
        want = len(tokens.encoding().encode_ordinary(text))
        assert tokens._count(text) == want


def test_the_piece_memo_is_bounded_and_counts_the_same_after_a_restart(monkeypatch) -> None:
    memo = tokens._PIECE.__self__
    monkeypatch.setattr(tokens, "MAX_PIECES", 50)
    memo.clear()
    for text in _random_texts(19, 300):
        assert tokens._count(text) == _encoded(text)
        assert len(memo) <= 50


def test_a_long_ascii_text_counts_the_same_by_pieces_or_by_tiktoken(monkeypatch) -> None:
    text = "".join(_random_texts(20, 3_000))
    assert len(text) > 60_000
    by_pieces = tokens._count(text)
    monkeypatch.setattr(tokens, "SPLIT_MOST", 1_000)  # (this text goes to tiktoken now)
    assert tokens._count(text) == by_pieces == _encoded(text)
