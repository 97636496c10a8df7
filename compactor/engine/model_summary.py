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
        from compactor.summarize.completion import complete_from_state

        text, completed = complete_from_state(
            text, LiftedState.model_validate(base.state), budget, latest_full=mid_turn)
    tokens = count_text(text) if text else count_text(json.dumps(native or {}))
    return base.model_copy(update={
        "id": checkpoint_id or base.id,
        "summary": text,
        "sections": dict(sections or {}),
        "native": native,
        "summary_tokens": tokens,
        "summarizer": summarizer,
    }), completed


def completion_note(completed: Sequence[str]) -> list[str]:
    """The record's line for what completion added (section names only, no text)."""
    return (["completed from the lifted state: " + ", ".join(s.lower() for s in completed)]
            if completed else [])


__all__ = ["MIN_SUMMARY_TOKENS", "completion_note", "covered_events", "summary_budget", "with_summary"]
