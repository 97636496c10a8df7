"""A checkpoint merged with the events appended after its snapshot (the transaction's merge
step, DESIGN.md section 5: the head moved while the compaction ran).

``commit_swap`` (``activities.merge``) calls ``reconcile_checkpoint`` on the checkpoint it is
about to publish with the events the agent appended meanwhile: they stay verbatim after it, an
action the state marked unknown whose result arrived among them is resolved.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from compactor.engine.compact import MIN_SUMMARY_TOKENS
from compactor.events import Block, Event, TextBlock, ToolResultBlock, content_hash
from compactor.records import Checkpoint


def reconcile_checkpoint(
    ckpt: Checkpoint, new_events: Sequence[Event], *, checkpoint_id: str | None = None
) -> tuple[Checkpoint, list[str]]:
    """Fold events appended after the snapshot into a candidate checkpoint (DESIGN §5 step 7).

    The new events stay verbatim after the checkpoint; an action the state marks unknown whose
    result arrived among them is resolved (state re-rendered within the same budget). A result
    whose tool_use the checkpoint covers would lead its message without its call, so the view
    shows it as text naming the call (a replacement; the log is untouched).

    Returns the checkpoint (unchanged when nothing resolved) and the resolved tool_use ids.
    """
    from compactor.lifting.lift import LiftedState, reconcile
    from compactor.summarize.structured import render_summary

    if ckpt.covers.empty or not ckpt.state:
        return ckpt, []
    state = LiftedState.model_validate(ckpt.state)
    new_state, resolved = reconcile(state, new_events)
    if not resolved:
        return ckpt, []
    names = {u.tool_use_id: u.name for u in state.unknown_actions}
    rendered = render_summary(new_state, max(ckpt.summary_tokens, MIN_SUMMARY_TOKENS))
    repl = dict(ckpt.replacements)
    for e in new_events:
        if e.seq <= ckpt.covers.end or not any(r.tool_use_id in names for r in e.tool_results):
            continue
        blocks: list[Block] = []
        for b in repl.get(e.seq, e.blocks):
            if isinstance(b, ToolResultBlock) and b.tool_use_id in names:
                err = " (error)" if b.is_error else ""
                head = f"[result{err} of the earlier call {b.tool_use_id} ({names[b.tool_use_id]}), " \
                       "which the summary covers]\n"
                blocks.append(TextBlock(text=head + b.text))
            else:
                blocks.append(b)
        repl[e.seq] = blocks
    new_id = checkpoint_id or "ck-" + hashlib.sha256(
        (ckpt.id + content_hash(new_events)).encode()
    ).hexdigest()[:32]
    snapshot = max([ckpt.snapshot_version, *(e.seq for e in new_events)])
    out = ckpt.model_copy(update={
        "id": new_id, "state": new_state.model_dump(mode="json"), "summary": rendered.text,
        "sections": dict(rendered.sections), "summary_tokens": rendered.tokens,
        "replacements": repl, "snapshot_version": snapshot,
    })
    return Checkpoint.model_validate(out.model_dump()), resolved
