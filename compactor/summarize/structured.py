"""The structured summarizer: a lifted state rendered into fixed sections, within a budget.

Deterministic and offline (the default summarizer). Every section is a ``## Name`` heading
followed by its items; empty sections are left out. When the text is over ``budget_tokens``
(counted with ``compactor.tokens.count_text``) items are dropped least valuable first: old
successful command listings, then files read, decisions, requests between the first and the
latest, ... Never dropped: the goal, the constraints, the actions whose outcome is unknown
and the latest request. (A constraint sentence that is also quoted verbatim inside the goal
or latest request shown in full is a duplicate: it may leave the constraints list early, as
its words stay in the summary.) When a section loses items a one-line note says how many, so the
reader knows the log has more.

The agent's own reports (its closing message of each turn) and the reasons and rules it stated
get a *share* of the budget instead (``compactor.lifting.narrative``): they are clipped to whole
sentences within it before anything is dropped, newest first, so at a small budget the newest
report is still there, and at a large one they cannot crowd out the lifted lists. An older
request is one line (its head, whether a report answered it): only the latest is verbatim. What
the newest changed files hold outranks the older requests and reports; the share those detail
lines leave unused goes to the reports (a review or research session's answers are its work).
What the agent concluded along the way (its findings after tool results: a SWE-agent or CTF
session is one long turn with one report) goes in the reports section, ``(found)``, newest first,
within its own share (most telling first: what ruled something out or named a cause); the 3 most
telling outrank a failure a rerun fixed, the rest go before the ok command listings do.

Here: the fit to a budget and the render. The document's lines are built in ``document``
(``_build``); the sections, their order and the drop tiers are ``sections``'.
"""

from __future__ import annotations

from operator import attrgetter

from pydantic import BaseModel, Field

from compactor.lifting.lift import LiftedState
from compactor.summarize.document import _build, _Doc
from compactor.summarize.file_details import ARTIFACT_SHARE
from compactor.summarize.ladder_count import batch_counts, count_beyond, first_batch, split_lines, top_batch
from compactor.summarize.ladder_lines import Line as _Line
from compactor.summarize.ladder_memo import begin_ladder_memo, end_ladder_memo, made_lines
from compactor.summarize.piece_cuts import piece_cut_extra
from compactor.summarize.sections import (
    ARTIFACTS,
    COMMANDS,
    CONSTRAINTS,
    DECISIONS,
    ERRORS,
    ESSENTIAL_TIER,
    FILES_CHANGED,
    FILES_READ,
    GOAL,
    LAST_ACTION,
    LATEST,
    LINKS,
    PROTECTED_SECTIONS,
    REASONS,
    REPORTS,
    REQUESTS,
    SECTION_NAMES,
    TESTS,
    TODOS,
    UNKNOWN,
    _FIXED_SECTIONS,
    _HEADINGS,
    _SECTION_RANK,
    section_names,
)
from compactor.tokens import ASCII_ALNUM, SHORT_TEXT, count_lines, count_text

__all__ = [  # what callers import from here: the renderer, the sections (``sections``), the ladder's memo
    "ARTIFACT_SHARE", "ARTIFACTS", "COMMANDS", "CONSTRAINTS", "DECISIONS", "ERRORS", "ESSENTIAL_TIER",
    "FILES_CHANGED", "FILES_READ", "GOAL", "LAST_ACTION", "LATEST", "LINKS", "PROTECTED_SECTIONS",
    "REASONS", "REPORTS", "REQUESTS", "SECTION_NAMES", "TESTS", "TODOS", "UNKNOWN", "RenderedSummary",
    "begin_ladder_memo", "doc_lines", "end_ladder_memo", "render_summary", "section_names",
]


class RenderedSummary(BaseModel):
    text: str = Field(description="The summary text, sections in SECTION_NAMES order.")
    sections: dict[str, list[str]] = Field(
        default_factory=dict, description="Section name -> the item lines rendered in it."
    )
    tokens: int = Field(default=0, description="count_text(text).")
    dropped: dict[str, int] = Field(
        default_factory=dict, description="Section name -> items left out for budget."
    )
    left_out_weight: int = Field(
        default=0,
        description="Sum of the keep-tiers of the essential items (tier >= ESSENTIAL_TIER) left "
        "out for budget: what a larger summary would have kept. 0 = every essential item shown.",
    )


