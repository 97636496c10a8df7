"""The replacement layers' blocks the summary ladder cannot show, let go while it runs (issue
17, memory): on a big session the clearing layer replaces nearly every tool result (~1 KB each
with its artifact's bytes, held by the replacements, the artifacts and the cleared candidate's
checkpoint), and the summary that beats it covers all but the tail. The layers are pure, so
the cleared candidate gets them back by running them again, only when it is validated or
chosen."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from compactor.engine.boundary import choose_cut, safe_cut_points
from compactor.engine.invariants import _refs
from compactor.engine.policy import Policy
from compactor.events import Block, Event


def ladder_cuts(evs: list[Event], plan: Any, policy: Policy, safe: dict[bool, list[int]] | None,
                 covered_all: Sequence[Event]) -> list[int]:
    """Every cut after ``plan.prev_end`` that ``compact.apply_layers``' shrink ladder may try
    (the same ``choose_cut`` calls; ``plan``: its ``Plan``)."""
    safe = dict(safe or {})
    cuts = []
    for keep_request in (True, False):
        if keep_request not in safe:
            safe[keep_request] = safe_cut_points(evs, plan.prev_end, keep_latest_request=keep_request)
        for factor in [*policy.shrink_ladder, 0.0]:
            budget = int(plan.tail_budget * factor)
            cuts.append(choose_cut(
                evs, policy, budget, tail_min=int(plan.tail_min * factor),
                tail_max=max(budget, int(plan.tail_max * factor)),
                min_text_messages=plan.min_text_messages if factor else 0, prev_end=plan.prev_end,
                keep_latest_request=keep_request, safe=safe[keep_request], body_events=covered_all,
            ))
    return [c for c in cuts if c > plan.prev_end]


def replay(repl0: dict[int, list[Block]], replacing: Sequence[tuple[str, Callable[..., Any]]],
            layers: Sequence[str], replaced: Callable[..., Any]) -> tuple[dict[int, list[Block]], dict[str, bytes]]:
    """The replacement layers run again from ``repl0``: the same replacements and artifacts
    (the layers are pure)."""
    repl = dict(repl0)
    artifacts: dict[str, bytes] = {}
    for name, fn in replacing:
        if name not in layers:
            continue
        out = replaced(name, fn, repl)
        if not out.items:
            continue
        repl.update(out.replacements)
        artifacts.update(out.artifacts)
    return repl, artifacts


def release_replaced(repl: dict[int, list[Block]], artifacts: dict[str, bytes],
                     cuts: Sequence[int]) -> tuple[int, dict[str, bytes]] | None:
    """Memory (issue 17): the replacement layers' blocks of the events the summary ladder
    covers whatever its cut (``cuts``: every cut it may try) are let go before it runs (~1 KB
    per cleared tool result of a big session, held by ``repl``, ``artifacts`` and the cleared
    candidate's checkpoint). ``repl`` keeps, trimmed in place, what a cut at or after the
    smallest one shows; returns that cut and the artifacts those replacements reference
    (None: no cut, nothing let go)."""
    low = min((c for c in cuts if c > 0), default=0)
    if not low:
        return None
    for s in [s for s in repl if s <= low]:
        del repl[s]
    used = {r.sha256 for b in repl.values() for r in _refs(b)}
    return low, {k: v for k, v in artifacts.items() if k in used}
