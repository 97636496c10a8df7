"""Why a tool call failed, what the agent did next, and whether a later run fixed it.

``exit 1`` or ``TypeError (#140)`` does not tell a continuing agent whether the problem is
still there. Per failure the lifter keeps:

- ``cause``: the one or two most telling lines of the output (``anchor: command not found``,
  a traceback's last line, a compiler error with its location), picked by fixed weights;
- ``next``: the agent's next move (its next sentence or call), clipped;
- ``resolved_at``: the seq of a later successful run of the same action (the command or test
  normalized: ``cd x &&`` prefixes, env assignments, flags, ``2>&1`` and ``| tail`` dropped),
  or ``None`` while it is still open.

Plain rules, no model: the same events always give the same annotations.
"""

from __future__ import annotations

import functools
import re
import shlex
from bisect import bisect_right
from typing import Sequence

from compactor.lifting.needles import any_needle
from compactor.lifting.state import FailedApproach
from compactor.lifting.outputs import (
    HARNESS_NOTE_RE as _HARNESS_NOTE_RE,
    PARTIAL_CHARS,
    answer_title,
    clip as _clip,
    partial_fields,
    partial_result,
)

CAUSE_LINES = 2
CAUSE_LINE_CHARS = PARTIAL_CHARS  # (one width: a cut answer's fields are a cause line too)
ONE_CAUSE_CHARS = 200
NEXT_CHARS = 150
NEXT_CALL_CHARS = 80
"""The agent's next move after a failure: its opening sentences up to this many characters (the first
often only restates the error; the second says what it does about it)."""

_NOISE_PREFIXES = ("Chunk ID", "Wall time", "Process exited", "Exit code", "Original token count",
                   "Output:", "Command exited", "Process running", "Total output lines",
                   # SWE-agent's advice after a rejected edit: says nothing of the cause
                   "DO NOT re-run the same failed edit command")

_WEIGHTS: tuple[tuple[int, re.Pattern[str]], ...] = (
    (6, re.compile(r"command not found|No such file or directory|Permission denied|"
                   r"ModuleNotFoundError|ImportError|not recognized as|"
                   r"no default toolchain|could not find|Could not find|not installed")),
    (5, re.compile(r"^\s*(?:E\s+)?(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b[:\s]|"
                   r"\b[A-Z]\w*(?:Error|Exception): \S|\bE\d{3} \w+Error\b|"
                   r"\berror\[E\d{4}\]|\berror TS\d+|^\s*panic(?:ked)?\b|^\s*fatal:|^FAILED \S+::|"
                   r"thread '.*' panicked")),
    (4, re.compile(r"(?i)^\s*error\b|\bError:|\bERR!|\bnot found\b|\bcannot\b|can't|\bunable to\b|"
                   r"couldn'?t|\bdenied\b|\bblocked\b|\brefused\b|\btimed? ?out\b|\bAssertionError\b|^\s*E\s+assert")),
    (3, re.compile(r"\bfailed\b|\bFAILED\b|\bFAIL\b|\bassert\b")),
)
_LETTERS_RE = re.compile(r"[^\W\d_]")
_LISTING_RE = re.compile(r"^\s*\d+\s*[:|│]\s")  # a numbered source listing, not output
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"])")
_LOCATION_RE = re.compile(r"^\s*--> (\S+:\d+(?::\d+)?)")
_WARNED_ERROR_RE = re.compile(r"\bERROR\b|\bError\b(?!s)|\bfailed\b")
_WARNING_RE = re.compile(r"^\s*warning\b", re.I)


def _weight(line: str) -> int:
    for w, rx in _WEIGHTS:
        if rx.search(line):
            return w
    return 0


