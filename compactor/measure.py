"""Token size of a view as the model receives it: the rendered Anthropic request. Pure.

Budgets (``target_tokens``) are checked on this number: the system prompt plus the messages
``to_anthropic`` builds (consecutive same-role events merged, thinking dropped), counted with
cl100k per block the same way ``tokens.count_event`` counts events.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from compactor.events import Event, to_anthropic
from compactor.tokens import IMAGE_TOKENS, MESSAGE_OVERHEAD, count_text


def _block_tokens(b: dict[str, Any]) -> int:
    kind = b.get("type")
    if kind == "text":
        return count_text(b.get("text", ""))
    if kind == "tool_use":
        return count_text(b["name"] + " " + json.dumps(b.get("input", {}), ensure_ascii=False)) + 8
    if kind == "tool_result":
        content = b.get("content", [])
        if isinstance(content, str):
            return count_text(content) + 4
        return sum(_block_tokens(c) for c in content) + 4
    if kind == "image":
        return IMAGE_TOKENS
    return count_text(json.dumps(b, ensure_ascii=False))


def count_messages(system: str, messages: Iterable[dict[str, Any]]) -> int:
    """Tokens of an Anthropic request body (system + messages)."""
    total = count_text(system) + (MESSAGE_OVERHEAD if system else 0)
    for m in messages:
        total += MESSAGE_OVERHEAD
        content = m["content"]
        if isinstance(content, str):
            total += count_text(content)
        else:
            total += sum(_block_tokens(b) for b in content)
    return total


def view_tokens(view: Sequence[Event]) -> int:
    """Tokens of the request the view renders to."""
    system, messages = to_anthropic(view)
    return count_messages(system, messages)
