"""Deterministic state lifting: what a continuing agent must know, pulled out of events.

``lift_state`` reads a range of canonical events (optionally on top of the previous
checkpoint's state, so compaction k+1 reads checkpoint k plus the events after it, never the
whole log again) and returns a ``LiftedState``: the goal and every genuine user request,
constraints quoted verbatim, decisions, files read and changed, commands with exit status,
test runs, errors and failed approaches, actions whose outcome is unknown, the agent's latest
plan/todos, artifacts and the URLs the user gave.

Rules are plain regexes and tool-name tables, no model calls: the same events always lift to
the same state, which is what lets the structured summarizer and the validator agree.

An action whose tool_use has no tool_result in the events is recorded only under
``unknown_actions``; it is never listed as a command run or a file changed. ``reconcile``
moves such an action to the done lists when its result arrives after the snapshot, so nothing
reads as pending and done at once.
"""

from __future__ import annotations

import json
import re
import shlex
from bisect import bisect_right
from typing import Any, Iterable, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from compactor.events import (
    ArtifactRefBlock,
    Event,
    ImageBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from compactor import digests as _digests
from compactor import failures as _failures
from compactor.constraints import is_question, own_lines
from compactor.shell import plausible_path, scripts_of, shell_files
from compactor.narrative import NarrativeAcc, Reason, TurnOutcome
from compactor.tokens import count_text

LONG_REQUEST_TOKENS = 2_000
"""Requests longer than this are kept as a head quote plus a pointer to the log."""
LONG_REQUEST_QUOTE_CHARS = 3_000
MAX_ITEM_CHARS = 300
"""Commands, messages and decisions are cut to this many characters in the state."""
MAX_CONSTRAINT_CHARS = 1_500
MAX_DECISIONS = 40
MAX_ERRORS_PER_RESULT = 3


class _Item(BaseModel):
    model_config = ConfigDict(frozen=True)


# --- item models ------------------------------------------------------------------------------


class Request(_Item):
    seq: int = Field(description="Seq of the user event.")
    text: str = Field(description="Verbatim text, or a head quote when ``truncated``.")
    tokens: int = Field(default=0, description="Tokens of the full request text.")
    truncated: bool = Field(default=False, description="True when only a head quote is kept.")


class Constraint(_Item):
    seq: int
    text: str = Field(description="The user's sentence, verbatim.")


class Decision(_Item):
    seq: int
    text: str


class FileRef(_Item):
    path: str
    seq: int = Field(description="Seq of the latest event that touched the file.")
    ops: list[str] = Field(default_factory=list, description="Operations, deduplicated, in order.")
    count: int = 1
    tool_use_id: str | None = None
    digest: str = Field(default="", description="What the latest change put in the file, short.")


CommandStatus = Literal["ok", "failed", "unknown"]


class Command(_Item):
    seq: int = Field(description="Seq of the tool_use (or the text line that ran it).")
    command: str
    tool: str = ""
    tool_use_id: str | None = None
    exit_code: int | None = None
    status: CommandStatus = "unknown"
    result_seq: int | None = Field(default=None, description="Seq of the result, if any.")


TestStatus = Literal["passed", "failed", "unknown"]


class TestRun(_Item):
    __test__ = False  # not a pytest class

    seq: int
    command: str
    tool_use_id: str | None = None
    status: TestStatus = "unknown"
    exit_code: int | None = None
    summary: str = Field(default="", description="Runner summary line, e.g. '2 failed, 9 passed'.")
    result_seq: int | None = Field(default=None, description="The log version the run reported at.")


class ErrorItem(_Item):
    seq: int
    name: str = Field(description="Error name, e.g. TypeError, or 'error' when unnamed.")
    message: str = Field(default="", description="The line that reported it, cut short.")
    tool_use_id: str | None = None


class FailedApproach(_Item):
    seq: int
    what: str = Field(description="The action that failed (command, tool + target) or a statement.")
    error: str = ""
    tool_use_id: str | None = None
    cause: str = Field(default="", description="The most telling line(s) of the output.")
    next: str = Field(default="", description="The agent's next move after the failure, with its seq.")
    resolved_at: int | None = Field(
        default=None, description="Seq of a later successful run of the same action; None = open.")
    result_seq: int | None = Field(default=None, description="Seq of the failed result.")
    key: str = Field(default="", description="The action normalized, to match a later run.")


ActionKind = Literal["command", "read", "change", "todo", "other"]


class UnknownAction(_Item):
    """A tool call whose result is not in the log: it may or may not have happened."""

    seq: int
    tool_use_id: str
    name: str
    kind: ActionKind = "other"
    summary: str = Field(description="Name and key arguments, for people.")
    command: str | None = None
    paths: list[str] = Field(default_factory=list, description="Files it would change (or read).")
    reads: list[str] = Field(default_factory=list, description="Files a shell command would read.")
    is_test: bool = False
    digests: dict[str, str] = Field(default_factory=dict, description="File -> what it would put there.")


class Todo(_Item):
    text: str
    status: str = ""


class Artifact(_Item):
    uri: str
    sha256: str
    bytes: int = 0
    seq: int = 0


class Url(_Item):
    url: str
    seq: int


class LiftedState(BaseModel):
    """Everything lifted from a covered range; stored in ``Checkpoint.state`` as JSON."""

    goal: Request | None = Field(default=None, description="The first genuine user request.")
    requests: list[Request] = Field(default_factory=list)
    constraints: list[Constraint] = Field(default_factory=list)
    decisions: list[Decision] = Field(default_factory=list)
    files_read: list[FileRef] = Field(default_factory=list)
    files_changed: list[FileRef] = Field(default_factory=list)
    commands: list[Command] = Field(default_factory=list)
    tests: list[TestRun] = Field(default_factory=list)
    errors: list[ErrorItem] = Field(default_factory=list)
    failed_approaches: list[FailedApproach] = Field(default_factory=list)
    unknown_actions: list[UnknownAction] = Field(default_factory=list)
    todos: list[Todo] = Field(default_factory=list, description="Latest plan/todo list.")
    todos_seq: int = Field(default=0, description="Seq of the event that set ``todos``.")
    artifacts: list[Artifact] = Field(default_factory=list)
    urls: list[Url] = Field(default_factory=list, description="URLs the user gave.")
    covers_end: int = Field(default=0, description="Last seq folded into this state.")
    outcomes: list[TurnOutcome] = Field(
        default_factory=list,
        description="The agent's closing report of each user turn, clipped (compactor.narrative).",
    )
    reasons: list[Reason] = Field(
        default_factory=list,
        description="Sentences where the agent gave a reason or stated a rule or number.",
    )

    @property
    def latest_request(self) -> Request | None:
        return self.requests[-1] if self.requests else None


# --- text rules -------------------------------------------------------------------------------

_INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<system-reminder>",
    "Caveat: The messages below were generated",
)