def _render(doc: _Doc) -> tuple[str, dict[str, list[str]], dict[str, int]]:
    sections: dict[str, list[str]] = {}
    dropped: dict[str, int] = {}
    get = dropped.get
    mark = doc.mark
    for ln in doc.lines:
        if ln.dropped == mark:
            if not ln.detail:
                dropped[ln.section] = get(ln.section, 0) + 1
        elif (items := sections.get(ln.section)) is not None:
            items.append(ln.text)
        else:
            sections[ln.section] = [ln.text]
    return _join(sections, dropped), {k: v for k, v in sections.items()}, dropped


def _join(sections: dict[str, list[str]], dropped: dict[str, int]) -> str:
    parts: list[str] = []
    gone: list[str] = []
    for name in SECTION_NAMES:
        items = sections.get(name)
        n_dropped = dropped.get(name, 0)
        if not items:
            if n_dropped and name != CONSTRAINTS:  # folded rules: their words are in the requests
                gone.append(f"{name.lower()} {n_dropped}")
            continue
        body = list(items)
        if n_dropped and name == CONSTRAINTS:
            body.append(f"- ({n_dropped} more quoted verbatim in the requests above)")
        elif n_dropped:
            body.append(f"- ({n_dropped} more not shown for space; they are in the full log)")
        parts.append(f"## {name}\n" + "\n".join(body))
    if gone:
        parts.append("(Not shown for space, in the full log: " + ", ".join(gone) + ".)")
    return "\n\n".join(parts)


def _fit(doc: _Doc, budget: int, tokens: int | None,
         rendered: tuple[str, dict[str, list[str]], dict[str, int]] | None,
         beyond: int | None = None) -> tuple[str, dict[str, list[str]], dict[str, int], int]:
    """Drop droppable lines, lowest tier and oldest first, until the text fits (or none left).

    ``rendered``: ``_render(doc)``, whose count is ``tokens`` (``_measure``: which also sized
    each droppable line, ``ln.tokens``). Each batch drops the lines that
    should cover the surplus, then the text of what is left is rendered and counted exactly;
    only the kept lines are rendered (a big state's first batch drops nearly all of its ~100k
    lines, issue 17), with the same result as ``_render(doc)`` after each batch.

    ``beyond`` (``_count_beyond``; then ``tokens`` and ``rendered`` are None): a document over
    its budget, whose count is its droppable lines' sizes plus ``beyond``. The first batch is
    then found from the top: the most valuable lines whose sizes fit in ``budget - beyond``
    stay, the ones the drop from the bottom would leave (it stops at the first line that makes
    the sizes dropped cover the surplus), and the lines below are dropped without being sized."""
    # (tier, seq, order) order: two stable sorts of the lines in their order, by seq then by tier,
    # without a key tuple per line (a rung of a big state sorts ~100k-300k of them, issue 17)
    if beyond is not None:
        # the memo's sections taken whole (``ladder_count``), and first only their lines ranked
        # above the most of them: the boundary is there when it drops one of those
        candidates, fixed, items = split_lines(doc.lines, doc.spans, doc.raised)
        top = top_batch(candidates, budget - beyond, doc.raised, ESSENTIAL_TIER)
        if top is None:  # (the boundary is lower: all of the lines, made and sorted)
            candidates = split_lines(doc_lines(doc), doc.spans)[0]
    else:
        candidates = [ln for ln in doc.lines if ln.tier is not None]
        fixed = [ln for ln in doc.lines if ln.tier is None]
    if beyond is None or top is None:
        candidates.sort(key=_SEQ)
        candidates.sort(key=_TIER)
    n_dropped: dict[str, int] = {}
    n = len(candidates)
    idx = 0
    mark = doc.mark
    if beyond is not None:
        # (the lines it drops are ``candidates[:top]`` and the memo lines left out of them: not
        # marked one by one, ~95k of them a rung at 100k events; a later batch's kept lines are
        # sorted from the candidates)
        if top is None:
            top = first_batch(candidates, budget - beyond)
        n_dropped = batch_counts(candidates, top, items)
        idx = top
        kept = sorted([*fixed, *candidates[idx:]], key=_ORDER)
        dropped = {name: n_dropped[name] for name in SECTION_NAMES if name in n_dropped}
        text, sections = _render_kept(kept, dropped)
        tokens = count_lines(text)
    else:
        assert tokens is not None and rendered is not None
        text, sections, dropped = rendered
    while tokens > budget and idx < n:
        surplus = tokens - budget
        freed = 0
        # drop a batch that should cover the surplus, then measure exactly
        while idx < n and freed < surplus:
            ln = candidates[idx]
            ln.dropped = mark
            freed += ln.tokens
            idx += 1
            if not ln.detail:
                n_dropped[ln.section] = n_dropped.get(ln.section, 0) + 1
        if 2 * (n - idx) < len(doc.lines) or beyond is not None:
            kept = sorted([*fixed, *candidates[idx:]], key=_ORDER)
        else:
            kept = [ln for ln in doc.lines if ln.dropped != mark]
        # (a section's lines are contiguous and the sections come in SECTION_NAMES order, so
        # this is the order ``_render`` meets their first dropped lines in)
        dropped = {name: n_dropped[name] for name in SECTION_NAMES if name in n_dropped}
        text, sections = _render_kept(kept, dropped)
        tokens = count_lines(text)
    # (the lines dropped are ``candidates[:idx]``, by tier: the essential ones are its end)
    weight = 0
    while idx and (tier := candidates[idx - 1].tier) >= ESSENTIAL_TIER:  # type: ignore[operator]
        weight += tier
        idx -= 1
    doc.left_out = weight
    return text, sections, dropped, tokens


