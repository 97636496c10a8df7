"""Key facts a continuing agent needs, extracted from an ORIGINAL transcript for grading.

This extractor is deliberately independent of ``compactor.lifting.lift``: it has its own short rules
and shares no code with the engine, so the fidelity benchmark does not grade the engine with
the engine's own notion of what matters. Each fact carries an identifying string (a path, an
error name, a command, a constraint sentence, a URL, a tool_use id); a fact is *recalled* by
a view when that string appears in the view's text (whitespace and quote style normalized).

Rules, per kind:

- ``file_changed``: the path a successful edit/write tool call names (``file_path``/``path``/
  ``filePath``/``notebook_path``/``filename`` of Edit, Write, MultiEdit, edit, write,
  create, str_replace_editor other than ``view``, ...), files named in ``*** Update/Add File:``
  patch headers, Aider's ``Applied edit to X`` lines, SWE-agent ``create X``.
- ``error``: capitalised names ending in ``Error``/``Exception`` in a failed tool result
  (``is_error``, a non-zero exit code, or a Python traceback), and in any result on a line
  that starts with that name (the last line of a traceback).
- ``failed_test`` / ``last_test``: shell commands that run a test runner (pytest, npm test,
  go test, cargo test, jest, ...); failed when the result failed or reports failures.
- ``constraint``: sentences of genuine user messages containing never / don't / do not /
  must not / avoid / only / without / always / must.
- ``first_request`` / ``latest_request``: the first and last genuine user messages (their
  first 300 characters).
- ``pending_call``: a tool_use whose tool_result never arrives (its id).
- ``user_url``: http(s) URLs in genuine user messages.
- ``error_cause``: the cause line of each failed tool result (``is_error``, a non-zero exit, a
  traceback): the last line that starts with an exception name, else the first line with an
  error word (error, not found, no such file, denied, failed, fatal, cannot, unable, refused,
  timed out), else (``is_error`` only) the first line. Harness lines (``Exit code 1``,
  ``Process exited with code``, ``Chunk ID``, ...) never count. Key: that line, at most
  ``CAUSE_KEY_CHARS`` characters cut at a word boundary.
- ``resolution``: a shell command that failed and later ran again, identical, and succeeded.
  Recalled when the view carries the successful run (its tool_use id and the head of its
  output), or states the outcome next to the command: the first status word within
  ``RESOLUTION_WINDOW`` characters after the command is a success word (passed, succeeded,
  ok, exit 0, ...) rather than a failure word, or a resolution word (resolved, fixed, now
  passes, later succeeded, ...) is written within that window after it or just before it.
- ``turn_outcome``: per user turn, the agent's closing text message (its last text before the
  next genuine user message): its ``OUTCOME_WORDS`` rarest words across the transcript (no
  stop words, no words any user request contains). Recalled when most of them (more than
  half) occur as words in the view.

- ``constant``: a constant the agent set in a file it wrote: a line of the written text (a
  write's content, an edit's new side, a patch's ``+`` lines, an aider REPLACE block) that
  assigns a number or a short quoted string to an UPPER_CASE name. Key ``NAME = value``;
  recalled when the view has the name with the value within ``CONSTANT_WINDOW`` characters
  after it.
- ``data_file``: a data file the written code names in a string literal (``"data/x.csv"``,
  ``'results.json'``). Key: that path.

A ``file_changed`` fact also comes from a successful shell command that writes with a
redirect or ``tee`` (``cat > path <<'EOF'``, ``printf '...' > path``, ``echo x | tee -a path``);
targets under ``/dev/`` and ``/tmp/`` are scratch, not project files, and are skipped.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Sequence

from pydantic import BaseModel

from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    render_artifact_ref,
)

KINDS = (
    "file_changed",
    "error",
    "failed_test",
    "last_test",
    "constraint",
    "first_request",
    "latest_request",
    "pending_call",
    "user_url",
    "error_cause",
    "resolution",
    "turn_outcome",
    "constant",
    "data_file",
)
REQUEST_KEY_CHARS = 300
CAUSE_KEY_CHARS = 100
RESOLUTION_WINDOW = 120
OUTCOME_WORDS = 5
CONSTANT_WINDOW = 80

_EDIT_TOOLS = {
    "edit", "write", "multiedit", "notebookedit", "create", "write_file", "edit_file",
    "create_file", "replace", "apply_patch", "insert", "str_replace", "search_replace",
}
_PATH_FIELDS = ("file_path", "path", "filePath", "notebook_path", "filename")
_PATCH_HEADER = re.compile(r"^\*\*\* (?:Update|Add) File: (\S.*?)\s*$", re.M)
_AIDER_APPLIED = re.compile(r"Applied edit to (\S+)")
_ERR_NAME = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception))\b")
_ERR_LINE_START = re.compile(r"^([A-Z][A-Za-z0-9]*(?:Error|Exception)):", re.M)
_EXIT_NONZERO = re.compile(r"(?i)(?:exit code|exited with code)[: ]+([1-9]\d*)")
_TEST_CMD = re.compile(
    r"\b(pytest|py\.test|npm test|npm run test|yarn test|pnpm test|go test|cargo test|jest|"
    r"vitest|mocha|unittest|tox|make test|rspec|phpunit|dotnet test|mvn test)\b"
)
_TEST_FAILED = re.compile(r"\b\d+ failed\b|\bFAILED\b|^FAIL\b|test result: FAILED", re.M)
_CONSTRAINT_WORDS = re.compile(
    r"\b(never|don't|do not|must not|avoid|only|without|always|must)\b", re.I
)
_WRITE_FIELDS = ("content", "file_text", "new_string", "new_str", "newText", "new_text")
_CONST_LINE = re.compile(
    r"^\s*(?:export\s+)?(?:const\s+|let\s+|var\s+|pub\s+const\s+|static\s+)?([A-Z][A-Z0-9_]{2,})\s*"
    r"(?::\s*[\w\[\]&' ]+)?=\s*(-?\d[\d_]*(?:\.\d+)?|\"[^\"\n]{1,40}\"|'[^'\n]{1,40}')\s*[;,]?\s*(?:#.*|//.*)?$",
    re.M)
_DATA_LITERAL = re.compile(
    r"[\"'`]((?:[\w.-]+/)*[\w-]+\.(?:csv|tsv|json|jsonl|parquet|db|sqlite|xlsx|npy|pkl|h5))[\"'`]")
_AIDER_REPLACE = re.compile(r"^=======\n(.*?)^>>>>>>> REPLACE", re.S | re.M)
_URL = re.compile(r"https?://[^\s)\]>\"'`]+")
_WRAPPED = re.compile(r"(?s)^\s*<([\w-]+)>.*</\1>\s*$")
_SHELL_WRITE = re.compile(
    r"(?:^|[\s;&|(])(?<![0-9&])>>?\s*['\"]?([\w~./-]+)|\btee\s+(?:-a\s+)?['\"]?([\w~./-]+)"
)
_EXC_LINE = re.compile(r"^\s*(?:E\s+)?[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b")
_ERROR_WORDS = re.compile(
    r"(?i)\berror\b|\bnot found\b|no such file|permission denied|\bdenied\b|\bfailed\b|"
    r"\bfailure\b|\bfatal\b|\bcannot\b|\bcan't\b|\bunable to\b|\brefused\b|timed out|\bpanic"
)
_HARNESS_LINE = re.compile(
    r"(?i)^\s*(?:exit code\b|process exited with code|chunk id:|wall time:|original token count:|"
    r"output:\s*$|traceback \(most recent call last\)|command exited|\[process exited)"
)
_SUCCESS_WORDS = re.compile(
    r"(?i)\b(?:pass(?:ed|es|ing)?|succeed(?:ed|s)?|success(?:ful(?:ly)?)?|resolved|fixed|"
    r"ok|exit(?:ed)?(?: with)?(?: code)?[ :=]+0)\b"
)
_FAILURE_WORDS = re.compile(
    r"(?i)\b(?:fail(?:ed|s|ure|ing)?|error|errors|traceback|exception|exit(?:ed)?(?: with)?(?: code)?"
    r"[ :=]+[1-9]\d*|not found|denied)\b"
)
_RESOLVED = re.compile(r"(?i)\b(?:resolved|fixed|(?:now|later|then) (?:pass|succeed|work)\w*)\b")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")
_STOP = frozenset("""
about above after again all also and any are because been before being below between both but
can could did does doing done down during each few for from further had has have having here how
into its itself just let like made make more most much need needs now off once only other our out
over own same should some such than that the their them then there these they this those through
too under until very was were what when where which while who whom why will with would you your
yours i've it's i'll i'm we've we'll let's that's there's don't didn't doesn't isn't aren't won't
can't here's now's yes okay sure thanks thank please next also still should've
""".split())


class Fact(BaseModel):
    kind: str
    key: str
    seq: int = 0
    evidence: list[str] = []
    """``resolution``: the successful call's id and output head (the run itself in the view)."""


