"""The structured summary's failure lines: one dense line per failure, "attempt -> cause -> next -> outcome".

Blind readers asked "what happened on the first attempt to read X and what caused it", "why was
the first ``edit 287:295`` rejected", "what happened to the commands creating data/ results/":
the answer is one failed call, the telling line of its output, what the agent did next and
whether a later run of the same thing worked. Per line:

- the same action failing again (a rejected edit retried with new text) is one line with each
  distinct cause and the runs that hit it, in order (the first attempt's cause stays readable);
- different actions failing with one cause (a sandbox refusing every command, three proposed
  commands the user declined) are one line naming each action with its own outcome, so a read
  that a rerun fixed is not hidden behind the command still failing;
- the status comes first in the keep-tier: a failure nothing fixed outranks one a rerun fixed.

Split out of ``compactor.summarize.structured`` (which renders these under "Errors and failed
approaches") to keep it small.
"""

from __future__ import annotations

from functools import lru_cache

import re

from compactor.lifting.failures import PARTIAL_ERROR, SOFT_ERROR, SOFT_NEXT, soft_concluded
from compactor.lifting.state import FailedApproach, FileRef

TIER_FAILED_RESOLVED = 60  # a failure a later run fixed: history, still what not to repeat
TIER_FAILED_FIXED = 66  # a failure fixed by changing files: what failed, why, and what fixed it
TIER_FAILED_APPROACH = 60
TIER_FAILED_OPEN = 70  # a failure nothing fixed yet: the next agent meets it again

CAUSE_CHARS = 300
"""A cause as the lifter kept it (its telling line(s) and where a traceback raised it), clipped to this."""
NEXT_CHARS = 170
"""The agent's next move as the lifter kept it (``failures.NEXT_CHARS`` of its words, its seq)."""
RESOLVED_NEXT_CHARS = 100
MAX_ACTIONS = 4
"""Actions named on one shared-cause line; the rest are counted."""
MAX_CAUSES = 3
"""Distinct causes quoted on one repeated-action line (the first always)."""


@lru_cache(maxsize=1 << 16)
def one_line(text: str, n: int = 240) -> str:
    # (memo: each candidate of the shrink ladder renders the same commands and files again)
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1].rstrip() + "…"


def code(text: str, n: int = 200, memo: bool = True) -> str:
    """``text`` on one line, cut to ``n``, as inline code. ``memo=False``: not through
    ``one_line``'s memo (a line the shrink ladder's own memo builds once: each of a big
    session's ~50k-150k commands would take a memo entry, and evict the others, for nothing)."""
    return "`" + (one_line if memo else _one_line)(text, n).replace("`", "'") + "`"


_one_line = one_line.__wrapped__


def _fixed_by(fa: FailedApproach, files: list[FileRef]) -> str:
    """`` after changing a.py (#20)``: the files whose latest change falls between a failure and
    the run that worked (what fixed it, as far as the log shows; a file changed again later is
    not named, so this never claims more than happened in that window)."""
    if fa.resolved_at is None:
        return ""
    # (a change at the resolving seq is the rerun itself: a retried edit that worked)
    between = sorted((f for f in files if fa.seq < f.seq < fa.resolved_at), key=lambda f: f.seq)
    if not between:
        return ""
    names = [f"{f.path} (#{f.seq})" for f in between[:3]]
    more = f" and {len(between) - 3} more" if len(between) > 3 else ""
    return " after changing " + ", ".join(names) + more


def _names_fixed_file(text: str, files: list[FileRef], fa: FailedApproach) -> bool:
    return any(f.path in text for f in files if fa.seq < f.seq < (fa.resolved_at or 0))


def _status(fa: FailedApproach, files: list[FileRef]) -> tuple[str, int]:
    """(``resolved at #N after changing …`` / ``failed again at #N`` / ``still open …``, tier)."""
    if fa.resolved_at is not None:
        fix = (f" (rerun with {fa.fixed_by})" if fa.fixed_by else "") + _fixed_by(fa, files)
        # a failure that changes to files fixed (the bug the session is about) says more than
        # one a plain retry fixed (a rejected edit, a wrong directory)
        return f"resolved at #{fa.resolved_at}{fix}", TIER_FAILED_FIXED if fix else TIER_FAILED_RESOLVED
    if fa.key and fa.failed_again is not None:
        return f"failed again at #{fa.failed_again}", TIER_FAILED_OPEN
    if fa.key:
        return "still open (not rerun since)", TIER_FAILED_OPEN
    return "", TIER_FAILED_APPROACH  # nothing to compare a later run with


