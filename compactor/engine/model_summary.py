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

from typing import Any, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from compactor.engine.policy import Policy
from compactor.events import Event
from compactor.records import Checkpoint
from compactor.tokens import count_text

MIN_SUMMARY_TOKENS = 200
"""As ``engine.compact.MIN_SUMMARY_TOKENS`` (kept equal; a test checks it)."""


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


__all__ = ["MIN_SUMMARY_TOKENS", "covered_events", "summary_budget"]