def normalize(text: str) -> str:
    """Collapse whitespace and straighten quotes, for matching."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return " ".join(text.split())


def _genuine(e: Event) -> bool:
    return e.is_user_request and not _WRAPPED.match(e.text)


def _result_text(r: ToolResultBlock) -> str:
    out = []
    for c in r.content:
        if isinstance(c, TextBlock):
            out.append(c.text)
        elif isinstance(c, ArtifactRefBlock):
            out.append(c.preview_head + "\n" + c.preview_tail)
    return "\n".join(out)


def _failed(r: ToolResultBlock, text: str) -> bool:
    return r.is_error or bool(_EXIT_NONZERO.search(text)) or "Traceback (most recent call last)" in text


def _shell_command(u: ToolUseBlock) -> str | None:
    for k in ("command", "cmd"):
        v = u.input.get(k)
        if isinstance(v, str):
            return v
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return v[-1]
    return None


def _strings(x: Any) -> Iterable[str]:
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)


def _changed_paths(u: ToolUseBlock) -> list[str]:
    name = u.name.lower()
    paths: list[str] = []
    for s in _strings(u.input):
        paths += _PATCH_HEADER.findall(s)
    if name == "str_replace_editor" and u.input.get("command") == "view":
        return paths
    if name in _EDIT_TOOLS or name == "str_replace_editor" or name.endswith(("_edit", "_write")):
        for k in _PATH_FIELDS:
            v = u.input.get(k)
            if isinstance(v, str) and v:
                paths.append(v)
                break
    cmd = _shell_command(u)
    if cmd and cmd.startswith("create "):
        paths.append(cmd.split()[1])
    return paths


def _shell_writes(cmd: str) -> list[str]:
    """Files a shell command writes by redirect or tee (scratch under /dev and /tmp skipped)."""
    out = []
    for a, b in _SHELL_WRITE.findall(cmd):
        path = (a or b).rstrip(".")
        if (re.search(r"[A-Za-z]", path) and ("." in path or "/" in path)
                and not path.startswith(("/dev/", "/tmp/", "-"))):
            out.append(path)
    return out


def _clip(text: str, n: int) -> str:
    """``text`` cut to at most ``n`` characters at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= n:
        return text
    cut = text[:n]
    return cut[: cut.rfind(" ")] if " " in cut else cut