def failure_cause(text: str, max_lines: int = CAUSE_LINES) -> str:
    """The most telling line(s) of a failed result, in output order, joined by `` / ``."""
    lines: list[str] = []
    lead: dict[int, str] = {}  # sentence index -> the first sentence of its long line
    for ln in text.splitlines():
        # a long line (a harness message) is judged sentence by sentence
        if len(ln) > CAUSE_LINE_CHARS:
            parts = _SENTENCE_RE.split(ln.rstrip())
            for k in range(1, len(parts)):
                lead[len(lines) + k] = parts[0]
            lines += parts
        else:
            lines.append(ln.rstrip())
    scored: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s or s.startswith(_NOISE_PREFIXES) or _LISTING_RE.match(s) or s in seen:
            continue
        w = _weight(s)
        if not w:
            continue
        if _WARNING_RE.match(s):
            # a warning tells only when nothing says error (yt-dlp reports its errors so), unless
            # it carries the error itself ("WARNING: [youtube] YouTube said: ERROR - ...")
            w = 3 if _WARNED_ERROR_RE.search(s) else 1
        seen.add(s)
        # a compiler error's location is on the next "-->" line: keep them together
        loc = next((m.group(1) for m in (_LOCATION_RE.match(x) for x in lines[i + 1:i + 3]) if m), None)
        scored.append((w, i, f"{s} ({loc})" if loc and loc not in s else s))
    if not scored:
        # the first line that says something (a banner such as "===" names no cause)
        first = next((ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith(_NOISE_PREFIXES)
                      and len(_LETTERS_RE.findall(ln)) >= 3), "")
        return _clip(first, CAUSE_LINE_CHARS)
    # highest weight first; among equals the last one (a traceback ends with its cause)
    best = sorted(scored, key=lambda t: (-t[0], -t[1]))[:max_lines]
    best.sort(key=lambda t: t[1])
    out = []
    heads: set[str] = set()
    for _, i, s in best:
        # a telling sentence inside a long harness line keeps the line's opening (once) for context
        head = lead.get(i)
        opening = _clip(head, CAUSE_LINE_CHARS) + " … " if head and head not in heads else ""
        if head:
            heads.add(head)
        # one cause alone may say its distinctive end (``... missing: PixelRepresentation``)
        out.append(opening + _clip(s, CAUSE_LINE_CHARS if len(best) > 1 else ONE_CAUSE_CHARS))
    frame = _raising_frame(lines, best[-1][1]) if "File \"" in text else ""
    return " / ".join(out) + (f" (raised at {frame})" if frame else "")


_FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')


def _raising_frame(lines: list[str], cause_at: int) -> str:
    """``path:line in function`` of a Python traceback's innermost frame above the cause line."""
    for ln in reversed(lines[max(0, cause_at - 12):cause_at]):
        m = _FRAME_RE.match(ln)
        if m and m.group(1).startswith("<"):  # ``python -c`` / stdin: no file to name
            return ""
        if m:
            fn = "" if m.group(3) == "<module>" else f" in {m.group(3)}"
            # the file name (prose, and short): its full path is in the traceback and the files lists
            return f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}{fn}"
    return ""


_CD_PREFIX_RE = re.compile(r"^\s*(?:cd\s+\S+\s*(?:&&|;)\s*)+")
_TAIL_RE = re.compile(r"\s*(?:2>&1|\|\s*(?:tail|head|grep|tee|cat|less)\b[^|]*)\s*$")


_ASSIGN_RE = re.compile(r"^[A-Za-z_]\w*=")
_DURATION_RE = re.compile(r"\d+[smh]?")


@functools.lru_cache(maxsize=8192)  # pure; every lift re-keys the previous state's commands
def command_key(command: str) -> str:
    """A command normalized so that reruns match: no cd prefix, env, flags or output plumbing."""
    s = " ".join(command.split())
    s = _CD_PREFIX_RE.sub("", s) if "cd" in s else s  # (every prefix match holds it)
    prev = None
    while prev != s and ("|" in s or "2>&1" in s):  # (every _TAIL_RE match holds one of these)
        prev = s
        s = _TAIL_RE.sub("", s)
    if "'" in s or '"' in s or "\\" in s:
        try:
            toks = shlex.split(s)
        except ValueError:
            toks = s.split()
    else:  # no quotes or escapes: shlex.split is str.split (s is single-spaced), 20x faster
        toks = s.split()
    while toks and (_ASSIGN_RE.match(toks[0]) or toks[0] in ("timeout", "time", "sudo")
                    or _DURATION_RE.fullmatch(toks[0])):
        toks = toks[1:]
    if len(toks) >= 2 and toks[1] == "-m" and toks[0] in ("python", "python3"):
        toks = toks[2:]
    return " ".join(toks) if "-" not in s else " ".join([t for t in toks if not t.startswith("-")])