def _measure(doc: _Doc) -> tuple[str, dict[str, list[str]], dict[str, int], int]:
    """``_render(doc)`` of a document with no line dropped, and ``count_lines`` of its text, with
    every droppable line sized for ``_fit`` (``ln.tokens``: its text's count plus its newline).

    The text's count is summed from the lines' own counts, the ones ``_fit`` sizes them by,
    instead of splitting and looking up the whole text again (a state of 100k items renders
    a text of ~100k lines per rung of the shrink ladder, issue 17). The same number as
    ``count_lines(text)``: the text is cut where ``count_lines`` cuts it (before a line
    starting with a non-space character, which the tokenizer never joins to the newline
    before it), and across ``count_lines``' own cuts of a long text (``piece_cut_extra``); a text
    laid out otherwise than ``_render`` lays it out is counted with ``count_lines``."""
    doc_lines(doc)
    text, sections, dropped = _render(doc)
    tokens = _sum_lines(doc.lines, text) if len(text) > SHORT_TEXT else None
    if tokens is None:  # (a short text, or one not laid out as expected)
        for ln in doc.lines:
            if ln.tier is not None:
                ln.tokens = count_text(ln.text) + 1
        tokens = count_lines(text)
    return text, sections, dropped, tokens


def _sum_lines(lines: list[_Line], text: str | None, more: bool = False) -> int | None:
    """``count_lines(text)`` of ``_render``'s text of ``lines`` (none dropped), summed from the
    lines' counts (see ``_measure``), sizing the droppable ones; None: not laid out so.
    ``text`` None: the sum of these lines' sections only, without the checks against the text
    and its long text's cuts (``ladder_count``; ``more``: the text goes on after them)."""
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
            k = _SECTION_RANK.get(section, -1)
            if k <= rank:  # (not the order ``_render`` lays the sections out in)
                return None
            rank = k
            head = _HEADINGS[section]
            size += len(head)
            if t[:1].isspace() or not t:
                region = [head]
            else:
                total += count_text(head)
        # the separator after this line, and whether a cut follows it
        if i == last:
            sep, cut = ("\n\n", True) if more else ("", True)
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
    if text is None:
        return None if region is not None else total
    if size != len(text):
        return None
    extra = piece_cut_extra(text)
    return None if extra is None else total + extra


_ORDER = attrgetter("order")


def _render_kept(kept: list[_Line], dropped: dict[str, int]) -> tuple[str, dict[str, list[str]]]:
    """``_render``'s text and sections, from the lines kept (in order) and the dropped counts."""
    sections: dict[str, list[str]] = {}
    for ln in kept:
        if (items := sections.get(ln.section)) is not None:
            items.append(ln.text)
        else:
            sections[ln.section] = [ln.text]
    return _join(sections, dropped), sections


_SEQ = attrgetter("seq")
_TIER = attrgetter("tier")


def doc_lines(doc: _Doc) -> list[_Line]:
    """``doc.lines``, every ladder memo entry made its line first (a document read whole)."""
    return made_lines(doc.lines, doc.spans, doc.columns)