def cause_line(text: str, is_error: bool) -> str | None:
    """The most telling line of a failed output (see the module docstring), or None."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not _HARNESS_LINE.match(ln)]
    exc = [ln for ln in lines if _EXC_LINE.match(ln)]
    if exc:
        line = exc[-1]
    else:
        line = next((ln for ln in lines if _ERROR_WORDS.search(ln)), None)
        if line is None and is_error and lines:
            line = lines[0]
    if line is None:
        return None
    line = re.sub(r"^\s*E\s+", "", line)  # pytest's failure-line marker
    if len(re.findall(r"[^\W\d_]", line)) < 3:
        return None  # a rule or banner line ("===") names no cause
    return _clip(line, CAUSE_KEY_CHARS)


def _words(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(text.lower().replace("\u2019", "'")):
        if w in _STOP or w.isdigit():
            continue
        if len(w) >= 4 or (len(w) >= 2 and not w.isascii()):
            out.append(w)
    return out


def _event_text(e: Event) -> str:
    parts = [e.text]
    for u in e.tool_uses:
        parts.extend(_strings(u.input))
    for r in e.tool_results:
        parts.append(_result_text(r))
    return "\n".join(parts)


def _outcome_facts(events: Sequence[Event], requests: Sequence[Event]) -> list[tuple[str, int]]:
    """(rarest words of the closing message, its seq) per user turn."""
    df: dict[str, int] = {}
    for e in events:
        for w in set(_words(_event_text(e))):
            df[w] = df.get(w, 0) + 1
    asked = {w for r in requests for w in _words(r.text)}
    starts = [i for i, e in enumerate(events) if e.kind == "message" and _genuine(e)]
    out = []
    for n, i in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(events)
        closing = next((e for e in reversed(events[i + 1:end])
                        if e.role == "assistant" and e.text.strip()), None)
        if closing is None:
            continue
        words: list[str] = []
        for w in _words(closing.text):
            if w not in asked and w not in words:
                words.append(w)
        order = {w: k for k, w in enumerate(words)}
        best = sorted(words, key=lambda w: (df.get(w, 0), order[w]))[:OUTCOME_WORDS]
        if best:
            out.append((" ".join(sorted(best, key=order.get)), closing.seq))
    return out


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n", text) if s.strip()]


def extract_facts(events: Sequence[Event]) -> list[Fact]:
    """The key facts of a transcript, deduplicated by (kind, key), in transcript order."""
    facts: list[Fact] = []
    seen: set[tuple[str, str]] = set()

    def add(kind: str, key: str, seq: int) -> None:
        key = key.strip()
        if key and (kind, key) not in seen:
            seen.add((kind, key))
            facts.append(Fact(kind=kind, key=key, seq=seq))

    results: dict[str, ToolResultBlock] = {}
    for e in events:
        for r in e.tool_results:
            results.setdefault(r.tool_use_id, r)

    requests = [e for e in events if e.kind == "message" and _genuine(e)]
    if requests:
        add("first_request", requests[0].text.strip()[:REQUEST_KEY_CHARS], requests[0].seq)
        add("latest_request", requests[-1].text.strip()[:REQUEST_KEY_CHARS], requests[-1].seq)
    for e in requests:
        for s in _sentences(e.text):
            if _CONSTRAINT_WORDS.search(s.replace("\u2019", "'")):
                add("constraint", s, e.seq)
        for url in _URL.findall(e.text):
            add("user_url", url.rstrip(".,;:!?"), e.seq)

    tests: list[tuple[str, bool, int]] = []
    runs: list[tuple[str, bool, int, ToolUseBlock, str]] = []  # (command, failed, seq, call, output)
    for e in events:
        if e.kind != "message":
            continue
        if e.role != "user" or not e.is_user_request:
            for m in _AIDER_APPLIED.finditer(e.text):
                add("file_changed", m.group(1), e.seq)
        for u in e.tool_uses:
            r = results.get(u.id)
            if r is None:
                add("pending_call", u.id, e.seq)
                continue
            text = _result_text(r)
            failed = _failed(r, text)
            for m in _AIDER_APPLIED.finditer(text):
                add("file_changed", m.group(1), e.seq)
            cmd = _shell_command(u)
            if not failed:
                for p in _changed_paths(u) + (_shell_writes(cmd) if cmd else []):
                    add("file_changed", p, e.seq)
            if cmd:
                runs.append((normalize(cmd), failed, e.seq, u, text))
            if cmd and _TEST_CMD.search(cmd):
                tests.append((cmd.strip().split("\n")[0], failed or bool(_TEST_FAILED.search(text)), e.seq))
        for r in e.tool_results:
            text = _result_text(r)
            names = _ERR_NAME.findall(text) if _failed(r, text) else _ERR_LINE_START.findall(text)
            for n in names:
                add("error", n, e.seq)
            if _failed(r, text):
                line = cause_line(text, r.is_error)
                if line:
                    add("error_cause", line, e.seq)
    for text, seq in _written_texts(events, results):
        for m in _CONST_LINE.finditer(text):
            add("constant", f"{m.group(1)} = {m.group(2).strip(chr(34) + chr(39))}", seq)
        for m in _DATA_LITERAL.finditer(text):
            add("data_file", m.group(1), seq)
    for cmd, failed, seq in tests:
        if failed:
            add("failed_test", cmd, seq)
    if tests:
        add("last_test", tests[-1][0], tests[-1][2])
    for f in _resolutions(runs):
        if ("resolution", f.key) not in seen:
            seen.add(("resolution", f.key))
            facts.append(f)
    for key, seq in _outcome_facts(events, requests):
        add("turn_outcome", key, seq)
    return facts


def _written_texts(events: Sequence[Event], results: dict[str, ToolResultBlock]) -> list[tuple[str, int]]:
    """(text, seq) the agent wrote into files by successful tool calls or aider blocks."""
    out: list[tuple[str, int]] = []
    for e in events:
        if e.kind != "message" or e.role != "assistant":
            continue
        if ">>>>>>> REPLACE" in e.text:
            out += [(m.group(1), e.seq) for m in _AIDER_REPLACE.finditer(e.text)]
        for u in e.tool_uses:
            r = results.get(u.id)
            if r is None or _failed(r, _result_text(r)):
                continue
            for k in _WRITE_FIELDS:
                v = u.input.get(k)
                if isinstance(v, str):
                    out.append((v, e.seq))
            for s in _strings(u.input):
                if "*** Begin Patch" in s:
                    out.append(("\n".join(ln[1:] for ln in s.splitlines() if ln.startswith("+")), e.seq))
    return out


def _constant_recalled(fact: Fact, hay: str) -> bool:
    name, _, value = fact.key.partition(" = ")
    value = normalize(value)
    start = hay.find(name)
    while start >= 0:
        if value in hay[start + len(name): start + len(name) + CONSTANT_WINDOW]:
            return True
        start = hay.find(name, start + 1)
    return False


def _resolutions(runs: Sequence[tuple[str, bool, int, ToolUseBlock, str]]) -> list[Fact]:
    """A failed command that later ran again, identical, and succeeded: one fact each."""
    out: list[Fact] = []
    failed_cmds: set[str] = set()
    for cmd, failed, seq, call, output in runs:
        if failed or _TEST_FAILED.search(output) and _TEST_CMD.search(cmd):
            failed_cmds.add(cmd)
        elif cmd in failed_cmds:
            failed_cmds.discard(cmd)
            head = _clip(" ".join(ln for ln in output.splitlines() if not _HARNESS_LINE.match(ln)), 40)
            out.append(Fact(kind="resolution", key=_clip(cmd, 120),
                            seq=seq, evidence=[call.id] + ([head] if head else [])))
    return out


def view_haystack(view: Iterable[Event]) -> str:
    """Everything a model would read in a view, as plain text (tool inputs unescaped)."""
    parts: list[str] = []
    for e in view:
        for b in e.blocks:
            if isinstance(b, TextBlock):
                parts.append(b.text)
            elif isinstance(b, CompactionBlock):
                parts.append(b.content or (json.dumps(b.raw) if b.raw else ""))
            elif isinstance(b, ThinkingBlock):
                parts.append(b.thinking)
            elif isinstance(b, ToolUseBlock):
                parts.append(f"{b.id} {b.name}")
                parts.extend(_strings(b.input))
            elif isinstance(b, ToolResultBlock):
                parts.append(b.tool_use_id)
                for c in b.content:
                    if isinstance(c, TextBlock):
                        parts.append(c.text)
                    elif isinstance(c, ArtifactRefBlock):
                        parts.append(render_artifact_ref(c))
            elif isinstance(b, ArtifactRefBlock):
                parts.append(render_artifact_ref(b))
    return normalize("\n".join(parts))


class Haystack:
    """A view's normalized text, with the lowercase word set turn outcomes are matched on."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._words: set[str] | None = None

    @property
    def words(self) -> set[str]:
        if self._words is None:
            self._words = set(_words(self.text))
        return self._words


