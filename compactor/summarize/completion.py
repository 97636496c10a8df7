"""Complete a model-written summary from the lifted state, so no name the next turn needs is lost.

A model summary is prose the validator cannot fully check; the lifted state is what the
structured summarizer would have said. Before a model summary is validated, every item of the
state it does not name (``is_named``: on meaning, see ``acceptance``) is appended under one
heading (``ALSO_HEADING``), most needed first: the unknown outcomes, the constraints, the goal
and (after a mid-turn cut) the latest request always; then open errors, files changed,
requests, failed commands and the rest while the summary budget lasts. Sections the model
left out are completed, never a reason to reject. Room still left after that goes to the
details the summary names only in part (``_FILL``): an error line, a changed file's content,
what a fetch returned, a decision, when the summary carries less than 80% of the line's
distinctive terms (``PARTLY``); errors first, newest first. A summary that names a file or
an error by a word or two can leave the next turn without what the file does or why the
call failed; the room is the summary's own (the budget the engine gave it), so using it
costs the kept tail nothing. An answer that names almost nothing by
itself ("## Goal / placeholder") is not completed into the structured summary under the
model's name: ``acceptance.is_placeholder`` refuses it before.

Pure and deterministic: the same text and state give the same completed text.
"""

from __future__ import annotations

import re
from typing import Callable

from compactor.lifting.lift import LiftedState
from compactor.summarize.structured import (
    COMMANDS,
    CONSTRAINTS,
    DECISIONS,
    ERRORS,
    FILES_CHANGED,
    GOAL,
    LAST_ACTION,
    LATEST,
    UNKNOWN,
    _build,
    doc_lines,
)
from compactor.summarize.acceptance import ALSO_HEADING, found_count, haystack, item_named, model_part, named, terms
from compactor.tokens import count_text

_MUST = (UNKNOWN, CONSTRAINTS, GOAL)
_FILL = {ERRORS: 0, LAST_ACTION: 1, FILES_CHANGED: 2, COMMANDS: 3, DECISIONS: 4}
"""Sections whose lines may be added again in full when the summary names them only in part,
in this order (what failed and why, where the covered range ends, what the changed files
hold, what a fetch or query returned, why things were done). Of the commands only those with
a fetch's or query's answer (``got: ...``) are: a bare command line adds nothing the summary's
name of it lacks, and a run's other gists (``printed: ...``) are short enough to be named whole."""
PARTLY = 0.8
"""A line the summary names carries less than this share of its terms: its detail is missing."""
_FILL_MIN_TERMS = 4
_TOOL_ID_RE = re.compile(r"\[tool_use ([^\]]+)\]")


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _body(text: str) -> str:
    return text[2:] if text.startswith("- ") else text


def _request_text(section: str, line: str) -> str:
    """The request a goal/latest line quotes (its first line is the "(from the user, #n)" tag)."""
    body = _body(line)
    return body.split("\n", 1)[1] if section in (GOAL, LATEST) and "\n" in body else body


def carried_by(request: str) -> Callable[[str], bool]:
    """Whether a constraint is in ``request`` word for word (whitespace and case aside): after
    a mid-turn cut the request is quoted whole, so such a constraint needs no line of its own
    (here, and in the model's request: ``prompting.build_prompt``)."""
    quoted = _norm(request)
    return lambda constraint: _norm(constraint) in quoted


def is_named(section: str, line: str, text: str, *, latest_full: bool = False) -> bool:
    """Whether the summary ``text`` already says the structured ``line`` of ``section``.

    Must-haves are checked as the validator checks them: constraints verbatim, the latest
    request after a mid-turn cut verbatim, an unknown outcome by its tool id or by its terms
    under the summary's unknown-outcome heading. Everything else is named when the summary
    carries the item's distinctive terms (``acceptance.named``), in any wording or language.
    """
    hay = haystack(text)
    if section == CONSTRAINTS:
        return _norm(_body(line)) in hay
    if section == LATEST and latest_full:
        quote = _request_text(section, line).split("\n[…", 1)[0]
        return _norm(quote) in hay
    if section == UNKNOWN:
        m = _TOOL_ID_RE.search(line)
        if m and m.group(1).lower() in hay:
            return True
        own = model_part(text)
        at = own.lower().find("outcome unknown")
        return at >= 0 and named(terms(_TOOL_ID_RE.sub(" ", line)), haystack(own[at:]))
    if not terms(line):
        return _norm(_body(line))[:60] in hay
    return item_named(section, line, hay)