def action_key(tool: str, command: str | None, paths: Sequence[str], kind: str = "") -> str:
    """What identifies an action for 'a later run of the same thing'.

    A file change is matched by its files (a later successful edit of the same file), a
    command by its normalized text, anything else by tool + files.
    """
    if kind == "change" and paths:
        return "change:" + ",".join(sorted(paths))
    if command:
        return "cmd:" + command_key(command)
    if paths:
        return f"{tool.lower()}:" + ",".join(sorted(paths))
    return ""


_TARGET_RE = re.compile(r"/|::|\.(?:py|js|ts|tsx|jsx|go|rs|rb)$")


def suite_key(key: str) -> str:
    """``cmd:pytest tests/a.py::t`` -> ``cmd:pytest``: the same runner over the whole suite
    (the key without its file/test targets); "" when the key names no target."""
    if not key.startswith("cmd:"):
        return ""
    toks = key[4:].split()
    keep = [t for t in toks if not _TARGET_RE.search(t)]
    return "cmd:" + " ".join(keep) if keep and len(keep) < len(toks) else ""


def first_after(seqs: Sequence[int], after: int) -> int | None:
    """The smallest seq in sorted ``seqs`` greater than ``after``."""
    i = bisect_right(seqs, after)
    return seqs[i] if i < len(seqs) else None


def move_text(text: str, is_call: bool) -> str:
    """How an agent's next move reads in a summary: a call in backticks, a sentence quoted."""
    if is_call:
        return "`" + _clip(text, NEXT_CALL_CHARS).replace("`", "'") + "`"
    return "\"" + _clip(text, NEXT_CHARS) + "\""


# A harness that asks before running a command the agent proposed (aider: "mkdir data" then
# "Run shell command? (Y)es/(N)o/... [Yes]: n"): a "no" means the command never ran. The
# agent's text still proposes it, so without this a reader assumes it did.
_ASK_RE = re.compile(r"^(?P<ask>.*\b(?:Run|Execute)\s+(?:shell\s+)?commands?\?).*:\s*(?P<ans>n|no|s|skip|d)\s*$", re.I)
DECLINED_CAUSE = "not run: the user answered \"{ans}\" to \"{ask}\""


def declined_commands(text: str) -> list[tuple[str, str]]:
    """(command, cause) for each command a run-this-command prompt in ``text`` was answered no to."""
    if "ommand" not in text:
        return []
    out = []
    lines = text.splitlines()
    for i, ln in enumerate(lines[1:], 1):
        m = _ASK_RE.match(ln.strip())
        cmd = lines[i - 1].strip()
        if m is None or not cmd or _ASK_RE.match(cmd) or cmd.endswith("?"):
            continue
        out.append((cmd, DECLINED_CAUSE.format(ans=m.group("ans"), ask=_clip(m.group("ask"), 40))))
    return out


# A run that exits 0 yet reports it got nothing ("DONE: 0/49 transcripts extracted", "0 of 12
# succeeded"): the batch failed, and the next agent must not read "ok" as done.
_ZERO_TALLY_RE = re.compile(r"(?<![\d./])0\s*(?:/|of|out of)\s*[1-9]\d*\b(?![./]\d)", re.I)
_ZERO_TALLY_PRE = re.compile(r"0\s*(?:/|of|out of)", re.I)
TALLY_TAIL_LINES = 4
_BAD_COUNTED_RE = re.compile(r"(?i)fail|error|\berr|skip|warn|miss|broken|problem|issue|leak|vuln|regress|invalid|bad")


def zero_tally(text: str) -> str:
    """The closing line of an output that reports zero successes out of N, or ""."""
    if "0" not in text or _ZERO_TALLY_PRE.search(text, max(0, len(text) - 2000)) is None:
        return ""  # (every tally match in a line of the tail is one of this simpler pattern there)
    tail = [ln.strip() for ln in text[-2000:].splitlines() if ln.strip() and not _HARNESS_NOTE_RE.match(ln)]
    for ln in reversed(tail[-TALLY_TAIL_LINES:]):
        m = _ZERO_TALLY_RE.search(ln)
        if m and _LETTERS_RE.search(ln) and not _BAD_COUNTED_RE.search(ln[m.end():m.end() + 30]):
            return _clip(ln, CAUSE_LINE_CHARS)
    return ""