def _min_tokens(doc: _Doc, sections: frozenset[str], limit: int | None = None) -> int:
    """A lower bound of the tokens of any summary that shows every item line of ``sections``
    in ``doc``: each line of text holding a non-space character starts at least one token of
    its own (no piece of cl100k's pre-split holds a newline followed by a non-space
    character). With ``limit``: counted only until it is passed (a number over ``limit``)."""
    if limit is not None:
        # a memo section's lines (``- ...``) hold a non-space character each: one token apiece
        # at least, counted without a step per line, enough when that alone passes the limit
        n = sum(end - start for name, (start, end, _) in doc.spans.items() if name in sections)
        if n > limit:
            return n
    n = 0
    for ln in doc_lines(doc):
        if ln.section in sections and not ln.detail:
            text = ln.text
            if "\n" in text:
                n += sum(1 for part in text.split("\n") if part and not part.isspace())
            elif text and not text.isspace():
                n += 1
            if limit is not None and n > limit:
                break  # (the caller only asks whether the budget is passed)
    return n


def _count_beyond(doc: _Doc) -> int | None:
    """What ``_measure(doc)``'s count is beyond the sizes of its droppable lines, without its
    text or sizing the ladder memo's lines (``ladder_count``); None: no memo lines, or a text
    laid out otherwise (then ``_measure``)."""
    if not doc.spans:
        return None
    return count_beyond(doc.lines, doc.spans, doc.columns, _HEADINGS, SECTION_NAMES, _sum_rest)


def _sum_rest(lines: list[_Line], more: bool) -> int | None:
    return _sum_lines(lines, None, more) if lines else 0


def _left_out_weight(doc: _Doc) -> int:
    """The sum of the tiers of the essential lines (tier >= ``ESSENTIAL_TIER``) ``_fit(doc)``
    dropped."""
    return doc.left_out


def render_summary(state: LiftedState, budget_tokens: int, *, latest_full: bool = False) -> RenderedSummary:
    """Render ``state`` into the fixed sections, dropping the least valuable items to fit.

    The goal, constraints, unknown outcomes and latest request are never dropped; if they
    alone exceed the budget the goal and latest request shrink to head quotes pointing at the
    log (the latest request stays whole with ``latest_full``: a mid-turn cut passed it, so
    the summary is the only place it is verbatim), and if that is still too much the result is returned over budget (``tokens`` says
    so) for the caller to handle.
    """
    # Whole reports and reasons when everything fits; their budget shares apply only when
    # the summary has to give something up.
    beyond: int | None
    budgeted = _build(state, budget=budget_tokens)
    if _min_tokens(budgeted, _FIXED_SECTIONS, budget_tokens) <= budget_tokens:
        # (else the whole state cannot fit: its lists alone hold more lines than the budget
        # has tokens, and a session of thousands of commands is not rendered twice, issue 17)
        doc = _build(state)
        text, sections, dropped, tokens = _measure(doc)
        if tokens <= budget_tokens:
            return RenderedSummary(text=text, sections=sections, tokens=tokens, dropped=dropped)
        beyond = None
    else:
        # its full text is over the budget: only what it counts beyond its droppable lines is
        # needed (``_fit``'s first batch), not that text (a big state's ~100k lines)
        beyond = _count_beyond(budgeted)
    doc = budgeted
    if beyond is None:
        text, sections, dropped, tokens = _measure(doc)
        if tokens <= budget_tokens:
            return RenderedSummary(text=text, sections=sections, tokens=tokens, dropped=dropped)
        text, sections, dropped, tokens = _fit(doc, budget_tokens, tokens, (text, sections, dropped))
    else:
        text, sections, dropped, tokens = _fit(doc, budget_tokens, None, None, beyond)
    weight = _left_out_weight(doc)
    if tokens > budget_tokens:
        # Last resort: the goal and latest request shrink to head quotes pointing at the log.
        short = _build(state, short_requests=True, budget=budget_tokens, latest_full=latest_full)
        *short_rendered, short_tokens = _measure(short)
        out2 = _fit(short, budget_tokens, short_tokens, tuple(short_rendered))
        if out2[3] < tokens:
            text, sections, dropped, tokens = out2
            weight = _left_out_weight(short)
    return RenderedSummary(text=text, sections=sections, tokens=tokens, dropped=dropped,
                           left_out_weight=weight)
