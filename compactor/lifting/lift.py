"""Deterministic state lifting: what a continuing agent must know, pulled out of events.

``lift_state`` reads a range of canonical events (optionally on top of the previous
checkpoint's state, so compaction k+1 reads checkpoint k plus the events after it, never the
whole log again) and returns a ``LiftedState``: the goal and every genuine user request,
constraints quoted verbatim, decisions, files read and changed, commands with exit status,
test runs, errors and failed approaches, actions whose outcome is unknown, the agent's latest
plan/todos, artifacts and the URLs the user gave.

Rules are plain regexes and tool-name tables, no model calls: the same events always lift to
the same state, which is what lets the structured summarizer and the validator agree.

The state's models live in ``compactor.lifting.state`` and what a tool call and its result say in
``compactor.lifting.actions`` (both re-exported here); this module holds the text rules for requests,
constraints and decisions, and the accumulation.

An action whose tool_use has no tool_result in the events is recorded only under
``unknown_actions``; it is never listed as a command run or a file changed. ``reconcile``
moves such an action to the done lists when its result arrives after the snapshot, so nothing
reads as pending and done at once.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from bisect import bisect_right
from operator import attrgetter
from typing import Any, Sequence

from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from compactor.lifting import content as _content
from compactor.lifting import digests as _digests
from compactor.lifting import notes as _notes
from compactor.lifting import failures as _failures
from compactor.lifting.constraints import (  # noqa: F401 - re-exported: the classification lives there
    MAX_CONSTRAINT_CHARS,
    constraint_sentences,
    is_genuine_request,
    looks_injected,
    split_sentences,
    user_urls,
)
from compactor.lifting.narrative import _REASON_NEEDLES, _RULE_NEEDLES, NarrativeAcc
from compactor.lifting.needles import any_needle
from compactor.lifting.pass_index import first_result, index_events
from compactor.lifting.shellpair import ShellPairs, run_detail
from compactor.lifting.actions import (  # noqa: F401 - re-exported: the lifter's public names stay here
    _AIDER_RUNNING_RE,
    _APPLIED_EDIT_RE,
    _Action,
    _FAIL_SUMMARY_RE,
    _SWE_FILE_HEADER_RE,
    _SWE_OPEN_FILE_RE,
    _clip,
    _command_of,
    _one_line,
    _outcome,
    _route,
    _test_status,
    _test_summary,
    classify,
    error_names,
    is_test_command,
    no_match,
    parse_exit_code,
    plain_command,
)
from compactor.lifting.state import (  # noqa: F401 - re-exported
    Artifact,
    Command,
    CommandStatus,
    Constraint,
    Decision,
    ErrorItem,
    FailedApproach,
    FileRef,
    LastAction,
    LiftedState,
    Request,
    TestRun,
    Todo,
    UnknownAction,
    Url,
    built_state,
    first_file_ref,
    next_file_ref,
    op_list,
    run_command,
)
from compactor.tokens import count_text


LONG_REQUEST_TOKENS = 2_000
"""Requests longer than this are kept as a head quote plus a pointer to the log."""
LONG_REQUEST_QUOTE_CHARS = 3_000
MAX_DECISIONS = 40


# --- text rules -------------------------------------------------------------------------------

_DECISION_RE = re.compile(
    r"\b(I'?ll use|I will use|I'?ll switch|I will switch|switch(?:ing)? to|instead of|decided|"
    r"decide to|decision|going with|I'?ll go with|we'?ll use|let'?s use|I'?m going to use|"
    r"opting for|opt for|chose|choose to|rather than|the approach is|my plan is|the plan is)\b",
    re.IGNORECASE,
)
_FAILED_TEXT_RE = re.compile(
    r"\b(didn'?t work|did not work|doesn'?t work|does not work|failed because|that failed|"
    r"this failed|won'?t work|not working|approach failed|no luck|still fail(?:s|ing)?)\b",
    re.IGNORECASE,
)

# Every match of _DECISION_RE (of _FAILED_TEXT_RE) holds one of these, lowercased: checked on ASCII
# sentences before the case-insensitive search of the alternation, which costs several times more
_DECISION_NEEDLES = ("ll use", "will use", "switch", "instead of", "decide", "decision", "going with",
                     "ll go with", "s use", "going to use", "opting for", "opt for", "chose", "choose to",
                     "rather than", "approach is", "plan is")
_FAILED_NEEDLES = ("t work", "failed", "not working", "no luck", "still fail")
_DECISION_PRE = re.compile("|".join(map(re.escape, _DECISION_NEEDLES)))  # (one search of the literals)
_DECISION_FAILED_PRE = re.compile("|".join(map(re.escape, _DECISION_NEEDLES + _FAILED_NEEDLES)))
_FAILED_PRE = re.compile("|".join(map(re.escape, _FAILED_NEEDLES)))
# The needles of every family an assistant text is searched for, in one search: decisions and
# failures, reasons and rules (``compactor.lifting.narrative``), a file name's ".x" (``notes``) and
# words that say a call did nothing (``failures.SoftCalls.on_text``)
_TEXT_FAMILIES = any_needle(_DECISION_NEEDLES + _FAILED_NEEDLES + _REASON_NEEDLES + _RULE_NEEDLES
                            + _failures._SOFT_FAIL_NEEDLES, r"\.[a-z]")

# "`<>` doesn't work with strings, unless the string is `ARGV`": how a thing behaves, not an attempt that failed
_RULE_TEXT_RE = re.compile(r"\b(?:unless|only (?:if|when|with))\b", re.IGNORECASE)

# --- accumulation -----------------------------------------------------------------------------


class _Acc(ShellPairs):
    """Mutable builder; dedupes while keeping first-seen order (the short path of a plain shell
    command's pair is ``ShellPairs.shell_pair``)."""

    def __init__(self, prev: LiftedState | None) -> None:
        p = prev or LiftedState()
        self.goal = p.goal
        self.requests = list(p.requests)
        self.constraints = list(p.constraints)
        self.decisions = list(p.decisions)
        self.files_read = {f.path: f for f in p.files_read}
        self.files_changed = {f.path: f for f in p.files_changed}
        self.commands = list(p.commands)
        self.tests = list(p.tests)
        self.errors = list(p.errors)
        self.failed = list(p.failed_approaches)
        self.unknown = {u.tool_use_id: u for u in p.unknown_actions}
        self.todos = list(p.todos)
        self.todos_seq = p.todos_seq
        self.artifacts = {a.uri: a for a in p.artifacts}
        self.urls = {u.url: u for u in p.urls}
        self.covers_end = p.covers_end
        self.last_action = p.last_action
        self._last: tuple | None = None  # this pass's last call or reply, materialized in build
        self._last_seq = p.last_action.seq if p.last_action is not None else -1
        self._last_out: tuple[Any, int] | None = None
        self.narrative = NarrativeAcc(list(p.outcomes), list(p.reasons),
                                      p.requests[-1].seq if p.requests else 0, list(p.findings),
                                      p.last_action is not None and p.last_action.kind == "call"
                                      and p.last_action.result_seq is not None)
        self.open_file: str | None = None
        self._aider_digests: dict[str, str] = {}  # path -> digest of the last aider reply's blocks
        self._aider_texts: dict[str, str] = {}  # path -> the text the last aider reply's block wrote
        self._aider_partial: set[str] = set()  # paths whose last aider block edited (not created) them
        self.notes = _notes.NoteAcc({f.path: f.note for f in p.files_changed if f.note}, p.file_notes)
        self._req_seqs = {r.seq for r in self.requests}
        self._constraint_keys = {_norm(c.text) for c in self.constraints}
        self._decision_keys = {_norm(d.text) for d in self.decisions}
        self._error_keys = {(e.name, e.message) for e in self.errors}
        # The ids of the calls whose run is listed: the previous state's and those ``add_pair`` lists.
        # ``shell_pair`` lists a run without adding its id (issue 17, memory: a set slot a pair, ~4 MB at
        # 300k events): it is asked only by ``Lifter._fold``, of a call id the pass has not folded (its
        # ``uses``), and a call id the pass folded is not asked of this set again (the fold skips it, and
        # ``resolve`` takes only a previous state's unknown calls the pass has not folded).
        self._command_ids = {c.tool_use_id for c in self.commands if c.tool_use_id}
        self._test_ids = {t.tool_use_id for t in self.tests if t.tool_use_id}
        self._failed_keys = {(f.tool_use_id, f.what) for f in self.failed}
        # action key -> seqs of successful runs, and the agent's moves (seq, text, is_call):
        # what resolves a failure and what came next, looked up when the state is built
        self._ok_runs: dict[str, list[int]] = {}
        soft = {f.tool_use_id for f in p.failed_approaches  # exit 0, nothing done (0/49); a cut answer is ok
                if f.tool_use_id and f.error != _failures.PARTIAL_ERROR}
        for c in p.commands:
            if c.status == "ok" and c.tool_use_id not in soft:
                self._ok_runs.setdefault(_failures.action_key("", c.command, ()), []).append(c.seq)
        # the agent's moves, (seq, text, is_call), and the (seq, command) of each message's first call
        # (where a soft failure led), each as parallel lists (issue 17, memory: a tuple per move and
        # per call was ~150 bytes a tool pair, kept for the pass, read only when the state has failures)
        self._move_seqs: list[int] = []
        self._move_texts: list[str] = []
        self._move_calls = bytearray()  # (1: a call; a byte a move, not a list slot)
        self._call_seqs: list[int] = []
        self._call_texts: list[str] = []
        self._listings: dict[str, dict[int, str]] = {}  # path -> the lines of its latest numbered listing
        self._soft = _failures.SoftCalls()  # the last ok command: the agent's next words may say it did nothing
        self._ok_params: dict[tuple[str, int], Any] = {}  # (key, seq) of a run that worked -> its input
        # runs _ok_keys keys, flat: (name, command, paths, kind, seq, input) each, or for a ``shell_pair`` run
        # the event of its one call, or (call, seq) (issue 17, memory: six slots a pair were ~7 MB at 300k
        # events, held by the pass; two slots ~2.4 MB)
        self._unkeyed_ok: list[Any] = []

    # requests ---------------------------------------------------------------------------
    def add_request(self, e: Event) -> None:
        if e.seq in self._req_seqs and e.seq:
            return
        text = e.text.strip()
        tokens = count_text(text)
        if tokens > LONG_REQUEST_TOKENS:
            req = Request(seq=e.seq, text=text[:LONG_REQUEST_QUOTE_CHARS].rstrip(), tokens=tokens,
                          truncated=True)
        else:
            req = Request(seq=e.seq, text=text, tokens=tokens)
        self._req_seqs.add(e.seq)
        self.requests.append(req)
        if self.goal is None:
            self.goal = req
        for s in constraint_sentences(text):
            key = _norm(s)
            if key not in self._constraint_keys:
                self._constraint_keys.add(key)
                self.constraints.append(Constraint(seq=e.seq, text=s))
        for u in user_urls(text):
            if u not in self.urls:
                self.urls[u] = Url(url=u, seq=e.seq)

    # assistant text ---------------------------------------------------------------------
    def add_assistant_text(self, e: Event, seq: int, text: str, calls: Sequence[ToolUseBlock]) -> bool:
        """Fold the agent's words in ``e`` (its ``seq``, ``text`` and ``tool_uses``, as the fold read
        them: a model's field read passes pydantic's ``__getattr__`` hook, ~0.1 us, issue 17); False
        when they hold no reason or rule needle (an ASCII text without ``**``:
        ``NarrativeAcc.on_assistant_text`` need not look for reasons)."""
        sentences = split_sentences(text)
        # An ASCII text none of whose needles (lowercased) occur holds no decision or failure
        # sentence: each sentence is a piece of it (a space split_sentences puts back after a
        # full stop joins no needle), so its sentences are not searched one by one (issue 17).
        # One search for the needles of every family first: most messages hold none of them.
        low_text = text.lower() if text.isascii() else None
        plain = low_text is not None and _TEXT_FAMILIES.search(low_text) is None
        for s in sentences if low_text is None or not plain and _DECISION_FAILED_PRE.search(low_text) else ():
            if len(s) > 400 or len(s) < 12:
                continue
            probe = s.replace("\u2019", "'")
            low = probe.lower() if probe.isascii() else None  # (None: no pre-check beyond ASCII)
            if (low is None or _DECISION_PRE.search(low)) and _DECISION_RE.search(probe):
                key = _norm(s)
                if key not in self._decision_keys:
                    self._decision_keys.add(key)
                    self.decisions.append(Decision(seq=seq, text=_clip(s)))
            elif ((low is None or _FAILED_PRE.search(low)) and _FAILED_TEXT_RE.search(probe)
                  and not _RULE_TEXT_RE.search(s)):
                self._add_failed(FailedApproach(seq=seq, what=_clip(s)))
        self.failed, soft = self._soft.on_text(seq, sentences, self.failed, low_text, plain)
        if soft is not None:
            self._add_failed(soft)
        if "<<<<<<< SEARCH" in text or "Applied edit to" in text or "Running " in text:
            self._text_actions(e)  # (its three markers)
        self.notes.on_text(seq, text, False if plain else None)  # (plain: no ".x" of a file name)
        if seq > self._last_seq and not calls:
            first = next((s for s in sentences if len(s) >= 12), sentences[0] if sentences else "")
            self._last, self._last_seq, self._last_out = ("reply", seq, first), seq, None
        self.note_move(seq, _failures.next_words(sentences), False)
        return not plain or "**" in text  # (bold markers dropped from a unit can join a needle)

    def _text_actions(self, e: Event) -> None:
        """Aider writes its actions as text: 'Applied edit to X', '> Running cmd'."""
        text = e.text
        if "<<<<<<< SEARCH" in text:
            blocks = _digests.aider_blocks(text)
            self._aider_digests = _digests.aider_digests(text, blocks)
            self._aider_texts = {p: new for p, (_, new) in blocks.items()}
            self._aider_partial = {p for p, (old, _) in blocks.items() if old.strip()}
        if "Applied edit to" in text:
            for m in _APPLIED_EDIT_RE.finditer(text):
                path = m.group(1)
                key = path.strip().strip("`'\"")
                self._touch(self.files_changed, path, e.seq, "edit", None,
                            self._aider_digests.get(key, ""), self._aider_texts.get(key, ""),
                            whole=key not in self._aider_partial)
        if "Running " in text:
            for m in _AIDER_RUNNING_RE.finditer(text):
                cmd = _clip(m.group(1))
                self.commands.append(Command(seq=e.seq, command=cmd, tool="aider"))
                if is_test_command(cmd):
                    self.tests.append(TestRun(seq=e.seq, command=cmd))

    # files ------------------------------------------------------------------------------
    def _touch(self, table: dict[str, FileRef], path: str, seq: int, op: str,
               tool_use_id: str | None, digest: str = "", text: str = "",
               facts: list[str] | None = None, whole: bool = True) -> None:
        path = path.strip().strip("`'\"")
        if not path:
            return
        old = table.get(path)
        if facts is None:
            facts = _content.content_facts(path, text, whole) if text else []
        if old is None:
            if table is self.files_changed:
                self.notes.on_new_file(path)
            table[path] = first_file_ref(path=path, seq=seq, ops=op_list(op), tool_use_id=tool_use_id,
                                         digest=digest, facts=facts)
        else:
            ops = old.ops if (not op or op in old.ops) else [*old.ops, op]
            # the last state wins; a change with no digest (rm, mv, sed -i) makes the old one stale
            latest = seq >= old.seq
            table[path] = next_file_ref(path=path, seq=max(seq, old.seq), ops=ops, count=old.count + 1,
                                        tool_use_id=tool_use_id or old.tool_use_id,
                                        digest=(digest if latest else old.digest),
                                        facts=(_content.merge_facts(facts, old.facts) if latest
                                               else _content.merge_facts(old.facts, facts)),
                                        note=old.note)

    # moves / resolution -----------------------------------------------------------------
    def note_move(self, seq: int, text: str, is_call: bool) -> None:
        """Remember the agent's first move at ``seq`` (for a failure's 'next')."""
        text = text.strip()
        if not text:
            return
        seqs = self._move_seqs
        if not seqs or seqs[-1] < seq:
            seqs.append(seq)
            self._move_texts.append(text)  # (one-lined when a failure's next move reads it)
            self._move_calls.append(is_call)
        if is_call and (not self._call_seqs or self._call_seqs[-1] < seq):
            # (kept as written: ``soft_next`` one-lines it to fewer than 200 characters when read)
            self._call_seqs.append(seq)
            self._call_texts.append(text)

    def _note_ok(self, key: str, seq: int, params: Any) -> None:
        if key:
            self._ok_runs.setdefault(key, []).append(seq)
            self._ok_params[(key, seq)] = params  # (its call_params when a failure it resolved is read)

    def _ok_keys(self) -> None:
        """Key the runs that worked and are not keyed yet (``_ok_runs``, ``_ok_params``): what a
        failure's ``resolved_at`` looks up. A lift without failures never asks (issue 17: the key,
        a normalized command, was ~5% of a tool pair's CPU); the keys are the same either way."""
        runs, i = self._unkeyed_ok, 0
        while i < len(runs):
            run = runs[i]
            if type(run) is str:  # (the general path's run: its name first, six items)
                name, command, paths, kind, seq, params = runs[i:i + 6]
                i += 6
            else:  # (``shell_pair``'s: the event of its one call, or the call and its seq; the command read again)
                if type(run) is Event:
                    use, seq = run.tool_uses[0], run.seq
                    i += 1
                else:
                    use, seq = runs[i:i + 2]
                    i += 2
                name, params, paths, kind = use.name, use.input, (), "command"
                command = _clip(plain_command(_route(name), params))
            self._note_ok(_failures.action_key(name, command, paths, kind), seq, params)
        runs.clear()

    def _annotated_failures(self) -> list[FailedApproach]:
        out: list[FailedApproach] = []
        if self.failed and self._unkeyed_ok:
            self._ok_keys()
        move_seqs = self._move_seqs
        calls: list[tuple[int, str]] | None = None  # (seq, command) of the first calls, made when asked
        failed_runs: dict[str, list[int]] = {}
        for g in self.failed:
            if g.key:
                failed_runs.setdefault(g.key, []).append(g.seq)
        for f in self.failed:
            after = f.result_seq or f.seq
            upd: dict[str, Any] = {}
            if not f.next and f.error != _failures.SOFT_ERROR:  # (its symptom is the agent's next words)
                i = bisect_right(move_seqs, after)
                if i < len(move_seqs):
                    mseq, text, is_call = move_seqs[i], self._move_texts[i], self._move_calls[i] == 1
                    upd["next"] = f"{_failures.move_text(_one_line(text, 200), is_call)} (#{mseq})"
            elif not f.next:  # a call that did nothing: the call the agent made next (where it went instead)
                calls = list(zip(self._call_seqs, self._call_texts)) if calls is None else calls
                upd["next"] = _failures.soft_next(calls, after)
            if f.resolved_at is None and f.key and f.failed_again is None:
                upd["failed_again"] = _failures.first_after(sorted(failed_runs.get(f.key, ())), f.seq)
            if f.resolved_at is None and f.key.startswith(_failures.PARTIAL_KEY):  # the rest asked for later
                upd["resolved_at"] = next((c.seq for c in self.commands if c.seq > f.seq
                                           and _failures.fetched_rest(f.key, c.command)), None)
            elif f.resolved_at is None and f.key:
                runs = sorted(self._ok_runs.get(f.key, ()))
                suite = _failures.suite_key(f.key) if is_test_command(f.key[4:]) else ""
                if suite:  # a later passing run of the whole suite covers the subset that failed
                    runs = sorted([*runs, *self._ok_runs.get(suite, ())])
                upd["resolved_at"] = _failures.first_after(runs, f.seq)
                rerun = self._ok_params.get((f.key, upd["resolved_at"] or -1))
                if rerun is not None and f.params is not None:
                    upd["fixed_by"] = _failures.param_diff(f.params, _failures.call_params(rerun))
            out.append(f.model_copy(update=upd) if upd else f)
        return out

    # errors / failures ------------------------------------------------------------------
    def _add_error(self, item: ErrorItem) -> None:
        key = (item.name, item.message)
        if key not in self._error_keys:
            self._error_keys.add(key)
            self.errors.append(item)

    def _add_failed(self, item: FailedApproach) -> None:
        key = (item.tool_use_id, item.what)
        if key not in self._failed_keys:
            self._failed_keys.add(key)
            self.failed.append(item)

    # tool pairs -------------------------------------------------------------------------
    def add_pair(self, use: ToolUseBlock, use_seq: int, act: _Action,
                 result: ToolResultBlock, result_seq: int) -> None:
        out = _outcome(result)
        use_id = use.id  # (read once: a model's attribute reads pass its __getattr__ hook)
        if out.failed and not result.is_error and no_match(act.command, out):
            out = dataclasses.replace(out, failed=False, error_line="")  # "grep found nothing"
        elif not out.failed and act.command is None and (err := _failures.error_only_result(out.text)):
            out = dataclasses.replace(out, failed=True, error_line=err)  # a tool that answers with an error
        self._last_result(use_id, out, result_seq)
        text = out.text
        # (SWE-agent's markers: searched only where their literal is)
        m = _SWE_OPEN_FILE_RE.search(text[-600:]) if text and "(Open file: " in text else None
        header = _SWE_FILE_HEADER_RE.search(text[:400]) if text and "[File: " in text else None
        paths = [header.group(1)] if act.swe_edit and header else act.paths  # (read, never changed)
        was = ""
        if act.swe_edit and header and not out.failed and (rng := _failures.edit_range(act.command)):
            was = _failures.replaced_text(self._listings.get(header.group(1), {}), *rng)  # what the edit replaced
        if header and text:
            listing = _failures.listed_lines(text)
            if listing:
                kept = {**self._listings.get(header.group(1), {}), **listing}
                self._listings[header.group(1)] = dict(sorted(kept.items())[-_failures.LISTED_LINES_KEPT:])
        if m and m.group(1) not in ("n/a", "None"):
            self.open_file = m.group(1)
        elif header:
            self.open_file = header.group(1)

        if act.kind == "todo" and act.todos is not None:
            if use_seq >= self.todos_seq:
                self.todos = list(act.todos)
                self.todos_seq = use_seq
        elif act.kind == "read" and not out.failed:
            for p in paths:  # (what a file read defines: one file's listing only)
                self._touch(self.files_read, p, use_seq, "read", use_id,
                            facts=_content.read_facts(p, text) if len(paths) == 1 else [])
        elif act.kind == "change" and not out.failed:
            if was and len(paths) == 1:
                # what the range held before: the first of the file's facts
                digest = act.digests.get(paths[0]) or act.digests.get("", "")
                self._touch(self.files_changed, paths[0], use_seq, act.change_op, use_id, digest, "",
                            [was, *_content.content_facts(paths[0], act.texts.get(paths[0]) or act.texts.get("", ""),
                                                          False)])
            for p in (paths if not (was and len(paths) == 1) else []):
                aider = self._aider_digests if use.name == "apply_edit" else {}
                aider_text = self._aider_texts.get(p, "") if use.name == "apply_edit" else ""
                self._touch(self.files_changed, p, use_seq, act.change_op, use_id,
                            act.digests.get(p) or act.digests.get("", "") or aider.get(p, ""),
                            act.texts.get(p) or act.texts.get("", "") or aider_text,
                            (act.facts.get(p) or act.facts.get("", [])) if act.facts is not None else None,
                            (p not in self._aider_partial) if aider_text and not act.texts else not act.partial)

        if act.kind == "command" and act.command is not None:
            self._soft.on_command(use_id, act.command, use_seq, result_seq, not out.failed)
            if use_id not in self._command_ids:
                self._command_ids.add(use_id)
                status: CommandStatus = "failed" if out.failed else "ok"
                detail = run_detail(act.command, text, not out.failed and not act.reads and not act.paths)
                self.commands.append(run_command(seq=use_seq, command=act.command, tool=act.tool,
                                                 tool_use_id=use_id, exit_code=out.exit_code,
                                                 status=status, result_seq=result_seq, detail=detail))
            if not out.failed:
                for p in act.paths:
                    self._touch(self.files_changed, p, use_seq, act.shell_ops.get(p, "shell"), use_id,
                                act.digests.get(p, ""), act.texts.get(p, ""),
                                act.facts.get(p, []) if act.facts is not None else None, not act.partial)
                for p in act.reads:
                    self._touch(self.files_read, p, use_seq, "read", use_id,
                                facts=_content.read_facts(p, text) if len(act.reads) == 1 and not act.paths else [])
            if act.is_test and use_id not in self._test_ids:
                self._test_ids.add(use_id)
                summary = _test_summary(text)
                tstatus = _test_status(out, summary)
                self.tests.append(TestRun(seq=use_seq, command=act.command, tool_use_id=use_id,
                                          status=tstatus, exit_code=out.exit_code, summary=summary,
                                          result_seq=result_seq))

        # (a run that worked is keyed only when a failure asks what resolved it: _ok_keys)
        key = _failures.action_key(use.name, act.command, paths, act.kind) if out.failed else None
        if out.failed:
            what = act.command or act.summary or use.name
            if act.kind == "change" and paths:
                what = f"{act.command or use.name} ({', '.join(paths)})"
            cause = _failures.failure_cause(text) if text else ""
            wrong = _failures.rejected_edit_detail(act.command, text) if act.kind == "change" and text else ""
            self._add_failed(FailedApproach(seq=use_seq, what=_clip(what, 200),
                                            error=out.error_line, tool_use_id=use_id,
                                            cause=f"{cause}: {wrong}" if wrong else cause,
                                            result_seq=result_seq, key=key,
                                            params=_failures.call_params(use.input)))
        soft = (_failures.soft_failures(act.command, text, use_id, use_seq, result_seq, key or "", not out.failed)
                if text else [])
        if soft and key is None:  # (rare: a soft failure carries the key; the same call, keyed)
            key = _failures.action_key(use.name, act.command, paths, act.kind)
            soft = _failures.soft_failures(act.command, text, use_id, use_seq, result_seq, key, True)
        for f in soft:  # "worked", yet got nothing (0/49), or proposed and never run (declined)
            self._add_failed(f)
        if not out.failed and not (soft and any(f.key == key for f in soft)) and not (
                act.is_test and _FAIL_SUMMARY_RE.search(_test_summary(text) or "")):
            if key is None:
                self._unkeyed_ok += (use.name, act.command, paths, act.kind, use_seq, use.input)
            else:
                self._note_ok(key, use_seq, use.input)
        for name, line in error_names(text, out.failed) if text else []:
            self._add_error(ErrorItem(seq=result_seq, name=name, message=line, tool_use_id=use_id))
        if out.failed and result.is_error and not error_names(text, True):
            pass  # shown under failed approaches with its first line

    def on_call(self, e: Event, use: ToolUseBlock, act: _Action) -> None:
        """The agent's call ``use`` in ``e``: the last action so far (its outcome comes later).

        Kept as references and materialized once, in ``build``: this runs for every call.
        """
        if e.seq >= self._last_seq:
            self._last = ("call", e, use, act)
            self._last_seq = e.seq
            self._last_out = None

    def _last_result(self, use_id: str, out: Any, result_seq: int) -> None:
        if self._last is not None:
            if self._last[0] == "call" and self._last[2].id == use_id:
                self._last_out = (out, result_seq)
            return
        la = self.last_action  # the previous state's, resolved by a late result (reconcile)
        if la is not None and la.tool_use_id == use_id:
            self.last_action = _with_result(la, out, result_seq)

    def _built_last_action(self) -> LastAction | None:
        if self._last is None:
            return self.last_action
        if self._last[0] == "reply":
            _, seq, first = self._last
            return LastAction(seq=seq, kind="reply", what=_one_line(first, 200), status="reply")
        _, e, use, act = self._last
        if act is None:  # (a plain shell command's pair, ``shell_pair``: the same call, classified again)
            act = classify(use, None)
        text = e.text
        intent = next((x for x in split_sentences(text) if len(x) >= 8), "") if text else ""
        la = LastAction(seq=e.seq, what=_one_line(act.command or act.summary or use.name, 200),
                        intent=_one_line(intent, 160), tool_use_id=use.id)
        return _with_result(la, *self._last_out) if self._last_out is not None else la

    def add_unknown(self, use: ToolUseBlock, use_seq: int, act: _Action) -> None:
        if use.id in self.unknown:
            return
        self.unknown[use.id] = UnknownAction(
            seq=use_seq, tool_use_id=use.id, name=use.name, kind=act.kind,
            summary=act.summary or use.name, command=act.command, paths=list(act.paths),
            reads=list(act.reads), is_test=act.is_test, digests=dict(act.digests),
            facts={p: f for p, t in act.texts.items()
                   if (f := _content.content_facts(p or (act.paths or [""])[0], t, not act.partial))},
        )

    def resolve(self, u: UnknownAction, result: ToolResultBlock, result_seq: int) -> None:
        self.unknown.pop(u.tool_use_id, None)
        use = ToolUseBlock(id=u.tool_use_id, name=u.name, input={})
        act = _Action(kind=u.kind, tool=u.name, command=u.command, paths=list(u.paths),
                      reads=list(u.reads), change_op="edit" if u.kind == "change" else "",
                      is_test=u.is_test, summary=u.summary, digests=dict(u.digests), facts=dict(u.facts))
        if u.kind == "todo":
            act.kind = "other"  # the todo items were not kept for unknown actions
        self.add_pair(use, u.seq, act, result, result_seq)

    def add_artifact(self, b: ArtifactRefBlock, seq: int) -> None:
        if b.uri not in self.artifacts:
            self.artifacts[b.uri] = Artifact(uri=b.uri, sha256=b.sha256, bytes=b.bytes, seq=seq)

    def snapshot(self) -> LiftedState:
        """``build`` without consuming the builder: more events may be folded in afterwards
        (``build`` closes the turn in progress; the snapshot closes a copy of it)."""
        narrative = self.narrative
        self.narrative = copy.copy(narrative)
        self.narrative.outcomes = dict(narrative.outcomes)
        try:
            return self.build()
        finally:
            self.narrative = narrative

    def build(self) -> LiftedState:
        decisions = self.decisions[-MAX_DECISIONS:]
        outcomes, reasons = self.narrative.build()
        # (the lists the builder goes on changing are copied, as validation copied every list: the
        # others are new; ``built_state``: the same state as ``LiftedState(...)``, unchecked)
        return built_state(
            goal=self.goal,
            requests=self.requests.copy(),
            constraints=self.constraints.copy(),
            decisions=decisions,
            files_read=list(self.files_read.values()),
            files_changed=self.notes.annotate(list(self.files_changed.values())),
            commands=self.commands.copy(),
            tests=self.tests.copy(),
            errors=self.errors.copy(),
            failed_approaches=self._annotated_failures(),
            unknown_actions=sorted(self.unknown.values(), key=lambda u: (u.seq, u.tool_use_id)),
            todos=self.todos.copy(),
            todos_seq=self.todos_seq,
            artifacts=list(self.artifacts.values()),
            urls=list(self.urls.values()),
            covers_end=self.covers_end,
            outcomes=outcomes,
            reasons=reasons,
            findings=self.narrative.built_findings(),
            last_action=self._built_last_action(),
            file_notes=self.notes.last_mentions.copy(),
        )


_SEQ = attrgetter("seq")
_NO_ARTIFACT = frozenset({TextBlock, ToolUseBlock, ThinkingBlock, CompactionBlock})
"""Block types that are no artifact and hold none (exact types: none of them subclasses another)."""


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _with_result(la: LastAction, out: Any, result_seq: int) -> LastAction:
    """``la`` with the outcome of its result: ok or failed, the exit code and the cause."""
    parts = [f"exit {out.exit_code}"] if out.exit_code is not None else []
    if out.failed:
        cause = _failures.failure_cause(out.text) if out.text else out.error_line
        if cause:
            parts.append(cause)
    return la.model_copy(update={"status": "failed" if out.failed else "ok", "result_seq": result_seq,
                                 "detail": _one_line(": ".join(parts), 220)})


# --- public API -------------------------------------------------------------------------------


def lift_state(events: Sequence[Event], prev: LiftedState | None = None) -> LiftedState:
    """Lift the structured state of ``events``, merged on top of ``prev``.

    Events at or before ``prev.covers_end`` are skipped (they are already in ``prev``), as are
    pinned events (they stay verbatim in every view) and compaction events (another
    summarizer's words, not facts). A tool result for an action ``prev`` marked unknown
    resolves it.
    """
    return Lifter(events, prev).state_at(None, final=True)


class Lifter:
    """``lift_state`` of growing prefixes of the same events in one pass.

    ``state_at(cut)`` equals ``lift_state([e for e in events if e.seq <= cut], prev)``: the
    shrink ladder's candidates at different cuts extend one accumulator instead of lifting
    the covered range again for each (a cut further on continues where the last one stopped).
    The result is the same, not an approximation: a call whose result lies after the cut is
    unknown at that cut, exactly as in a separate lift, and a later cut that reaches such a
    result (or a cut before the last one) starts the pass over.
    """

    def __init__(self, events: Sequence[Event], prev: LiftedState | None = None) -> None:
        self._prev = prev
        start = prev.covers_end if prev is not None else 0
        # (one read of each event's seq, calls and results when the events come in order and none is
        # left out, as a log's do: each read of a field of 100k events is a cache miss, issue 17)
        # (a list of events is read, not copied: the caller does not change it while the lifter is
        # used; the engine's is held through the ladder anyway, issue 17, memory)
        evs = events if type(events) is list else list(events)
        least, ordered, results, repeated = index_events(evs)
        if least is not None and (least <= start and not (start == 0 and least == 0) or not ordered):
            evs = sorted((e for e in evs if e.seq > start or e.seq == 0), key=_SEQ)
            _, _, results, repeated = index_events(evs)
        # the call ids a pass remembers folding (``_uses``): those it may be asked about again, calls
        # made more than once and the previous state's unknown calls a result may resolve (and the
        # calls the pass leaves unknown: ``_fold``); not every call's (issue 17, memory: ~4 MB at 300k)
        self._watch = repeated | {u.tool_use_id for u in prev.unknown_actions} if prev is not None else repeated
        self._evs, self._results = evs, results
        self.passes = 0
        self._reset()

    def _reset(self) -> None:
        self._acc = _Acc(self._prev)
        # the ids of the calls folded in that the pass may be asked about again (``_watch``, and the
        # calls left unknown): what the fold asks of them is only whether it saw one (issue 17, memory:
        # their blocks and classifications were kept per call, ~50k at 100k events)
        self._uses: set[str] = set()
        self._next = 0  # index of the next event to fold in
        self._cut: int | None = None
        self._straddle: int | None = None  # earliest result seq of a call left unknown by a cut
        self.passes += 1

    def state_at(self, cut: int | None, *, final: bool = False) -> LiftedState:
        """The state of the events up to ``cut`` (None: all of them). ``final``: no later
        call follows (the accumulator may be consumed)."""
        if self._next and (
            cut is not None and (self._cut is None or cut < self._cut)
            or self._straddle is not None and (cut is None or cut >= self._straddle)
        ):
            self._reset()
        n = len(self._evs) if cut is None else bisect_right(self._evs, cut, key=_SEQ)
        evs, fold, i = self._evs, self._fold, self._next  # (locals: the loop runs once an event)
        try:
            while i < n:
                fold(evs[i], cut, i)
                i += 1
        finally:
            self._next = i
        self._cut = cut
        return self._acc.build() if final else self._acc.snapshot()

    def _fold(self, e: Event, cut: int | None, i: int) -> None:
        """Fold ``e``, ``self._evs[i]``, into the accumulator."""
        acc, uses, results, watch = self._acc, self._uses, self._results, self._watch
        seq = e.seq
        if seq > acc.covers_end:
            acc.covers_end = seq
        # (each field of the event read once: a fold touches 100k events, issue 17)
        here = e.tool_results
        for b in e.blocks:
            t = type(b)
            if t in _NO_ARTIFACT:
                continue  # (text, a call, thinking: the common blocks, one look-up)
            for c in b.content if t is ToolResultBlock else (b,):  # (a block, or a result's content)
                if type(c) is TextBlock:
                    continue
                if isinstance(c, ArtifactRefBlock):
                    acc.add_artifact(c, seq)
                elif isinstance(c, ImageBlock) and c.ref is not None:
                    acc.add_artifact(c.ref, seq)
        if e.kind != "message":
            return
        role, calls = e.role, e.tool_uses
        if role == "assistant":
            text = e.text
            if text:
                acc.narrative.on_assistant_text(seq, text, acc.add_assistant_text(e, seq, text, calls))
            if here:
                acc.narrative.on_results()
            elif calls:
                acc.narrative.on_call()
        else:
            if here:
                acc.narrative.on_results()
            elif role == "user" and is_genuine_request(e):  # (a request carries no result)
                acc.add_request(e)
                acc.narrative.on_request(seq)
            elif role in ("user", "system") and e.text:
                acc._text_actions(e)  # aider's '>' lines may be attributed to the user or system
        for use in calls:
            uid = use.id
            if uid in uses:
                continue
            if uid in watch:
                uses.add(uid)
            at = results.get(uid, False)  # (the event of its first result; False: the next one, ``pass_index``)
            got = None if at is None else first_result(self._evs[i + 1] if at is False else at, uid)
            if (role == "assistant" and got is not None and (cut is None or got[1] <= cut)
                    and acc.shell_pair(e, use, seq, got, uid, len(calls) == 1)):  # (a plain shell command that worked: most pairs)
                continue
            act = classify(use, acc.open_file)
            if role == "assistant":
                acc.note_move(seq, act.command or act.summary or use.name, True)
                acc.on_call(e, use, act)
            if got is not None and (cut is None or got[1] <= cut):
                acc.add_pair(use, seq, act, got[0], got[1])
            else:
                uses.add(uid)  # (kept as before: a later result of it in this pass would not resolve it)
                if got is not None:  # answered after the cut: unknown here, not at a later cut
                    self._straddle = got[1] if self._straddle is None else min(self._straddle, got[1])
                acc.add_unknown(use, seq, act)
                if act.kind == "todo" and act.todos is not None and seq >= acc.todos_seq:
                    # the plan the agent wrote is its intent even if the write is unconfirmed
                    acc.todos, acc.todos_seq = list(act.todos), seq
        for r in here if acc.unknown else ():  # (a result resolves only a call left unknown)
            rid = r.tool_use_id
            if rid not in uses and rid in acc.unknown:
                acc.resolve(acc.unknown[rid], r, seq)


def reconcile(state: LiftedState, new_events: Sequence[Event]) -> tuple[LiftedState, list[str]]:
    """Resolve unknown actions whose results arrived in ``new_events`` (after the snapshot).

    Only resolution happens here: the new events stay verbatim after the checkpoint, so
    nothing else of theirs is folded in and ``covers_end`` does not move. Returns the updated
    state and the tool_use ids it resolved, in the order their results arrived.
    """
    pending = {u.tool_use_id: u for u in state.unknown_actions}
    if not pending:
        return state, []
    acc = _Acc(state)
    resolved: list[str] = []
    for e in sorted(new_events, key=lambda x: x.seq):
        for r in e.tool_results:
            u = pending.pop(r.tool_use_id, None)
            if u is None:
                continue
            acc.resolve(u, r, e.seq)
            resolved.append(u.tool_use_id)
    if not resolved:
        return state, []
    return acc.build(), resolved


def dump_state(state: LiftedState) -> dict[str, Any]:
    """JSON-safe dict for ``Checkpoint.state``."""
    return json.loads(state.model_dump_json())


def load_state(data: dict[str, Any] | None) -> LiftedState | None:
    """Inverse of ``dump_state``; ``None`` for an empty dict."""
    if not data:
        return None
    return LiftedState.model_validate(data)