_CONSTRAINT_RE = re.compile(
    r"\b(never|don'?t|do not|does not|must not|mustn'?t|should not|shouldn'?t|can'?t|cannot|"
    r"avoid|only|without|always|must|no longer|not allowed|make sure|ensure|instead of|"
    r"no more than|at most|at least|required?|important|prefer)\b"
    r"|절대|무조건|반드시|하지\s?마|금지",
    re.IGNORECASE,
)
_SENTENCE_GAP_RE = re.compile(r"(?<=[.!?])[ \t]+(?=\S)")

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
_URL_RE = re.compile(r"https?://[^\s<>\"'`)\]}]+")

_EXIT_RES = [
    re.compile(r"Process exited with code (-?\d+)"),
    re.compile(r"Command exited with code (-?\d+)"),
    re.compile(r"(?m)^Exit code:?\s*(-?\d+)"),
    re.compile(r"(?i)\bexit(?:ed)?(?: with)? (?:status|code)[:= ]+(-?\d+)"),
    re.compile(r"(?i)\breturn ?code[:= ]+(-?\d+)"),
]
_ERROR_LINE_RE = re.compile(
    r"^\s*(?:E\s+|E\d{3}\s+|-\s+E\d{3}\s+)?((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Interrupt))\b"
)
_ERROR_ANY_RE = re.compile(r"\b((?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception))\b")
_RUST_ERR_RE = re.compile(r"\berror\[(E\d{4})\]")
_TS_ERR_RE = re.compile(r"\berror (TS\d{3,5})\b")
_GO_PANIC_RE = re.compile(r"^panic: ", re.MULTILINE)
_TRACEBACK = "Traceback (most recent call last)"

_TEST_RE = re.compile(
    r"(?:^|[\s;&|(/])(pytest|py\.test|tox|nox|unittest|nosetests|"
    r"(?:npm|pnpm|yarn|bun)(?: run)? test(?::\w+)?|npx (?:jest|vitest|mocha|playwright test)|"
    r"jest|vitest|mocha|go test|cargo test|cargo nextest|make (?:test|check)\w*|"
    r"mvn test|gradle(?:w)? test|\./gradlew test|dotnet test|rspec|phpunit|ctest|deno test|"
    r"bundle exec rspec|mix test|swift test|runtests?\.py|manage\.py test)\b"
)
_PYTEST_SUMMARY_RE = re.compile(
    r"(?m)^=+ ?((?:\d+ \w+(?:, )?)+.*?) in [\d.]+s.*?=+\s*$"
)
_SUMMARY_LINE_RES = [
    re.compile(r"(?m)^(test result: .*)$"),  # cargo
    re.compile(r"(?m)^(Tests?:\s+.*)$"),  # jest
    re.compile(r"(?m)^((?:FAIL|ok)\s+\S+.*)$"),  # go
    re.compile(r"(?m)^(Ran \d+ tests? in .*)$"),  # unittest
    re.compile(r"(?m)^(FAILED \(.*\)|OK(?: \(.*\))?)$"),  # unittest
]

