"""What a tool call does and what its result says: classification and result evaluation.

``classify`` reads a tool_use (a command run, files read or changed, a todo list); ``_outcome``
reads its tool_result (exit status, failure, the runner's summary line); ``error_names`` finds
the errors a result reports. Plain rules over tool names, inputs and output text, no model
calls: the lifter (``compactor.lifting.lift``) accumulates what they find into the lifted state.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from compactor.lifting import digests as _digests
from compactor.lifting.content import written_text
from compactor.events import ArtifactRefBlock, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting.state import ActionKind, TestStatus, Todo
from compactor.lifting.shell import plausible_path, scripts_of, shell_files

MAX_ITEM_CHARS = 300
"""Commands, messages and decisions are cut to this many characters in the state."""
MAX_ERRORS_PER_RESULT = 3

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
_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})
_SWE_READ = {"open", "goto"}
_SWE_CHANGE = {"create", "edit", "insert", "append"}
_SWE_VERBS = frozenset({*_SWE_READ, *_SWE_CHANGE, "submit", "scroll_down", "scroll_up", "find_file", "search_dir",
                        "search_file"})
"""Every verb ``_swe_command`` answers for."""


def _clip(text: str, n: int = MAX_ITEM_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _one_line(text: str, n: int = MAX_ITEM_CHARS) -> str:
    return _clip(" ".join(text.split()), n)



def parse_exit_code(text: str) -> int | None:
    if text.isascii():  # (beyond ASCII, a case-insensitive match need not survive str.lower)
        low = text.lower()
        if "exit" not in low and "returncode" not in low and "return code" not in low:
            return None  # every pattern holds one of these (``return`` alone is code, issue 17)
    for rx in _EXIT_RES:
        m = rx.search(text)
        if m:
            return int(m.group(1))
    return None


_TEST_NEEDLES = ("test", "tox", "nox", "jest", "mocha", "check", "rspec", "phpunit")
"""Every match of ``_TEST_RE`` holds one of these (checked before the search)."""


_TEST_PRE = re.compile("|".join(_TEST_NEEDLES))  # (one search of the literals)


def is_test_command(command: str) -> bool:
    if _TEST_PRE.search(command) is None:
        return False
    return bool(_TEST_RE.search(command))



def error_names(text: str, failed: bool) -> list[tuple[str, str]]:
    """(name, line) pairs for errors reported in a tool result.

    In a successful result only lines that *start* with an error name count (a traceback's
    last line, ``E   TypeError``), so reading source code full of ``raise ValueError`` does
    not invent errors; in a failed result any mention counts.
    """
    found: list[tuple[str, str]] = []
    if ("Error" not in text and "Exception" not in text and "Interrupt" not in text and "error" not in text
            and "panic: " not in text):
        return found  # (every pattern below holds one of these: no match, for less than a scan)
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


class _NoFiles(dict):  # type: ignore[type-arg]
    """The empty file maps ``_Action``s share: read-only, and hashable as a dataclass default must be."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return 0

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an _Action's shared empty mapping is read-only: assign a new one")

    __setitem__ = __delitem__ = setdefault = pop = popitem = clear = update = __ior__ = _read_only


_NO_FILES: Mapping[str, str] = _NoFiles()


@dataclass(slots=True)
class _Action:
    """What a tool_use is, independent of its result.

    A plain dataclass, not a pydantic model: one is built per tool call and set attribute by
    attribute, and it never leaves the lifter (what is stored is the state's own models). It is
    read, never changed in place: a call without paths or files shares the empty defaults (a
    tuple, a read-only mapping: issue 17, five containers fewer per call, kept while the pass
    lives) and ``classify`` assigns new ones."""

    tool: str
    kind: ActionKind = "other"
    command: str | None = None
    paths: Sequence[str] = ()
    change_op: str = ""
    is_test: bool = False
    reads: Sequence[str] = ()  # files a shell command reads
    shell_ops: Mapping[str, str] = _NO_FILES  # file -> how a shell command changed it
    swe_edit: bool = False  # SWE-agent `edit`: the file is the one open, named by the result
    digests: Mapping[str, str] = _NO_FILES  # file -> what this call put there
    texts: Mapping[str, str] = _NO_FILES  # file -> the text it wrote (new lines of an edit)
    facts: dict[str, list[str]] | None = None  # file -> facts of its text, when known without the text
    partial: bool = False  # the texts are fragments (an edit's new lines), not whole files
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
    for v in inp.values():  # (a flat input of strings without an envelope's marker: none, no walk)
        if not isinstance(v, str) or "*** " in v:
            break
    else:
        return out
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
    toks = first.split(None, 2)  # (the verb and its first argument are all that is read)
    if not toks:
        return None
    verb = toks[0]
    if verb not in _SWE_VERBS:
        return None  # (most commands: one set look-up)
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


