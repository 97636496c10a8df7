"""``count_lines``' piece cuts of a long text: what they add to the sum of its lines' counts (issue 17).

``compactor.tokens.count_lines`` counts a text of over ``COUNT_PIECE`` characters in pieces
(``tokens._pieces``), whose cuts may split a line the tokenizer would not have split. The
summary's renders sum their lines' counts and add what those cuts add (``piece_cut_extra``).
The shrink ladder's big rungs lay no text out for that (``ladder_count``): their text is read
through ``piece_cut_extra_of``'s ``part(a, b)``, only a few hundred characters around each cut
(a rung's text is ~17 MB at 300k events; its lines' texts are made only where read,
``ladder_lines``).
"""

from __future__ import annotations

from collections.abc import Callable

from compactor import tokens
from compactor.tokens import _LINE_CUT, _cut, count_text


def piece_cut_extra(text: str) -> int | None:
    """What ``count_lines(text)`` counts beyond the sum of its lines' counts (each line cut where
    ``count_lines`` cuts): 0 for a text of at most ``COUNT_PIECE`` characters; over that, it
    counts the text in ``_pieces``, whose cuts may split a line the tokenizer would not have
    split (a newline after punctuation is one piece with it), so each line a piece cut falls in
    is counted as its two halves. None: a line longer than a piece (the summary's renders then
    count the text with ``count_lines``)."""
    return piece_cut_extra_of(len(text), lambda a, b: text[a:b])


def piece_cut_extra_of(n: int, part: Callable[[int, int], str]) -> int | None:
    """``piece_cut_extra`` of a text of ``n`` characters seen only through ``part(a, b)``:
    ``text[a:b]``, asked for only around its piece cuts (a few KB each; the shrink ladder's
    rungs lay out no text of their ~100k-300k lines, issue 17 memory)."""
    if n <= tokens.COUNT_PIECE:
        return 0
    cuts = []
    start = 0
    while n - start > tokens.COUNT_PIECE:  # (``_pieces``' cuts)
        start = _cut_of(part, start + tokens.COUNT_PIECE, start)
        cuts.append(start)
    extra = 0
    prev = 0
    for k, pos in enumerate(cuts):
        # the line (between two of ``count_lines``' cuts) that holds the piece cut at ``pos``
        start = _line_start(part, pos)
        end = _line_end(part, pos, n)
        if start < prev or (k + 1 < len(cuts) and end > cuts[k + 1]):
            return None  # (a line over two piece cuts: a giant item)
        prev = pos
        if start == pos:
            continue  # a line cut already
        line = part(start, end)
        k_in = pos - start
        extra += count_text(line[:k_in]) + count_text(line[k_in:]) - count_text(line)
    return extra


def _cut_of(part: Callable[[int, int], str], pos: int, floor: int) -> int:
    """``_cut(text, pos, floor)``, read back from ``pos`` a growing span at a time (a cut found
    inside the span, past its first character, is the text's: the span holds what it read)."""
    lo = max(floor + 1, pos - 4096)
    back = _SPAN
    while True:
        a = max(lo, pos - back)
        span = part(a, pos + 1)
        k = pos - a
        i = _cut(span, k, -1)  # (``k``: no space in reach, or one at ``pos`` after a non-space)
        if a == lo or i < k or (span[k].isspace() and not span[k - 1].isspace()):
            return a + i
        back *= 8


_SPAN = 256
"""The span ``piece_cut_extra_of`` reads first around a cut (a summary line is ~100 characters)."""


def _line_start(part: Callable[[int, int], str], pos: int) -> int:
    """Where the line holding ``pos`` starts: after the last newline before it that is followed
    by a non-space character (0: none), read back from ``pos`` a growing span at a time."""
    back = _SPAN
    while True:
        a = max(0, pos - back)
        span = part(a, pos + 1)
        at = pos - a
        while (j := span.rfind("\n", 0, at)) >= 0:
            if not span[j + 1].isspace():
                return a + j + 1
            at = j
        if not a:
            return 0
        back *= 4


def _line_end(part: Callable[[int, int], str], pos: int, n: int) -> int:
    """``count_lines``' first cut after ``pos`` (``n``: none), read on a growing span at a time
    (a cut found in it is one of the text: its next character is in the span)."""
    ahead = _SPAN
    while True:
        b = min(n, pos + 1 + ahead)
        m = _LINE_CUT.search(part(pos, b), 1)
        if m is not None:
            return pos + m.start()
        if b == n:
            return n
        ahead *= 4