# A non-shell tool (a browser, an eval) that reports its error as its whole answer without
# flagging it ("EVAL ERROR: Invalid or unexpected token at line undefined"): a failure.
_ERROR_ANSWER_RE = re.compile(r"^(?:[A-Z][A-Z _-]{0,24} )?ERROR\b\s*[:\-]\s*\S|^(?:[A-Z]\w*)?(?:Error|Exception):\s+\S")
ERROR_ANSWER_CHARS = 400


def error_only_result(text: str) -> str:
    """The error line when a short result (<= 3 lines, ``ERROR_ANSWER_CHARS``) opens with one, else ""."""
    if not text or len(text) > ERROR_ANSWER_CHARS:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines or len(lines) > 3 or not _ERROR_ANSWER_RE.match(lines[0]):
        return ""
    return _clip(lines[0], CAUSE_LINE_CHARS)


def next_words(sentences: Sequence[str]) -> str:
    """The agent's words after a failure: from its first sentence of 12+ characters, whole sentences
    while they fit in ``NEXT_CHARS`` (at least the first)."""
    if len(sentences) == 1:  # (one sentence, the usual line beside a call: itself or nothing, issue 17)
        sent = sentences[0].strip()
        return sent if len(sent) >= 12 else ""
    out: list[str] = []
    n = 0
    for sent in sentences:
        sent = sent.strip()
        if not out and len(sent) < 12:
            continue
        if out and n + len(sent) + 1 > NEXT_CHARS:
            break
        out.append(sent)
        n += len(sent) + 1
    return " ".join(out)


# How a rerun differed from the call that failed ("rerun with sandbox_permissions=require_escalated"):
# the same command can work the second time because a parameter beside it changed.
_BODY_KEYS = frozenset({"cmd", "command", "content", "file_text", "contents", "new_content", "text", "code",
                        "old_str", "new_str", "old_string", "new_string", "edits", "patch", "input", "script",
                        "justification", "description"})
PARAM_CHARS = 40
MAX_PARAMS = 8


def call_params(inp: object) -> dict[str, str]:
    """A call's short scalar parameters beside its command or body (``workdir``, ``timeout``,
    ``sandbox_permissions``), values as text, to compare a rerun with the call that failed."""
    if not isinstance(inp, dict):
        return {}
    out: dict[str, str] = {}
    for k, v in inp.items():
        if k in _BODY_KEYS or len(out) >= MAX_PARAMS:
            continue
        if isinstance(v, list) and len(v) <= 4 and all(isinstance(x, (str, int, float, bool)) for x in v):
            v = "[" + ", ".join(str(x) for x in v) + "]"
        if isinstance(v, (str, int, float, bool)) and len(str(v)) <= 2 * PARAM_CHARS:
            out[str(k)] = _clip(str(v), PARAM_CHARS)
    return dict(sorted(out.items()))  # (key order survives a checkpoint's JSON round trip: one prompt on both paths)


def param_diff(failed: dict[str, str], rerun: dict[str, str]) -> str:
    """``sandbox_permissions=require_escalated, timeout=600``: what the rerun set differently ("" if nothing)."""
    changed = [f"{k}={v}" for k, v in rerun.items() if failed.get(k) != v]
    changed += [f"no {k}" for k in failed if k not in rerun]
    return ", ".join(changed[:4])


# A fetch whose answer says it is cut ("restricted":true, 8000 of 20526 chars) is a limitation the
# agent hit: what came back partial, and whether a later call asked for the rest (an offset, a page).
PARTIAL_ERROR = "partial answer (the response's own fields)"
PARTIAL_KEY = "partial:"
_URL_RE = re.compile(r"(?:https?://|\$\{?\w+\}?/)[^\s\"'?<>|;)]+")
_REST_PARAM_RE = re.compile(r"(?i)\b(?:offset|page|cursor|start|skip|from|nextOffset|page_token|pageToken)\b\s*[=:\"']")