def _input_texts(paths: list[str], inp: dict[str, Any]) -> dict[str, str]:
    """{path: written text} for a one-file tool call (key "" when the result names the file)."""
    if len(paths) > 1:
        return {}
    text = written_text(inp)
    return {(paths[0] if paths else ""): text} if text else {}


def first_line_args(command: str) -> str:
    """SWE-agent ``edit 10:12``: the arguments on the command's first line."""
    return " ".join(command.split("\n", 1)[0].split()[1:])


@dataclass(frozen=True, slots=True)
class _Route:
    """What a tool's name alone says of its calls (``_route``): the name lowercased, ``-`` as ``_``,
    and which of ``classify``'s name tables hold it."""

    low: str
    todo: bool  # a todo/plan/task tool: its input may hold a todo list
    editor: bool
    write: bool  # a write tool (by table or by its ``_write``/``_edit`` ending)
    read: bool
    shell: bool
    plain_shell: bool  # a shell tool of no other table: its calls run commands (``classify``'s first check)


_ROUTES: dict[str, _Route] = {}
_MAX_ROUTES = 4096
"""Tool names remembered (a session uses a few dozen; a pathological one cannot grow the memo)."""


def _route(name: str) -> _Route:
    """``_Route`` of the tool ``name``, memoized (issue 17: the same few names, asked per call)."""
    r = _ROUTES.get(name)
    if r is None:
        low = name.lower().replace("-", "_")
        todo, editor = "todo" in low or "plan" in low or "task" in low, low in _EDITOR_TOOLS
        write, read, shell = low in _WRITE_TOOLS or low.endswith(("_write", "_edit")), low in _READ_TOOLS, low in _SHELL_TOOLS
        r = _Route(low, todo, editor, write, read, shell, shell and not (todo or editor or write or read)
                   and low != "str_replace_editor" and "patch" not in low)
        if len(_ROUTES) >= _MAX_ROUTES:
            _ROUTES.clear()
        _ROUTES[name] = r
    return r


def plain_command(route: _Route, inp: dict[str, Any]) -> str | None:
    """The command of a shell tool's plain call, stripped: what ``classify`` reads as the run of that
    command without its general machinery (None: the call takes the general path).

    A plain call is one of a shell tool of no other table (``route.plain_shell``) whose input is
    strings, none holding a patch envelope's ``*** `` (``_patch_files`` finds no patch), with a
    non-blank ``command`` (``_command_of``'s first key: its first answer) that opens with no
    SWE-agent verb (``_swe_command`` says None)."""
    if not route.plain_shell:
        return None
    for v in inp.values():
        if type(v) is not str or "*** " in v:
            return None
    command = inp.get("command")
    if command is None or not (command := command.strip()) or command.split(None, 1)[0] in _SWE_VERBS:
        return None
    return command


def classify(use: ToolUseBlock, open_file: str | None = None) -> _Action:
    """What a tool_use does: run a command, read files, change files, set todos."""
    name = use.name
    route = _route(name)
    low = route.low
    inp = use.input if isinstance(use.input, dict) else {}
    act = _Action(tool=name)
    if route.plain_shell and (command := plain_command(route, inp)) is not None:
        return _command_action(act, name, command)  # a shell tool's call (most calls), its input plain

    todos = _todos_of(inp) if route.todo else None
    if todos is not None:
        act.kind = "todo"
        act.todos = todos
        act.summary = f"{name} ({len(todos)} items)"
        return act

    # Patches anywhere in the input (Codex apply_patch, shell heredocs) name changed files.
    patches = _patch_files(inp)
    patch_files = _dedupe(pf.path for pf in patches) if patches else []

    if route.editor:
        sub = str(inp.get("command", ""))
        paths = _path_of(inp)
        if sub == "view":
            act.kind, act.paths = "read", paths
        else:
            act.kind, act.paths, act.change_op = "change", paths, sub or "edit"
            act.digests = _input_digests(paths, act.change_op, inp)
            act.texts = _input_texts(paths, inp)
            act.partial = act.change_op not in ("create", "write")
        act.summary = f"{name} {sub} {' '.join(paths)}".strip()
        return act

    if patch_files and (low in _WRITE_TOOLS or route.shell or "patch" in low):
        act.kind, act.paths, act.change_op = "change", patch_files, "patch"
        act.digests = {pf.path: pf.digest() for pf in patches}  # the last hunk for a file wins
        act.texts = {pf.path: "\n".join(pf.added) for pf in patches if pf.added}
        act.partial = any(pf.op != "add" for pf in patches)
        command = _command_of(inp) if route.shell else None
        act.command = _clip(command) if command else None
        act.summary = f"{name} {', '.join(patch_files)}"
        return act

    if route.write:
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
        act.texts = _input_texts(paths, inp)
        act.partial = act.change_op not in ("create", "write")
        act.summary = f"{name} {' '.join(paths)}".strip()
        return act

    if route.read:
        paths = _path_of(inp)
        act.kind, act.paths = "read", [p for p in paths if not p.startswith(("http://", "https://"))]
        act.summary = f"{name} {' '.join(paths)}".strip()
        return act

    command = _command_of(inp) if (route.shell or "command" in inp or "cmd" in inp) else None
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
                    act.texts = {(act.paths[0] if act.paths else ""): body}
                    act.partial = verb != "create"
            else:
                act.kind = "command"
            act.command = _clip(command.split("\n", 1)[0])
            act.summary = act.command
            return act
        return _command_action(act, name, command)

    # Anything else: keep its name and the most telling argument for people.
    arg = ""
    for key in ("query", "url", "pattern", "path", "file_path", "action", "name"):
        v = inp.get(key)
        if isinstance(v, str) and v:
            arg = v
            break
    act.summary = _one_line(f"{name} {arg}".strip(), 200)
    return act


