"""A structured summary's document: the lines of its sections, built from a lifted state
(``_build``; split from ``structured``, which fits them to a budget and renders them).

A line is one item (``ladder_lines.Line``) with its section, text, tier and order. The shrink
ladder's memo (``ladder_memo``) keeps the command and file-read lines of one rung's state for the
next: those are made here (``_command_line``, ``_read_line``; a ``LazyLine``'s text made when
read), and a document holds the memo's sections as columns (``_Doc.columns``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import count as _counter
from operator import attrgetter

from compactor.lifting.outputs import is_install
from compactor.lifting.lift import LastAction, LiftedState, Request
from compactor.lifting.narrative import (
    REPORT_SHARE,
    cut_words,
    finding_weight,
    fit_report,
    norm,
    select_findings,
    select_reasons,
    select_reports,
)
from compactor.summarize.failure_lines import build_failure_lines, code as _code, one_line as _one_line, shown_soft
from compactor.summarize.file_details import ARTIFACT_SHARE, file_details, read_details
from compactor.summarize.ladder_carry import (ReadCarry, ascending, carry_command_lines, carry_reads, extend_commands,
                                               extend_reads, fresh_commands, raise_lines, special_runs)
from compactor.summarize.ladder_lines import LazyLine as _LazyLine
from compactor.summarize.ladder_lines import Line as _Line
from compactor.summarize.ladder_count import line_sizes
from compactor.summarize.ladder_memo import LADDER_MEMO as _LADDER_MEMO
from compactor.summarize.ladder_memo import LadderMemo as _LadderMemo
from compactor.summarize.ladder_memo import command_columns, read_columns, read_lines
from compactor.summarize.sections import (
    ANSWERED_REQUEST_CHARS, ARTIFACTS, COMMANDS, CONSTRAINTS, DECISIONS, ERRORS, FILES_CHANGED,
    FILES_READ, GIST_COMMAND_CHARS, GIST_SHARE, GOAL, LAST_ACTION, LATEST, LINKS, OPEN_REQUEST_CHARS,
    REASONS, REPORTS, REQUESTS, SHORT_QUOTE_CHARS, TESTS, TODOS, UNKNOWN, _BASE_COMMAND, _BASE_READ,
    _EXTRA_REPORT_TOKENS, _RANKED, _RECENT_DETAIL_FILES, _RECENT_FINDINGS, _RECENT_OK_COMMANDS,
    _TIER_ARTIFACT, _TIER_COMMAND_EXPLAINED, _TIER_COMMAND_FAILED, _TIER_COMMAND_OK,
    _TIER_COMMAND_RECENT_OK, _TIER_DECISION, _TIER_ERROR, _TIER_ERROR_RESOLVED, _TIER_EXTRA_FINDING,
    _TIER_EXTRA_REPORT, _TIER_FILE_CHANGED, _TIER_FILE_DETAIL, _TIER_FILE_READ, _TIER_FINDING,
    _TIER_INSTALL, _TIER_LAST_CALL, _TIER_LAST_DONE, _TIER_LAST_TEST, _TIER_LINK, _TIER_MIDDLE_REQUEST,
    _TIER_NEGATIVE_FINDING, _TIER_NEWEST_REPORT, _TIER_OLD_FILE_DETAIL, _TIER_OLD_REPORT,
    _TIER_OLD_TEST, _TIER_OUTPUT_GIST, _TIER_QUOTED_CONSTRAINT, _TIER_READ_DETAIL, _TIER_REASON,
    _TIER_RECENT_FINDING, _TIER_RECENT_REASON, _TIER_RECENT_REPORT, _TIER_TODO_DONE, _TIER_TODO_OPEN,
)
from compactor.tokens import count_text

_LIST_MARK = re.compile(r"(?m)^\s*(?:[-*•]|\d{1,2}[.)])(?=\s|[A-Za-z])")


_MARKS = _counter(1)


@dataclass
class _Doc:
    """The lines of one render. A line may be in several documents (the ladder memo keeps the
    command and file-read lines of one rung for the next, issue 17), so a line dropped for
    budget says by which document's ``mark``, not just that it was."""

    lines: list[_Line] = field(default_factory=list)
    mark: int = field(default_factory=_MARKS.__next__)
    spans: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """The sections of the ladder memo's lines: name -> (start, end, the sum of their
    corrections: ``ladder_count.line_sizes``), for ``_count_beyond``."""
    raised: dict[str, tuple[int, list[_Line]]] = field(default_factory=dict)
    """The ladder memo's sections: name -> (the tier of most of their lines, the others in order),
    for ``_fit``'s first batch."""
    columns: dict[str, tuple[Callable[[int], _Line], Callable[[], Iterable[int]]]] = field(default_factory=dict)
    """The ladder memo's sections: name -> (the line at a place in the section, its lines' text
    lengths): their entries in ``lines`` are the items of the lines ranked with the most of the
    section, made lines only when read (``doc_lines``, ``ladder_memo.memo_line``)."""
    left_out: int = 0
    """``_fit``'s: the sum of the tiers of the essential lines it dropped (``_left_out_weight``)."""

    def add(self, section: str, text: str, tier: int | None, seq: int, detail: bool = False) -> None:
        lines = self.lines
        lines.append(_Line(section, text, tier, seq, _RANKED[section] | len(lines), 0, 0, detail))