def partial_key(command: str) -> str:
    """``partial:`` + the URL a command fetched (its query left out), or its normalized text."""
    m = _URL_RE.search(command)
    return PARTIAL_KEY + (m.group(0) if m else command_key(command))


def fetched_rest(key: str, later_command: str) -> bool:
    """Whether a later command asked for more of what ``key`` (``partial_key``) fetched: the same URL
    with an offset, page or cursor parameter."""
    target = key[len(PARTIAL_KEY):]
    return bool(target) and target in later_command and bool(_REST_PARAM_RE.search(later_command))


def partial_failure(command: str, text: str, tool_use_id: str, seq: int, result_seq: int) -> FailedApproach | None:
    """The limitation a fetch's answer states about itself (``partial_result``) as a failure whose
    cause is what came back (``"title": restricted, 8000 of 20526 chars``); None for a whole answer."""
    partial = partial_result(text)
    if not partial:
        return None
    title = answer_title(text)
    cause = (f"\"{title}\": " if title else "") + partial_fields(partial)
    return FailedApproach(seq=seq, what=_clip(command, 200), error=PARTIAL_ERROR, tool_use_id=tool_use_id,
                          cause=cause, result_seq=result_seq, key=partial_key(command))


def soft_failures(command: str | None, text: str, tool_use_id: str, seq: int, result_seq: int,
                  key: str, ran_ok: bool) -> list[FailedApproach]:
    """Failures in a result no exit code or error flag marks: a run reporting zero successes
    (``zero_tally``), the commands a user declined to run (``declined_commands``) and a fetch whose
    answer says it is cut (``partial_failure``: its key is its own, so the run still counts as ok)."""
    out: list[FailedApproach] = []
    if not ("true" in text or "0" in text or "ommand" in text):
        return out  # (each finder below needs one of these: most results, no call, issue 17)
    cut = partial_failure(command, text, tool_use_id, seq, result_seq) if command and ran_ok else None
    if cut is not None:
        out.append(cut)
    tally = zero_tally(text) if command and ran_ok else ""
    if tally:
        cause = failure_cause(text, 1)
        out.append(FailedApproach(seq=seq, what=_clip(command or "", 200), error=tally, tool_use_id=tool_use_id,
                                  result_seq=result_seq, key=key,
                                  cause=tally + (f" / {cause}" if cause and cause != tally else "")))
    for cmd, why in declined_commands(text):
        out.append(FailedApproach(seq=seq, what=_clip(cmd, 200), error=why, tool_use_id=tool_use_id, cause=why,
                                  result_seq=result_seq, key=action_key("", cmd, [], "command")))
    return out


# A call that ran and "worked" yet did nothing the agent wanted ("the attempt did not yield any
# additional output", "the file was not echoed back", "0 cards rendered"): no exit code says so,
# only the agent's next words. The failure is kept with those words (its symptom), the agent's
# explanation in the same message (``because`` ...), and what its next result showed.
SOFT_ERROR = "no visible effect (the agent's words)"
SOFT_SENTENCES = 3
"""The agent's first sentences after a result that may state a symptom."""
SOFT_CHARS = 170
WHY_CHARS = 240
_SOFT_FAIL_RE = re.compile(
    r"\b(?:did not|didn'?t|does not|doesn'?t|was not|wasn'?t|were not|weren'?t)\s+(?:yield|produce|return|print|show|"
    r"echo|output|render|display|trigger|execute|run)\w*\b(?![^.]*\b(?:errors?|warnings?)\b)"
    r"|\bnot (?:echoed|printed|rendered|displayed|shown|returned)\b|\bno (?:output|response|results?|effect)\b"
    r"|\b(?:returned|printed|showed|rendered|produced) nothing\b|\bempty (?:output|response|result|page|list)\b"
    r"|\b(?:rendered |shows? |found )?0 (?:results|cards|items|rows|matches|videos|entries)\b", re.I)
_WHY_RE = re.compile(r"\b(?:because|probably|caused by|due to|the reason|this means|which means)\b", re.I)
_CONFIRM_RE = re.compile(r"\b(?:valid|confirm\w*|worked|works|success\w*|as expected|yielded|fixed|now (?:shows|prints|renders|returns))\b",
                         re.I)


