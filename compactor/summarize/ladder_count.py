"""The count of a shrink-ladder rung's summary when its count is all that is needed (issue 17).

A big state's document cannot fit its budget (``structured._min_tokens`` says so before it is
measured): its full text is never the summary, and ``_fit``'s first batch needs only how much
that text counts beyond its droppable lines' sizes: it keeps, from the most valuable line down,
the lines whose sizes fit in what the budget leaves (the same lines it would drop from the least
valuable up), so a line it drops unseen is never counted. Nearly all of the ~100k-300k lines are
commands and files read, built once per ladder (``ladder_memo``) with a correction (what a line
counts inside its section beyond its size: none for a line ending in a letter or digit):
such a section counts its heading, the sum of those corrections (a C-level sum of the memo's
numbers, not a Python step per line) and its last line's own separator. The few other lines
are summed as ``structured`` sums every text (``sum_rest``).

The same number as ``count_lines`` of ``_render``'s text: that text is cut where ``count_lines``
cuts it, before each line starting with a non-space character (a memo line starts with ``- ``),
and ``piece_cut_extra`` adds what its cuts of a long text add.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import accumulate
from operator import attrgetter
from typing import Any

from compactor.summarize.piece_cuts import piece_cut_extra_of
from compactor.tokens import ASCII_ALNUM, count_text


_TIER = attrgetter("tier")
_SEQ = attrgetter("seq")


def line_sizes(text: str) -> tuple[int, int]:
    """A memo line's size (``tokens``: its text's count plus one; 0: not counted yet) and its
    correction: what it counts inside its section's text, followed by a line starting with a
    non-space character (``count_text(text + "\n")``), beyond its size. A line ending in a
    letter or digit, whose newline is a token of its own, has none: (0, 0), and is counted only
    when ``_fit`` looks at it (``size``; a big rung's first batch drops nearly all unseen)."""
    if text[-1] in ASCII_ALNUM:
        return 0, 0
    tokens = count_text(text) + 1
    return tokens, count_text(text + "\n") - tokens


def size(line: Any) -> int:
    """``line.tokens``, counted the first time it is asked for."""
    n = line.tokens
    if not n:
        n = line.tokens = count_text(line.text) + 1
    return n


def first_batch(candidates: Sequence[Any], room: int) -> int:
    """How many of ``candidates`` (in drop order) ``_fit``'s first batch drops when the text
    counts ``room`` tokens less than the budget plus the candidates' sizes: the batch that
    drops from the bottom, one line at a time, until the sizes dropped cover the surplus, keeps
    the lines above it, the most valuable lines whose sizes fit in ``room``: found from the top,
    sizing only those (and the first that does not fit)."""
    kept = 0
    top = len(candidates)
    while top and kept + (k := size(candidates[top - 1])) <= room:
        kept += k
        top -= 1
    return top


def split_lines(lines: list[Any], spans: dict[str, tuple[int, int, int]],
                raised: dict[str, tuple[int, list]] | None = None) -> tuple[list, list, dict[str, int]]:
    """``lines``' droppable ones (``tier`` not None) and the others, each in order, and section
    name -> its droppable items (lines not ``detail``): a memo section's lines (``spans``) are
    all droppable items, taken whole, without a step per line. ``raised``: of a memo section,
    only the lines it names (those ranked above the most of them) are taken."""
    candidates: list[Any] = []
    fixed: list[Any] = []
    items: dict[str, int] = {}
    pos = 0
    for name, (start, end, _) in [*sorted(spans.items(), key=lambda kv: kv[1][0]), ("", (len(lines), 0, 0))]:
        for ln in lines[pos:start]:  # (a few lines: the requests, reports, goal, ...)
            if ln.tier is None:
                fixed.append(ln)
            else:
                candidates.append(ln)
                if not ln.detail:
                    items[ln.section] = items.get(ln.section, 0) + 1
        if name:
            candidates += lines[start:end] if raised is None else raised[name][1]
            items[name] = end - start
            pos = end
    return candidates, fixed, items


def top_batch(candidates: list[Any], room: int, raised: dict[str, tuple[int, list]], essential: int) -> int | None:
    """``first_batch`` of ``candidates`` (the document's droppable lines but the memo sections'
    lines of their most common tier, ``raised``, which sort below every one of them), sorted in
    place in drop order; None: the boundary is not among them (it keeps them all), or they do
    not all rank above the lines left out (then sort all of the lines). A big rung sorts ~1k
    lines, not its ~100k-300k (the lines left out are dropped, below ``essential``)."""
    if not candidates or not raised:
        return None
    low = max(tier for tier, _ in raised.values())
    if low >= essential or min(map(_TIER, candidates)) <= low:
        return None
    candidates.sort(key=_SEQ)
    candidates.sort(key=_TIER)
    return first_batch(candidates, room) or None


def batch_counts(candidates: list[Any], top: int, items: dict[str, int]) -> dict[str, int]:
    """Section name -> the items among ``candidates[:top]`` (``items``: those of all of them),
    counted from the few kept (``candidates[top:]``), not the ~100k dropped; none: left out."""
    counts = dict(items)
    for ln in candidates[top:]:
        if not ln.detail:
            counts[ln.section] -= 1
    return {name: k for name, k in counts.items() if k}


def mid_tokens(text: str, tokens: int) -> int:
    """What a line (``tokens``: its size) counts inside its section's text when a line starting
    with a non-space character follows it."""
    return tokens if text[-1] in ASCII_ALNUM else count_text(text + "\n")


def count_beyond(lines: Sequence[Any], spans: dict[str, tuple[int, int, int]],
                 columns: dict[str, tuple[Callable[[int], Any], Callable[[], Iterable[int]]]],
                 headings: dict[str, str], order: Sequence[str],
                 sum_rest: Callable[[list[Any], bool], int | None]) -> int | None:
    """``count_lines`` of the text ``_render`` lays ``lines`` out in (none dropped), less the
    sizes of its droppable lines (``tier`` not None): with those sizes, its count, without
    counting a memo line (or laying out the text) more than once.

    ``spans``: section name -> (start, end, the sum of its lines' corrections) for the sections
    whose lines (``lines[start:end]``, all of the section's, at least one) are the memo's
    (``line_sizes``), each droppable and starting with a non-space character; ``columns``: name
    -> (the line at a place of the section, made if its entry is an item: ``ladder_memo``, and
    the lengths of its lines' texts), so that only the lines read are made. ``sum_rest(rest, more)``: the count of the other lines' sections,
    sizing their droppable lines (``more``: the text goes on after the last of them). None: a
    text the sums cannot count (then count it all)."""
    n = len(lines)
    total = 0
    # the text, for ``piece_cut_extra_of`` only, as its parts in order (a memo section is one
    # part, ``_MemoSpan``: its lines stand for their texts and a newline each, made only if a
    # piece cut reads them - a big rung's text is ~17 MB at 300k events, its lines' texts ~30 MB
    # more, issue 17 memory - and its length summed from the memo's column, not a part and a
    # length per line laid out every rung: ~300k of each at 300k events, issue 17, CPU)
    parts: list[Any] = []
    lens: list[int] = []
    sep = "\n\n"  # (before the next section's heading: "\n" after a memo line's own newline)
    section = None
    pos = 0
    ordered = sorted(spans.items(), key=lambda kv: kv[1][0])
    rest: list[Any] = []
    for name, (start, end, corr) in [*ordered, ("", (n, n, 0))]:
        for ln in lines[pos:start]:  # (a few lines: the requests, reports, goal, ...)
            rest.append(ln)
            if ln.section != section:
                section = ln.section
                new = (sep, headings[section], ln.text) if parts else (headings[section], ln.text)
                sep = "\n\n"
            else:
                new = ("\n", ln.text)
            parts += new
            lens += map(len, new)
        if not name:
            break
        pos = end
        line_at, lengths = columns[name]
        last = line_at(end - 1 - start)
        t = last.text
        k = size(last)
        # the last line: followed by the next section's heading, or the end of the text
        own = count_text(t + "\n\n") if end < n else k - 1
        total += count_text(headings[name]) + corr - mid_tokens(t, k) + own
        section = name
        new = (sep, headings[name]) if parts else (headings[name],)
        parts += new
        lens += map(len, new)
        span = _MemoSpan(line_at, lengths())
        parts.append(span)
        lens.append(span.size)
        sep = "\n"
    counted = sum_rest(rest, pos == n)
    if counted is None:
        return None
    total += counted
    total -= sum(ln.tokens for ln in rest if ln.tier is not None)
    ends = list(accumulate(lens))
    del lens
    # (the text ends with a memo line: without the newline its part stands for)
    extra = piece_cut_extra_of(ends[-1] - (sep == "\n"), partial(_text_part, parts, ends))
    return None if extra is None else total + extra


class _MemoSpan:
    """A memo section's lines in the text ``count_beyond`` lays out: each line's text and a
    newline, the line made by ``line_at(place)`` only when read (``text``); its ``size`` is
    its lines' text lengths (the memo's column) plus a newline each. The lines' starts are found
    from the sums of ``CHUNK`` lengths at a time, made the first time the span is read (a piece
    cut falls in a few of a big rung's sections), not from a length per line laid out."""

    __slots__ = ("line_at", "lengths", "size", "_ends")

    CHUNK = 256

    def __init__(self, line_at: Callable[[int], Any], lengths: Iterable[int]) -> None:
        self.line_at = line_at
        self.lengths = lengths = lengths if type(lengths) is array else array("q", lengths)
        self.size = sum(lengths) + len(lengths)
        self._ends: list[int] | None = None

    def text(self, a: int, b: int) -> str:
        """``text[a:b]`` of the span's text, ``0 <= a < b <= size``."""
        ends = self._ends
        lengths, step = self.lengths, self.CHUNK
        if ends is None:  # the end of each chunk of lines in the span's text
            ends = self._ends = list(accumulate(sum(lengths[i:i + step]) + len(lengths[i:i + step])
                                                for i in range(0, len(lengths), step)))
        c = bisect_right(ends, a)  # (the chunk holding the line at ``a``)
        k = c * step
        at = ends[c - 1] if c else 0
        while at + lengths[k] + 1 <= a:  # (the line holding ``a``: ``at`` is its start)
            at += lengths[k] + 1
            k += 1
        out = []
        end = at
        line_at = self.line_at
        while end < b:
            out.append(line_at(k).text)
            out.append("\n")
            end += lengths[k] + 1
            k += 1
        return "".join(out)[a - at:b - at]


def _text_part(parts: list[Any], ends: list[int], a: int, b: int) -> str:
    """``text[a:b]`` of the text laid out in ``parts`` (strings, or a memo section's lines,
    ``_MemoSpan``) that end at ``ends``: only the lines it spans are made."""
    if b <= a:
        return ""
    i = bisect_right(ends, a)
    j = bisect_right(ends, b - 1)
    out = []
    for k in range(i, j + 1):
        p = parts[k]
        start = ends[k - 1] if k else 0
        lo, hi = max(a, start) - start, min(b, ends[k]) - start
        out.append(p[lo:hi] if type(p) is str else p.text(lo, hi))
    return "".join(out)
