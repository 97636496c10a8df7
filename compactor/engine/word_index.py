"""Which texts hold a whole word, as sorted hashes (issue 17, memory): the validator's index of
the session's words (``covered_text.CoveredText``) without a set of the words themselves.

A set of every whitespace-separated word of a big session held a copy of each word (``split``
makes one, ~55 bytes) and a slot in a table sized for them (16-32 bytes): ~30 MB at 300k small
events, through the whole summary ladder. Here a word is one 32-bit machine int in one sorted
array: the top bits of its ``hash`` and the number of the piece (texts joined) it came from.
A hit is checked in its piece (``word in piece``), so a hash two strings share never answers
for the other: the index says "occurs" only when the text holds it, and a word of the pieces
always hits. A string that is no whole word (or whose hash's entries are another word's) gets
``False``: the caller searches the pieces as it did for what was not in the set.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Sequence

_SPLIT = 16  # the keys sorted a sixteenth at a time (the sort's list of ints: ~36 bytes a key)
_PIECE_BITS = 10  # at most 1,024 pieces numbered (more texts: fewer, longer pieces)


def piece_size(n_texts: int, least: int = 512) -> int:
    """Texts a piece joins: ``least``, or more to keep ``n_texts`` in 1,024 pieces (a key's
    piece number in 10 bits: the keys stay one-digit ints, issue 17)."""
    return max(least, -(-n_texts >> _PIECE_BITS))


class WordIndex:
    """The whole words of ``pieces`` (texts, each searched with ``in``), read-only."""

    __slots__ = ("_pieces", "_keys", "_shift", "_drop")

    def __init__(self, pieces: Sequence[str], *, hash_bits: int | None = None) -> None:
        """``hash_bits``: of each word's hash kept (default: 20 or more, 30 bits a key in all;
        the tests take 1 or 2, to make every word share them with others)."""
        self._pieces = pieces
        # A key: the top bits of the word's hash, then the piece's number (the low ``shift``
        # bits), 30 bits in all while the pieces are at most 1,024 (ints of one digit: the
        # arithmetic a word is the build's cost beside its hash; and 4 bytes a key). Two words
        # share a hash's top bits now and then (~1 in 2**20): a hit is checked in its piece.
        self._shift = shift = max(1, (len(pieces) - 1).bit_length())
        bits = max(20, 30 - shift) if hash_bits is None else hash_bits
        total = bits + shift
        self._drop = drop = 64 - bits  # (the hash's low bits dropped: an arithmetic shift)
        low = -(1 << (total - 1))
        bounds = [low + (b << max(0, total - 4)) for b in range(1, _SPLIT)]  # (ascending)
        parts = [array("q") for _ in range(_SPLIT)]
        for k, piece in enumerate(pieces):
            # (a word once a piece: one key for its repeats there)
            keys = sorted({h >> drop << shift | k for h in map(hash, piece.split())})
            lo = 0
            for part, bound in zip(parts, bounds):
                hi = bisect_left(keys, bound, lo)
                if hi > lo:
                    part.extend(keys[lo:hi])
                lo = hi
            parts[-1].extend(keys[lo:])
        out = array("i" if total <= 31 else "q")
        for b in range(_SPLIT):
            out.extend(sorted(parts[b]))
            parts[b] = array("q")  # (let go before the next sixteenth's sort)
        self._keys = out

    def __len__(self) -> int:
        """The keys held: each word once per piece it is in."""
        return len(self._keys)

    def __contains__(self, word: object) -> bool:
        """True: a piece holds ``word`` (checked there), as it does every whole word of the
        pieces. False: ``word`` is no whole word of them (a piece may still hold it within a
        word or across words: the caller searches the pieces for that)."""
        if type(word) is not str:
            return False
        shift, keys, pieces = self._shift, self._keys, self._pieces
        key = hash(word) >> self._drop
        i = bisect_left(keys, key << shift)
        n = len(keys)
        mask = (1 << shift) - 1
        while i < n and keys[i] >> shift == key:
            if word in pieces[keys[i] & mask]:
                return True
            i += 1
        return False