def _request_body(r: Request, short: bool = False) -> str:
    text = r.text
    if short and len(text) > SHORT_QUOTE_CHARS:
        text = text[:SHORT_QUOTE_CHARS].rstrip()
        return f"{text}\n[… shortened for space: the full request is in the log at seq {r.seq}]"
    if r.truncated:
        return (
            f"{text}\n[… truncated: the full request ({r.tokens} tokens) is in the log at seq "
            f"{r.seq}]"
        )
    return text


def _answered(state: LiftedState) -> dict[int, int]:
    """Request seq -> seq of the agent's report that closed its turn (the newest one)."""
    out: dict[int, int] = {}
    for o in state.outcomes:
        if o.request_seq:
            out[o.request_seq] = max(out.get(o.request_seq, 0), o.seq)
    return out


def _request_line(r: Request, answered_at: int | None) -> str:
    """An older request (a later one followed it) as one line: its head, whitespace and list
    markers folded, cut at a word, with where its full text is and whether the agent answered it.

    The latest request stays verbatim (the validator requires it after a mid-turn cut); an
    older one is history the reports and files say more about, so its words get a line, not
    the room the agent's work needs.
    """
    flat = " ".join(_LIST_MARK.sub(" ", r.text).split())
    n = ANSWERED_REQUEST_CHARS if answered_at else OPEN_REQUEST_CHARS
    head = cut_words(flat, n)
    status = f"answered at #{answered_at}" if answered_at else "no closing report in the log"
    where = f"; full text at #{r.seq}" if head != flat or r.truncated else ""
    return f"- #{r.seq} ({status}{where}): {head}"


def _last_action_line(la: LastAction) -> tuple[str, int]:
    """``#57 `npm test` ("Now the tests") → result came (#58): failed, exit 1: …`` and its tier."""
    if la.kind == "reply":
        return f"- #{la.seq} the agent's last message (no call pending): {_one_line(la.what, 200)}", _TIER_LAST_DONE
    intent = f" (\"{_one_line(la.intent, 90)}\")" if la.intent else ""
    if la.status == "unknown":
        status = "no result in the log: it may not have run or may have failed; verify it"
    else:
        word = "ok" if la.status == "ok" else "FAILED"
        status = f"result came (#{la.result_seq}): {word}" + (f": {la.detail}" if la.detail else "")
    return (f"- #{la.seq} {_code(la.what, 120)}{intent} → {status}",
            _TIER_LAST_DONE if la.status == "ok" else _TIER_LAST_CALL)