def _next(fa: FailedApproach, files: list[FileRef]) -> str:
    # (the fix said it already when it names the file)
    if fa.next and not (fa.resolved_at is not None and _names_fixed_file(fa.next, files, fa)):
        # (a resolved failure's outcome is said; its next move is history: shorter)
        return f"; next: {one_line(fa.next, NEXT_CHARS if fa.resolved_at is None else RESOLVED_NEXT_CHARS)}"
    return ""


def failure_line(fa: FailedApproach, files: list[FileRef] | None = None) -> tuple[str, int]:
    """``#57 `anchor build` → failed, still open: "cause"; next: …`` and its keep-tier (the
    status first: it decides what the next turn does)."""
    files = files or []
    if not fa.tool_use_id:  # the agent's own words ("that didn't work")
        return f"- #{fa.seq} the agent said: \"{one_line(fa.what)}\"", TIER_FAILED_APPROACH
    status, tier = _status(fa, files)
    cause = fa.cause or fa.error
    if fa.error == SOFT_ERROR:  # it ran; the agent's words say it did nothing it wanted
        # (its next result confirmed the agent's explanation: what failed, why and what worked, as a fix)
        # (the call after it is said by a chain of such calls: where the agent went after the last one)
        confirmed = bool(fa.next) and not fa.next.startswith(SOFT_NEXT)
        return f"- #{fa.seq} {code(fa.what, 120)} → ran, no visible effect: {one_line(cause, CAUSE_CHARS)}" + (
            f"; {one_line(fa.next, NEXT_CHARS)}" if confirmed else ""), TIER_FAILED_FIXED if confirmed else tier
    line = f"- #{fa.seq} {code(fa.what, 120)} → failed" + (f", {status}" if status else "") + (
        f": {one_line(cause, CAUSE_CHARS)}" if cause else ": no error text in the output")
    return line + _next(fa, files), tier


def _seqs(runs: list[FailedApproach], n: int = 4) -> str:
    return ", ".join(f"#{fa.seq}" for fa in runs[:n]) + (", …" if len(runs) > n else "")


def _lead(runs: list[FailedApproach]) -> FailedApproach:
    open_runs = [fa for fa in runs if fa.resolved_at is None and fa.key]
    return open_runs[-1] if open_runs else runs[-1]


def _repeated_action_line(runs: list[FailedApproach], files: list[FileRef]) -> tuple[str, int]:
    """One action failing more than once with different causes: each cause with its runs."""
    lead = _lead(runs)
    status, tier = _status(lead, files)
    # the agent struggled with it (a rejected edit retried with new text): what not to repeat
    tier = max(tier, TIER_FAILED_FIXED)
    causes: dict[str, list[FailedApproach]] = {}
    for fa in runs:
        cause = (fa.cause or fa.error).strip().lstrip("-* ").strip()  # (a listed lint line)
        causes.setdefault(cause or "no error text in the output", []).append(fa)
    # (the first cause whole: a rejected edit's says what the attempt got wrong)
    parts = [f"{one_line(c, 200 if k == 0 else 120)} ({_seqs(rs, 3)})"
             for k, (c, rs) in enumerate(list(causes.items())[:MAX_CAUSES])]
    if len(causes) > MAX_CAUSES:
        parts.append(f"{len(causes) - MAX_CAUSES} more causes")
    line = (f"- #{runs[0].seq} {code(lead.what, 120)} ×{len(runs)} → failed ({_seqs(runs, 6)})"
            + (f", {status}" if status else "") + ": " + " / ".join(parts))
    # (once a rerun worked, the words after the last failed one are history: the causes say what went wrong)
    return line + (_next(runs[-1], files) if lead.resolved_at is None else ""), tier