_SHELL_TOOLS = {
    "bash", "shell", "exec_command", "shell_command", "local_shell", "run_command",
    "execute_command", "run_terminal_cmd", "terminal", "run_shell_command", "command",
    "execute_bash", "cmd", "powershell", "sh", "exec",
}
_READ_TOOLS = {
    "read", "read_file", "view", "view_file", "open", "cat", "notebookread", "read_many_files",
    "open_file", "readfile", "file_read", "get_file", "goto",
}
_WRITE_TOOLS = {
    "write", "write_file", "edit", "multiedit", "notebookedit", "create", "create_file",
    "replace", "str_replace", "insert", "apply_patch", "patch", "edit_file", "search_replace",
    "replace_in_file", "writefile", "file_write", "file_edit", "apply_diff", "update_file",
    "delete_file", "remove_file", "append", "rename_file", "move_file",
}
_PATH_KEYS = ("file_path", "filePath", "path", "filename", "file", "target_file",
              "notebook_path", "absolute_path", "relative_path", "file_name")
_APPLIED_EDIT_RE = re.compile(r"^(?:>\s*)?Applied edit to (.+?)\s*$", re.MULTILINE)
_AIDER_RUNNING_RE = re.compile(r"^>\s*Running (.+?)\s*$", re.MULTILINE)
_SWE_FILE_HEADER_RE = re.compile(r"^\[File: (.+?) \(\d+ lines total\)\]", re.MULTILINE)
_SWE_OPEN_FILE_RE = re.compile(r"\(Open file: (.+?)\)")
_SWE_EDIT_FAILED = "Your proposed edit has introduced new syntax error"
_SWE_READ = {"open", "goto"}
_SWE_CHANGE = {"create", "edit", "insert", "append"}


def _clip(text: str, n: int = MAX_ITEM_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _one_line(text: str, n: int = MAX_ITEM_CHARS) -> str:
    return _clip(" ".join(text.split()), n)


def looks_injected(text: str) -> bool:
    """Harness-written text that some importers still mark as a user message."""
    t = text.lstrip()
    return any(t.startswith(p) for p in _INJECTED_PREFIXES)


def is_genuine_request(e: Event) -> bool:
    return e.is_user_request and not looks_injected(e.text)


_ABBREV_END_RE = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|Mr|Mrs|Dr|No)\.|\b[A-Z]\.)$")


def split_sentences(text: str) -> list[str]:
    """Sentences and lines of ``text``, each stripped, otherwise verbatim.

    A split right after an abbreviation ("e.g.", "i.e.", "etc.") is undone, so a rule is not
    cut in the middle.
    """
    out: list[str] = []
    for line in text.splitlines():
        start = 0
        cuts = [m.start() for m in _SENTENCE_GAP_RE.finditer(line)] + [len(line)]
        for cut in cuts:
            piece = line[start:cut].strip()
            if piece and not _ABBREV_END_RE.search(piece) or cut == len(line):
                if piece:
                    out.append(piece)
                start = cut
    return out


def constraint_sentences(text: str) -> list[str]:
    """Sentences of a user request that state a rule: negations, 'only', 'always', 'must'...

    Questions and pasted output (logs, errors, code, fenced blocks) state no rule and are
    skipped. The validator recomputes constraints with this same function.
    """
    out: list[str] = []
    for s in split_sentences("\n".join(own_lines(text))):
        probe = s.replace("\u2019", "'").replace("\u2018", "'")
        if _CONSTRAINT_RE.search(probe) and len(s) <= MAX_CONSTRAINT_CHARS and not is_question(probe):
            out.append(s)
    return out


def parse_exit_code(text: str) -> int | None:
    for rx in _EXIT_RES:
        m = rx.search(text)
        if m:
            return int(m.group(1))
    return None


def is_test_command(command: str) -> bool:
    return bool(_TEST_RE.search(command))


def user_urls(text: str) -> list[str]:
    return [u.rstrip(".,;:!?'\"") for u in _URL_RE.findall(text)]


def error_names(text: str, failed: bool) -> list[tuple[str, str]]:
    """(name, line) pairs for errors reported in a tool result.

    In a successful result only lines that *start* with an error name count (a traceback's
    last line, ``E   TypeError``), so reading source code full of ``raise ValueError`` does
    not invent errors; in a failed result any mention counts.
    """
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    lines = text.splitlines()

    def scan(match_any: bool) -> None:
        for line in lines:
            if len(found) >= MAX_ERRORS_PER_RESULT:
                return
            m = _ERROR_LINE_RE.match(line) or (_ERROR_ANY_RE.search(line) if match_any else None)
            name = m.group(1) if m else None
            if name is None:
                m2 = _RUST_ERR_RE.search(line) or _TS_ERR_RE.search(line)
                name = m2.group(1) if m2 else None
            if name and name not in seen:
                seen.add(name)
                found.append((name, _one_line(line, 200)))

    # Lines that start with the name (a traceback's last line) say the most; mentions
    # elsewhere in a failed result (e.g. a code listing around the failure) only count
    # when nothing better was found.
    scan(False)
    if failed and not found:
        scan(True)
    if not found and _GO_PANIC_RE.search(text):
        line = next(ln for ln in lines if ln.startswith("panic: "))
        found.append(("panic", _one_line(line, 200)))
    return found