def _build(state: LiftedState, short_requests: bool = False, budget: int | None = None,
           latest_full: bool = False) -> _Doc:
    doc = _Doc()
    requests = list(state.requests)
    goal = state.goal or (requests[0] if requests else None)
    latest = requests[-1] if requests else None

    if goal is not None:
        goal_is_latest = latest is not None and goal.seq == latest.seq
        doc.add(GOAL, f"(from the user, #{goal.seq})\n"
                + _request_body(goal, short_requests and not (latest_full and goal_is_latest)),
                None, goal.seq)

    answered = _answered(state)
    for r in requests:
        if (goal is not None and r.seq == goal.seq) or (latest is not None and r.seq == latest.seq):
            continue
        doc.add(REQUESTS, _request_line(r, answered.get(r.seq)), _TIER_MIDDLE_REQUEST, r.seq)

    shown_in_full = [_request_body(r, short_requests and not (latest_full and r.seq == latest.seq))
                     for r in (goal, latest) if r is not None and latest is not None]
    for c in state.constraints:
        # A rule quoted verbatim inside a request shown in full may go when space runs out:
        # it is still in the summary. Otherwise it is never dropped.
        quoted = any(c.text in body for body in shown_in_full)
        doc.add(CONSTRAINTS, f"- {c.text}", _TIER_QUOTED_CONSTRAINT if quoted else None, c.seq)

    for t in state.todos:
        status = f"[{t.status}] " if t.status else ""
        done = t.status.lower() in ("completed", "done", "complete", "finished")
        doc.add(TODOS, f"- {status}{t.text}", _TIER_TODO_DONE if done else _TIER_TODO_OPEN,
                state.todos_seq)

    details = file_details(state.files_changed, budget)
    # A session that wrote little (a review, research, questions) gives the room the files'
    # detail lines leave unused to the agent's reports: there, its answers are the work.
    share = REPORT_SHARE
    if budget is not None:
        used = sum(count_text(d) for d in details.values())
        share += max(0.0, ARTIFACT_SHARE - used / budget)
    reports = select_reports(state.outcomes, budget, share)
    report_lines: list[tuple[int, str, int]] = []  # (seq, line, tier): reports and findings, newest first
    for rank, (o, text) in enumerate(reports):
        tier = _TIER_NEWEST_REPORT if rank == 0 else _TIER_RECENT_REPORT if rank < 3 else _TIER_OLD_REPORT
        answers = f" (answering #{o.request_seq})" if o.request_seq else ""
        report_lines.append((o.seq, f"- #{o.seq}{answers}: {text}", tier))
    picked = {o.seq for o, _ in reports}
    if budget is not None:
        # Older reports beyond the share: shortened, and the first thing to go for space.
        for o in sorted(state.outcomes, key=lambda x: x.seq, reverse=True):
            if o.seq in picked:
                continue
            answers = f" (answering #{o.request_seq})" if o.request_seq else ""
            report_lines.append((o.seq, f"- #{o.seq}{answers}: {fit_report(o.text, _EXTRA_REPORT_TOKENS)}",
                                 _TIER_EXTRA_REPORT))
    # (a call's "no visible effect" line quotes the agent's symptom and why: not said again)
    soft = [fa.cause.replace("…", "") for fa in shown_soft(state.failed_approaches)]
    reasons = select_reasons(state.reasons, budget, [t for _, t in reports] + soft)
    shown = [norm(t) for _, t in reports] + [norm(r.text) for r in reasons]
    # What the agent concluded along the way (a long turn's findings), said once: not again when
    # a report, a reason or a failure line carries the sentence.
    said_failed = {norm(fa.what) for fa in state.failed_approaches if not fa.tool_use_id}
    said = shown + sorted(said_failed) + [norm(c) for c in soft]
    if state.last_action is not None and state.last_action.status in ("unknown", "failed") and state.last_action.intent:
        said.append(norm(state.last_action.intent))  # quoted by the last action's line, which stays
    findings = select_findings(state.findings, budget, said, picked)
    for rank, (f, fits) in enumerate(findings):  # most telling first
        weight = finding_weight(f.text)  # 0: names nothing and rules nothing out ("there was a mistake")
        tier = (_TIER_EXTRA_FINDING if not fits else _TIER_RECENT_FINDING if rank < _RECENT_FINDINGS and weight
                else _TIER_NEGATIVE_FINDING if weight >= 2 else _TIER_FINDING)
        report_lines.append((f.seq, f"- #{f.seq} (found): {f.text}", tier))
    for seq, line, tier in sorted(report_lines, key=lambda x: -x[0]):
        doc.add(REPORTS, line, tier, seq)

    recent = {f.path for f in sorted(state.files_changed, key=lambda x: x.seq)[-_RECENT_DETAIL_FILES:]}
    for f in state.files_changed:
        ops = ", ".join(f.ops) if f.ops else "changed"
        times = f" ×{f.count}" if f.count > 1 else ""
        digest = f": {_one_line(f.digest, 240)}" if f.digest else ""
        doc.add(FILES_CHANGED, f"- {f.path} ({ops}{times}, last #{f.seq}){digest}", _TIER_FILE_CHANGED,
                f.seq)
        if details.get(f.path):
            tier = _TIER_FILE_DETAIL if f.path in recent else _TIER_OLD_FILE_DETAIL
            doc.add(FILES_CHANGED, details[f.path], tier, f.seq, detail=True)

    changed = frozenset(f.path for f in state.files_changed)
    memo = _LADDER_MEMO.get()
    # (a rung whose files read extend the previous rung's: only the new ones are looked at)
    grown_reads = extend_reads(memo.reads, state.files_read, changed) if memo is not None else None
    if grown_reads is None:
        read_only = [f for f in state.files_read if f.path not in changed] if changed else state.files_read
        with_facts = [f for f in read_only if f.facts]
        in_order = memo is not None and ascending(with_facts, [])
    else:
        read_only, with_facts, carried, in_order = grown_reads
    read_facts = read_details(read_only, budget, with_facts, in_order)
    lines = doc.lines  # (the loops below append their lines as ``doc.add`` does, without a call each)
    get_facts = read_facts.get
    # (what a file only read defines is what the work built on: kept with its line)
    base = _RANKED[FILES_READ]
    if memo is None:
        lines += [_Line(FILES_READ, f"- {f.path}\n{facts}", _TIER_READ_DETAIL, f.seq, base | k)
                  if (facts := get_facts(f.path)) else _Line(FILES_READ, f"- {f.path}", _TIER_FILE_READ, f.seq, base | k)
                  for k, f in enumerate(read_only)]
    else:
        start = len(lines)
        if grown_reads is not None:  # (the previous rung's lines, but those whose facts changed)
            section, raised = carry_reads(memo.reads, read_only, read_facts, carried,
                                          lambda ks: _read_lines(read_only, get_facts, memo, ks), _TIER_FILE_READ)
        else:
            section = _read_lines(read_only, get_facts, memo)
            raised = raise_lines({}, 0, section, _TIER_FILE_READ)
        lines += section
        files = state.files_read[:]
        memo.reads = ReadCarry(files, changed, read_only if changed else files, with_facts, read_facts, section,
                               in_order, raised)
        if read_only:
            doc.spans[FILES_READ] = (start, len(lines), sum(memo.read_corrs[:len(read_only)]))
            doc.raised[FILES_READ] = (_TIER_FILE_READ, [raised[k] for k in sorted(raised)])
            doc.columns[FILES_READ] = read_columns(memo, _read_line, read_only, get_facts)

    failure_lines = build_failure_lines(state.failed_approaches, state.files_changed)  # [line, tier, seq, tool ids]
    explained = {i for fl in failure_lines for i in fl[3]}  # failed runs the errors section tells in full

    # Commands: one line per distinct command, showing the latest run.
    commands = state.commands
    # (a rung whose commands extend the previous rung's, none run again: its lines are the
    # previous rung's, the new ones and the few whose rank or line may change, ``ladder_carry``)
    grown = extend_commands(memo.commands, commands, _COMMAND) if memo is not None else None
    if grown is None:
        carry = fresh_commands(commands, _COMMAND)
        todo = carry.latest_runs
    else:
        carry, todo = grown
    latest_runs, counts = carry.latest_runs, carry.counts
    # the newest distinct commands that worked are how the agent got where it is: kept longer
    recent_ok: set[int] = set()
    for i in reversed(latest_runs):
        if len(recent_ok) == _RECENT_OK_COMMANDS:
            break
        if commands[i].status != "failed":
            recent_ok.add(i)
    # what fetches and queries answered (a status, the documents and items that came back, code a
    # response printed): what the agent learned and acted on, within a share
    gist_room = None if budget is None else int(budget * GIST_SHARE)
    gists: set[int] = set()
    answers = [(count_text(c.command[:GIST_COMMAND_CHARS] + c.detail) + 4, -i) for i in todo
               if (c := commands[i]).status == "ok" and "got" in c.detail[:40]]
    if grown is not None:
        answers = carry.answers + answers
    for cost, neg in sorted(answers):  # the shortest answers first (a status, a title), then the newest
        if gist_room is not None and cost > gist_room:
            continue
        gists.add(-neg)
        gist_room = None if gist_room is None else gist_room - cost
    if memo is not None and len(memo.cmd_items) < len(commands):
        memo.grow_commands(len(commands))
    base = _RANKED[COMMANDS]
    if memo is not None:  # (the memo's columns, looked up once: the first rung makes ~50k-150k lines)
        cmd_items, cmd_keys, cmd_lines, cmd_tiers, cmd_corrs, cmd_tokens, cmd_lengths = (
            memo.cmd_items, memo.cmd_keys, memo.cmd_lines, memo.cmd_tiers, memo.cmd_corrs, memo.cmd_tokens,
            memo.cmd_lengths)

    def line_of(i: int) -> _Line:
        c = commands[i]
        n = counts[c.command] if counts is not None else 1
        gist = i in gists
        key = 2 * n + gist
        if memo is not None and cmd_items[i] is c and cmd_keys[i] == key:
            # the same item at the same place in the previous rung's state: the same line (its
            # order is its place; its tier is set below, as this rung's lists rank it), or the
            # item itself (its line not made)
            line, tier = cmd_lines[i], cmd_tiers[i]
        else:
            status = c.status
            text = _command_text(c, key, memo is None)
            # (a cut answer's line under Errors says what it got: its command line is history too)
            tier = (_TIER_COMMAND_FAILED if status == "failed"
                    else _TIER_OUTPUT_GIST if gist
                    else _TIER_INSTALL if c.detail.startswith("partial") or is_install(c.command)
                    else _TIER_COMMAND_OK)  # (an answer past the share: the log has it)
            if memo is None:
                line = _Line(COMMANDS, text, tier, c.seq, base | i)  # (sized by ``_measure``)
            else:  # (sized when ``_fit`` looks at it: ``ladder_count``; made, then its text, if read)
                cmd_tokens[i], cmd_corrs[i] = line_sizes(text)
                cmd_lengths[i] = len(text)
                cmd_items[i], cmd_keys[i], cmd_lines[i], cmd_tiers[i] = c, key, c, tier
                line = c
        # what the rung's own lists say of it: told in full under Errors, or one of the newest
        if explained and c.tool_use_id in explained and (c.status == "failed" or c.detail.startswith("partial")):
            tier = _TIER_COMMAND_EXPLAINED
        elif tier != _TIER_COMMAND_FAILED and i in recent_ok:
            tier = _TIER_COMMAND_RECENT_OK
        if line is c:  # (a memo line not made: the item stands for it while it ranks with the most)
            if tier == _TIER_COMMAND_OK:
                return c
            line = cmd_lines[i] = _command_line(i, c, key, cmd_lengths[i], cmd_tokens[i])
        line.tier = tier
        return line

    start = len(lines)
    if memo is None:
        lines += map(line_of, todo)
    else:
        lines += carry_command_lines(carry, grown is not None, todo, commands, line_of, special_runs(
            carry, todo, commands, recent_ok, explained), gists, _TIER_COMMAND_OK)
        carry.answers = answers
        memo.commands = carry
        if latest_runs:
            doc.raised[COMMANDS] = (_TIER_COMMAND_OK, [carry.raised[i] for i in sorted(carry.raised)])
            doc.columns[COMMANDS] = command_columns(memo, _command_line, commands, latest_runs, counts, gists)
    if memo is not None and latest_runs:
        corrs = memo.cmd_corrs
        doc.spans[COMMANDS] = (start, len(lines), sum(corrs[:len(commands)]) if counts is None
                               else sum(map(corrs.__getitem__, latest_runs)))

    last_test_by_cmd: dict[str, int] = {}
    for i, t in enumerate(state.tests):
        last_test_by_cmd[t.command] = i
    for i, t in enumerate(state.tests):
        at = t.result_seq or t.seq
        later = [f.path for f in state.files_changed if f.seq > at]
        extra = f" ({t.summary})" if t.summary else ""
        since = f"; files changed since: {', '.join(later[:5])}" if later else ""
        tier = _TIER_LAST_TEST if last_test_by_cmd[t.command] == i else _TIER_OLD_TEST
        doc.add(TESTS, f"- #{t.seq} {_code(t.command)} → {t.status.upper()}{extra}, at log "
                f"version {at}{since}", tier, t.seq)

    resolved_at = {fa.tool_use_id: fa.resolved_at for fa in state.failed_approaches
                   if fa.tool_use_id and fa.resolved_at is not None}
    by_name: dict[str, list] = {}
    for e in state.errors:
        by_name.setdefault(e.name, []).append(e)
    # An error name is said by the failure line of the call that hit it when that line quotes it
    # (command, cause, status: "what failed, why, fixed or not" in one line, which then keeps
    # as long as the error would); otherwise on its own line, with the call that hit it.
    what_failed: dict[str, str] | None = None  # tool call id -> what it ran (made when an error needs it)
    for name, items in by_name.items():
        seqs = ", ".join(f"#{e.seq}" for e in items[:4]) + (", …" if len(items) > 4 else "")
        fixed = [resolved_at.get(e.tool_use_id) for e in items]
        done = f", resolved at #{max(fixed)}" if all(fixed) else ""  # type: ignore[type-var]
        tier = _TIER_ERROR_RESOLVED if done else _TIER_ERROR
        carriers = [fl for fl in failure_lines if name in fl[0]
                    and any(e.tool_use_id in fl[3] for e in items if e.tool_use_id)]
        if carriers and all(any(e.tool_use_id in fl[3] for fl in carriers) for e in items):
            for fl in carriers:
                fl[1] = max(fl[1], tier)
            continue
        if what_failed is None:
            what_failed = {c.tool_use_id: c.command for c in state.commands if c.tool_use_id}
            what_failed.update({fa.tool_use_id: fa.what for fa in state.failed_approaches if fa.tool_use_id})
        where = what_failed.get(items[-1].tool_use_id or "")
        where_text = f" in {_code(where, 90)}" if where else ""
        doc.add(ERRORS, f"- {name} ({seqs}{done}){where_text}: {_one_line(items[-1].message, 200)}",
                tier, items[-1].seq)
    for line, tier, seq, _ in failure_lines:
        doc.add(ERRORS, line, tier, seq)

    for d in state.decisions:
        if any(norm(d.text) in t for t in shown):
            continue  # already in a report or a reason above: one sentence, said once
        doc.add(DECISIONS, f"- #{d.seq} {_one_line(d.text, 300)}", _TIER_DECISION, d.seq)

    reasons = [r for r in reasons if norm(r.text) not in said_failed]  # the failure line says it
    for rank, r in enumerate(sorted(reasons, key=lambda x: x.seq)):
        tier = _TIER_RECENT_REASON if rank >= len(reasons) - 3 else _TIER_REASON
        doc.add(REASONS, f"- #{r.seq} {_one_line(r.text, 400)}", tier, r.seq)

    for u in state.unknown_actions:
        doc.add(UNKNOWN, f"- #{u.seq} [tool_use {u.tool_use_id}] {_one_line(u.summary, 240)} — no "
                "result in the log; it may not have run or may have failed", None, u.seq)

    for a in state.artifacts:
        doc.add(ARTIFACTS, f"- {a.uri} ({a.bytes} bytes, from #{a.seq})", _TIER_ARTIFACT, a.seq)

    for link in state.urls:
        # a link quoted in a request shown in full is still in the summary when this line goes
        quoted = any(link.url in body for body in shown_in_full)
        doc.add(LINKS, f"- {link.url}", _TIER_QUOTED_CONSTRAINT if quoted else _TIER_LINK, link.seq)

    la = state.last_action
    if la is not None and not (la.kind == "reply" and any(o.seq == la.seq for o in state.outcomes)):
        # (a closing reply is the newest report already)
        line, tier = _last_action_line(la)
        # one line that repeats the reports or the unknown actions: dropped silently for space
        doc.add(LAST_ACTION, line, tier, la.seq, detail=True)

    if latest is not None:
        if goal is not None and latest.seq == goal.seq:
            doc.add(LATEST, f"(#{latest.seq}, the same as the goal above)", None, latest.seq)
        else:
            doc.add(LATEST, f"(from the user, #{latest.seq})\n"
                    + _request_body(latest, short_requests and not latest_full),
                    None, latest.seq)
    return doc