def _shared_cause_line(actions: list[list[FailedApproach]], cause: str, files: list[FileRef]) -> tuple[str, int]:
    """Different actions that failed with one cause: each action with its own outcome."""
    n_runs = sum(len(a) for a in actions)
    named: list[str] = []
    tier = 0
    for runs in actions:
        status, t = _status(_lead(runs), files)
        tier = max(tier, t)
        if len(named) < MAX_ACTIONS:
            short = "open" if status.startswith("still open") else status
            named.append(f"{code(runs[0].what, 90)} ({_seqs(runs, 3)}" + (f", {short})" if short else ")"))
    rest = actions[MAX_ACTIONS:]
    if rest:
        named.append(f"{len(rest)} more ({_seqs([r[0] for r in rest], 4)})")
    first = min(fa.seq for a in actions for fa in a)
    last = max((fa for a in actions for fa in a), key=lambda fa: fa.seq)
    line = (f"- #{first} {n_runs} calls failed with the same cause: " + "; ".join(named)
            + f" → {one_line(cause, CAUSE_CHARS)}")
    return line + _next(last, files), tier


MAX_PARTIAL = 5
"""Answers named on the partial-answers line; the rest are counted."""


def _partial_line(cut: list[FailedApproach]) -> tuple[str, int]:
    """Fetches whose answers said they were cut, on one line: what each got and whether the rest was
    asked for later (the limitation the next agent meets again, and what the agent did instead)."""
    open_ = [fa for fa in cut if fa.resolved_at is None]
    items = [f"{fa.cause or code(fa.what, 90)} (#{fa.seq}" + (f", rest fetched at #{fa.resolved_at})" if fa.resolved_at else ")")
             for fa in cut[:MAX_PARTIAL]]
    if len(cut) > MAX_PARTIAL:
        items.append(f"{len(cut) - MAX_PARTIAL} more ({_seqs(cut[MAX_PARTIAL:], 4)})")
    n = len(cut)
    head = (f"{n} answers came back partial" if n > 1 else f"{code(cut[0].what, 90)} came back partial")
    rest = ("the rest never fetched" if len(open_) == n else f"{len(open_)} never fetched further" if open_
            else "the rest fetched later")
    last = max(cut, key=lambda fa: fa.seq)
    line = f"- #{cut[0].seq} {head} (their own fields), {rest}: " + "; ".join(items)
    return line + (f"; next: {one_line(last.next, NEXT_CHARS)}" if last.next else ""), (
        TIER_FAILED_OPEN if open_ else TIER_FAILED_RESOLVED)


def soft_told(fa: FailedApproach) -> bool:
    """A soft failure with the agent's why or what its next result confirmed."""
    return "why: " in fa.cause or bool(fa.next and not fa.next.startswith(SOFT_NEXT))


_URL_TARGET_RE = re.compile(r"https?://[^\s\"'?#]+")


def _target(fa: FailedApproach) -> str:
    m = _URL_TARGET_RE.search(fa.what)
    return m.group(0) if m else ""


def _soft_chains(soft: list[FailedApproach]) -> list[list[FailedApproach]]:
    """Calls that did nothing, one after another at the same URL (two payloads sent to one form):
    one chain, so the line says what was tried there and where the agent went after the last."""
    chains: list[list[FailedApproach]] = []
    for fa in sorted(soft, key=lambda x: x.seq):
        prev = chains[-1][-1] if chains else None
        if (prev is not None and _target(fa) and _target(fa) == _target(prev)
                and prev.next.startswith(SOFT_NEXT) and prev.next.endswith(f"(#{fa.seq})")):
            chains[-1].append(fa)
        else:
            chains.append([fa])
    return chains


CHAIN_CALL_CHARS = 100
CHAIN_CAUSE_CHARS = 160
"""Each try of a chain: its call and the agent's words (its symptom, then what it concluded), clipped."""


def _soft_chain_line(chain: list[FailedApproach], files: list[FileRef]) -> tuple[str, int]:
    first = chain[0]
    line = f"- #{first.seq} {code(first.what, CHAIN_CALL_CHARS)} → ran, no visible effect: {one_line(first.cause, CHAIN_CAUSE_CHARS)}"
    for fa in chain[1:]:  # (the same URL: its call without it)
        what = fa.what.replace(_target(fa), "…").strip()
        line += f"; then #{fa.seq} {code(what, CHAIN_CALL_CHARS)} → no visible effect either: {one_line(fa.cause, CHAIN_CAUSE_CHARS)}"
    last = chain[-1]
    # (several tries at one target that all did nothing: what not to repeat, as a retried edit is)
    return line + (f"; {one_line(last.next, NEXT_CHARS)}" if last.next else ""), TIER_FAILED_FIXED


