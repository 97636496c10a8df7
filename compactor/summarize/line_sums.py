"""The structured summary's text counted from its lines' counts (issue 17).

``structured._measure`` renders a document of ~100k-300k lines per rung of the shrink ladder;
its text's ``count_lines`` is summed from the lines' own counts instead of tokenizing it again.
``sum_lines`` walks the lines one by one (any layout); ``sum_runs`` takes the document's
sections as runs of lines (``section_runs``) and, when every line of a section starts with a
non-space character (the usual case: ``- ...`` items), sums each section in C-level passes
over the counts the lines carry (``tokens``: the ladder memo's lines are sized when built), so
Python code runs only for the lines not sized yet and those not ending in a letter or digit.

The lines are ``structured._Line`` objects (read by attribute: section, text, tier, tokens);
the section ranks and headings are ``structured``'s, passed in.
"""

from __future__ import annotations

from itertools import compress, groupby
from operator import attrgetter, itemgetter, not_

from compactor.tokens import ASCII_ALNUM, count_text, piece_cut_extra

_SECTION = attrgetter("section")
_TEXT = attrgetter("text")
_TOKENS = attrgetter("tokens")
_FIRST = itemgetter(0)
_LAST = itemgetter(-1)


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


def sum_runs(lines: list, runs: list[tuple[str, list]], texts: list[list[str]], text: str,
             ranks: dict[str, int], headings: dict[str, str]) -> int | None:
    """``sum_lines(lines, text, ...)``, with ``runs = section_runs(lines)`` and ``texts`` their
    lines' texts: a section whose lines all start with a non-space character (then each line
    but the section's last is followed by a cut) is summed from its lines' counts, corrected for
    the lines that do not end in a letter or digit (their newline may join their last token),
    in C-level passes; any other section sends the whole text to the walk of ``sum_lines``."""
    total = 0
    size = 0
    rank = -1
    final = len(runs) - 1
    alnum = ASCII_ALNUM.__contains__
    for r, (name, run) in enumerate(runs):
        k = ranks.get(name, -1)
        if k <= rank:
            return None  # (not the order ``_render`` lays the sections out in)
        rank = k
        items = texts[r]
        if "" in items or any(map(str.isspace, map(_FIRST, items))):
            return sum_lines(lines, text, ranks, headings)
        sizes = list(map(_TOKENS, run))  # each line's count + 1 (the ladder memo's lines: sized there)
        if 0 in sizes:
            for i in compress(range(len(sizes)), map(not_, sizes)):
                ln = run[i]
                sizes[i] = count_text(ln.text) + 1
                if ln.tier is not None:
                    ln.tokens = sizes[i]
        # a line's newline is a token of its own after a letter or digit; else counted with it
        inner = [(i, count_text(items[i] + "\n")) for i in
                 compress(range(len(items)), map(not_, map(alnum, map(_LAST, items))))]
        body = sum(sizes) + sum(c - sizes[i] for i, c in inner)
        last = len(items) - 1
        body -= inner[-1][1] if inner and inner[-1][0] == last else sizes[last]  # (the last: below)
        head = headings[name]
        total += count_text(head) + body
        size += len(head) + sum(map(len, items)) + last
        if r == final:
            total += sizes[last] - 1
        else:
            total += count_text(items[last] + "\n\n")
            size += 2
    if size != len(text):
        return None
    extra = piece_cut_extra(text)
    return None if extra is None else total + extra