def _resolution_recalled(fact: Fact, hay: str) -> bool:
    if fact.evidence and all(normalize(x) in hay for x in fact.evidence):
        return True  # the successful run itself is in the view
    key = normalize(fact.key)
    start = hay.find(key)
    while start >= 0:
        after = hay[start + len(key): start + len(key) + RESOLUTION_WINDOW]
        ok, bad = _SUCCESS_WORDS.search(after), _FAILURE_WORDS.search(after)
        if ok and (bad is None or ok.start() < bad.start()) or _RESOLVED.search(after):
            return True
        if _RESOLVED.search(hay[max(0, start - 80): start]):
            return True
        start = hay.find(key, start + 1)
    return False


def recalled(fact: Fact, haystack: str | Haystack) -> bool:
    """True when the view carries the fact, by the rule of its kind (module docstring)."""
    hay = haystack if isinstance(haystack, Haystack) else Haystack(haystack)
    if fact.kind == "resolution":
        return _resolution_recalled(fact, hay.text)
    if fact.kind == "constant":
        return _constant_recalled(fact, hay.text)
    if fact.kind == "turn_outcome":
        words = fact.key.split()
        return sum(w in hay.words for w in words) * 2 > len(words)
    return normalize(fact.key) in hay.text


def recall(facts: Sequence[Fact], haystack: str | Haystack) -> tuple[float, dict[str, tuple[int, int]]]:
    """(overall recall, kind -> (recalled, total)); 1.0 when there are no facts."""
    hay = haystack if isinstance(haystack, Haystack) else Haystack(haystack)
    per: dict[str, tuple[int, int]] = {}
    hit = 0
    for f in facts:
        ok = recalled(f, hay)
        hit += ok
        a, b = per.get(f.kind, (0, 0))
        per[f.kind] = (a + ok, b + 1)
    return (hit / len(facts) if facts else 1.0), per