def share_carried(line_terms: frozenset[str], hay: str) -> float:
    """The share of a line's distinctive terms (``terms``) that ``hay`` (a ``haystack``) carries."""
    return found_count(line_terms, hay) / len(line_terms) if line_terms else 1.0


def complete_from_state(text: str, state: LiftedState, budget_tokens: int, *,
                        latest_full: bool = False) -> tuple[str, list[str]]:
    """``text`` with the state's items it does not name appended, then (room left) the lines it
    names only in part; and the sections completed.

    Args:
        text: the model's summary.
        state: the lifted state of the covered range (the structured summarizer's input).
        budget_tokens: the summary budget; optional items and the lines named in part are added
            only while it lasts.
        latest_full: the cut passed the latest request (mid-turn): it must be quoted whole.
    """
    doc = _build(state, latest_full=latest_full)
    latest = state.requests[-1] if state.requests else None
    # After a mid-turn cut the latest request must be in the summary character for character
    # (invariants.check_latest_request): quoted whole below, unindented, unless it already is.
    quote_latest = bool(latest_full and latest is not None and latest.text.strip()
                        and latest.text.strip() not in text)
    in_quote = carried_by(latest.text) if quote_latest and latest is not None else None
    must: list[tuple[str, str]] = []
    optional: list[tuple[int, int, str, str]] = []
    fill: list[tuple[int, int, str, str]] = []  # (section rank, -seq, section, line): named in part
    file_at: int | None = None  # optional[] index of the file line its detail lines belong to
    file_line = ""  # the file line a detail line belongs to
    for ln in doc_lines(doc):  # (inside the ladder's memo: its entries made lines)
        if ln.detail and ln.section == FILES_CHANGED:
            # what a changed file holds / the agent's note on it: goes with its file line when
            # that line is added, and not on its own (a named file's details are the model's,
            # unless it says too little of them: the fill below)
            if file_at is not None:
                tier, order, section, body = optional[file_at]
                optional[file_at] = (tier, order, section, body + "\n" + ln.text.strip())
            elif file_line:
                path = _body(file_line).split(" (", 1)[0].strip()
                fill.append((_FILL[FILES_CHANGED], -ln.seq, FILES_CHANGED, f"{path}: {ln.text.strip()}"))
            continue
        file_at = None
        file_line = ln.text if ln.section == FILES_CHANGED else ""
        if ln.section == LATEST or (latest_full and latest is not None and ln.section == GOAL
                                    and state.goal is not None and state.goal.seq == latest.seq):
            continue  # the latest request: quoted below when needed, else it is in the tail
        if is_named(ln.section, ln.text, text, latest_full=latest_full):
            if ln.section in _FILL and ln.section != FILES_CHANGED and (
                    ln.section != COMMANDS or "got:" in ln.text):
                fill.append((_FILL[ln.section], -ln.seq, ln.section, ln.text))
            continue
        if in_quote is not None and ln.section == CONSTRAINTS and in_quote(_body(ln.text)):
            continue  # the request quoted whole below carries it word for word
        if ln.section in _MUST:
            must.append((ln.section, ln.text))
        else:
            optional.append((-(ln.tier or 100), ln.order, ln.section, ln.text))
            if ln.section == FILES_CHANGED:
                file_at = len(optional) - 1
    if not must and not optional and not quote_latest and not fill:
        return text, []
    out = [text.rstrip(), "", ALSO_HEADING]
    used = count_text("\n".join(out))
    added: list[str] = []

    def add(section: str, line: str) -> None:
        nonlocal used
        body = line[2:] if line.startswith("- ") else line
        item = f"- {section}: " + body.replace("\n", "\n  ")
        out.append(item)
        used += count_text(item) + 1
        if section not in added:
            added.append(section)

    for section, line in must:
        add(section, line)
    if quote_latest:
        assert latest is not None
        item = f"- {LATEST} (verbatim, from the user, #{latest.seq}):\n{latest.text.strip()}"
        out.append(item)
        used += count_text(item) + 1
        added.append(LATEST)
    for _, _, section, line in sorted(optional):
        item_tokens = count_text(line) + 4
        if used + item_tokens > budget_tokens:
            continue
        add(section, line)
    hay = haystack("\n".join(out))
    for _, _, section, line in sorted(fill):
        line_terms = terms(line)
        if len(line_terms) < _FILL_MIN_TERMS or share_carried(line_terms, hay) >= PARTLY:
            continue
        item_tokens = count_text(line) + 4
        if used + item_tokens > budget_tokens:
            continue
        add(section, line)
        hay += " " + haystack(out[-1])
    if len(out) == 3:
        return text, []  # nothing was missing, nothing named in part had room
    return "\n".join(out), added
