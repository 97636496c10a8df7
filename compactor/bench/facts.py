"""Key facts a continuing agent needs, extracted from an ORIGINAL transcript for grading.

This extractor is deliberately independent of ``compactor.lift``: it has its own short rules
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
)
REQUEST_KEY_CHARS = 300

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
_URL = re.compile(r"https?://[^\s)\]>\"'`]+")
_WRAPPED = re.compile(r"(?s)^\s*<([\w-]+)>.*</\1>\s*$")


class Fact(BaseModel):
    kind: str
    key: str
    seq: int = 0


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
            if not failed:
                for p in _changed_paths(u):
                    add("file_changed", p, e.seq)
            cmd = _shell_command(u)
            if cmd and _TEST_CMD.search(cmd):
                tests.append((cmd.strip().split("\n")[0], failed or bool(_TEST_FAILED.search(text)), e.seq))
        for r in e.tool_results:
            text = _result_text(r)
            names = _ERR_NAME.findall(text) if _failed(r, text) else _ERR_LINE_START.findall(text)
            for n in names:
                add("error", n, e.seq)
    for cmd, failed, seq in tests:
        if failed:
            add("failed_test", cmd, seq)
    if tests:
        add("last_test", tests[-1][0], tests[-1][2])
    return facts


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


def recalled(fact: Fact, haystack: str) -> bool:
    """True when the fact's identifying string appears in a normalized haystack."""
    return normalize(fact.key) in haystack


def recall(facts: Sequence[Fact], haystack: str) -> tuple[float, dict[str, tuple[int, int]]]:
    """(overall recall, kind -> (recalled, total)); 1.0 when there are no facts."""
    per: dict[str, tuple[int, int]] = {}
    hit = 0
    for f in facts:
        ok = recalled(f, haystack)
        hit += ok
        a, b = per.get(f.kind, (0, 0))
        per[f.kind] = (a + ok, b + 1)
    return (hit / len(facts) if facts else 1.0), per
