"""The count of a shrink-ladder rung's summary when its count is all that is needed (issue 17).

A big state's document cannot fit its budget (``structured._min_tokens`` says so before it is
measured): its full text is never the summary, and ``_fit`` needs only that text's count (to size
its first batch) and each droppable line's. Nearly all of its ~100k-300k lines are commands and
files read, each built and sized once per ladder (``ladder_memo``) with its count inside its
section (``mid_tokens``): such a section counts its heading, the sum of those (a C-level sum of
the memo's numbers, not a Python step per line) and its last line's own separator. The few
other lines are summed as ``structured`` sums every text (``sum_rest``).

The same number as ``count_lines`` of ``_render``'s text: that text is cut where ``count_lines``
cuts it, before each line starting with a non-space character (a memo line starts with ``- ``),
and ``piece_cut_extra`` adds what its cuts of a long text add.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from compactor.tokens import ASCII_ALNUM, count_text, piece_cut_extra


def mid_tokens(text: str, tokens: int) -> int:
    """What a line counts in its section's text when a line starting with a non-space character
    follows it: ``count_text(text + "\\n")``; ``tokens`` (its text's count plus one) when it ends
    in a letter or digit, whose newline is a token of its own."""
    return tokens if text[-1] in ASCII_ALNUM else count_text(text + "\n")


def count_spans(lines: Sequence[Any], spans: dict[str, tuple[int, int, int]],
                headings: dict[str, str], order: Sequence[str],
                sum_rest: Callable[[list[Any], bool], int | None]) -> int | None:
    """``count_lines`` of the text ``_render`` lays ``lines`` out in (none dropped).

    ``spans``: section name -> (start, end, the sum of its lines' ``mid_tokens``) for the
    sections whose lines (``lines[start:end]``, all of the section's) are the memo's, each
    sized (``tokens``) and starting with a non-space character. ``sum_rest(rest, more)``: the
    count of the other lines' sections (``more``: the text goes on after the last of them).
    None: a text the sums cannot count (then count it all)."""
    n = len(lines)
    total = 0
    rest: list[Any] = []
    bodies: dict[str, str] = {}
    pos = 0
    for name, (start, end, mid) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        rest += lines[pos:start]
        pos = end
        last = lines[end - 1]
        t = last.text
        # the last line: followed by the next section's heading, or the end of the text
        own = count_text(t + "\n\n") if end < n else last.tokens - 1
        total += count_text(headings[name]) + mid - mid_tokens(t, last.tokens) + own
        bodies[name] = "\n".join([ln.text for ln in lines[start:end]])
    rest += lines[pos:]
    counted = sum_rest(rest, pos == n)
    if counted is None:
        return None
    for ln in rest:  # (a few lines: the requests, reports, goal, ...)
        if ln.section in bodies:
            bodies[ln.section] += "\n" + ln.text
        else:
            bodies[ln.section] = ln.text
    # (the text only for where count_lines cuts a long one: ``piece_cut_extra``)
    extra = piece_cut_extra("\n\n".join([headings[name] + bodies[name] for name in order if name in bodies]))
    return None if extra is None else total + counted + extra