_GLUED_RE = re.compile(r"(?<=[a-z][.!?])(?=[A-Z][a-z])")


# Every match of _SOFT_FAIL_RE holds one of these, lowercased (checked on ASCII sentences first)
_SOFT_FAIL_NEEDLES = ("did", "does", "was", "were", "not ", "no ", "nothing", "empty ", "0 ")
_SOFT_FAIL_PRE = any_needle(_SOFT_FAIL_NEEDLES)  # (a trie: one branch per first character, issue 17)


def _soft_fail(sentence: str) -> bool:
    if sentence.isascii():  # (beyond ASCII a case-insensitive match need not survive str.lower)
        if _SOFT_FAIL_PRE.search(sentence.lower()) is None:
            return False
    return _SOFT_FAIL_RE.search(sentence) is not None


def soft_symptom(sentences: Sequence[str]) -> tuple[str, str]:
    """(symptom, why): the agent's sentence saying a call had no effect, among its first
    ``SOFT_SENTENCES``, and its explanation later in the same message; ("", "") when none."""
    firsts = [s.strip() for s in sentences if len(s.strip()) >= 12][:SOFT_SENTENCES]
    i = next((k for k, s in enumerate(firsts) if _soft_fail(s)), -1)
    if i < 0:
        return "", ""
    rest = [s.strip() for s in sentences if len(s.strip()) >= 12]
    start = rest.index(firsts[i]) + 1
    k = next((j for j in range(start, min(len(rest), start + 4)) if _WHY_RE.search(rest[j])), -1)
    why = " ".join(rest[k:k + 2]) if k >= 0 else ""  # (an explanation often runs on into a second sentence)
    symptom = _GLUED_RE.split(firsts[i], 1)[0]  # ("...at this page.Upon revisiting": the next sentence)
    return _clip(symptom, SOFT_CHARS), _clip(why, WHY_CHARS)


# The agent's conclusion in the symptom sentence itself ("did not yield any output, suggesting that
# the vulnerability might not be at this page"): the attempt ruled something out.
_CONCLUDED_RE = re.compile(r"\b(?:suggest(?:s|ing|ed)?|indicat(?:es|ing)|this means|which means|so (?:it|this|the|we)|"
                           r"might not|may not|must not|(?:does|did)n'?t seem|do(?:es)? not seem|not (?:vulnerable|possible|supported))\b",
                           re.I)
SOFT_NEXT = "next call: "


def soft_concluded(cause: str) -> bool:
    """Whether a soft failure's quoted words (``soft_cause``) state what the agent concluded."""
    return bool(_CONCLUDED_RE.search(cause.replace("\u2019", "'")))


def soft_next(calls: Sequence[tuple[int, str]], after: int) -> str:
    """``next call: `curl …/file.pl` (#15)``: the first call after a soft failure's result, or "".

    ``calls``: (seq, text) as the agent wrote the call; ``move_text`` one-lines and clips it."""
    i = bisect_right([c[0] for c in calls], after)
    return f"{SOFT_NEXT}{move_text(calls[i][1], True)} (#{calls[i][0]})" if i < len(calls) else ""


def soft_cause(symptom: str, why: str) -> str:
    return f"the agent: \"{symptom}\"" + (f" / why: \"{why}\"" if why else "")


