"""Complete a model-written summary from the lifted state, so no name the next turn needs is lost.

A model summary is prose the validator cannot fully check; the lifted state is what the
structured summarizer would have said. Before a model summary is validated, every item of the
state it does not name is appended under one heading (``ALSO_HEADING``), most needed first:
the unknown outcomes, the constraints, the goal and (after a mid-turn cut) the latest request
always; then open errors, files changed, requests, failed commands and the rest while the
summary budget lasts. A one-word answer ("## Goal / stub") is thereby completed into a usable
summary, or, when even that cannot fit, rejected by ``missing_sections``.

Pure and deterministic: the same text and state give the same completed text.
"""

from __future__ import annotations

import re

from compactor.lifting.lift import LiftedState
from compactor.summarize.structured import (
    CONSTRAINTS,
    ERRORS,
    FILES_CHANGED,
    GOAL,
    LATEST,
    REQUESTS,
    UNKNOWN,
    _build,
)
from compactor.tokens import count_text

ALSO_HEADING = "## Also in the lifted state (named here because the summary above does not)"

_MUST = (UNKNOWN, CONSTRAINTS, GOAL)
_BACKTICK_RE = re.compile(r"`([^`]{3,})`")
_TOOL_ID_RE = re.compile(r"\[tool_use ([^\]]+)\]")


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def line_key(section: str, text: str) -> str:
    """The part of a structured summary line whose presence says the item is named."""
    body = text[2:] if text.startswith("- ") else text
    if section == UNKNOWN:
        m = _TOOL_ID_RE.search(body)
        return m.group(1) if m else body
    if section == CONSTRAINTS:
        return body
    if section in (GOAL, LATEST):
        first = body.split("\n", 1)[1] if "\n" in body else body
        return first[:80].rstrip("…").strip()
    m = _BACKTICK_RE.search(body)
    if m:
        return m.group(1).rstrip("…").strip()[:60]
    if section == FILES_CHANGED:
        return body.split(" (", 1)[0]
    if section == REQUESTS:
        return re.sub(r"^#\d+:\s*", "", body)[:80].rstrip("…").strip()
    if section == ERRORS:
        return body.split(" (", 1)[0].split(":", 1)[0]
    return body[:60]


def complete_from_state(text: str, state: LiftedState, budget_tokens: int, *,
                        latest_full: bool = False) -> tuple[str, list[str]]:
    """``text`` with the state's items it does not name appended; and the sections completed.

    Args:
        text: the model's summary.
        state: the lifted state of the covered range (the structured summarizer's input).
        budget_tokens: the summary budget; optional items are added only while it lasts.
        latest_full: the cut passed the latest request (mid-turn): it must be quoted whole.
    """
    hay = _norm(text)
    doc = _build(state)
    must_sections = (*_MUST, LATEST) if latest_full else _MUST
    must: list[tuple[str, str]] = []
    optional: list[tuple[int, int, str, str]] = []
    for ln in doc.lines:
        key = line_key(ln.section, ln.text)
        if key and _norm(key) in hay:
            continue
        if ln.section in must_sections:
            must.append((ln.section, ln.text))
        elif ln.section != LATEST:
            optional.append((-(ln.tier or 100), ln.order, ln.section, ln.text))
    if not must and not optional:
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
    for _, _, section, line in sorted(optional):
        item_tokens = count_text(line) + 4
        if used + item_tokens > budget_tokens:
            continue
        add(section, line)
    return "\n".join(out), added


def missing_sections(text: str, state: LiftedState) -> list[str]:
    """Sections the state has content for of which the summary names nothing (goal, requests,
    files changed, open errors, unknown outcomes): a model summary missing one is rejected."""
    hay = _norm(text)
    doc = _build(state)
    wanted = (GOAL, REQUESTS, FILES_CHANGED, ERRORS, UNKNOWN)
    have: dict[str, bool] = {}
    for ln in doc.lines:
        if ln.section not in wanted:
            continue
        key = line_key(ln.section, ln.text)
        have[ln.section] = have.get(ln.section, False) or bool(key and _norm(key) in hay)
    return [s for s in wanted if s in have and not have[s]]