def told_chains(failed: list[FailedApproach]) -> list[list[FailedApproach]]:
    """Tries at one target that all did nothing (``_soft_chains``), one of them with the agent's why
    or conclusion ("suggesting that the vulnerability might not be at this page"): each one line."""
    return [c for c in _soft_chains([fa for fa in failed if fa.error == SOFT_ERROR])
            if len(c) > 1 and any(soft_told(fa) or soft_concluded(fa.cause) for fa in c)]


def shown_soft(failed: list[FailedApproach],
               chains: list[list[FailedApproach]] | None = None) -> list[FailedApproach]:
    """The calls that did nothing which get a failure line (alone or in a chain): their quoted words
    are not said again elsewhere. ``chains``: ``told_chains(failed)`` when the caller has it."""
    chained = {id(fa) for c in (told_chains(failed) if chains is None else chains) for fa in c}
    return [fa for fa in failed if fa.error == SOFT_ERROR and (id(fa) in chained or soft_told(fa))]


def build_failure_lines(failed: list[FailedApproach], files: list[FileRef]) -> list[list]:
    """``[line, tier, seq, tool ids]`` per failure line, in the order of their first failure.

    Runs of one action (its normalized key) are folded first; actions whose runs all failed with
    one cause are then folded by that cause.
    """
    chains = told_chains(failed)
    in_chain = {id(fa) for c in chains for fa in c}
    soft = " ".join(fa.cause for fa in shown_soft(failed, chains))
    # a call the agent said did nothing is a line when the agent said why or its next result confirmed
    # something: then it is what the session turned on; a bare symptom stays the agent's finding
    failed = [fa for fa in failed if id(fa) not in in_chain and (fa.error != SOFT_ERROR or soft_told(fa))]
    cut = [fa for fa in failed if fa.error == PARTIAL_ERROR]
    failed = [fa for fa in failed if fa.error != PARTIAL_ERROR]
    # (a sentence a call's "no visible effect" line quotes is not said again on its own)
    stated: list[FailedApproach] = [fa for fa in failed if not fa.tool_use_id and fa.what[:100] not in soft]
    out: list[list] = []
    for chain in chains:
        line, tier = _soft_chain_line(chain, files)
        out.append([line, tier, chain[0].seq, {fa.tool_use_id for fa in chain}])
    by_action: dict[str, list[FailedApproach]] = {}
    for fa in failed:
        if fa.tool_use_id:
            by_action.setdefault(fa.key or f"\0{fa.tool_use_id}\0{fa.what}", []).append(fa)
    by_cause: dict[str, list[list[FailedApproach]]] = {}
    mixed: list[list[FailedApproach]] = []
    for runs in by_action.values():
        causes = {fa.cause or fa.error for fa in runs}
        if len(causes) == 1 and "" not in causes:
            by_cause.setdefault(causes.pop(), []).append(runs)
        else:
            mixed.append(runs)
    for fa in stated:
        line, tier = failure_line(fa, files)
        out.append([line, tier, fa.seq, set()])
    for cause, actions in by_cause.items():
        if len(actions) == 1 and len(actions[0]) == 1:
            line, tier = failure_line(actions[0][0], files)
        elif len(actions) == 1:
            runs = actions[0]
            line, tier = failure_line(_lead(runs), files)
            lead = _lead(runs)
            others = [fa for fa in runs if fa is not lead]
            also = ", ".join(f"#{fa.seq}" for fa in others[-4:]) + (", …" if len(others) > 4 else "")
            line = line.replace(f"- #{lead.seq} ", f"- #{lead.seq} (×{len(runs)} with the same cause, also {also}) ", 1)
        else:
            line, tier = _shared_cause_line(actions, cause, files)
        runs_all = [fa for a in actions for fa in a]
        out.append([line, tier, min(fa.seq for fa in runs_all), {fa.tool_use_id for fa in runs_all}])
    for runs in mixed:
        line, tier = (_repeated_action_line(runs, files) if len(runs) > 1 else failure_line(runs[0], files))
        out.append([line, tier, runs[0].seq, {fa.tool_use_id for fa in runs}])
    if cut:
        line, tier = _partial_line(cut)
        out.append([line, tier, cut[0].seq, {fa.tool_use_id for fa in cut}])
    out.sort(key=lambda fl: fl[2])
    return out