def _command_action(act: _Action, name: str, command: str) -> _Action:
    """``act`` (new, of the tool ``name``) as the run of the shell command ``command``: the files it
    reads and changes (``shell_files``), whether it runs tests."""
    act.kind = "command"
    act.command = _clip(command)
    act.is_test = is_test_command(command)
    files = shell_files(command)
    reads, changes = files.reads, files.changes
    if changes:  # (else the shared empty defaults: most commands change no file)
        act.paths = list(changes)
        act.shell_ops = changes
    if files.writes:  # (else the shared empty maps)
        act.digests = {p: _digests.write_digest(p, text, append=changes[p].endswith(("append", "-a")))
                       for p, text in files.writes.items()}
        act.texts = dict(files.writes)
    act.partial = any(op.endswith(("append", "-a")) for op in changes.values()) if changes else False
    act.change_op = "shell"
    if reads:
        act.reads = reads
    act.summary = f"{name}: {_one_line(command, 160)}"
    return act


# --- result evaluation ------------------------------------------------------------------------


@dataclass(slots=True)
class _Outcome:
    """What a tool_result says (a plain dataclass: one per result, never stored)."""

    failed: bool
    exit_code: int | None = None
    error_line: str = ""
    text: str = ""


def _result_text(r: ToolResultBlock) -> str:
    content = r.content
    if len(content) == 1 and type(content[0]) is TextBlock:
        return content[0].text  # (most results: one text block, joined alone it is itself)
    parts: list[str] = []
    for c in content:
        if isinstance(c, ArtifactRefBlock):
            parts.append(c.preview_head)
            parts.append(c.preview_tail)
        elif hasattr(c, "text"):
            parts.append(c.text)  # type: ignore[union-attr]
    return "\n".join(parts)


_NO_MATCH_TOOLS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git grep", "diff", "cmp", "test", "["})
_ERROR_WORDS_RE = re.compile(r"(?i)\berror\b|no such file|not found|denied|invalid|unrecognized|usage:|fatal")


def no_match(command: str | None, out: _Outcome) -> bool:
    """Exit 1 of a search or comparison (``grep``/``rg`` found nothing, ``diff`` found
    differences, ``test`` was false) with no error text: a result, not a failure."""
    if not command or out.exit_code != 1:
        return False
    last = command.strip().split("|")[-1] if "|" in command and "grep" in command.split("|")[-1] else command
    words = last.strip().lstrip("(").split()
    while words and ("=" in words[0] or words[0] in ("cd", "&&", "sudo", "timeout")):
        words = words[2:] if words[0] == "cd" else words[1:]
    if not words:
        return False
    tool = "git grep" if words[:2] == ["git", "grep"] else words[0].rsplit("/", 1)[-1]
    return tool in _NO_MATCH_TOOLS and not _ERROR_WORDS_RE.search(out.text[:2000])


def _outcome(r: ToolResultBlock) -> _Outcome:
    text = _result_text(r)
    code = parse_exit_code(text[:600]) if text else None
    if code is None and len(text) > 400:  # (a shorter text's tail is the text just searched)
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
    return _Outcome(failed, code, _one_line(line, 200) if line else "", text)  # (by position: fields in order)


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


