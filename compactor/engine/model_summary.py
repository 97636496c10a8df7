"""A model-written summary on the layer candidate: its budget, completion, acceptance. Pure.

The durable path (``StoreActivities.externalize`` / ``validate_candidate``) and the inline
path (``compact --inline --summarizer anthropic``) call these same functions, so a model
answer is judged the same way wherever it runs.

Acceptance on meaning (issue 14):

* **Refused when it carries almost nothing.** Before completion, the share of the lifted
  state's items the answer names by itself (``carried``) is measured; below
  ``MIN_CARRIED`` the answer is refused: the completed text would be the structured summary
  under the model's name. The record then says ``summarizer: structured`` and why.
* **Completed, never rejected, for the rest.** Every item the answer does not name is added
  from the lifted state (``completion.complete_from_state``) while room lasts.
* **Rejected only on must-haves** the validator checks on the completed text: constraints
  verbatim, unknown actions never reported done, no identifier the session never had, the
  latest request after a mid-turn cut (``invariants``).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from compactor.engine.compact import MIN_SUMMARY_TOKENS
from compactor.engine.policy import Policy
from compactor.events import Event
from compactor.records import Checkpoint
from compactor.tokens import count_text

def summary_budget(
    policy: Policy,
    *,
    target_tokens: int,
    tokens_after: int,
    summary_tokens: int,
    covered_tokens: int,
) -> int:
    """Room a model summary may take on the layer candidate: what the structured summary had,
    up to the target (``tokens_after`` is the candidate view's size with the structured
    summary of ``summary_tokens``; ``covered_tokens`` what the summary replaces)."""
    from compactor.engine.view import SUMMARY_PREFIX

    room = target_tokens - (tokens_after - summary_tokens) - 4
    budget = min(room, policy.summary_max_tokens)
    if policy.summary_must_shrink and covered_tokens:
        budget = min(budget, covered_tokens - count_text(SUMMARY_PREFIX) - 8)
    return max(budget, summary_tokens, MIN_SUMMARY_TOKENS)


def covered_events(events: Sequence[Event], ckpt: Checkpoint, prev_end: int = 0) -> list[Event]:
    """The events a checkpoint's summary replaces (after ``prev_end``, pinned left out)."""
    end = 0 if ckpt.covers.empty else ckpt.covers.end
    return [e for e in events if e.kind != "pinned" and prev_end < e.seq <= end]


def with_summary(
    base: Checkpoint,
    text: str,
    *,
    summarizer: str,
    budget: int,
    mid_turn: bool = False,
    sections: Mapping[str, list[str]] | None = None,
    native: dict[str, Any] | None = None,
    checkpoint_id: str | None = None,
) -> tuple[Checkpoint, list[str]]:
    """The layer candidate ``base`` with a summarizer's text swapped in, a model's text
    completed from the lifted state (``completion.complete_from_state``); and the sections
    completion added. Judged afterwards by ``invariants.validate`` like any candidate."""
    completed: list[str] = []
    if text and summarizer != "structured" and native is None and base.state:
        from compactor.lifting.lift import LiftedState

        text, completed = fit_completed(text, LiftedState.model_validate(base.state), budget,
                                        latest_full=mid_turn)
    tokens = count_text(text) if text else count_text(json.dumps(native or {}))
    return base.model_copy(update={
        "id": checkpoint_id or base.id,
        "summary": text,
        "sections": dict(sections or {}),
        "native": native,
        "summary_tokens": tokens,
        "summarizer": summarizer,
    }), completed


def over_budget(view_tokens: int, target_tokens: int | None, structured_tokens: int) -> str | None:
    """A model summary may not push the view over the target the structured candidate met:
    the hard violation (counts only, no text) that makes either path fall back to it. A view
    the structured summary could not fit either keeps the soft ``over_budget`` note."""
    if target_tokens and view_tokens > target_tokens >= structured_tokens:
        return (f"summary_over_budget: the view with the model summary is {view_tokens:,} tokens, "
                f"over the target {target_tokens:,} that the structured summary met "
                f"({structured_tokens:,})")
    return None