_COMMAND = attrgetter("command")

def _read_lines(files: list, get_facts, memo: _LadderMemo, ks=None) -> list[_Line]:
    """The "Files read" lines of ``files``, each built and sized once per ladder
    (``ladder_memo.read_lines``)."""
    base = _BASE_READ

    def make(k: int, f, facts) -> tuple:
        text = _read_text(f, facts)
        tokens, corr = line_sizes(text)  # (sized when ``_fit`` looks at it; its text made again if read)
        if not facts:  # (ranked with the most of its section: its line made when read, ``memo_line``)
            return f, corr, tokens, len(text)
        return _ReadLine(FILES_READ, f, facts, len(text), _TIER_READ_DETAIL, f.seq, base | k, tokens), corr, \
            tokens, len(text)

    return read_lines(files, get_facts, memo, make, ks)


_OUTCOME_WORDS = {"ok": "ok", "failed": "failed", "unknown": "no exit status recorded"}


def _command_text(c, key: int, memo: bool = False) -> str:
    """A command's line (``key``: 2 x its run count + whether its answer is shown, ``gist``)."""
    n = key >> 1
    outcome = f"exit {c.exit_code}" if c.exit_code is not None else _OUTCOME_WORDS[c.status]
    times = f" ×{n}" if n > 1 else ""
    detail = f": {c.detail}" if c.detail else ""
    cmd_text = _code(c.command, GIST_COMMAND_CHARS if key & 1 else 200, memo)  # (the answer is the point)
    return f"- #{c.seq} {cmd_text} → {outcome}{times}{detail}"