class SoftCalls:
    """The lifter's wiring for calls that did nothing: the last ok command, whose next words from the
    agent may say it had no effect (``soft_symptom``: a failure), and such a failure awaiting what the
    agent's words after its next result confirm (``confirmation``: its next move)."""

    def __init__(self) -> None:
        self.call: tuple[str, str, int, int] | None = None  # (use id, command, use seq, result seq)
        self.open: tuple[str, int] | None = None  # (use id, result seq) of a soft failure awaiting what came next

    def on_command(self, use_id: str, command: str, use_seq: int, result_seq: int, ok: bool) -> None:
        self.call = (use_id, command, use_seq, result_seq) if ok else None

    def on_text(self, seq: int, sentences: list[str], failed: list[FailedApproach], low: str | None = None,
                plain: bool = False) -> tuple[list[FailedApproach], FailedApproach | None]:
        """(``failed`` with a confirmed soft failure's next move set, a new soft failure or None).

        ``low``: the message lowercased when it is ASCII (its sentences are pieces of it), else None;
        ``plain``: the caller found none of ``_SOFT_FAIL_NEEDLES`` in ``low`` (the lifter's one search
        of every family's needles, issue 17), so it is not searched again."""
        if self.open is not None and self.call is not None and self.call[3] > self.open[1]:
            said = confirmation(sentences)
            if said:
                uid = self.open[0]
                failed = [f.model_copy(update={"next": f"then #{seq}: \"{said}\""}) if f.tool_use_id == uid
                          and f.error == SOFT_ERROR else f for f in failed]
            self.open = None
        call, self.call = self.call, None
        if call is None or call[3] >= seq:
            return failed, None
        if plain or low is not None and _SOFT_FAIL_PRE.search(low) is None:
            return failed, None  # (no sentence of it holds a needle: none says the call did nothing)
        symptom, why = soft_symptom(sentences)
        if not symptom:
            return failed, None
        uid, command, use_seq, result_seq = call
        self.open = (uid, result_seq)
        return failed, FailedApproach(seq=use_seq, what=_clip(command, 200), error=SOFT_ERROR, tool_use_id=uid,
                                      cause=soft_cause(symptom, why), result_seq=result_seq)


def confirmation(sentences: Sequence[str]) -> str:
    """The agent's opening words after its next result when they confirm something ("Our assumptions
    are valid! Switching the two yielded back the file."), else ""."""
    words = next_words(sentences)
    return _clip(words, SOFT_CHARS) if words and _CONFIRM_RE.search(words) else ""


# A line-range edit (SWE-agent ``edit 287:295``) replaces lines the agent saw in a listing: what
# they were is "the original check" a reader asks about, and a rejected attempt's harness output
# shows both the text it would have produced and the original, so the first line that differs says
# what the attempt got wrong ("line 287 would have read `'BitsAllocated', ...` instead of
# `required_elements = [`": the opening line was left out).
_RANGE_EDIT_RE = re.compile(r"^edit\s+(\d+):(\d+)\b")
_LISTED_RE = re.compile(r"^(\d{1,6}):(.*)$", re.M)
ORIGINAL_MARK = "This is the original code before your edit"
WOULD_MARK = "This is how your edit would have looked if applied"
REPLACED_CHARS = 220
LISTED_LINES_KEPT = 400


def edit_range(command: str | None) -> tuple[int, int] | None:
    m = _RANGE_EDIT_RE.match(command or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def listed_lines(text: str) -> dict[int, str]:
    """Line number -> text of a numbered file listing (``287:    required_elements = [``); for a
    rejected edit's output, the original listing."""
    if ORIGINAL_MARK in text:
        text = text.split(ORIGINAL_MARK, 1)[1]
    return {int(m.group(1)): m.group(2) for m in _LISTED_RE.finditer(text[:40_000])}


def replaced_text(listing: dict[int, str], start: int, end: int) -> str:
    """``was (lines 287-296): required_elements = [ ⏎ …`` when the listing holds every line of the range."""
    if end < start or any(n not in listing for n in range(start, end + 1)):
        return ""
    body = " ⏎ ".join(" ".join(listing[n].split()) for n in range(start, end + 1) if listing[n].strip())
    return f"was (lines {start}-{end}): " + _clip(body, REPLACED_CHARS) if body else ""


def rejected_edit_detail(command: str | None, text: str) -> str:
    """What a rejected line-range edit would have put at its first changed line, against the original."""
    rng = edit_range(command)
    if rng is None or WOULD_MARK not in text or ORIGINAL_MARK not in text:
        return ""
    would_part, original_part = text.split(WOULD_MARK, 1)[1].split(ORIGINAL_MARK, 1)
    would = {int(m.group(1)): m.group(2) for m in _LISTED_RE.finditer(would_part)}
    original = {int(m.group(1)): m.group(2) for m in _LISTED_RE.finditer(original_part)}
    n = rng[0]
    if n in would and n in original and would[n].strip() != original[n].strip():
        return f"line {n} would be `{_clip(would[n], 36)}`, not `{_clip(original[n], 36)}`"
    return ""