# Sections of a model's answer that give way first when the completed summary overruns its
# budget (a model that wrote past the budget it was asked for; its sections that say
# nothing, "- (none)", are gone already): the least a continuing agent acts on first; what
# the agent built (files changed: what they hold and do), why, and what failed last. Goal,
# constraints, unknown outcomes and the latest request never give way. (Probes, issue 14: a trimmed answer that had lost its
# "Files changed" left readers unable to say what the fix changed.)
_SHED_ORDER = ("Files read", "Links the user gave", "Artifacts", "Commands run", "Tests",
               "User requests", "Agent's reports (newest first)", "Current plan / todos",
               "Reasons and rules", "Decisions", "Errors and failed approaches", "Files changed")
_NOTHING = {"", "- (none)", "(none)", "- none", "none", "- (none recorded)"}
TRIMMED = "trimmed"


def _sections(text: str) -> list[list[str]]:
    """The answer as [heading line, body lines...] blocks (text before any heading: one block)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("## "):
            blocks.append([line])
        else:
            blocks[-1].append(line)
    return [b for b in blocks if b]


def _joined(blocks: list[list[str]]) -> str:
    """The blocks as text, without the headings whose lines all gave way (a bare heading says
    nothing: raze at 5% showed eight of them over the lifted state's lines)."""
    return "\n".join("\n".join(b) for b in blocks if b and not _says_nothing(b))


def _says_nothing(block: list[str]) -> bool:
    return bool(block) and block[0].startswith("## ") and \
        all(line.strip().lower() in _NOTHING for line in block[1:])


def without_empty_sections(text: str) -> str:
    """``text`` without its sections that say nothing (a heading over "- (none)" or no line at
    all), as the structured summary leaves them out: at a tight budget the template's empty
    sections took a tenth of a model's answer (Soul at 10%: five of 17 sections, ~50 of 449
    tokens) that completion can fill with what the answer names only in part. Everything
    else is kept as written."""
    blocks = _sections(text)
    if not any(_says_nothing(b) for b in blocks):
        return text
    return _joined(blocks)


def fit_completed(text: str, state: Any, budget: int, *, latest_full: bool = False) -> tuple[str, list[str]]:
    """The model's ``text`` without its empty sections (``without_empty_sections``), completed
    from the lifted state, within ``budget`` where the answer allows: when the completed text
    overruns it, the model's own lines give way, section by section in ``_SHED_ORDER`` and
    last line first (after a mid-turn cut, first the model's shortened copy of the latest
    request that completion quotes whole), and completion runs again, so what the model
    dropped that matters is added back from the state. Returns the text and the completed
    sections (``TRIMMED`` last when lines gave way)."""
    from compactor.summarize.completion import complete_from_state

    original = text
    text = without_empty_sections(text)
    done, completed = complete_from_state(text, state, budget, latest_full=latest_full)
    if count_text(done) <= budget:
        return done, completed
    from compactor.summarize.acceptance import done_claims, foreign_language

    if foreign_language(original, state) is not None or any(True for _ in done_claims(original, state)):
        return done, completed  # an answer that breaks a must-have is judged whole, never trimmed into passing
    blocks = _sections(text)
    dropped = 0
    order = (["## Latest request"] if latest_full else []) + [f"## {h}" for h in _SHED_ORDER]
    for heading in order:
        for block in blocks:
            if not block or block[0].strip() != heading:
                continue
            while len(block) > 1:
                if block[-1].strip():
                    dropped += 1
                block.pop()
                if heading != "## Latest request" and dropped % 2:
                    continue  # re-measure every other line (each measure runs the completion)
                candidate = _joined(blocks)
                done, completed = complete_from_state(candidate, state, budget, latest_full=latest_full)
                if count_text(done) <= budget:
                    return done, [*completed, TRIMMED]
            if heading == "## Latest request":
                block.clear()  # the heading goes too: completion quotes the request whole
    candidate = _joined(blocks)
    done, completed = complete_from_state(candidate, state, budget, latest_full=latest_full)
    return done, [*completed, TRIMMED] if dropped else completed


def completion_note(completed: Sequence[str]) -> list[str]:
    """The record's lines for what completion added and whether the model's own lines were
    trimmed to the budget (section names only, no text)."""
    added = [s for s in completed if s != TRIMMED]
    notes = ["completed from the lifted state: " + ", ".join(s.lower() for s in added)] if added else []
    if TRIMMED in completed:
        notes.append("model text trimmed to its budget (least-used sections first)")
    return notes


__all__ = ["MIN_SUMMARY_TOKENS", "completion_note", "covered_events", "fit_completed", "over_budget", "summary_budget",
           "with_summary", "without_empty_sections"]
