"""The structured summary's text counted from its lines' counts (issue 17).

``structured._measure`` renders a document of ~100k-300k lines per rung of the shrink ladder;
its text's ``count_lines`` is summed from the lines' own counts instead of tokenizing it again.
``sum_lines`` walks the lines one by one (any layout); ``sum_runs`` takes the document's
sections as runs of lines (``section_runs``) and, when every line of a section starts with a
non-space character (the usual case: ``- ...`` items), sums each section in C-level passes
over counts each line carries (``inner``: set once per line, and a line the ladder memo keeps
carries it to the next rung), so a rung's count costs little more than its new lines.

The lines are ``structured._Line`` objects (read by attribute: section, text, tier, tokens,
inner); the section ranks and headings are ``structured``'s, passed in.
"""

from __future__ import annotations

from itertools import compress, groupby
from operator import attrgetter, not_

from compactor.tokens import ASCII_ALNUM, count_text, piece_cut_extra

_SECTION = attrgetter("section")
_TEXT = attrgetter("text")
_INNER = attrgetter("inner")


def section_runs(lines: list) -> list[tuple[str, list]]:
    """The document's lines as (section, its contiguous lines), in order."""
    return [(name, list(run)) for name, run in groupby(lines, _SECTION)]


def sum_lines(lines: list, text: str, ranks: dict[str, int], headings: dict[str, str]) -> int | None:
    """``count_lines(text)`` of ``_render``'s text of ``lines`` (none dropped), summed from the
    lines' counts (see ``structured._measure``), sizing the droppable ones; None: not laid out so."""
    total = 0
    size = 0  # characters laid out so far (a check of the layout against the text)
    region: list[str] | None = None  # the text since the last cut, when a line cannot start a region
    alnum = ASCII_ALNUM
    section = None
    rank = -1
    last = len(lines) - 1
    for i, ln in enumerate(lines):
        t = ln.text
        c = ln.tokens - 1 if ln.tokens else count_text(t)  # (a line from the ladder's memo: sized there)
        if ln.tier is not None:
            ln.tokens = c + 1
        if ln.section != section:  # a section starts: its heading comes first
            section = ln.section
            k = ranks.get(section, -1)
            if k <= rank:  # (not the order ``_render`` lays the sections out in)
                return None
            rank = k
            head = headings[section]
            size += len(head)
            if t[:1].isspace() or not t:
                region = [head]
            else:
                total += count_text(head)
        # the separator after this line, and whether a cut follows it
        if i == last:
            sep, cut = "", True
        elif lines[i + 1].section == section:
            sep = "\n"
            nt = lines[i + 1].text
            cut = bool(nt) and not nt[0].isspace()
        else:
            sep, cut = "\n\n", True  # (the next section's heading)
        size += len(t) + len(sep)
        if region is not None:
            region.append(t)
            region.append(sep)
            if cut:
                total += count_text("".join(region))
                region = None
        elif not cut:
            region = [t, sep]
        elif sep == "\n" and t[-1] in alnum:
            total += c + 1  # a newline after a letter or digit is a token of its own
        else:
            total += count_text(t + sep) if sep else c
    if size != len(text):
        return None
    extra = piece_cut_extra(text)
    return None if extra is None else total + extra


_CANNOT_FOLLOW_A_CUT = -(1 << 48)
"""``inner`` of a line that cannot follow a cut (empty, or starting with whitespace): a section
holding one sums below 0 (no real count is near 2**48)."""


def _size(ln) -> int:
    """Set ``ln.inner``: what the line counts for followed by a newline and a line starting
    with a non-space character (a cut: ``count_lines`` counts it alone), or
    ``_CANNOT_FOLLOW_A_CUT``; and size it for ``_fit``. Returns ``inner``."""
    t = ln.text
    c = ln.tokens - 1 if ln.tokens else count_text(t)
    if ln.tier is not None:
        ln.tokens = c + 1
    if not t or t[0].isspace():
        inner = _CANNOT_FOLLOW_A_CUT
    else:
        inner = c + 1 if t[-1] in ASCII_ALNUM else count_text(t + "\n")
    ln.inner = inner
    return inner


def sum_runs(lines: list, runs: list[tuple[str, list]], texts: list[list[str]], text: str,
             ranks: dict[str, int], headings: dict[str, str]) -> int | None:
    """``sum_lines(lines, text, ...)``, with ``runs = section_runs(lines)`` and ``texts`` their
    lines' texts: each section summed from its lines' ``inner`` counts when every line of it
    starts with a non-space character (then each line but the section's last is followed by a
    cut), else the walk of ``sum_lines``."""
    total = 0
    size = 0
    rank = -1
    final = len(runs) - 1
    for r, (name, run) in enumerate(runs):
        k = ranks.get(name, -1)
        if k <= rank:
            return None  # (not the order ``_render`` lays the sections out in)
        rank = k
        inners = list(map(_INNER, run))
        if 0 in inners:  # (lines not counted yet: the ladder memo's lines are, from an earlier rung)
            for i in compress(range(len(inners)), map(not_, inners)):
                inners[i] = _size(run[i])
        body = sum(inners)
        if body < 0:
            return sum_lines(lines, text, ranks, headings)
        head = headings[name]
        last = run[-1]
        total += count_text(head) + body - inners[-1]
        size += len(head) + sum(map(len, texts[r])) + len(run) - 1
        if r == final:
            total += last.tokens - 1 if last.tokens else count_text(last.text)
        else:
            total += count_text(last.text + "\n\n")
            size += 2
    if size != len(text):
        return None
    extra = piece_cut_extra(text)
    return None if extra is None else total + extra