def _read_text(f, facts) -> str:
    """A file only read's line (``facts``: what it defines, or none)."""
    return f"- {f.path}\n{facts}" if facts else f"- {f.path}"


class _CommandLine(_LazyLine):
    """A command's line in the ladder memo, its text made when read (``ladder_lines``)."""

    __slots__ = ()
    make = staticmethod(_command_text)


class _ReadLine(_LazyLine):
    """A file only read's line in the ladder memo, its text made when read."""

    __slots__ = ()
    make = staticmethod(_read_text)


def _command_line(i: int, c, key: int, length: int | None, tokens: int) -> _CommandLine:
    """The ladder memo's line of the command at ``i`` (``key``: ``_command_text``'s), of the tier
    of most of its section (a rung sets its own); ``length`` None: sized here."""
    if length is None:
        text = _command_text(c, key)
        tokens = line_sizes(text)[0]
        length = len(text)
    return _CommandLine(COMMANDS, c, key, length, _TIER_COMMAND_OK, c.seq, _BASE_COMMAND | i, tokens)


def _read_line(k: int, f, facts, length: int | None, tokens: int) -> _ReadLine:
    """The ladder memo's line of the file only read at ``k`` (``facts``: its facts line)."""
    if length is None:
        text = _read_text(f, facts)
        tokens = line_sizes(text)[0]
        length = len(text)
    return _ReadLine(FILES_READ, f, facts, length, _TIER_READ_DETAIL if facts else _TIER_FILE_READ, f.seq,
                     _BASE_READ | k, tokens)