# --- tool classification ----------------------------------------------------------------------


class _Action(BaseModel):
    """What a tool_use is, independent of its result."""

    kind: ActionKind = "other"
    tool: str
    command: str | None = None
    paths: list[str] = Field(default_factory=list)
    change_op: str = ""
    is_test: bool = False
    reads: list[str] = Field(default_factory=list)  # files a shell command reads
    shell_ops: dict[str, str] = Field(default_factory=dict)  # file -> how a shell command changed it
    swe_edit: bool = False  # SWE-agent `edit`: the file is the one open, named by the result
    digests: dict[str, str] = Field(default_factory=dict)  # file -> what this call put there
    todos: list[Todo] | None = None
    summary: str = ""


def _str_values(obj: Any) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _str_values(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _str_values(v)


def _command_of(inp: dict[str, Any]) -> str | None:
    for key in ("command", "cmd", "script", "code", "input"):
        v = inp.get(key)
        if isinstance(v, str) and v.strip():
            return v.strip()
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            # Codex `shell`: ["bash", "-lc", "..."]
            if len(v) >= 3 and v[1] in ("-lc", "-c"):
                return v[2].strip()
            return " ".join(shlex.quote(x) for x in v)
    return None


_PATH_SUFFIX_RE = re.compile(r"(?::\d+(?:-\d+)?)?(?::raw)?$")


def _clean_path(p: str) -> str:
    """Drop the line-range / mode suffixes some read tools accept (pi: ``file.py:10-40:raw``)."""
    return _PATH_SUFFIX_RE.sub("", p.strip()) or p.strip()


def _path_of(inp: dict[str, Any]) -> list[str]:
    for key in _PATH_KEYS:
        v = inp.get(key)
        if isinstance(v, str) and v.strip():
            return [_clean_path(v)]
    v = inp.get("paths") or inp.get("file_paths")
    if isinstance(v, list):
        return [_clean_path(x) for x in v if isinstance(x, str)]
    return []


def _patch_files(inp: dict[str, Any]) -> list[_digests.PatchFile]:
    """Files named by Codex patch envelopes anywhere in a tool input (apply_patch, heredocs).

    Strings stored with literal ``\\n`` separators are decoded first; a path is kept only
    when it occurs verbatim in the input and reads as a path.
    """
    out: list[_digests.PatchFile] = []
    for s in _str_values(inp):
        if "*** " not in s:
            continue
        for script in scripts_of(s):
            for pf in _digests.parse_patch(script):
                if plausible_path(pf.path) and pf.path in s:
                    out.append(pf)
    return out


def _dedupe(xs: Iterable[str]) -> list[str]:
    out: list[str] = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out


def _todos_of(inp: dict[str, Any]) -> list[Todo] | None:
    for key in ("todos", "plan", "items", "tasks", "steps"):
        v = inp.get(key)
        if isinstance(v, list):
            out: list[Todo] = []
            for item in v:
                if isinstance(item, str):
                    out.append(Todo(text=_one_line(item)))
                elif isinstance(item, dict):
                    text = next(
                        (item[k] for k in ("content", "step", "description", "title", "text", "task",
                                           "name") if isinstance(item.get(k), str)),
                        None,
                    )
                    if text is None:
                        continue
                    status = item.get("status") or item.get("state") or ""
                    if isinstance(status, bool):
                        status = "completed" if status else "pending"
                    out.append(Todo(text=_one_line(text), status=str(status)))
            return out
    return None


def _swe_command(command: str) -> tuple[str, list[str]] | None:
    """SWE-agent's special commands: (verb, paths) for open/create/edit..."""
    first, _, rest = command.partition("\n")
    toks = first.split()
    if not toks:
        return None
    verb = toks[0]
    if verb in _SWE_READ:
        args = [t.strip("'\"") for t in toks[1:2]]
        return verb, [a for a in args if a and not a.isdigit()]
    if verb == "create":
        return verb, [t.strip("'\"") for t in toks[1:2]]
    if verb in ("edit", "insert", "append") and (
        len(toks) == 1 or re.match(r"^\d+(:\d+)?$", toks[1]) or toks[1].startswith(("'", '"'))
    ):
        return verb, []
    if verb in ("submit", "scroll_down", "scroll_up", "find_file", "search_dir", "search_file"):
        return verb, []
    return None


def _input_digests(paths: list[str], op: str, inp: dict[str, Any]) -> dict[str, str]:
    """{path: digest} for a one-file tool call; key "" when the file is named by the result."""
    if len(paths) > 1:
        return {}
    path = paths[0] if paths else ""
    digest = _digests.input_digest(path, op, inp)
    return {path: digest} if digest else {}


def first_line_args(command: str) -> str:
    """SWE-agent ``edit 10:12``: the arguments on the command's first line."""
    return " ".join(command.split("\n", 1)[0].split()[1:])


def classify(use: ToolUseBlock, open_file: str | None = None) -> _Action:
    """What a tool_use does: run a command, read files, change files, set todos."""
    name = use.name
    low = name.lower().replace("-", "_")
    inp = use.input if isinstance(use.input, dict) else {}
    act = _Action(tool=name)

    todos = _todos_of(inp) if ("todo" in low or "plan" in low or "task" in low) else None
    if todos is not None:
        act.kind = "todo"
        act.todos = todos
        act.summary = f"{name} ({len(todos)} items)"
        return act

    # Patches anywhere in the input (Codex apply_patch, shell heredocs) name changed files.
    patches = _patch_files(inp)
    patch_files = _dedupe(pf.path for pf in patches)

    if low == "str_replace_editor" or low == "str_replace_based_edit_tool" or low == "text_editor":
        sub = str(inp.get("command", ""))
        paths = _path_of(inp)
        if sub == "view":
            act.kind, act.paths = "read", paths
        else:
            act.kind, act.paths, act.change_op = "change", paths, sub or "edit"
            act.digests = _input_digests(paths, act.change_op, inp)
        act.summary = f"{name} {sub} {' '.join(paths)}".strip()
        return act

    if patch_files and (low in _WRITE_TOOLS or low in _SHELL_TOOLS or "patch" in low):
        act.kind, act.paths, act.change_op = "change", patch_files, "patch"
        act.digests = {pf.path: pf.digest() for pf in patches}  # the last hunk for a file wins
        command = _command_of(inp) if low in _SHELL_TOOLS else None
        act.command = _clip(command) if command else None
        act.summary = f"{name} {', '.join(patch_files)}"
        return act

    if low in _WRITE_TOOLS or low.endswith(("_write", "_edit")):
        paths = _path_of(inp) or patch_files
        if low in ("edit", "insert", "append") and not paths:
            # SWE-agent function-calling `edit`/`insert`: acts on the open file
            act.swe_edit = True
            paths = [open_file] if open_file else []
        if low == "create" and not paths:
            paths = [str(inp.get("filename", ""))] if inp.get("filename") else []
        act.kind, act.paths = "change", paths
        act.change_op = {"write": "write", "create": "create", "create_file": "create",
                         "write_file": "write", "delete_file": "delete", "remove_file": "delete",
                         "multiedit": "edit"}.get(low, "edit" if "patch" not in low else "patch")
        act.digests = _input_digests(paths, act.change_op if low not in ("insert", "append") else low, inp)
        act.summary = f"{name} {' '.join(paths)}".strip()
        return act

    if low in _READ_TOOLS:
        paths = _path_of(inp)
        act.kind, act.paths = "read", [p for p in paths if not p.startswith(("http://", "https://"))]
        act.summary = f"{name} {' '.join(paths)}".strip()
        return act

    command = _command_of(inp) if (low in _SHELL_TOOLS or "command" in inp or "cmd" in inp) else None
    if command is not None and low not in ("str_replace_editor",):
        swe = _swe_command(command)
        if swe is not None and low not in ("exec_command", "shell_command", "shell"):
            verb, paths = swe
            if verb in _SWE_READ:
                act.kind, act.paths = "read", paths
            elif verb in _SWE_CHANGE:
                act.kind, act.change_op = "change", "create" if verb == "create" else "edit"
                act.paths = paths or ([open_file] if open_file else [])
                act.swe_edit = verb != "create"
                body = command.split("\n", 1)[1] if "\n" in command else ""
                body = body.split("end_of_edit", 1)[0]
                if body.strip():
                    act.digests = {(act.paths[0] if act.paths else ""): _digests.lines_digest(
                        act.paths[0] if act.paths else "", [], [x for x in body.splitlines() if x.strip()],
                        f"{verb} {first_line_args(command)}: ")}
            else:
                act.kind = "command"
            act.command = _clip(command.split("\n", 1)[0])
            act.summary = act.command
            return act
        act.kind = "command"
        act.command = _clip(command)
        act.is_test = is_test_command(command)
        files = shell_files(command)
        reads, changes = files.reads, files.changes
        act.paths = list(changes)
        act.shell_ops = changes
        act.digests = {p: _digests.write_digest(p, text, append=changes[p].endswith(("append", "-a")))
                       for p, text in files.writes.items()}
        act.change_op = "shell"
        act.reads = reads
        act.summary = f"{name}: {_one_line(command, 160)}"
        return act

    # Anything else: keep its name and the most telling argument for people.
    arg = ""
    for key in ("query", "url", "pattern", "path", "file_path", "action", "name"):
        v = inp.get(key)
        if isinstance(v, str) and v:
            arg = v
            break
    act.summary = _one_line(f"{name} {arg}".strip(), 200)
    return act


# --- result evaluation ------------------------------------------------------------------------


class _Outcome(BaseModel):
    failed: bool
    exit_code: int | None = None
    error_line: str = ""
    text: str = ""


def _result_text(r: ToolResultBlock) -> str:
    parts: list[str] = []
    for c in r.content:
        if isinstance(c, ArtifactRefBlock):
            parts.append(c.preview_head)
            parts.append(c.preview_tail)
        elif hasattr(c, "text"):
            parts.append(c.text)  # type: ignore[union-attr]
    return "\n".join(parts)


def _outcome(r: ToolResultBlock) -> _Outcome:
    text = _result_text(r)
    code = parse_exit_code(text[:600]) if text else None
    if code is None and text:
        code = parse_exit_code(text[-400:])
    failed = r.is_error or (code is not None and code != 0)
    if not failed and code is None and (_TRACEBACK in text or _SWE_EDIT_FAILED in text):
        failed = True
    line = ""
    if failed:
        line = next((ln.strip() for ln in text.splitlines() if _ERROR_LINE_RE.match(ln)), "")
        for ln in ([] if line else text.splitlines()):
            s = ln.strip()
            if not s or s.startswith(("Chunk ID", "Wall time", "Process exited", "Exit code",
                                      "Original token count", "Output:", "Command exited")):
                continue
            if _ERROR_ANY_RE.search(s) or re.search(r"(?i)\berror\b|denied|not found|no such|fail", s):
                line = s
                break
        if not line:
            line = next((ln.strip() for ln in text.splitlines() if ln.strip()
                         and not ln.startswith(("Chunk ID", "Wall time", "Process exited",
                                                "Original token count", "Output:"))), "")
    return _Outcome(failed=failed, exit_code=code, error_line=_one_line(line, 200), text=text)


def _test_summary(text: str) -> str:
    ms = _PYTEST_SUMMARY_RE.findall(text)
    if ms:
        return _one_line(ms[-1], 160)
    for rx in _SUMMARY_LINE_RES:
        found = rx.findall(text)
        if found:
            return _one_line(found[-1], 160)
    return ""


_FAIL_SUMMARY_RE = re.compile(r"\b[1-9]\d* (?:failed|failures?|errors?)\b|^FAIL|FAILED|test result: FAILED",
                              re.IGNORECASE)


def _test_status(out: _Outcome, summary: str) -> TestStatus:
    if out.failed or (summary and _FAIL_SUMMARY_RE.search(summary)):
        return "failed"
    if out.exit_code == 0 or summary:
        return "passed"
    return "unknown"


# --- accumulation -----------------------------------------------------------------------------


class _Acc:
    """Mutable builder; dedupes while keeping first-seen order."""

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
        self.narrative = NarrativeAcc(list(p.outcomes), list(p.reasons),
                                      p.requests[-1].seq if p.requests else 0)
        self.open_file: str | None = None
        self._aider_digests: dict[str, str] = {}  # path -> digest of the last aider reply's blocks
        self._req_seqs = {r.seq for r in self.requests}
        self._constraint_keys = {_norm(c.text) for c in self.constraints}
        self._decision_keys = {_norm(d.text) for d in self.decisions}
        self._error_keys = {(e.name, e.message) for e in self.errors}
        self._command_ids = {c.tool_use_id for c in self.commands if c.tool_use_id}
        self._test_ids = {t.tool_use_id for t in self.tests if t.tool_use_id}
        self._failed_keys = {(f.tool_use_id, f.what) for f in self.failed}
        # action key -> seqs of successful runs, and the agent's moves (seq, text, is_call):
        # what resolves a failure and what came next, looked up when the state is built
        self._ok_runs: dict[str, list[int]] = {}
        for c in p.commands:
            if c.status == "ok":
                self._ok_runs.setdefault(_failures.action_key("", c.command, ()), []).append(c.seq)
        self._moves: list[tuple[int, str, bool]] = []

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
    def add_assistant_text(self, e: Event) -> None:
        text = e.text
        sentences = split_sentences(text)
        for s in sentences:
            if len(s) > 400 or len(s) < 12:
                continue
            if _DECISION_RE.search(s.replace("\u2019", "'")):
                key = _norm(s)
                if key not in self._decision_keys:
                    self._decision_keys.add(key)
                    self.decisions.append(Decision(seq=e.seq, text=_clip(s)))
            elif _FAILED_TEXT_RE.search(s.replace("\u2019", "'")):
                self._add_failed(FailedApproach(seq=e.seq, what=_clip(s)))
        self._text_actions(e)
        self.note_move(e.seq, next((s for s in sentences if len(s) >= 12), ""), False)

    def _text_actions(self, e: Event) -> None:
        """Aider writes its actions as text: 'Applied edit to X', '> Running cmd'."""
        text = e.text
        if "<<<<<<< SEARCH" in text:
            self._aider_digests = _digests.aider_digests(text)
        if "Applied edit to" in text:
            for m in _APPLIED_EDIT_RE.finditer(text):
                path = m.group(1)
                digest = self._aider_digests.get(path.strip().strip("`'\""), "")
                self._touch(self.files_changed, path, e.seq, "edit", None, digest)
        if "Running " in text:
            for m in _AIDER_RUNNING_RE.finditer(text):
                cmd = _clip(m.group(1))
                self.commands.append(Command(seq=e.seq, command=cmd, tool="aider"))
                if is_test_command(cmd):
                    self.tests.append(TestRun(seq=e.seq, command=cmd))

    # files ------------------------------------------------------------------------------
    def _touch(self, table: dict[str, FileRef], path: str, seq: int, op: str,
               tool_use_id: str | None, digest: str = "") -> None:
        path = path.strip().strip("`'\"")
        if not path:
            return
        old = table.get(path)
        if old is None:
            table[path] = FileRef(path=path, seq=seq, ops=[op] if op else [], tool_use_id=tool_use_id,
                                  digest=digest)
        else:
            ops = old.ops if (not op or op in old.ops) else [*old.ops, op]
            # the last state wins; a change with no digest (rm, mv, sed -i) makes the old one stale
            latest = seq >= old.seq
            table[path] = FileRef(path=path, seq=max(seq, old.seq), ops=ops, count=old.count + 1,
                                  tool_use_id=tool_use_id or old.tool_use_id,
                                  digest=(digest if latest else old.digest))

    # moves / resolution -----------------------------------------------------------------
    def note_move(self, seq: int, text: str, is_call: bool) -> None:
        """Remember the agent's first move at ``seq`` (for a failure's 'next')."""
        text = text.strip()
        if text and (not self._moves or self._moves[-1][0] < seq):
            self._moves.append((seq, _one_line(text, 200), is_call))

    def _note_ok(self, key: str, seq: int) -> None:
        if key:
            self._ok_runs.setdefault(key, []).append(seq)

    def _annotated_failures(self) -> list[FailedApproach]:
        out: list[FailedApproach] = []
        move_seqs = [m[0] for m in self._moves]
        for f in self.failed:
            after = f.result_seq or f.seq
            upd: dict[str, Any] = {}
            if not f.next:
                i = bisect_right(move_seqs, after)
                if i < len(self._moves):
                    mseq, text, is_call = self._moves[i]
                    upd["next"] = f"{_failures.move_text(text, is_call)} (#{mseq})"
            if f.resolved_at is None and f.key:
                runs = sorted(self._ok_runs.get(f.key, ()))
                suite = _failures.suite_key(f.key) if is_test_command(f.key[4:]) else ""
                if suite:  # a later passing run of the whole suite covers the subset that failed
                    runs = sorted([*runs, *self._ok_runs.get(suite, ())])
                upd["resolved_at"] = _failures.first_after(runs, f.seq)
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
        text = out.text
        m = _SWE_OPEN_FILE_RE.search(text[-600:]) if text else None
        header = _SWE_FILE_HEADER_RE.search(text[:400]) if text else None
        paths = list(act.paths)
        if act.swe_edit and header:
            paths = [header.group(1)]
        if m and m.group(1) not in ("n/a", "None"):
            self.open_file = m.group(1)
        elif header:
            self.open_file = header.group(1)

        if act.kind == "todo" and act.todos is not None:
            if use_seq >= self.todos_seq:
                self.todos = list(act.todos)
                self.todos_seq = use_seq
        elif act.kind == "read" and not out.failed:
            for p in paths:
                self._touch(self.files_read, p, use_seq, "read", use.id)
        elif act.kind == "change" and not out.failed:
            for p in paths:
                aider = self._aider_digests if use.name == "apply_edit" else {}
                self._touch(self.files_changed, p, use_seq, act.change_op, use.id,
                            act.digests.get(p) or act.digests.get("", "") or aider.get(p, ""))

        if act.kind == "command" and act.command is not None:
            if use.id not in self._command_ids:
                self._command_ids.add(use.id)
                status: CommandStatus = "failed" if out.failed else "ok"
                self.commands.append(Command(seq=use_seq, command=act.command, tool=act.tool,
                                             tool_use_id=use.id, exit_code=out.exit_code,
                                             status=status, result_seq=result_seq))
            if not out.failed:
                for p in act.paths:
                    self._touch(self.files_changed, p, use_seq, act.shell_ops.get(p, "shell"), use.id,
                                act.digests.get(p, ""))
                for p in act.reads:
                    self._touch(self.files_read, p, use_seq, "read", use.id)
            if act.is_test and use.id not in self._test_ids:
                self._test_ids.add(use.id)
                summary = _test_summary(text)
                tstatus = _test_status(out, summary)
                self.tests.append(TestRun(seq=use_seq, command=act.command, tool_use_id=use.id,
                                          status=tstatus, exit_code=out.exit_code, summary=summary,
                                          result_seq=result_seq))

        key = _failures.action_key(use.name, act.command, paths, act.kind)
        if out.failed:
            what = act.command or act.summary or use.name
            if act.kind == "change" and paths:
                what = f"{act.command or use.name} ({', '.join(paths)})"
            self._add_failed(FailedApproach(seq=use_seq, what=_clip(what, 200),
                                            error=out.error_line, tool_use_id=use.id,
                                            cause=_failures.failure_cause(text) if text else "",
                                            result_seq=result_seq, key=key))
        elif not (act.is_test and _FAIL_SUMMARY_RE.search(_test_summary(text) or "")):
            self._note_ok(key, use_seq)
        for name, line in error_names(text, out.failed) if text else []:
            self._add_error(ErrorItem(seq=result_seq, name=name, message=line, tool_use_id=use.id))
        if out.failed and result.is_error and not error_names(text, True):
            pass  # shown under failed approaches with its first line

    def add_unknown(self, use: ToolUseBlock, use_seq: int, act: _Action) -> None:
        if use.id in self.unknown:
            return
        self.unknown[use.id] = UnknownAction(
            seq=use_seq, tool_use_id=use.id, name=use.name, kind=act.kind,
            summary=act.summary or use.name, command=act.command, paths=list(act.paths),
            reads=list(act.reads), is_test=act.is_test, digests=dict(act.digests),
        )

    def resolve(self, u: UnknownAction, result: ToolResultBlock, result_seq: int) -> None:
        self.unknown.pop(u.tool_use_id, None)
        use = ToolUseBlock(id=u.tool_use_id, name=u.name, input={})
        act = _Action(kind=u.kind, tool=u.name, command=u.command, paths=list(u.paths),
                      reads=list(u.reads), change_op="edit" if u.kind == "change" else "",
                      is_test=u.is_test, summary=u.summary, digests=dict(u.digests))
        if u.kind == "todo":
            act.kind = "other"  # the todo items were not kept for unknown actions
        self.add_pair(use, u.seq, act, result, result_seq)

    def add_artifact(self, b: ArtifactRefBlock, seq: int) -> None:
        if b.uri not in self.artifacts:
            self.artifacts[b.uri] = Artifact(uri=b.uri, sha256=b.sha256, bytes=b.bytes, seq=seq)

    def build(self) -> LiftedState:
        decisions = self.decisions[-MAX_DECISIONS:]
        outcomes, reasons = self.narrative.build()
        return LiftedState(
            goal=self.goal,
            requests=self.requests,
            constraints=self.constraints,
            decisions=decisions,
            files_read=list(self.files_read.values()),
            files_changed=list(self.files_changed.values()),
            commands=self.commands,
            tests=self.tests,
            errors=self.errors,
            failed_approaches=self._annotated_failures(),
            unknown_actions=sorted(self.unknown.values(), key=lambda u: (u.seq, u.tool_use_id)),
            todos=self.todos,
            todos_seq=self.todos_seq,
            artifacts=list(self.artifacts.values()),
            urls=list(self.urls.values()),
            covers_end=self.covers_end,
            outcomes=outcomes,
            reasons=reasons,
        )


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


# --- public API -------------------------------------------------------------------------------


def lift_state(events: Sequence[Event], prev: LiftedState | None = None) -> LiftedState:
    """Lift the structured state of ``events``, merged on top of ``prev``.

    Events at or before ``prev.covers_end`` are skipped (they are already in ``prev``), as are
    pinned events (they stay verbatim in every view) and compaction events (another
    summarizer's words, not facts). A tool result for an action ``prev`` marked unknown
    resolves it.
    """
    acc = _Acc(prev)
    start = prev.covers_end if prev is not None else 0
    evs = sorted((e for e in events if e.seq > start or e.seq == 0), key=lambda e: e.seq)

    uses: dict[str, tuple[ToolUseBlock, int, _Action]] = {}
    results: dict[str, tuple[ToolResultBlock, int]] = {}
    for e in evs:
        for r in e.tool_results:
            results.setdefault(r.tool_use_id, (r, e.seq))

    for e in evs:
        acc.covers_end = max(acc.covers_end, e.seq)
        for b in e.blocks:
            if isinstance(b, ArtifactRefBlock):
                acc.add_artifact(b, e.seq)
            elif isinstance(b, ImageBlock) and b.ref is not None:
                acc.add_artifact(b.ref, e.seq)
            elif isinstance(b, ToolResultBlock):
                for c in b.content:
                    if isinstance(c, ArtifactRefBlock):
                        acc.add_artifact(c, e.seq)
                    elif isinstance(c, ImageBlock) and c.ref is not None:
                        acc.add_artifact(c.ref, e.seq)
        if e.kind != "message":
            continue
        if is_genuine_request(e):
            acc.add_request(e)
            acc.narrative.on_request(e.seq)
        elif e.role == "assistant" and e.text:
            acc.add_assistant_text(e)
            acc.narrative.on_assistant_text(e.seq, e.text)
        elif e.role in ("user", "system") and e.text and not e.tool_results:
            acc._text_actions(e)  # aider's '>' lines may be attributed to the user or system

        for use in e.tool_uses:
            if use.id in uses:
                continue
            act = classify(use, acc.open_file)
            uses[use.id] = (use, e.seq, act)
            if e.role == "assistant":
                acc.note_move(e.seq, act.command or act.summary or use.name, True)
            if use.id in results:
                r, rseq = results[use.id]
                acc.add_pair(use, e.seq, act, r, rseq)
            else:
                acc.add_unknown(use, e.seq, act)
                if act.kind == "todo" and act.todos is not None and e.seq >= acc.todos_seq:
                    # the plan the agent wrote is its intent even if the write is unconfirmed
                    acc.todos, acc.todos_seq = list(act.todos), e.seq
        for r in e.tool_results:
            if r.tool_use_id not in uses and r.tool_use_id in acc.unknown:
                acc.resolve(acc.unknown[r.tool_use_id], r, e.seq)
    return acc.build()


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
